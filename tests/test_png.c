/* png_io: the grid geometry of torchvision's make_grid, pixel values after save_image's
 * conversion (read back with our reader), the reader on every PNG colour type and depth
 * (written with libpng here), atomic writes and clean failures. Files go to a mkdtemp
 * directory under /tmp that is removed at exit. */
#include <dirent.h>
#include <png.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "base/error.h"
#include "io/png_io.h"
#include "testutil.h"

/* A path inside this run's temporary directory (created on first use). */
static const char *tmp_path(const char *name) {
  static char buf[8][512];
  static int next;
  const char *tmp_root = gt_tmp_root("png");
  char *p = buf[next++ % 8];
  snprintf(p, 512, "%s/%s", tmp_root, name);
  return p;
}

static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
  closedir(d);
  return n;
}

/* save_image's byte for a value v in [-1,1] space (normalize) or [0,1]. */
static int expect_byte(float v, int normalize) {
  if (normalize) {
    v = v < -1.0f ? -1.0f : (v > 1.0f ? 1.0f : v);
    v = (v + 1.0f) / 2.0f;
  }
  float t = v * 255.0f + 0.5f;
  t = t < 0.0f ? 0.0f : (t > 255.0f ? 255.0f : t);
  return (int)t;
}

static void test_grid_size(void) {
  int32_t gh, gw;
  ganfw_png_grid_size(64, 32, 32, 8, 2, &gh, &gw); /* the DC-GAN sample grid */
  CU_ASSERT_EQUAL(gh, 274);
  CU_ASSERT_EQUAL(gw, 274);
  ganfw_png_grid_size(10, 28, 20, 8, 2, &gh, &gw); /* 8 per row, 2 rows */
  CU_ASSERT_EQUAL(gh, 2 * (28 + 2) + 2);
  CU_ASSERT_EQUAL(gw, 8 * (20 + 2) + 2);
  ganfw_png_grid_size(3, 5, 7, 8, 1, &gh, &gw); /* fewer than nrow: one row of 3 */
  CU_ASSERT_EQUAL(gh, 5 + 2);
  CU_ASSERT_EQUAL(gw, 3 * 8 + 1);
  ganfw_png_grid_size(1, 5, 7, 8, 2, &gh, &gw); /* a single image: no padding */
  CU_ASSERT_EQUAL(gh, 5);
  CU_ASSERT_EQUAL(gw, 7);
  ganfw_png_grid_size(9, 4, 4, 3, 0, &gh, &gw);
  CU_ASSERT_EQUAL(gh, 12);
  CU_ASSERT_EQUAL(gw, 12);
}

/* 5 gray images 3 x 4, nrow 2, padding 1, pad 0.5: read back as RGB and check every pixel. */
static void test_grid_gray_values(void) {
  enum { N = 5, H = 3, W = 4, NROW = 2, PAD = 1 };
  float img[N * H * W];
  for (int i = 0; i < N * H * W; i++) img[i] = -1.2f + 2.4f * (float)((i * 37) % 101) / 100.0f;
  img[0] = -1.0f;
  img[1] = 1.0f;
  img[2] = 0.0f;
  img[3] = 5.0f; /* clamped to 1 */
  const char *path = tmp_path("gray_grid.png");
  CU_ASSERT_EQUAL_FATAL(ganfw_png_write_grid(path, img, N, 1, H, W, NROW, PAD, 0.5f, 1), GANFW_OK);
  float *px = NULL;
  int32_t c, h, w;
  CU_ASSERT_EQUAL_FATAL(ganfw_png_read(path, &px, &c, &h, &w), GANFW_OK);
  CU_ASSERT_EQUAL(c, 3); /* torchvision writes a 1-channel grid as RGB */
  CU_ASSERT_EQUAL(h, 3 * (H + PAD) + PAD);
  CU_ASSERT_EQUAL(w, 2 * (W + PAD) + PAD);
  int bad = 0;
  const size_t plane = (size_t)h * w;
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++) {
      int want = 128; /* pad 0.5 -> 0.5*255+0.5 = 128 */
      const int gy = y - PAD, gx = x - PAD;
      const int cy = gy / (H + PAD), cx = gx / (W + PAD);
      const int iy = gy % (H + PAD), ix = gx % (W + PAD);
      const int k = cy * NROW + cx;
      if (gy >= 0 && gx >= 0 && iy < H && ix < W && k < N)
        want = expect_byte(img[(k * H + iy) * W + ix], 1);
      for (int ch = 0; ch < 3; ch++) {
        const int got = (int)(px[ch * plane + (size_t)y * w + x] * 255.0f + 0.5f);
        if (got != want) bad++;
      }
    }
  CU_ASSERT_EQUAL(bad, 0);
  /* Known corners: image 0 at (1,1) is -1 -> 0; (1,2) is 1 -> 255; (1,3) is 0 -> 128. */
  CU_ASSERT_DOUBLE_EQUAL(px[1 * w + 1], 0.0, 1e-7);
  CU_ASSERT_DOUBLE_EQUAL(px[1 * w + 2], 1.0, 1e-7);
  CU_ASSERT_DOUBLE_EQUAL(px[1 * w + 3], 128.0 / 255.0, 1e-7);
  CU_ASSERT_DOUBLE_EQUAL(px[1 * w + 4], 1.0, 1e-7); /* 5.0 clamps to 1 */
  free(px);
}

