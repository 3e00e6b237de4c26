/* Pixel shuffle on the CPU, as PyTorch's nn.PixelShuffle(r) and nn.PixelUnshuffle(r): the
 * low-resolution lo [N,C*r*r,H,W] and the high-resolution hi [N,C,H*r,W*r] hold the same
 * elements, hi[n][c][h*r+i][w*r+j] = lo[n][c*r*r+i*r+j][h][w]. Shuffling copies lo into hi,
 * unshuffling hi into lo; each is the other's backward. Elements are moved, never converted,
 * so one kernel serves f32, f16 and bf16 (4 or 2 bytes an element) bit for bit. */
#include <stdint.h>

#include "backend/cpu/cpu_ops.h"

/* Below this many elements the kernels stay on one thread. */
#define PIXEL_SHUFFLE_PARALLEL_MIN 32768

/* n elements between a contiguous run of lo and every r-th element of hi, in the direction
 * to_hi says; one function per element size. */
static void strided32(int to_hi, uint32_t *lo, uint32_t *hi, int64_t n, int64_t r) {
  if (to_hi)
    for (int64_t w = 0; w < n; w++) hi[w * r] = lo[w];
  else
    for (int64_t w = 0; w < n; w++) lo[w] = hi[w * r];
}

static void strided16(int to_hi, uint16_t *lo, uint16_t *hi, int64_t n, int64_t r) {
  if (to_hi)
    for (int64_t w = 0; w < n; w++) hi[w * r] = lo[w];
  else
    for (int64_t w = 0; w < n; w++) lo[w] = hi[w * r];
}

/* Each row (n, c, h*r+i) of hi interleaves r rows of lo: element w*r+j is element w of
 * channel c*r*r+i*r+j's row h. Rows of hi are the unit split over threads. */
static void move(const int64_t *d, int to_hi, int32_t dtype, void *lo, void *hi) {
  const int64_t N = d[0], C = d[1], H = d[2], W = d[3], r = d[4];
  const int64_t rows = N * C * H * r, Q = W * r;
#pragma omp parallel for schedule(static)                                                          \
    num_threads(ganfw_cpu_threads()) if (rows * Q >= PIXEL_SHUFFLE_PARALLEL_MIN)
  for (int64_t row = 0; row < rows; row++) {
    const int64_t hh = row % (H * r), nc = row / (H * r), h = hh / r, i = hh % r;
    for (int64_t j = 0; j < r; j++) {
      const int64_t l0 = ((nc * r * r + i * r + j) * H + h) * W, h0 = row * Q + j;
      if (dtype == GANFW_DTYPE_F32)
        strided32(to_hi, (uint32_t *)lo + l0, (uint32_t *)hi + h0, W, r);
      else
        strided16(to_hi, (uint16_t *)lo + l0, (uint16_t *)hi + h0, W, r);
    }
  }
}

/* d: N, C (hi's channels), H, W (lo's size), r; to_hi: in[0] is lo and out[0] hi. */
static ganfw_status pixel_shuffle_run(const ganfw_op *op, int to_hi) {
  void *lo = to_hi ? (void *)op->in[0] : op->out[0];
  void *hi = to_hi ? op->out[0] : (void *)op->in[0];
  move(op->shape.d, to_hi, op->dtype, lo, hi);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_pixel_shuffle(ganfw_backend *be, ganfw_op *op) {
  return pixel_shuffle_run(op, 1);
}

ganfw_status ganfw_cpu_op_pixel_unshuffle(ganfw_backend *be, ganfw_op *op) {
  return pixel_shuffle_run(op, 0);
}
