# The MNIST IDX source alone: the generic data set and transforms it is wrapped in, zlib.
ganfw_fuzzer(idx SOURCES data/data_mnist.c data/data.c data/transform.c base/error.c
             LIBS ZLIB::ZLIB)
