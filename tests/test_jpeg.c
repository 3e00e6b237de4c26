/* The JPEG reader (io/jpeg_io.c) on files written here at run time with libjpeg's encoder
 * into a mkdtemp folder: baseline (4:2:0 and 4:4:4), progressive, arithmetic-coded, gray,
 * stored RGB, restart markers, CMYK and YCCK; the decoded pixels against the source and
 * against PIL's decode of the same files (skipped without /usr/bin/python3 and PIL); DCT-
 * domain scaling (the size chosen, the pixels against a full decode + resize); EXIF
 * orientation ignored; decoding from several threads; and every bad input (cut short, a
 * corrupt Huffman table or entropy data, 12-bit, garbage, headers over the limits, too many
 * scans) refused with a message naming the file. */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jpeglib.h>

#include "base/error.h"
#include "data/data_source.h"
#include "io/jpeg_io.h"
#include "testutil.h"

/* --- fixtures ----------------------------------------------------------------------------- */
/* `name` inside this run's temporary folder; the string lives for 16 more calls. */
static const char *path_in(const char *name) {
  static char bufs[16][600];
  static int next;
  const char *tmp_root = gt_tmp_root("jpeg");
  char *p = bufs[next++ % 16];
  snprintf(p, 600, "%s/%s", tmp_root, name);
  return p;
}

static int msg_has(const char *s) {
  const char *m = ganfw_error_message();
  if (strstr(m, s)) return 1;
  printf("\n  message \"%s\" lacks \"%s\"\n", m, s);
  return 0;
}

/* A smooth picture, with some detail (a ripple of period 30 pixels) when `detail`, [h,w,c]
 * interleaved: channel k of (y, x). */
