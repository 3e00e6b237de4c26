# The folder source alone: the generic data set and transforms, and the PNG reader.
ganfw_fuzzer(folder SOURCES data/data_folder.c data/data.c data/transform.c io/png_io.c
             base/error.c base/file.c LIBS PNG::PNG ZLIB::ZLIB)
