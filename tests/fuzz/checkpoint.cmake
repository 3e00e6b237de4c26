# The resume path's checkpoint metadata alone: the safetensors reader and checkpoint_meta.c.
ganfw_fuzzer(checkpoint
  SOURCES io/checkpoint_meta.c io/safetensors.c base/error.c base/file.c base/json.c
  LIBS ZLIB::ZLIB)