static uint8_t picture_px(int y, int x, int k, int h, int w, int detail) {
  const double v = 128 + 90 * sin(3.0 * x / w + 1.7 * k) * cos(2.0 * y / h - 0.6 * k) +
                   (detail ? 20 * sin((x + 2 * y + 5 * k) * 0.21) : 0);
  return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

static uint8_t *picture_of(int h, int w, int c, int detail) {
  uint8_t *px = malloc((size_t)h * w * c);
  CU_ASSERT_PTR_NOT_NULL_FATAL(px);
  for (int y = 0; y < h; y++)
    for (int x = 0; x < w; x++)
      for (int k = 0; k < c; k++)
        px[((size_t)y * w + x) * c + k] = picture_px(y, x, k, h, w, detail);
  return px;
}

static uint8_t *picture(int h, int w, int c) {
  return picture_of(h, w, c, 1);
}

static uint8_t *read_all(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fseek(f, 0, SEEK_END);
  *n = (size_t)ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *b = malloc(*n ? *n : 1);
  CU_ASSERT_FATAL(b && fread(b, 1, *n, f) == *n);
  fclose(f);
  return b;
}

static void write_all(const char *path, const uint8_t *b, size_t n) {
  FILE *f = fopen(path, "wb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_FATAL(fwrite(b, 1, n, f) == n);
  fclose(f);
}

/* The offset of the first marker FF `code` in b (after SOI), or -1. */
static long find_marker(const uint8_t *b, size_t n, uint8_t code) {
  for (size_t i = 2; i + 1 < n; i++)
    if (b[i] == 0xFF && b[i + 1] == code) return (long)i;
  return -1;
}

/* --- the formats ------------------------------------------------------------------------ */
typedef struct jpeg_case {
  const char *file;
  int32_t c_in; /* channels written: 1, 3 or 4 (CMYK, inverted as Adobe writes it) */
  gt_jpeg_opts opts;
} jpeg_case;

#define CASE_H 37
#define CASE_W 53 /* neither a multiple of 8 nor of 16: partial blocks and MCUs */

static const jpeg_case cases[] = {
    {"baseline.jpg", 3, {0}},
    {"baseline444.jpg", 3, {.quality = 95, .full_chroma = 1}},
    {"progressive.jpg", 3, {.progressive = 1}},
    {"arithmetic.jpg", 3, {.arithmetic = 1}},
    {"arith_progressive.jpg", 3, {.arithmetic = 1, .progressive = 1}},
    {"gray.jpg", 1, {0}},
    {"gray_progressive.jpg", 1, {.progressive = 1}},
    {"stored_rgb.jpg", 3, {.stored = 'R'}},
    {"restart.jpg", 3, {.restart = 1}},
    {"cmyk.jpg", 4, {.quality = 95}},
    {"ycck.jpg", 4, {.quality = 95, .stored = 'Y'}},
};
enum { CASE_COUNT = sizeof cases / sizeof cases[0] };

/* The RGB (or gray) picture a case should decode to, [c,h,w] planar in [0,1]: the written
 * pixels, or for CMYK (stored inverted: s = 1 - ink) R = s_C * s_K and so on. */
static void expected_planes(const jpeg_case *jc, const uint8_t *px, float *want) {
  const size_t plane = (size_t)CASE_H * CASE_W;
  for (size_t i = 0; i < plane; i++) {
    if (jc->c_in == 4) {
      const float k = px[4 * i + 3] / 255.0f;
      for (int c = 0; c < 3; c++) want[c * plane + i] = px[4 * i + c] / 255.0f * k;
    } else {
      for (int c = 0; c < jc->c_in; c++) want[c * plane + i] = px[jc->c_in * i + c] / 255.0f;
    }
  }
}

static void write_cases(void) {
  for (int i = 0; i < CASE_COUNT; i++) {
    uint8_t *px = picture(CASE_H, CASE_W, cases[i].c_in);
    CU_ASSERT_EQUAL_FATAL(
        gt_write_jpeg(path_in(cases[i].file), px, CASE_H, CASE_W, cases[i].c_in, &cases[i].opts),
        0);
    free(px);
  }
}

/* Each format decodes to the size and channels of its header, and to pixels near the ones
 * written (a lossy codec: a mean error of a few levels). */
static void test_formats(void) {
  write_cases();
  for (int i = 0; i < CASE_COUNT; i++) {
    const jpeg_case *jc = &cases[i];
    const char *path = path_in(jc->file);
    int32_t c0 = 0, h0 = 0, w0 = 0, c = 0, h = 0, w = 0;
    CU_ASSERT_EQUAL(ganfw_jpeg_read_size(path, &c0, &h0, &w0), GANFW_OK);
    float *px = NULL;
    const ganfw_status st = ganfw_jpeg_read(path, &px, &c, &h, &w);
    if (st != GANFW_OK) printf("\n  %s: %s\n", jc->file, ganfw_error_message());
    CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
    const int32_t want_c = jc->c_in == 1 ? 1 : 3;
    CU_ASSERT(c0 == want_c && h0 == CASE_H && w0 == CASE_W);
    CU_ASSERT(c == want_c && h == CASE_H && w == CASE_W);
    uint8_t *src = picture(CASE_H, CASE_W, jc->c_in);
    float *want = malloc(sizeof(float) * 3 * CASE_H * CASE_W);
    expected_planes(jc, src, want);
    double sum = 0, worst = 0;
    const size_t n = (size_t)c * h * w;
    for (size_t k = 0; k < n; k++) {
      const double d = fabs((double)px[k] - want[k]);
      sum += d;
      worst = d > worst ? d : worst;
    }
    if (!(sum / n < 4.0 / 255 && worst < 40.0 / 255))
      printf("\n  %s: mean error %.2f, worst %.1f levels\n", jc->file, sum / n * 255, worst * 255);
    CU_ASSERT(sum / n < 4.0 / 255 && worst < 40.0 / 255);
    free(src);
    free(want);
    free(px);
  }
}

/* --- PIL parity ------------------------------------------------------------------------- */
/* PIL's decode of each case (Image.open(...).convert("L" or "RGB"), the conversion
 * torchvision's ImageFolder loader makes) against ours, byte for byte: the largest
 * difference per file in levels of 255, printed. libjpeg-turbo decodes both (PIL 9.4 links
 * Debian's libjpeg62-turbo), with the same defaults (JDCT_ISLOW, fancy upsampling), so every
 * file but the CMYK ones must agree exactly; for CMYK PIL's integer cmyk2rgb rounds where
 * this computes in float: within 1 level. */
static void test_pil_parity(void) {
  if (!gt_python_has("PIL")) {
    printf("\n  skipped: /usr/bin/python3 with PIL (python3-pil) is not there ");
    return;
  }
  char cmd[8192];
  int at = snprintf(cmd, sizeof cmd,
                    "/usr/bin/python3 -c 'import sys\nfrom PIL import Image\n"
                    "for p in sys.argv[1:]:\n"
                    "    im = Image.open(p)\n"
                    "    im = im.convert(\"L\" if im.mode == \"L\" else \"RGB\")\n"
                    "    open(p + \".pil\", \"wb\").write(im.tobytes())\n'");
  for (int i = 0; i < CASE_COUNT; i++)
    at += snprintf(cmd + at, sizeof cmd - (size_t)at, " '%s'", path_in(cases[i].file));
  CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
  printf("\n  largest difference to PIL in levels:");
  for (int i = 0; i < CASE_COUNT; i++) {
    const char *path = path_in(cases[i].file);
    char pil[700];
    snprintf(pil, sizeof pil, "%s.pil", path);
    size_t n = 0;
    uint8_t *ref = read_all(pil, &n);
    float *px = NULL;
    int32_t c, h, w;
    CU_ASSERT_EQUAL_FATAL(ganfw_jpeg_read(path, &px, &c, &h, &w), GANFW_OK);
    CU_ASSERT_EQUAL_FATAL(n, (size_t)c * h * w);
    const size_t plane = (size_t)h * w;
    int worst = 0;
    for (size_t p = 0; p < plane; p++)
      for (int k = 0; k < c; k++) {
        const int ours = (int)lrintf(px[k * plane + p] * 255.0f);
        const int d = abs(ours - ref[p * c + k]);
        worst = d > worst ? d : worst;
      }
    printf(" %s %d", cases[i].file, worst);
    CU_ASSERT(worst <= (cases[i].c_in == 4 ? 1 : 0));
    free(px);
    free(ref);
  }
  printf(" ");
}

/* --- DCT-domain scaling ------------------------------------------------------------------ */
/* The mean and largest |a - b| over n values, in levels of 255. */
static void diff_levels(const float *a, const float *b, size_t n, double *mean, double *worst) {
  double sum = 0, w = 0;
  for (size_t i = 0; i < n; i++) {
    const double d = fabs((double)a[i] - b[i]) * 255.0;
    sum += d;
    w = d > w ? d : w;
  }
  *mean = sum / (double)n;
  *worst = w;
}

/* x [c,h,w] averaged over d x d blocks into y [c,h/d,w/d] (h, w multiples of d). */
static void box_down(const float *x, int c, int h, int w, int d, float *y) {
  const int oh = h / d, ow = w / d;
  for (int k = 0; k < c; k++)
    for (int i = 0; i < oh; i++)
      for (int j = 0; j < ow; j++) {
        double s = 0;
        for (int u = 0; u < d; u++)
          for (int v = 0; v < d; v++) s += x[((size_t)k * h + i * d + u) * w + j * d + v];
        y[((size_t)k * oh + i) * ow + j] = (float)(s / (d * d));
      }
}

/* The scale is the smallest of 1/8, 1/4, 1/2 that keeps both sides at least the minimum
 * (libjpeg's sizes: ceil(side * scale)). The scaled pixels are those of the full decode
 * low-passed: next to its d x d block means (4:4:4, a picture with detail) within a few
 * levels, and next to its bilinear resize (the transform's, no antialiasing) for a smooth
 * picture, where aliasing has nothing to fold. The measured errors are printed. */
static void test_dct_scale(void) {
  const int H = 200, W = 256;
  uint8_t *smooth = picture_of(H, W, 3, 0), *detail = picture_of(H, W, 3, 1);
  const gt_jpeg_opts base = {.quality = 95},
                     prog = {.quality = 95, .progressive = 1, .full_chroma = 1},
                     fine = {.quality = 98, .full_chroma = 1};
  CU_ASSERT_EQUAL_FATAL(gt_write_jpeg(path_in("smooth.jpg"), smooth, H, W, 3, &base), 0);
  CU_ASSERT_EQUAL_FATAL(gt_write_jpeg(path_in("smooth_prog.jpg"), smooth, H, W, 3, &prog), 0);
  CU_ASSERT_EQUAL_FATAL(gt_write_jpeg(path_in("detail.jpg"), detail, H, W, 3, &fine), 0);
  free(smooth);
  free(detail);
  const struct {
    int32_t min, h, w;
  } want[] = {{0, 200, 256},  {25, 25, 32},    {26, 50, 64},    {50, 50, 64},
              {51, 100, 128}, {100, 100, 128}, {101, 200, 256}, {4096, 200, 256}};
  const char *files[3] = {"smooth.jpg", "smooth_prog.jpg", "detail.jpg"};
  double worst_bilinear = 0, mean_bilinear = 0, worst_box = 0, mean_box = 0;
  for (int f = 0; f < 3; f++) {
    char file[600];
    snprintf(file, sizeof file, "%s", path_in(files[f]));
    float *full = NULL;
    int32_t c, h, w, fh, fw;
    CU_ASSERT_EQUAL_FATAL(ganfw_jpeg_read(file, &full, &c, &h, &w), GANFW_OK);
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
      float *px = NULL;
      CU_ASSERT_EQUAL_FATAL(
          ganfw_jpeg_read_scaled(file, want[i].min, want[i].min, &px, &c, &h, &w, &fh, &fw),
          GANFW_OK);
      CU_ASSERT(c == 3 && h == want[i].h && w == want[i].w && fh == H && fw == W);
      float *ref = malloc(sizeof(float) * 3 * h * w);
      double mean, worst;
      if (h == H) {
        CU_ASSERT_EQUAL(memcmp(px, full, sizeof(float) * 3 * H * W), 0);
      } else if (f < 2) {
        CU_ASSERT_EQUAL_FATAL(ganfw_resize_bilinear(full, 3, H, W, ref, h, w), GANFW_OK);
        diff_levels(px, ref, (size_t)3 * h * w, &mean, &worst);
        mean_bilinear = mean > mean_bilinear ? mean : mean_bilinear;
        worst_bilinear = worst > worst_bilinear ? worst : worst_bilinear;
        CU_ASSERT(mean < 1.0 && worst < 5);
      } else {
        box_down(full, 3, H, W, H / h, ref);
        diff_levels(px, ref, (size_t)3 * h * w, &mean, &worst);
        mean_box = mean > mean_box ? mean : mean_box;
        worst_box = worst > worst_box ? worst : worst_box;
        CU_ASSERT(mean < 1.0 && worst < 5);
      }
      free(ref);
      free(px);
    }
    free(full);
  }
  printf("\n  scaled vs full decode: smooth + bilinear mean %.2f worst %.1f levels, detail + "
         "block means mean %.2f worst %.1f ",
         mean_bilinear, worst_bilinear, mean_box, worst_box);
  /* odd sizes round up; a minimum on one side only is no minimum */
  uint8_t *odd = picture(77, 101, 1);
  CU_ASSERT_EQUAL_FATAL(gt_write_jpeg(path_in("odd.jpg"), odd, 77, 101, 1, NULL), 0);
  free(odd);
  float *px = NULL;
  int32_t c, h, w;
  CU_ASSERT_EQUAL(ganfw_jpeg_read_scaled(path_in("odd.jpg"), 10, 10, &px, &c, &h, &w, NULL, NULL),
                  GANFW_OK);
  CU_ASSERT(c == 1 && h == 10 && w == 13);
  free(px);
  CU_ASSERT_EQUAL(ganfw_jpeg_read_scaled(path_in("odd.jpg"), 0, 10, &px, &c, &h, &w, NULL, NULL),
                  GANFW_OK);
  CU_ASSERT(h == 77 && w == 101);
  free(px);
}

/* --- EXIF orientation --------------------------------------------------------------------- */
/* A JPEG whose EXIF says "rotate 90 degrees clockwise" (orientation 6) decodes as stored,
 * h x w unchanged, as PIL's Image.open gives it (torchvision's ImageFolder does not rotate). */
static void test_exif_orientation_ignored(void) {
  const int H = 16, W = 40;
  uint8_t *px = picture(H, W, 3);
  CU_ASSERT_EQUAL_FATAL(gt_write_jpeg(path_in("plain.jpg"), px, H, W, 3, NULL), 0);
  free(px);
  size_t n;
  uint8_t *b = read_all(path_in("plain.jpg"), &n);
  /* APP1 "Exif\0\0", big-endian TIFF, one IFD entry: Orientation (0x0112), SHORT, 6 */
  static const uint8_t app1[] = {0xFF, 0xE1, 0x00, 0x22, 'E',  'x',  'i',  'f',  0,
                                 0,    'M',  'M',  0x00, 0x2A, 0x00, 0x00, 0x00, 0x08,
                                 0x00, 0x01, 0x01, 0x12, 0x00, 0x03, 0x00, 0x00, 0x00,
                                 0x01, 0x00, 0x06, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  uint8_t *e = malloc(n + sizeof app1);
  memcpy(e, b, 2);
  memcpy(e + 2, app1, sizeof app1);
  memcpy(e + 2 + sizeof app1, b + 2, n - 2);
  write_all(path_in("exif6.jpg"), e, n + sizeof app1);
  float *a = NULL, *r = NULL;
  int32_t c, h, w;
  CU_ASSERT_EQUAL_FATAL(ganfw_jpeg_read(path_in("exif6.jpg"), &r, &c, &h, &w), GANFW_OK);
  CU_ASSERT(h == H && w == W);
  CU_ASSERT_EQUAL_FATAL(ganfw_jpeg_read(path_in("plain.jpg"), &a, &c, &h, &w), GANFW_OK);
  CU_ASSERT_EQUAL(memcmp(a, r, sizeof(float) * 3 * H * W), 0);
  if (gt_python_has("PIL")) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "/usr/bin/python3 -c 'import sys\nfrom PIL import Image\n"
             "im = Image.open(sys.argv[1])\n"
             "sys.exit(0 if im.size == (%d, %d) and im.getexif().get(0x0112) == 6 else 1)' '%s'",
             W, H, path_in("exif6.jpg"));
    CU_ASSERT_EQUAL(system(cmd), 0); /* PIL reads the tag and does not rotate either */
  }
  free(a);
  free(r);
  free(b);
  free(e);
}

