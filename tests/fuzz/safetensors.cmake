# The safetensors reader alone: its file, the error record, the atomic writer and the
# JSON string writer the safetensors writer shares.
ganfw_fuzzer(safetensors SOURCES io/safetensors.c base/error.c base/file.c base/json.c)
