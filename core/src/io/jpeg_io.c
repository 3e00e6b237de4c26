/* A JPEG reader returning float [C,H,W] in [0,1] for the folder data set, optionally scaled
 * down in the DCT domain. libjpeg-turbo's libjpeg API (not TurboJPEG: it gives the colour
 * space, the scan count, a memory cap and each warning); its errors, and the warnings that
 * mean it filled in missing data, longjmp back into the function that set up. */
#include "io/jpeg_io.h"

#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <jpeglib.h>
#include <jerror.h>

#include "base/error.h"

/* libjpeg's own working memory (a progressive image's coefficients: 2 bytes a sample) is
 * capped here; beyond it libjpeg would need a backing store and refuses. */
#define JPEG_MAX_MEMORY (512L << 20)

typedef struct jpeg_err {
  struct jpeg_error_mgr pub; /* first: libjpeg's pointer to it is a pointer to this */
  struct jpeg_progress_mgr progress;
  jmp_buf jump;
  char msg[JMSG_LENGTH_MAX + 160];
  int refused; /* 1: msg is the reader's own refusal (a limit, a format), not damage */
} jpeg_err;

/* The refusal of an image over GANFW_JPEG_MAX_PIXELS (or libjpeg's 65500 a side). */
static void too_large(jpeg_err *e, j_decompress_ptr d) {
  snprintf(e->msg, sizeof e->msg,
           "%u x %u pixels exceed the reader's limit of %d pixels (resize the image)",
           d->image_width, d->image_height, GANFW_JPEG_MAX_PIXELS);
  e->refused = 1;
}

static void on_jpeg_error(j_common_ptr cinfo) {
  jpeg_err *e = (jpeg_err *)cinfo->err;
  if (cinfo->err->msg_code == JERR_IMAGE_TOO_BIG && cinfo->is_decompressor) {
    too_large(e, (j_decompress_ptr)cinfo);
  } else if (cinfo->err->msg_code == JERR_BAD_PRECISION) {
    snprintf(e->msg, sizeof e->msg,
             "%d-bit JPEG is not supported (only 8-bit samples: convert it to an 8-bit JPEG "
             "or a PNG)",
             cinfo->err->msg_parm.i[0]);
    e->refused = 1;
  } else if (cinfo->err->msg_code == JERR_NO_BACKING_STORE) {
    snprintf(e->msg, sizeof e->msg,
             "decoding it needs more than the reader's %ld MiB of working memory (a large "
             "progressive JPEG: make it smaller or baseline)",
             JPEG_MAX_MEMORY >> 20);
    e->refused = 1;
  } else {
    (*cinfo->err->format_message)(cinfo, e->msg);
  }
  longjmp(e->jump, 1);
}

/* Corrupt-data warnings after which libjpeg goes on with gray or zero blocks in place of
 * what it could not read: refusals here, since a damaged picture would train silently. The
 * others (extraneous bytes between markers, an unknown JFIF revision or Adobe transform, a
 * bad ICC marker) leave the pixels whole and are ignored. */
static int warning_is_damage(int code) {
  return code == JWRN_JPEG_EOF || code == JWRN_HIT_MARKER || code == JWRN_MUST_RESYNC ||
         code == JWRN_HUFF_BAD_CODE || code == JWRN_ARITH_BAD_CODE ||
         code == JWRN_BOGUS_PROGRESSION || code == JWRN_NOT_SEQUENTIAL;
}

static void on_jpeg_message(j_common_ptr cinfo, int level) {
  if (level >= 0) return; /* trace messages */
  if (warning_is_damage(cinfo->err->msg_code)) on_jpeg_error(cinfo);
  cinfo->err->num_warnings++;
}

static void on_jpeg_output(j_common_ptr cinfo) {
  (void)cinfo; /* never print: every message worth showing becomes the status */
}

/* Called by libjpeg as it reads; stops a file of too many scans. */
static void on_jpeg_progress(j_common_ptr cinfo) {
  if (!cinfo->is_decompressor) return;
  j_decompress_ptr d = (j_decompress_ptr)cinfo;
  if (d->input_scan_number <= GANFW_JPEG_MAX_SCANS) return;
  jpeg_err *e = (jpeg_err *)cinfo->err;
  snprintf(e->msg, sizeof e->msg,
           "it has more than %d scans (a damaged or hostile progressive JPEG: re-encode it)",
           GANFW_JPEG_MAX_SCANS);
  e->refused = 1;
  longjmp(e->jump, 1);
}