/* RGB in [0,1] without normalising; RGBA; a single image without padding. */
static void test_grid_rgb_rgba_single(void) {
  enum { N = 3, H = 2, W = 2 };
  float img[N * 4 * H * W];
  for (int i = 0; i < N * 4 * H * W; i++) img[i] = (float)(i % 17) / 16.0f;
  const char *path = tmp_path("rgb_grid.png");
  CU_ASSERT_EQUAL_FATAL(ganfw_png_write_grid(path, img, N, 3, H, W, 8, 2, 0.0f, 0), GANFW_OK);
  float *px = NULL;
  int32_t c, h, w;
  CU_ASSERT_EQUAL_FATAL(ganfw_png_read(path, &px, &c, &h, &w), GANFW_OK);
  CU_ASSERT_EQUAL(c, 3);
  CU_ASSERT_EQUAL(h, H + 4);
  CU_ASSERT_EQUAL(w, N * (W + 2) + 2);
  /* image 2, channel 1, pixel (1,0) sits at y = 2+1, x = 2 + 2*(W+2) + 0 */
  const float v = img[((2 * 3 + 1) * H + 1) * W + 0];
  CU_ASSERT_DOUBLE_EQUAL(px[1 * h * w + 3 * w + 10] * 255.0f, expect_byte(v, 0), 1e-3);
  CU_ASSERT_DOUBLE_EQUAL(px[0], 0.0, 1e-7); /* padding 0 */
  free(px);

  path = tmp_path("rgba_grid.png");
  CU_ASSERT_EQUAL_FATAL(ganfw_png_write_grid(path, img, N, 4, H, W, 2, 2, 1.0f, 0), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_png_read(path, &px, &c, &h, &w), GANFW_OK);
  CU_ASSERT_EQUAL(c, 4);
  CU_ASSERT_EQUAL(h, 2 * (H + 2) + 2);
  CU_ASSERT_EQUAL(w, 2 * (W + 2) + 2);
  CU_ASSERT_DOUBLE_EQUAL(px[3 * h * w], 1.0, 1e-7); /* alpha of the padding: pad_value 1 */
  free(px);

  path = tmp_path("single.png");
  CU_ASSERT_EQUAL_FATAL(ganfw_png_write_grid(path, img, 1, 1, H, W, 8, 2, 0.0f, 0), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_png_read(path, &px, &c, &h, &w), GANFW_OK);
  CU_ASSERT_EQUAL(h, H);
  CU_ASSERT_EQUAL(w, W);
  CU_ASSERT_DOUBLE_EQUAL(px[3] * 255.0f, expect_byte(img[3], 0), 1e-3);
  free(px);
}

