/* PNG files: sample grids written like torchvision.utils.save_image (images [N,C,H,W] laid
 * out by make_grid, then x*255+0.5 truncated to uint8), and a reader that returns any
 * PNG (gray, gray+alpha, RGB, RGBA, palette; 1-16 bit) as float [C,H,W] in [0,1]. */
#ifndef GANFW_PNG_IO_H
#define GANFW_PNG_IO_H

#include <stdint.h>

#include "ganfw/status.h"

/* The grid make_grid builds for n images of h x w: xmaps = min(nrow, n) images a row,
 * ymaps = ceil(n / xmaps) rows, size (h + padding) * ymaps + padding by
 * (w + padding) * xmaps + padding. A single image (n == 1) gets no padding at all, as in
 * torchvision. */
void ganfw_png_grid_size(int32_t n, int32_t h, int32_t w, int32_t nrow, int32_t padding,
                         int32_t *grid_h, int32_t *grid_w);

/* Writes images [n,c,h,w] (c = 1, 3 or 4) as one PNG grid at `path`, the same picture
 * torchvision's save_image(images, path, nrow, padding, normalize, value_range=(-1, 1),
 * pad_value) writes: with `normalize` != 0 values are clamped to [-1,1] and mapped to
 * [0,1], otherwise they are taken as [0,1]; pad_value is in that [0,1] space; then
 * byte = (uint8)clamp(x*255 + 0.5, 0, 255). One channel is written as RGB (torchvision
 * repeats it 3 times); four channels as RGBA. NaN becomes 0. Defaults in torchvision:
 * nrow 8, padding 2, pad_value 0. The file appears atomically (a temporary file in the
 * same directory, fsync, rename): a failure leaves neither a partial file nor the
 * temporary behind, and returns GANFW_ERR_IO naming the path. */
ganfw_status ganfw_png_write_grid(const char *path, const float *images, int32_t n, int32_t c,
                                  int32_t h, int32_t w, int32_t nrow, int32_t padding,
                                  float pad_value, int32_t normalize);

/* Writes 8-bit interleaved pixels [h,w,c] (c = 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA)
 * atomically, as above. */
ganfw_status ganfw_png_write_u8(const char *path, const uint8_t *pixels, int32_t h, int32_t w,
                                int32_t c);

/* The largest image the reader decodes, in pixels (4096 x 4096; its float pixels take at
 * most 256 MiB): a larger one is refused before any of it is allocated, and so is one whose
 * header promises more image data than its file can hold. */
#define GANFW_PNG_MAX_PIXELS (1 << 24)

/* Reads the PNG at `path` into a new float buffer [c,h,w] (planar) in [0,1] (8-bit samples
 * / 255, 16-bit / 65535) with c as stored: 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA; palette
 * images become RGB and gray below 8 bit is expanded; tRNS transparency is ignored (as
 * PIL's convert("RGB") does). *pixels is malloc'd and owned by the caller (free()); NULL
 * on failure, with GANFW_ERR_IO naming the path and libpng's reason (or the limit, or "is a
 * directory"). */
ganfw_status ganfw_png_read(const char *path, float **pixels, int32_t *c, int32_t *h, int32_t *w);

/* Reads only the header: the channel count ganfw_png_read would return, and the size. */
ganfw_status ganfw_png_read_size(const char *path, int32_t *c, int32_t *h, int32_t *w);

#endif
