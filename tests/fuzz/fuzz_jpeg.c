/* Fuzz harness of the JPEG reader (io/jpeg_io.c): the input is a whole file, read for its
 * header (ganfw_jpeg_read_size), decoded at full size (ganfw_jpeg_read) and decoded scaled
 * (ganfw_jpeg_read_scaled, a minimum size picked from the input's length). The header and
 * the decode must agree on the shape; a full decode that succeeds means a scaled one does
 * too, no larger and no smaller than asked; every value lies in [0,1]; every refusal names
 * the file. An image of more than FZ_JPEG_FULL_PIXELS by its header is decoded only at
 * 1/8, and one of more than FZ_JPEG_SCALED_PIXELS not at all: an arithmetic-coded JPEG
 * describes a large image in a few bytes, legally (a uniform 2048 x 2048 one takes 208),
 * and the entropy decoding of every block costs even at 1/8 (0.2 s for 4115 x 3328 under
 * ASan, 1 s for the 8192 x 8192 the header may claim), which would measure the image's
 * size against the 1 s bound rather than the reader (libjpeg-turbo's own fuzzers skip
 * images over 1 Mpx). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "fuzz_util.h"
#include "io/jpeg_io.h"

#define FZ_JPEG_FULL_PIXELS   (1 << 20)
#define FZ_JPEG_SCALED_PIXELS (1 << 22)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_pixels(const float *px, int32_t c, int32_t h, int32_t w) {
  FZ_CHECK(c == 1 || c == 3);
  FZ_CHECK(h >= 1 && w >= 1);
  const size_t n = (size_t)c * h * w;
  for (size_t i = 0; i < n; i++) FZ_CHECK(px[i] >= 0.0f && px[i] <= 1.0f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[512];
  fz_path(path, sizeof path, "input.jpg");
  fz_write(path, data, size);
  int32_t c0 = 0, h0 = 0, w0 = 0, c = 0, h = 0, w = 0;
  const ganfw_status sz = ganfw_jpeg_read_size(path, &c0, &h0, &w0);
  if (sz != GANFW_OK) FZ_CHECK(strstr(ganfw_error_message(), path) != NULL);
  const int large = sz == GANFW_OK && (int64_t)h0 * w0 > FZ_JPEG_FULL_PIXELS;
  float *px = NULL;
  ganfw_status st = GANFW_ERR_IO;
  if (!large) {
    st = ganfw_jpeg_read(path, &px, &c, &h, &w);
    FZ_CHECK((st == GANFW_OK) == (px != NULL));
    fz_report(path, st, ganfw_error_message());
    if (st == GANFW_OK) {
      FZ_CHECK(sz == GANFW_OK && c == c0 && h == h0 && w == w0);
      check_pixels(px, c, h, w);
    } else {
      FZ_CHECK(strstr(ganfw_error_message(), path) != NULL);
    }
  }
  if (sz == GANFW_OK && (int64_t)h0 * w0 > FZ_JPEG_SCALED_PIXELS) {
    ganfw_error_clear();
    return 0;
  }
  static const int32_t mins[5] = {1, 2, 7, 16, 33};
  const int32_t min = large ? 1 : mins[size % 5];
  float *sp = NULL;
  int32_t sc = 0, sh = 0, sw = 0, fh = 0, fw = 0;
  const ganfw_status ss = ganfw_jpeg_read_scaled(path, min, min, &sp, &sc, &sh, &sw, &fh, &fw);
  FZ_CHECK((ss == GANFW_OK) == (sp != NULL));
  if (st == GANFW_OK) FZ_CHECK(ss == GANFW_OK);
  if (ss == GANFW_OK) {
    FZ_CHECK(sz == GANFW_OK && sc == c0 && fh == h0 && fw == w0);
    FZ_CHECK(sh <= fh && sw <= fw);
    FZ_CHECK((sh >= min && sw >= min) || (sh == fh && sw == fw));
    check_pixels(sp, sc, sh, sw);
  } else {
    FZ_CHECK(strstr(ganfw_error_message(), path) != NULL);
  }
  free(sp);
  free(px);
  ganfw_error_clear();
  return 0;
}