static void test_grid_bad_args(void) {
  float img[8] = {0};
  CU_ASSERT_EQUAL(ganfw_png_write_grid(tmp_path("x.png"), img, 2, 2, 2, 1, 8, 2, 0, 0),
                  GANFW_ERR_INVALID_ARG); /* 2 channels */
  CU_ASSERT_EQUAL(ganfw_png_write_grid(tmp_path("x.png"), img, 0, 1, 2, 2, 8, 2, 0, 0),
                  GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(ganfw_png_write_grid(tmp_path("x.png"), img, 2, 1, 2, 2, 0, 2, 0, 0),
                  GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(access(tmp_path("x.png"), F_OK), -1);
}

/* Into a missing directory: GANFW_ERR_IO naming the path; over a directory (rename fails):
 * the temporary file is removed; over an existing file: replaced. */
static void test_atomic_write(void) {
  float img[4] = {0.1f, 0.2f, 0.3f, 0.4f};
  const char *missing = tmp_path("no/such/dir/grid.png");
  CU_ASSERT_EQUAL(ganfw_png_write_grid(missing, img, 1, 1, 2, 2, 8, 2, 0, 0), GANFW_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), missing));

  const char *dir = tmp_path("atomic");
  CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0755), 0);
  char target[600];
  snprintf(target, sizeof target, "%s/grid.png", dir);
  CU_ASSERT_EQUAL_FATAL(mkdir(target, 0755), 0); /* a directory where the file should go */
  CU_ASSERT_EQUAL(ganfw_png_write_grid(target, img, 1, 1, 2, 2, 8, 2, 0, 0), GANFW_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), target));
  CU_ASSERT_EQUAL(count_entries(dir), 1); /* only the directory: no temporary left */
  CU_ASSERT_EQUAL(rmdir(target), 0);

  CU_ASSERT_EQUAL(ganfw_png_write_grid(target, img, 1, 1, 2, 2, 8, 2, 0, 0), GANFW_OK);
  float img2[4] = {0.9f, 0.9f, 0.9f, 0.9f};
  CU_ASSERT_EQUAL(ganfw_png_write_grid(target, img2, 1, 1, 2, 2, 8, 2, 0, 0), GANFW_OK);
  CU_ASSERT_EQUAL(count_entries(dir), 1);
  float *px = NULL;
  int32_t c, h, w;
  CU_ASSERT_EQUAL_FATAL(ganfw_png_read(target, &px, &c, &h, &w), GANFW_OK);
  CU_ASSERT_DOUBLE_EQUAL(px[0] * 255.0f, expect_byte(0.9f, 0), 1e-3);
  free(px);
}

/* --- the reader on PNGs written with libpng directly -------------------------------------- */
/* Writes rows of `rowbytes` bytes (libpng's packed layout) with the given type and depth. */
static int write_raw_png(const char *path, int w, int h, int color, int depth, int interlace,
                         const uint8_t *data, size_t rowbytes, const png_color *pal, int npal) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
  png_infop info = png_create_info_struct(png);
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_write_struct(&png, &info);
    fclose(f);
    return -1;
  }
  png_init_io(png, f);
  png_set_IHDR(png, info, w, h, depth, color, interlace, PNG_COMPRESSION_TYPE_DEFAULT,
               PNG_FILTER_TYPE_DEFAULT);
  if (pal) png_set_PLTE(png, info, pal, npal);
  png_write_info(png, info);
  const int passes = png_set_interlace_handling(png);
  for (int p = 0; p < passes; p++)
    for (int y = 0; y < h; y++) png_write_row(png, data + (size_t)y * rowbytes);
  png_write_end(png, NULL);
  png_destroy_write_struct(&png, &info);
  fclose(f);
  return 0;
}

