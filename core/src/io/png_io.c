/* PNG grids like torchvision.utils.save_image ([N,C,H,W] floats -> one RGB/RGBA picture),
 * written atomically, and a PNG reader returning float [C,H,W] in [0,1] for the folder
 * dataset. libpng's classic API; its errors longjmp back into the function that set up. */
#include "io/png_io.h"

#include <errno.h>
#include <math.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "base/file.h"

#define PNG_MAX_SIDE 16384 /* refuse larger images instead of attempting huge allocations */
/* deflate expands at most 1032-fold (a 258-byte match in 2 bits): image data needing more
 * than this many times the file's size cannot be in the file. */
#define PNG_DEFLATE_MAX_RATIO 1032
/* Ancillary chunks (text, ICC profiles, ...) larger than this are skipped, not buffered. */
#define PNG_MAX_CHUNK_BYTES (1 << 20)

typedef struct png_err_ctx {
  char msg[256];
  int refused; /* 1: msg is the reader's own refusal (a limit), not libpng's error */
} png_err_ctx;

static void on_png_error(png_structp png, png_const_charp msg) {
  png_err_ctx *e = (png_err_ctx *)png_get_error_ptr(png);
  snprintf(e->msg, sizeof e->msg, "%s", msg);
  png_longjmp(png, 1);
}

static void on_png_warning(png_structp png, png_const_charp msg) {
  (void)png;
  (void)msg; /* e.g. "known incorrect sRGB profile": harmless for training data */
}

static int color_type_for(int32_t c) {
  switch (c) {
  case 1:
    return PNG_COLOR_TYPE_GRAY;
  case 2:
    return PNG_COLOR_TYPE_GRAY_ALPHA;
  case 3:
    return PNG_COLOR_TYPE_RGB;
  case 4:
    return PNG_COLOR_TYPE_RGB_ALPHA;
  default:
    return -1;
  }
}

/* Encodes [h,w,c] bytes into f. 0 on success; -1 with err filled. */
static int png_encode(FILE *f, const uint8_t *pixels, int32_t h, int32_t w, int32_t c,
                      png_err_ctx *err) {
  png_structp png =
      png_create_write_struct(PNG_LIBPNG_VER_STRING, err, on_png_error, on_png_warning);
  if (!png) {
    snprintf(err->msg, sizeof err->msg, "libpng could not create a writer (out of memory)");
    return -1;
  }
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_write_struct(&png, NULL);
    snprintf(err->msg, sizeof err->msg, "libpng could not create an info struct");
    return -1;
  }
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    return -1;
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, 8, color_type_for(c), PNG_INTERLACE_NONE,
               PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
  png_write_info(png, info);
  for (int32_t y = 0; y < h; y++) png_write_row(png, pixels + (size_t)y * w * c);
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  return 0;
}

typedef struct {
  const char *path;
  const uint8_t *pixels;
  int32_t h, w, c;
} png_job;

static ganfw_status write_png(FILE *f, void *ud) {
  const png_job *j = ud;
  png_err_ctx err = {{0}, 0};
  if (png_encode(f, j->pixels, j->h, j->w, j->c, &err))
    return ganfw_error_set(GANFW_ERR_IO, "cannot write PNG '%s': %s", j->path, err.msg);
  return GANFW_OK;
}

ganfw_status ganfw_png_write_u8(const char *path, const uint8_t *pixels, int32_t h, int32_t w,
                                int32_t c) {
  if (!path || !pixels || h <= 0 || w <= 0 || color_type_for(c) < 0)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "PNG '%s': cannot write %d x %d pixels with %d channels (need "
                           "1, 2, 3 or 4 channels and a positive size)",
                           path ? path : "(null)", h, w, c);
  png_job job = {path, pixels, h, w, c};
  return ganfw_file_write_atomic(path, write_png, &job);
}

void ganfw_png_grid_size(int32_t n, int32_t h, int32_t w, int32_t nrow, int32_t padding,
                         int32_t *grid_h, int32_t *grid_w) {
  if (n == 1) {
    *grid_h = h;
    *grid_w = w;
    return;
  }
  int32_t xmaps = nrow < n ? nrow : n;
  int32_t ymaps = (n + xmaps - 1) / xmaps;
  *grid_h = (h + padding) * ymaps + padding;
  *grid_w = (w + padding) * xmaps + padding;
}

