# The JPEG reader alone: libjpeg-turbo's libjpeg.
ganfw_fuzzer(jpeg SOURCES io/jpeg_io.c base/error.c LIBS PkgConfig::LIBJPEG)