static void test_read_formats(void) {
  float *px = NULL;
  int32_t c, h, w;
  /* 16-bit gray 2 x 3 (big-endian samples), interlaced. */
  const uint16_t g16[6] = {0, 1, 256, 32768, 65534, 65535};
  uint8_t raw[64];
  for (int i = 0; i < 6; i++) {
    raw[2 * i] = g16[i] >> 8;
    raw[2 * i + 1] = g16[i] & 255;
  }
  const char *p = tmp_path("g16.png");
  CU_ASSERT_EQUAL_FATAL(
      write_raw_png(p, 3, 2, PNG_COLOR_TYPE_GRAY, 16, PNG_INTERLACE_ADAM7, raw, 6, NULL, 0), 0);
  CU_ASSERT_EQUAL_FATAL(ganfw_png_read(p, &px, &c, &h, &w), GANFW_OK);
  CU_ASSERT(c == 1 && h == 2 && w == 3);
  for (int i = 0; i < 6; i++) CU_ASSERT_DOUBLE_EQUAL(px[i], g16[i] / 65535.0, 1e-7);
  free(px);

  /* 1-bit gray, 10 x 1: bits 1011001110 */
  raw[0] = 0xB3;
  raw[1] = 0x80;
  p = tmp_path("g1.png");
  CU_ASSERT_EQUAL_FATAL(write_raw_png(p, 10, 1, PNG_COLOR_TYPE_GRAY, 1, 0, raw, 2, NULL, 0), 0);
  CU_ASSERT_EQUAL_FATAL(ganfw_png_read(p, &px, &c, &h, &w), GANFW_OK);
  CU_ASSERT(c == 1 && h == 1 && w == 10);
  const int bits[10] = {1, 0, 1, 1, 0, 0, 1, 1, 1, 0};
  for (int i = 0; i < 10; i++) CU_ASSERT_DOUBLE_EQUAL(px[i], bits[i], 1e-7);
  free(px);

  /* palette, 4-bit indices, 3 x 2 -> RGB planes */
  const png_color pal[3] = {{255, 0, 0}, {0, 128, 0}, {10, 20, 30}};
  const uint8_t idx[6] = {0, 1, 2, 2, 1, 0};
  raw[0] = (uint8_t)(idx[0] << 4 | idx[1]);
  raw[1] = (uint8_t)(idx[2] << 4);
  raw[2] = (uint8_t)(idx[3] << 4 | idx[4]);
  raw[3] = (uint8_t)(idx[5] << 4);
  p = tmp_path("pal.png");
  CU_ASSERT_EQUAL_FATAL(write_raw_png(p, 3, 2, PNG_COLOR_TYPE_PALETTE, 4, 0, raw, 2, pal, 3), 0);
  CU_ASSERT_EQUAL_FATAL(ganfw_png_read(p, &px, &c, &h, &w), GANFW_OK);
  CU_ASSERT(c == 3 && h == 2 && w == 3);
  for (int i = 0; i < 6; i++) {
    CU_ASSERT_DOUBLE_EQUAL(px[0 * 6 + i] * 255.0f, pal[idx[i]].red, 1e-3);
    CU_ASSERT_DOUBLE_EQUAL(px[1 * 6 + i] * 255.0f, pal[idx[i]].green, 1e-3);
    CU_ASSERT_DOUBLE_EQUAL(px[2 * 6 + i] * 255.0f, pal[idx[i]].blue, 1e-3);
  }
  free(px);

  /* 16-bit RGBA, 1 x 2 */
  const uint16_t rgba[8] = {1000, 2000, 3000, 65535, 65535, 0, 12345, 0};
  for (int i = 0; i < 8; i++) {
    raw[2 * i] = rgba[i] >> 8;
    raw[2 * i + 1] = rgba[i] & 255;
  }
  p = tmp_path("rgba16.png");
  CU_ASSERT_EQUAL_FATAL(write_raw_png(p, 2, 1, PNG_COLOR_TYPE_RGB_ALPHA, 16, 0, raw, 16, NULL, 0),
                        0);
  CU_ASSERT_EQUAL_FATAL(ganfw_png_read(p, &px, &c, &h, &w), GANFW_OK);
  CU_ASSERT(c == 4 && h == 1 && w == 2);
  for (int k = 0; k < 4; k++)
    for (int x = 0; x < 2; x++)
      CU_ASSERT_DOUBLE_EQUAL(px[k * 2 + x], rgba[x * 4 + k] / 65535.0, 1e-7);
  free(px);

  /* 8-bit gray+alpha via our own writer, and the header-only reader. */
  const uint8_t ga[4] = {10, 255, 200, 0};
  p = tmp_path("ga.png");
  CU_ASSERT_EQUAL_FATAL(ganfw_png_write_u8(p, ga, 1, 2, 2), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_png_read_size(p, &c, &h, &w), GANFW_OK);
  CU_ASSERT(c == 2 && h == 1 && w == 2);
  CU_ASSERT_EQUAL_FATAL(ganfw_png_read(p, &px, &c, &h, &w), GANFW_OK);
  CU_ASSERT_DOUBLE_EQUAL(px[0] * 255.0f, 10, 1e-3);
  CU_ASSERT_DOUBLE_EQUAL(px[1] * 255.0f, 200, 1e-3);
  CU_ASSERT_DOUBLE_EQUAL(px[2] * 255.0f, 255, 1e-3);
  CU_ASSERT_DOUBLE_EQUAL(px[3], 0, 1e-7);
  free(px);
}