/* save_image's conversion of one value already in [0,1] space. */
static uint8_t to_byte(float v) {
  if (isnan(v)) return 0;
  float t = v * 255.0f;
  t = t + 0.5f;
  if (t < 0.0f) t = 0.0f;
  if (t > 255.0f) t = 255.0f;
  return (uint8_t)t;
}

ganfw_status ganfw_png_write_grid(const char *path, const float *images, int32_t n, int32_t c,
                                  int32_t h, int32_t w, int32_t nrow, int32_t padding,
                                  float pad_value, int32_t normalize) {
  if (!path || !images || n <= 0 || h <= 0 || w <= 0 || nrow <= 0 || padding < 0 ||
      (c != 1 && c != 3 && c != 4))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "PNG grid '%s': need images [N,C,H,W] with C = 1, 3 or 4, N, H, W, "
                           "nrow > 0 and padding >= 0 (got N=%d C=%d H=%d W=%d nrow=%d "
                           "padding=%d)",
                           path ? path : "(null)", n, c, h, w, nrow, padding);
  int32_t gh, gw;
  ganfw_png_grid_size(n, h, w, nrow, padding, &gh, &gw);
  if (gh > PNG_MAX_SIDE * 4 || gw > PNG_MAX_SIDE * 4)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "PNG grid '%s': %d x %d pixels is too large",
                           path, gh, gw);
  const int32_t oc = c == 1 ? 3 : c;
  uint8_t *px = malloc((size_t)gh * gw * oc);
  if (!px)
    return ganfw_error_set(GANFW_ERR_OOM, "PNG grid '%s': no host memory for %d x %d pixels", path,
                           gh, gw);
  memset(px, to_byte(pad_value), (size_t)gh * gw * oc);
  const int32_t pad = n == 1 ? 0 : padding;
  const int32_t xmaps = nrow < n ? nrow : n;
  for (int32_t k = 0; k < n; k++) {
    const int32_t y0 = (k / xmaps) * (h + pad) + pad, x0 = (k % xmaps) * (w + pad) + pad;
    for (int32_t ch = 0; ch < oc; ch++) {
      const float *src = images + ((size_t)k * c + (c == 1 ? 0 : ch)) * h * w;
      for (int32_t y = 0; y < h; y++) {
        uint8_t *dst = px + ((size_t)(y0 + y) * gw + x0) * oc + ch;
        for (int32_t x = 0; x < w; x++) {
          float v = src[(size_t)y * w + x];
          if (normalize) {
            v = v < -1.0f ? -1.0f : (v > 1.0f ? 1.0f : v);
            v = (v + 1.0f) / 2.0f;
          }
          dst[(size_t)x * oc] = to_byte(v);
        }
      }
    }
  }
  ganfw_status st = ganfw_png_write_u8(path, px, gh, gw, oc);
  free(px);
  return st;
}