/* --- threads ------------------------------------------------------------------------------ */
static char case_paths[CASE_COUNT][600]; /* path_in's buffers are not for threads */

typedef struct decode_job {
  int differ, failed;
} decode_job;

static void *decode_all(void *arg) {
  decode_job *j = arg;
  for (int round = 0; round < 4; round++)
    for (int i = 0; i < CASE_COUNT; i++) {
      float *a = NULL, *b = NULL;
      int32_t c, h, w, c2, h2, w2;
      const char *path = case_paths[i];
      if (ganfw_jpeg_read_scaled(path, 0, 0, &a, &c, &h, &w, NULL, NULL) != GANFW_OK ||
          ganfw_jpeg_read(path, &b, &c2, &h2, &w2) != GANFW_OK) {
        j->failed++;
      } else if (memcmp(a, b, sizeof(float) * c * h * w) != 0) {
        j->differ++;
      }
      free(a);
      free(b);
    }
  return NULL;
}

/* Four threads decoding every case at once get what one thread gets, every time. */
static void test_threads(void) {
  enum { T = 4 };
  pthread_t th[T];
  decode_job jobs[T];
  memset(jobs, 0, sizeof jobs);
  for (int i = 0; i < CASE_COUNT; i++)
    snprintf(case_paths[i], sizeof case_paths[i], "%s", path_in(cases[i].file));
  for (int t = 0; t < T; t++)
    CU_ASSERT_EQUAL_FATAL(pthread_create(&th[t], NULL, decode_all, &jobs[t]), 0);
  for (int t = 0; t < T; t++) {
    pthread_join(th[t], NULL);
    CU_ASSERT(jobs[t].failed == 0 && jobs[t].differ == 0);
  }
}