static void test_read_errors(void) {
  float *px = (float *)1;
  int32_t c, h, w;
  const char *missing = tmp_path("missing.png");
  CU_ASSERT_EQUAL(ganfw_png_read(missing, &px, &c, &h, &w), GANFW_ERR_IO);
  CU_ASSERT_PTR_NULL(px);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), missing));

  const char *junk = tmp_path("junk.png");
  FILE *f = fopen(junk, "wb");
  fputs("this is not a png file at all", f);
  fclose(f);
  CU_ASSERT_EQUAL(ganfw_png_read(junk, &px, &c, &h, &w), GANFW_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), junk));

  /* A valid PNG cut in half. */
  uint8_t pix[32 * 32 * 3];
  for (int i = 0; i < (int)sizeof pix; i++) pix[i] = (uint8_t)(i * 7);
  const char *whole = tmp_path("whole.png"), *cut = tmp_path("cut.png");
  CU_ASSERT_EQUAL_FATAL(ganfw_png_write_u8(whole, pix, 32, 32, 3), GANFW_OK);
  f = fopen(whole, "rb");
  uint8_t buf[8192];
  const size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  f = fopen(cut, "wb");
  fwrite(buf, 1, n / 2, f);
  fclose(f);
  CU_ASSERT_EQUAL(ganfw_png_read(cut, &px, &c, &h, &w), GANFW_ERR_IO);
  CU_ASSERT_PTR_NULL(px);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), cut));
  CU_ASSERT_EQUAL(ganfw_png_read(whole, &px, &c, &h, &w), GANFW_OK);
  CU_ASSERT(c == 3 && h == 32 && w == 32);
  CU_ASSERT_DOUBLE_EQUAL(px[32 * 32 + 5] * 255.0f, pix[5 * 3 + 1], 1e-3); /* G of pixel 5 */
  free(px);
}

/* Appends a PNG chunk (length, type, body, CRC) to out at *n; `length` is what the chunk
 * header claims, `body_len` the bytes actually written. */
static void put_chunk(uint8_t *out, size_t *n, const char *type, uint32_t length,
                      const uint8_t *body, size_t body_len) {
  uint8_t *p = out + *n;
  p[0] = (uint8_t)(length >> 24), p[1] = (uint8_t)(length >> 16), p[2] = (uint8_t)(length >> 8);
  p[3] = (uint8_t)length;
  memcpy(p + 4, type, 4);
  if (body_len) memcpy(p + 8, body, body_len);
  const uint32_t crc = (uint32_t)crc32(crc32(0, NULL, 0), p + 4, (uInt)(4 + body_len));
  p[8 + body_len] = (uint8_t)(crc >> 24), p[9 + body_len] = (uint8_t)(crc >> 16);
  p[10 + body_len] = (uint8_t)(crc >> 8), p[11 + body_len] = (uint8_t)crc;
  *n += 12 + body_len;
}

/* A PNG signature and an IHDR of w x h at `depth` bits, colour type `color`, into out. */
static size_t put_header(uint8_t *out, uint32_t w, uint32_t h, uint8_t depth, uint8_t color) {
  static const uint8_t sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
  memcpy(out, sig, 8);
  size_t n = 8;
  const uint8_t ihdr[13] = {(uint8_t)(w >> 24),
                            (uint8_t)(w >> 16),
                            (uint8_t)(w >> 8),
                            (uint8_t)w,
                            (uint8_t)(h >> 24),
                            (uint8_t)(h >> 16),
                            (uint8_t)(h >> 8),
                            (uint8_t)h,
                            depth,
                            color,
                            0,
                            0,
                            0};
  put_chunk(out, &n, "IHDR", 13, ihdr, 13);
  return n;
}

