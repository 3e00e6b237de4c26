/* Fuzz harness of the PNG reader (io/png_io.c): the input is a whole file, read for its
 * header (ganfw_png_read_size) and decoded (ganfw_png_read); the two must agree on the
 * shape, and every decoded value must lie in [0,1]. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "fuzz_util.h"
#include "io/png_io.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[512];
  fz_path(path, sizeof path, "input.png");
  fz_write(path, data, size);
  int32_t c0 = 0, h0 = 0, w0 = 0, c = 0, h = 0, w = 0;
  const ganfw_status sz = ganfw_png_read_size(path, &c0, &h0, &w0);
  if (sz != GANFW_OK) FZ_CHECK(strstr(ganfw_error_message(), path) != NULL);
  float *px = NULL;
  const ganfw_status st = ganfw_png_read(path, &px, &c, &h, &w);
  FZ_CHECK((st == GANFW_OK) == (px != NULL));
  fz_report(path, st, ganfw_error_message());
  if (st == GANFW_OK) {
    FZ_CHECK(sz == GANFW_OK && c == c0 && h == h0 && w == w0);
    FZ_CHECK(c >= 1 && c <= 4 && h >= 1 && w >= 1);
    const size_t n = (size_t)c * h * w;
    for (size_t i = 0; i < n; i++) FZ_CHECK(px[i] >= 0.0f && px[i] <= 1.0f);
  } else {
    FZ_CHECK(strstr(ganfw_error_message(), path) != NULL);
  }
  free(px);
  ganfw_error_clear();
  return 0;
}
