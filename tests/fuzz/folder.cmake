# The folder source alone: the generic data set and transforms, the PNG and JPEG readers.
ganfw_fuzzer(folder SOURCES data/data_folder.c data/data.c data/transform.c io/png_io.c
             io/jpeg_io.c base/error.c base/file.c base/log.c
             LIBS PNG::PNG PkgConfig::LIBJPEG ZLIB::ZLIB)
