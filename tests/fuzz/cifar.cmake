# The CIFAR-10 source alone, with the generic data set and transforms it is wrapped in.
ganfw_fuzzer(cifar SOURCES data/data_cifar.c data/data.c data/transform.c base/error.c)