/* --- bad input ---------------------------------------------------------------------------- */
/* `path` is refused with GANFW_ERR_IO, a message naming it and holding `what`, and no
 * pixels; the header read refuses it too when `header` says so. */
static void expect_refused(const char *path, const char *what, int header) {
  float *px = (float *)1;
  int32_t c, h, w;
  CU_ASSERT_EQUAL(ganfw_jpeg_read(path, &px, &c, &h, &w), GANFW_ERR_IO);
  CU_ASSERT_PTR_NULL(px);
  CU_ASSERT(msg_has(path) && msg_has(what));
  if (header) {
    CU_ASSERT_EQUAL(ganfw_jpeg_read_size(path, &c, &h, &w), GANFW_ERR_IO);
    CU_ASSERT(msg_has(path) && msg_has(what));
  }
  ganfw_error_clear();
}

/* A copy of `src` with bytes [at, at + len) replaced by `with` (len may be 0 to insert), cut
 * to `keep` bytes when keep > 0, written as `dst`. */
static void patched(const char *src, const char *dst, long at, const uint8_t *with, size_t len,
                    size_t keep) {
  size_t n;
  uint8_t *b = read_all(src, &n);
  CU_ASSERT_FATAL(at >= 0 && (size_t)at + len <= n);
  if (len) memcpy(b + at, with, len);
  write_all(dst, b, keep ? keep : n);
  free(b);
}