int ganfw_jpeg_signature(const uint8_t *head, size_t n) {
  return n >= 3 && head[0] == 0xFF && head[1] == 0xD8 && head[2] == 0xFF;
}

/* The smallest scale 1/8, 1/4, 1/2 at which the output is still min_h x min_w or more;
 * else 1. Sets d->scale_num/scale_denom and d->output_width/height. */
static void choose_scale(j_decompress_ptr d, int32_t min_h, int32_t min_w) {
  d->scale_num = 1;
  if (min_h > 0 && min_w > 0)
    for (unsigned den = 8; den >= 2; den /= 2) {
      d->scale_denom = den;
      jpeg_calc_output_dimensions(d);
      if (d->output_height >= (JDIMENSION)min_h && d->output_width >= (JDIMENSION)min_w) return;
    }
  d->scale_denom = 1;
  jpeg_calc_output_dimensions(d);
}

/* One scanline of n pixels (libjpeg's interleaved samples in `space`) into the planes of
 * out at row offset `at`. */
static void store_row(const JSAMPLE *row, J_COLOR_SPACE space, JDIMENSION n, float *out,
                      size_t plane, size_t at) {
  const float s = 1.0f / 255.0f;
  if (space == JCS_GRAYSCALE) {
    for (JDIMENSION x = 0; x < n; x++) out[at + x] = (float)row[x] * s;
  } else if (space == JCS_RGB) {
    for (JDIMENSION x = 0; x < n; x++)
      for (int k = 0; k < 3; k++) out[k * plane + at + x] = (float)row[3 * x + k] * s;
  } else { /* JCS_CMYK, inverted: each stored sample is 1 - ink */
    for (JDIMENSION x = 0; x < n; x++) {
      const float k = (float)row[4 * x + 3] * s;
      for (int c = 0; c < 3; c++) out[c * plane + at + x] = (float)row[4 * x + c] * s * k;
    }
  }
}

/* The colour space libjpeg should give for the file's, and the channels returned; 0 when
 * the reader does not take it. */
static int output_space(J_COLOR_SPACE in, J_COLOR_SPACE *out) {
  switch (in) {
  case JCS_GRAYSCALE:
    *out = JCS_GRAYSCALE;
    return 1;
  case JCS_YCbCr:
  case JCS_RGB:
    *out = JCS_RGB;
    return 3;
  case JCS_CMYK:
  case JCS_YCCK:
    *out = JCS_CMYK;
    return 3;
  default:
    return 0;
  }
}

/* Decodes `path` at the scale min_h x min_w allows; with pixels == NULL only the header is
 * read (and *h, *w are the full size). */
