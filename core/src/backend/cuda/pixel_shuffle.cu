/* Pixel shuffle on the GPU with the CPU backend's rules (core/src/backend/cpu/pixel_shuffle.c):
 * lo [N,C*r*r,H,W] and hi [N,C,H*r,W*r] hold the same elements,
 * hi[n][c][h*r+i][w*r+j] = lo[n][c*r*r+i*r+j][h][w]; PIXEL_SHUFFLE copies lo into hi,
 * PIXEL_UNSHUFFLE hi into lo. One thread per element of hi, moving 4 bytes (f32) or 2 (f16,
 * bf16) unconverted: bit for bit the CPU's result in every dtype. The ops of op.h are at the
 * end of this file. */
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cudnn.h>

#include "backend/cuda/launch.cuh"

extern "C" {
#include "backend/cuda/cuda_internal.h"
}

/* total = N*C*H*r*W*r elements of hi, each moved from (to_hi) or to (!to_hi) lo. */
template <typename T>
static __global__ void pixel_shuffle_k(int64_t total, int64_t H, int64_t W, int64_t r, int to_hi,
                                       T *lo, T *hi) {
  const int64_t Q = W * r, P = H * r;
  GANFW_CU_FOR(idx, total) {
    const int64_t q = idx % Q, p = idx / Q % P, nc = idx / (P * Q);
    const int64_t l = ((nc * r * r + p % r * r + q % r) * H + p / r) * W + q / r;
    if (to_hi)
      hi[idx] = lo[l];
    else
      lo[l] = hi[idx];
  }
}

template <typename T>
static cudaError_t launch(cudaStream_t st, const int64_t *d, int to_hi, void *lo, void *hi) {
  const int64_t total = d[0] * d[1] * d[2] * d[3] * d[4] * d[4];
  GANFW_CU_LAUNCH(st, total, pixel_shuffle_k<T>, total, d[2], d[3], d[4], to_hi, (T *)lo, (T *)hi);
}

/* d: N, C (hi's channels), H, W (lo's size), r; to_hi: in[0] is lo and out[0] hi. */
static ganfw_status pixel_shuffle_run(ganfw_backend *be, const ganfw_op *op, int to_hi) {
  ganfw_cuda_state *cs = ganfw_cuda_state_of(be);
  void *lo = to_hi ? (void *)op->in[0] : op->out[0];
  void *hi = to_hi ? op->out[0] : (void *)op->in[0];
  ganfw_status st = ganfw_cuda_lp_begin(cs, op);
  if (st == GANFW_OK)
    st = LAUNCH_CHECK(cs, op->dtype == GANFW_DTYPE_F32
                              ? launch<uint32_t>(cs->stream, op->shape.d, to_hi, lo, hi)
                              : launch<uint16_t>(cs->stream, op->shape.d, to_hi, lo, hi));
  return ganfw_cuda_lp_end(cs, st);
}

extern "C" ganfw_status ganfw_cuda_op_pixel_shuffle(ganfw_backend *be, ganfw_op *op) {
  return pixel_shuffle_run(be, op, 1);
}

extern "C" ganfw_status ganfw_cuda_op_pixel_unshuffle(ganfw_backend *be, ganfw_op *op) {
  return pixel_shuffle_run(be, op, 0);
}