static void write_bytes(const char *path, const uint8_t *data, size_t n) {
  FILE *f = fopen(path, "wb");
  CU_ASSERT_FATAL(f != NULL);
  CU_ASSERT_EQUAL(fwrite(data, 1, n, f), n);
  fclose(f);
}

/* What a header promises is checked before it is allocated: more pixels than the limit, or
 * more image data than the file can hold (deflate expands at most 1032-fold), is refused
 * naming the file; an ancillary chunk claiming gigabytes is skipped, not allocated (the
 * fuzzer's first finding: a 97-byte file whose zTXt chunk claimed 268 MB took seconds). A
 * directory is named as one. An image at the pixel limit that compresses to almost nothing
 * is still read. */
static void test_read_bounds(void) {
  float *px = NULL;
  int32_t c, h, w;
  uint8_t buf[256];
  const char *p = tmp_path("too_many_pixels.png");
  static const uint8_t zeros[] = {0x78, 0x9c, 0x63, 0x00, 0x00, 0x00, 0x01, 0x00, 0x01};
  size_t n = put_header(buf, 4096, 4097, 8, 0);
  put_chunk(buf, &n, "IDAT", sizeof zeros, zeros, sizeof zeros);
  put_chunk(buf, &n, "IEND", 0, NULL, 0);
  write_bytes(p, buf, n);
  CU_ASSERT_EQUAL(ganfw_png_read_size(p, &c, &h, &w), GANFW_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), p));
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "limit of 16777216 pixels"));

  p = tmp_path("promises_more.png");
  n = put_header(buf, 4000, 4000, 8, 6); /* 64 MB of RGBA in a file of a few dozen bytes */
  put_chunk(buf, &n, "IDAT", sizeof zeros, zeros, sizeof zeros);
  put_chunk(buf, &n, "IEND", 0, NULL, 0);
  write_bytes(p, buf, n);
  CU_ASSERT_EQUAL(ganfw_png_read(p, &px, &c, &h, &w), GANFW_ERR_IO);
  CU_ASSERT_PTR_NULL(px);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), p));
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "more than a"));

  p = tmp_path("huge_text_chunk.png");
  n = put_header(buf, 4, 4, 8, 4);
  put_chunk(buf, &n, "zTXt", 0x10000027u, (const uint8_t *)"Comment", 7);
  write_bytes(p, buf, n);
  CU_ASSERT_EQUAL(ganfw_png_read(p, &px, &c, &h, &w), GANFW_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), p));

  const char *dir = tmp_path("a_dir.png");
  CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0755), 0);
  CU_ASSERT_EQUAL(ganfw_png_read(dir, &px, &c, &h, &w), GANFW_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), dir));
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "is a directory"));

  /* 4096 x 4096 black pixels: 16 MiB of data in a file of about 16 KiB, at the limit. */
  const int side = 4096;
  uint8_t *black = calloc((size_t)side * side, 1);
  CU_ASSERT_FATAL(black != NULL);
  p = tmp_path("black.png");
  CU_ASSERT_EQUAL_FATAL(ganfw_png_write_u8(p, black, side, side, 1), GANFW_OK);
  free(black);
  CU_ASSERT_EQUAL(ganfw_png_read(p, &px, &c, &h, &w), GANFW_OK);
  CU_ASSERT(c == 1 && h == side && w == side);
  if (px) CU_ASSERT_EQUAL(px[(size_t)side * side - 1], 0.0f);
  free(px);
}

static CU_TestInfo tests[] = {
    {"grid_size", test_grid_size},
    {"grid_gray_values", test_grid_gray_values},
    {"grid_rgb_rgba_single", test_grid_rgb_rgba_single},
    {"grid_bad_args", test_grid_bad_args},
    {"atomic_write", test_atomic_write},
    {"read_formats", test_read_formats},
    {"read_errors", test_read_errors},
    {"read_bounds", test_read_bounds},
    CU_TEST_INFO_NULL,
};
GT_MAIN("png_io", tests)