static ganfw_status jpeg_decode(const char *path, int32_t min_h, int32_t min_w, float **pixels,
                                int32_t *c, int32_t *h, int32_t *w, int32_t *full_h,
                                int32_t *full_w) {
  if (pixels) *pixels = NULL;
  struct stat sb;
  /* Before opening: a FIFO would block the open itself. */
  if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode))
    return ganfw_error_set(GANFW_ERR_IO, "JPEG '%s' is %s, not a JPEG file", path,
                           S_ISDIR(sb.st_mode) ? "a directory" : "not a regular file");
  FILE *f = fopen(path, "rb");
  if (!f) return ganfw_error_set(GANFW_ERR_IO, "cannot open JPEG '%s': %s", path, strerror(errno));
  uint8_t head[3];
  if (fread(head, 1, 3, f) != 3 || !ganfw_jpeg_signature(head, 3) || fseek(f, 0, SEEK_SET) != 0) {
    fclose(f);
    return ganfw_error_set(GANFW_ERR_IO,
                           "'%s' is not a JPEG file (it does not start with FF D8 FF)", path);
  }
  struct jpeg_decompress_struct d;
  jpeg_err err;
  memset(&d, 0, sizeof d);
  memset(&err, 0, sizeof err);
  d.err = jpeg_std_error(&err.pub);
  err.pub.error_exit = on_jpeg_error;
  err.pub.emit_message = on_jpeg_message;
  err.pub.output_message = on_jpeg_output;
  err.progress.progress_monitor = on_jpeg_progress;
  float *volatile out = NULL;
  JSAMPLE *volatile row = NULL;
  if (setjmp(err.jump)) {
    free(out);
    free(row);
    jpeg_destroy_decompress(&d);
    fclose(f);
    if (err.refused) return ganfw_error_set(GANFW_ERR_IO, "JPEG '%s': %s", path, err.msg);
    return ganfw_error_set(GANFW_ERR_IO,
                           "cannot read JPEG '%s': %s (the file is damaged or cut short: "
                           "re-encode or remove it)",
                           path, err.msg);
  }
  jpeg_create_decompress(&d);
  d.mem->max_memory_to_use = JPEG_MAX_MEMORY;
  d.progress = &err.progress;
  jpeg_stdio_src(&d, f);
  jpeg_read_header(&d, TRUE);
  const uint64_t iw = d.image_width, ih = d.image_height;
  if (iw * ih > GANFW_JPEG_MAX_PIXELS) {
    too_large(&err, &d);
    longjmp(err.jump, 1);
  }
  J_COLOR_SPACE space;
  const int ch = output_space(d.jpeg_color_space, &space);
  if (!ch) {
    snprintf(err.msg, sizeof err.msg,
             "%d components in a colour space the reader does not know (it takes gray, "
             "YCbCr, RGB, CMYK and YCCK): convert it to RGB",
             d.num_components);
    err.refused = 1;
    longjmp(err.jump, 1);
  }
  d.out_color_space = space;
  d.dct_method = JDCT_ISLOW;
  if (pixels) {
    choose_scale(&d, min_h, min_w);
    const uint64_t ow = d.output_width, oh = d.output_height;
    if (ow * oh > GANFW_JPEG_MAX_DECODED_PIXELS) {
      snprintf(err.msg, sizeof err.msg,
               "%llu x %llu pixels exceed the reader's limit of %d decoded pixels (set a smaller "
               "data.resize, which lets it decode at 1/2, 1/4 or 1/8 of the size, or resize "
               "the image)",
               (unsigned long long)ow, (unsigned long long)oh, GANFW_JPEG_MAX_DECODED_PIXELS);
      err.refused = 1;
      longjmp(err.jump, 1);
    }
    jpeg_start_decompress(&d);
    const size_t plane = (size_t)d.output_width * d.output_height;
    out = malloc(sizeof(float) * ch * plane);
    row = malloc((size_t)d.output_width * d.output_components);
    if (!out || !row) {
      snprintf(err.msg, sizeof err.msg, "no host memory for its %u x %u pixels", d.output_width,
               d.output_height);
      err.refused = 1;
      longjmp(err.jump, 1);
    }
    while (d.output_scanline < d.output_height) {
      const size_t at = (size_t)d.output_scanline * d.output_width;
      JSAMPROW rows[1] = {row};
      if (jpeg_read_scanlines(&d, rows, 1) != 1) ERREXIT(&d, JERR_INPUT_EMPTY);
      store_row(row, space, d.output_width, out, plane, at);
    }
    *pixels = out;
    *h = (int32_t)d.output_height;
    *w = (int32_t)d.output_width;
  } else {
    *h = (int32_t)ih;
    *w = (int32_t)iw;
  }
  *c = ch;
  if (full_h) *full_h = (int32_t)ih;
  if (full_w) *full_w = (int32_t)iw;
  /* Not jpeg_finish_decompress: every scanline is in, and what follows them (EOI, trailing
   * bytes) changes no pixel. */
  free(row);
  jpeg_destroy_decompress(&d);
  fclose(f);
  return GANFW_OK;
}

ganfw_status ganfw_jpeg_read(const char *path, float **pixels, int32_t *c, int32_t *h, int32_t *w) {
  return jpeg_decode(path, 0, 0, pixels, c, h, w, NULL, NULL);
}

ganfw_status ganfw_jpeg_read_scaled(const char *path, int32_t min_h, int32_t min_w, float **pixels,
                                    int32_t *c, int32_t *h, int32_t *w, int32_t *full_h,
                                    int32_t *full_w) {
  return jpeg_decode(path, min_h, min_w, pixels, c, h, w, full_h, full_w);
}

ganfw_status ganfw_jpeg_read_size(const char *path, int32_t *c, int32_t *h, int32_t *w) {
  return jpeg_decode(path, 0, 0, NULL, c, h, w, NULL, NULL);
}
