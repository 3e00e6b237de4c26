# The trace reader of `ganfw plot RUN` (memory.json's events) and the timeline it feeds.
ganfw_fuzzer(trace SOURCES io/trace_file.c tools/timeline.c io/png_io.c runtime/trace_event.c
             base/error.c base/file.c base/json.c LIBS PNG::PNG ZLIB::ZLIB)
