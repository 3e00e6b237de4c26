# The PNG reader alone (with its writer, which shares the file): libpng and zlib.
ganfw_fuzzer(png SOURCES io/png_io.c base/error.c base/file.c LIBS PNG::PNG ZLIB::ZLIB)
