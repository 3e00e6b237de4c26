/* Fuzz harness of the trace reader (io/trace_file.c): the input is written as memory.json of
 * a scratch directory and read back as `ganfw plot RUN` reads it; the events it yields are
 * then found, summed and drawn as ganfw plot does (tools/timeline.c), the SVG to /dev/null. */
#include <stdint.h>
#include <stdlib.h>

#include "base/error.h"
#include "fuzz_util.h"
#include "tools/timeline.h"
#include "io/trace_file.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *dir = fz_dir();
  char path[512];
  fz_clear(dir);
  fz_write(fz_path(path, sizeof path, "memory.json"), data, size);
  ganfw_trace_event *ev = NULL;
  char *names = NULL;
  int64_t n = 0;
  ganfw_status st = ganfw_trace_read_memory_json(path, &ev, &n, &names);
  FZ_CHECK(st == GANFW_OK ? n > 0 && ev != NULL : ev == NULL && names == NULL && n == 0);
  int64_t first = 0, count = 0;
  if (st == GANFW_OK && ganfw_trace_find_step(ev, n, 0, &first, &count) == GANFW_OK) {
    FZ_CHECK(first >= 0 && count >= 1 && first + count <= n);
    ganfw_timeline_summary s;
    if (ganfw_timeline_summarize(ev + first, count, &s) == GANFW_OK) {
      FZ_CHECK(s.peak_allocated >= 0 && s.n_top <= GANFW_TIMELINE_TOP);
      FILE *f = fopen("/dev/null", "w");
      if (f) {
        (void)ganfw_timeline_write_svg(f, ev + first, count, NULL);
        fclose(f);
      }
    }
  }
  free(ev);
  free(names);
  ganfw_error_clear();
  return 0;
}
