/* JPEG files for the folder data set: a reader returning any 8-bit JPEG (baseline,
 * progressive, arithmetic-coded; gray, YCbCr, RGB, CMYK, YCCK) as float [C,H,W] in [0,1],
 * optionally scaled down by 1/2, 1/4 or 1/8 in the DCT domain while decoding. */
#ifndef GANFW_JPEG_IO_H
#define GANFW_JPEG_IO_H

#include <stddef.h>
#include <stdint.h>

#include "ganfw/status.h"

/* The largest JPEG the reader accepts, by its header (8192 x 8192 pixels): a larger one is
 * refused before the decoder allocates anything. */
#define GANFW_JPEG_MAX_PIXELS (1 << 26)
/* The largest image it returns, after any DCT-domain scaling (4096 x 4096, as a PNG: its
 * float pixels take at most 192 MiB). A photo above it decodes when a scale brings it under
 * (ganfw_jpeg_read_scaled). */
#define GANFW_JPEG_MAX_DECODED_PIXELS (1 << 24)
/* The most scans a progressive JPEG may have (libjpeg-turbo's advice against files made of
 * thousands of empty scans, each a pass over the whole image). */
#define GANFW_JPEG_MAX_SCANS 500

/* 1 when the first n bytes of a file start a JPEG (FF D8 FF), else 0. */
int ganfw_jpeg_signature(const uint8_t *head, size_t n);

/* Reads the JPEG at `path` into a new float buffer [c,h,w] (planar) in [0,1] (sample / 255):
 * c = 1 for a gray JPEG, 3 for every other (YCbCr and RGB as libjpeg-turbo converts them,
 * with its accurate integer IDCT JDCT_ISLOW and smooth chroma upsampling: PIL's defaults;
 * CMYK and YCCK taken as Adobe's inverted CMYK, as PIL and Photoshop take them, then R =
 * (1 - C)(1 - K), G = (1 - M)(1 - K), B = (1 - Y)(1 - K)). EXIF orientation is not applied
 * (PIL's Image.open does not apply it either). *pixels is malloc'd and owned by the caller
 * (free()); NULL on failure, with GANFW_ERR_IO naming the path and why: not a JPEG, a header
 * over a limit above, 12-bit or lossless JPEG, damaged data (a file that ends early, a
 * corrupt Huffman table or code: libjpeg's warnings that it filled in missing data are
 * refusals here), too many scans. Thread-safe: each call has its own decoder. */
ganfw_status ganfw_jpeg_read(const char *path, float **pixels, int32_t *c, int32_t *h, int32_t *w);

/* As ganfw_jpeg_read, decoding at the smallest of the scales 1/8, 1/4, 1/2 and 1 at which
 * the image still is at least min_h x min_w (libjpeg's scaled size: each side
 * ceil(side * scale)); min_h or min_w <= 0: the full size. *h, *w are the decoded size,
 * *full_h, *full_w (may be NULL) the file's. GANFW_JPEG_MAX_DECODED_PIXELS applies to the
 * decoded size. */
ganfw_status ganfw_jpeg_read_scaled(const char *path, int32_t min_h, int32_t min_w, float **pixels,
                                    int32_t *c, int32_t *h, int32_t *w, int32_t *full_h,
                                    int32_t *full_w);

/* Reads only the header: the channel count ganfw_jpeg_read would return, and the full size.
 * Refuses what ganfw_jpeg_read refuses from the header alone. */
ganfw_status ganfw_jpeg_read_size(const char *path, int32_t *c, int32_t *h, int32_t *w);

#endif