/* Decodes `path`; with pixels == NULL only the header is read. */
static ganfw_status png_decode(const char *path, float **pixels, int32_t *c, int32_t *h,
                               int32_t *w) {
  if (pixels) *pixels = NULL;
  struct stat sb;
  /* Before opening: a FIFO would block the open itself. */
  if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
    return ganfw_error_set(GANFW_ERR_IO, "PNG '%s' is %s, not a PNG file", path,
                           S_ISDIR(sb.st_mode) ? "a directory" : "not a regular file");
  FILE *f = fopen(path, "rb");
  if (!f) return ganfw_error_set(GANFW_ERR_IO, "cannot open PNG '%s': %s", path, strerror(errno));
  if (fstat(fileno(f), &sb) != 0) {
    const int err = errno;
    fclose(f);
    return ganfw_error_set(GANFW_ERR_IO, "cannot stat PNG '%s': %s", path, strerror(err));
  }
  uint8_t sig[8];
  if (fread(sig, 1, 8, f) != 8 || png_sig_cmp(sig, 0, 8) != 0) {
    fclose(f);
    return ganfw_error_set(GANFW_ERR_IO, "'%s' is not a PNG file (bad signature)", path);
  }
  png_err_ctx err = {{0}, 0};
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, &err, on_png_error, on_png_warning);
  png_infop info = png ? png_create_info_struct(png) : NULL;
  if (!info) {
    if (png) png_destroy_read_struct(&png, NULL, NULL);
    fclose(f);
    return ganfw_error_set(GANFW_ERR_OOM, "PNG '%s': libpng could not create a reader", path);
  }
  uint8_t *volatile buf = NULL;
  png_bytep *volatile rows = NULL;
  float *volatile out = NULL;
  if (setjmp(png_jmpbuf(png))) {
    free(buf);
    free(rows);
    free(out);
    png_destroy_read_struct(&png, &info, NULL);
    fclose(f);
    if (err.refused) return ganfw_error_set(GANFW_ERR_IO, "PNG '%s': %s", path, err.msg);
    return ganfw_error_set(GANFW_ERR_IO, "cannot read PNG '%s': %s (corrupt or truncated?)", path,
                           err.msg);
  }
  png_init_io(png, f);
  png_set_sig_bytes(png, 8);
  png_set_user_limits(png, PNG_MAX_SIDE, PNG_MAX_SIDE);
  png_set_chunk_malloc_max(png, PNG_MAX_CHUNK_BYTES);
  /* Only IHDR, PLTE, tRNS, IDAT and IEND decide the pixels read here (no gamma or colour
   * management): every other chunk is skipped unread, so a text or ICC chunk whose length
   * says gigabytes is neither allocated nor decompressed. */
  png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, NULL, -1);
  png_read_info(png, info);
  {
    /* The image data the header promises, checked before anything that size is made. */
    const uint64_t iw = png_get_image_width(png, info), ih = png_get_image_height(png, info);
    const uint64_t bits = (uint64_t)png_get_channels(png, info) * png_get_bit_depth(png, info);
    const uint64_t raw = (iw * bits + 7) / 8 * ih;
    if (iw * ih > GANFW_PNG_MAX_PIXELS) {
      snprintf(err.msg, sizeof err.msg,
               "%llu x %llu pixels exceed the reader's limit of %d pixels (resize the image)",
               (unsigned long long)iw, (unsigned long long)ih, GANFW_PNG_MAX_PIXELS);
      err.refused = 1;
      png_longjmp(png, 1);
    }
    if (raw > (uint64_t)sb.st_size * PNG_DEFLATE_MAX_RATIO + 4096) {
      snprintf(err.msg, sizeof err.msg,
               "its header promises %llu x %llu pixels (%llu bytes of image data), more than "
               "a %lld-byte file can hold",
               (unsigned long long)iw, (unsigned long long)ih, (unsigned long long)raw,
               (long long)sb.st_size);
      err.refused = 1;
      png_longjmp(png, 1);
    }
  }
  const int color = png_get_color_type(png, info);
  if (color == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
  if (color == PNG_COLOR_TYPE_GRAY && png_get_bit_depth(png, info) < 8)
    png_set_expand_gray_1_2_4_to_8(png);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  const int32_t ch = png_get_channels(png, info), depth = png_get_bit_depth(png, info);
  const int32_t H = (int32_t)png_get_image_height(png, info);
  const int32_t W = (int32_t)png_get_image_width(png, info);
  const size_t rowbytes = png_get_rowbytes(png, info);
  if (pixels) {
    buf = malloc(rowbytes * H);
    rows = malloc(sizeof(png_bytep) * H);
    out = malloc(sizeof(float) * ch * H * W);
    if (!buf || !rows || !out) png_error(png, "out of host memory for the pixels");
    for (int32_t y = 0; y < H; y++) rows[y] = buf + rowbytes * y;
    png_read_image(png, rows);
    png_read_end(png, NULL);
    const size_t plane = (size_t)H * W;
    for (int32_t y = 0; y < H; y++) {
      const uint8_t *r = rows[y];
      for (int32_t x = 0; x < W; x++)
        for (int32_t k = 0; k < ch; k++) {
          const size_t i = (size_t)x * ch + k;
          const float v = depth == 16 ? (float)((r[2 * i] << 8) | r[2 * i + 1]) / 65535.0f
                                      : (float)r[i] / 255.0f;
          out[k * plane + (size_t)y * W + x] = v;
        }
    }
    *pixels = out;
  }
  free(buf);
  free(rows);
  png_destroy_read_struct(&png, &info, NULL);
  fclose(f);
  *c = ch;
  *h = H;
  *w = W;
  return GANFW_OK;
}

ganfw_status ganfw_png_read(const char *path, float **pixels, int32_t *c, int32_t *h, int32_t *w) {
  return png_decode(path, pixels, c, h, w);
}

ganfw_status ganfw_png_read_size(const char *path, int32_t *c, int32_t *h, int32_t *w) {
  return png_decode(path, NULL, c, h, w);
}