/* A gray progressive JPEG of more than GANFW_JPEG_MAX_SCANS scans: the DC scan, then each of
 * the 63 AC coefficients alone at successive approximation from bit 9 down, 10 scans
 * each, all valid. */
static void write_many_scans(const char *path) {
  enum { PER = 10, SCANS = 1 + 63 * PER };
  static jpeg_scan_info scans[SCANS];
  scans[0] = (jpeg_scan_info){1, {0}, 0, 0, 0, 0};
  int n = 1;
  for (int k = 1; k <= 63; k++)
    for (int a = PER - 1; a >= 0; a--)
      scans[n++] = (jpeg_scan_info){1, {0}, k, k, a == PER - 1 ? 0 : a + 1, a};
  struct jpeg_compress_struct ci;
  struct jpeg_error_mgr err;
  ci.err = jpeg_std_error(&err);
  jpeg_create_compress(&ci);
  FILE *f = fopen(path, "wb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  jpeg_stdio_dest(&ci, f);
  ci.image_width = ci.image_height = 16;
  ci.input_components = 1;
  ci.in_color_space = JCS_GRAYSCALE;
  jpeg_set_defaults(&ci);
  ci.scan_info = scans;
  ci.num_scans = SCANS;
  jpeg_start_compress(&ci, TRUE);
  uint8_t row[16];
  for (int y = 0; y < 16; y++) {
    for (int x = 0; x < 16; x++) row[x] = (uint8_t)(x * 13 + y * 7);
    JSAMPROW r = row;
    jpeg_write_scanlines(&ci, &r, 1);
  }
  jpeg_finish_compress(&ci);
  jpeg_destroy_compress(&ci);
  fclose(f);
}

static void test_bad_input(void) {
  char good[600];
  snprintf(good, sizeof good, "%s", path_in("bad_src.jpg"));
  uint8_t *px = picture(48, 64, 3);
  CU_ASSERT_EQUAL_FATAL(gt_write_jpeg(good, px, 48, 64, 3, NULL), 0);
  const gt_jpeg_opts prog = {.progressive = 1};
  CU_ASSERT_EQUAL_FATAL(gt_write_jpeg(path_in("bad_prog.jpg"), px, 48, 64, 3, &prog), 0);
  free(px);
  size_t n;
  uint8_t *b = read_all(good, &n);
  const long sof = find_marker(b, n, 0xC0), dht = find_marker(b, n, 0xC4),
             sos = find_marker(b, n, 0xDA);
  CU_ASSERT_FATAL(sof > 0 && dht > 0 && sos > 0);
  size_t pn;
  uint8_t *pb = read_all(path_in("bad_prog.jpg"), &pn);
  free(pb);

  /* cut short: baseline in its scan, progressive after a few scans, right after the header */
  patched(good, path_in("cut.jpg"), 0, NULL, 0, n * 6 / 10);
  expect_refused(path_in("cut.jpg"), "Premature end of JPEG file (the file is damaged or cut short",
                 0);
  patched(path_in("bad_prog.jpg"), path_in("cut_prog.jpg"), 0, NULL, 0, pn * 6 / 10);
  expect_refused(path_in("cut_prog.jpg"), "Premature end of JPEG file", 0);
  patched(good, path_in("cut_header.jpg"), 0, NULL, 0, (size_t)sos + 4);
  expect_refused(path_in("cut_header.jpg"), "cut short", 1);
  /* the entropy data ends early at a marker: libjpeg would fill in gray */
  const uint8_t eoi[2] = {0xFF, 0xD9};
  patched(good, path_in("early_eoi.jpg"), (long)(n * 7 / 10), eoi, 2, 0);
  expect_refused(path_in("early_eoi.jpg"), "premature end of data segment", 0);
  /* a Huffman table whose code counts over-fill the code space (all 16 lengths 255) */
  uint8_t counts[16];
  memset(counts, 255, sizeof counts);
  patched(good, path_in("bad_huffman.jpg"), dht + 5, counts, 16, 0);
  expect_refused(path_in("bad_huffman.jpg"), "Huffman", 1);
  /* 12-bit samples */
  const uint8_t twelve = 12;
  patched(good, path_in("twelve.jpg"), sof + 4, &twelve, 1, 0);
  expect_refused(path_in("twelve.jpg"), "12-bit JPEG is not supported", 1);
  /* headers over the limits: 65535 x 65535 (over libjpeg's 65500 too), 8192 x 8193, and
   * 5000 x 4000 (under the header limit, over the decoded one unless scaled) */
  const uint8_t huge[4] = {0xFF, 0xFF, 0xFF, 0xFF}, big[4] = {0x20, 0x01, 0x20, 0x00},
                photo[4] = {0x0F, 0xA0, 0x13, 0x88};
  patched(good, path_in("huge.jpg"), sof + 5, huge, 4, 0);
  expect_refused(path_in("huge.jpg"), "65535 x 65535 pixels exceed the reader's limit", 1);
  patched(good, path_in("big.jpg"), sof + 5, big, 4, 0);
  expect_refused(path_in("big.jpg"), "8192 x 8193 pixels exceed the reader's limit", 1);
  patched(good, path_in("photo.jpg"), sof + 5, photo, 4, 0);
  int32_t c, h, w;
  CU_ASSERT_EQUAL(ganfw_jpeg_read_size(path_in("photo.jpg"), &c, &h, &w), GANFW_OK);
  CU_ASSERT(h == 4000 && w == 5000);
  expect_refused(path_in("photo.jpg"), "decoded pixels (set a smaller data.resize", 0);
  /* garbage after a JPEG's first bytes, and a file that is no JPEG at all */
  uint8_t junk[300];
  for (size_t i = 0; i < sizeof junk; i++) junk[i] = (uint8_t)(i * 37 + 11);
  junk[0] = 0xFF, junk[1] = 0xD8, junk[2] = 0xFF;
  write_all(path_in("garbage.jpg"), junk, sizeof junk);
  expect_refused(path_in("garbage.jpg"), "cannot read JPEG", 1);
  write_all(path_in("text.jpg"), (const uint8_t *)"hello, world", 12);
  expect_refused(path_in("text.jpg"), "is not a JPEG file", 1);
  write_all(path_in("empty.jpg"), junk, 0);
  expect_refused(path_in("empty.jpg"), "is not a JPEG file", 1);
  CU_ASSERT_EQUAL_FATAL(mkdir(path_in("dir.jpg"), 0755), 0);
  expect_refused(path_in("dir.jpg"), "is a directory", 1);
  expect_refused(path_in("missing.jpg"), "No such file", 1);
  /* more scans than the limit */
  write_many_scans(path_in("scans.jpg"));
  expect_refused(path_in("scans.jpg"), "more than 500 scans", 0);
  free(b);
}

static CU_TestInfo tests[] = {
    {"formats", test_formats},
    {"pil_parity", test_pil_parity},
    {"dct_scale", test_dct_scale},
    {"exif_orientation_ignored", test_exif_orientation_ignored},
    {"threads", test_threads},
    {"bad_input", test_bad_input},
    CU_TEST_INFO_NULL,
};

GT_MAIN("jpeg", tests)
