/* BatchNorm2d on the CPU: training forward (batch statistics, running-stat update), eval
 * forward and backward, over x [N,C,HW] with per-channel gamma/beta/stats [C]. Channels go
 * in tiles of up to 2 MiB, each in two passes that walk memory in order (tile*HW contiguous
 * values per n): statistics (float lanes, double per channel), then one fused affine map
 * that finds the tile still in cache. Tiles are split across threads. In 16 bits (the op's
 * dtype f16 or bf16: x, y, dy, dx; everything else f32) the same kernels convert what they
 * read into f32 a piece at a time on the stack and round what they write, so they give the
 * bits of converting whole tensors around the f32 ops. */
#include <math.h>
#if defined(__x86_64__)
#include <immintrin.h> /* F16C and AVX-512 conversions in the kernels of the levels that have them */
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

#include "backend/cpu/cast.h"
#include "backend/cpu/cpu_ops.h"

/* The helpers must be inlined into each clone to get its instruction set. */
#if defined(__GNUC__)
#define BN_INLINE static inline __attribute__((always_inline))
#else
#define BN_INLINE static inline
#endif

/* Below this many elements the kernels stay on one thread. */
#define BN_PARALLEL_MIN 32768
/* A tile of channels holds at most this many bytes of input (so that pass 2 finds it in
 * cache; longer contiguous runs matter more than L2 residency here, measured on DC-GAN
 * shapes) and at most BN_TILE_MAX channels (the per-tile arrays live on the stack). */
#define BN_TILE_BYTES (2048 * 1024)
#define BN_TILE_MAX   64
/* 16-bit arrays are converted at most this many values at a time (a multiple of the
 * statistics' flush length, BN_LANES * BN_FLUSH in batchnorm2d_kernels.h). */
#define BN_LP_CHUNK 1024

/* Channels per tile for `arrays` input arrays of [N,C,HW], leaving a tile per thread, with
 * the tiles as even as the channels allow and their count a multiple of the threads (16
 * channels in tiles of at most 5 made 5, 5, 5, 1: one thread did 10 of them; now 4 x 4).
 * Each channel's sums do not depend on its tile (tile_sums), so neither do the bits. */
static int64_t tile_channels(int arrays, int64_t N, int64_t C, int64_t HW) {
  int64_t t = BN_TILE_BYTES / (arrays * N * HW * (int64_t)sizeof(float));
  int64_t threads = 1;
#ifdef _OPENMP
  threads = omp_get_max_threads();
  int64_t per_thread = C / threads;
  if (t > per_thread) t = per_thread;
#endif
  if (t > BN_TILE_MAX) t = BN_TILE_MAX;
  if (t > C) t = C;
  if (t < 1) t = 1;
  int64_t tiles = (C + t - 1) / t;
  if (threads > 1 && tiles % threads != 0 && tiles > threads) tiles += threads - tiles % threads;
  if (tiles > C) tiles = C;
  return (C + tiles - 1) / tiles;
}

/* The kernels, once per SIMD level (isa.h); each call runs the level in use. */
#define GANFW_ISA_BODY "backend/cpu/batchnorm2d_kernels.h"
#include "backend/cpu/isa_each.h"

typedef void (*bn_forward_train_fn)(ganfw_backend *be, int32_t dt, int64_t N, int64_t C, int64_t HW,
                                    const void *x, const float *gamma, const float *beta, void *y,
                                    float *running_mean, float *running_var, float momentum,
                                    float eps, float *save_mean, float *save_invstd);
static const bn_forward_train_fn bn_forward_train_by_isa[GANFW_CPU_ISA_COUNT] =
    GANFW_ISA_TABLE(bn_forward_train);

typedef void (*bn_forward_eval_fn)(ganfw_backend *be, int32_t dt, int64_t N, int64_t C, int64_t HW,
                                   const void *x, const float *gamma, const float *beta, void *y,
                                   const float *running_mean, const float *running_var, float eps);
static const bn_forward_eval_fn bn_forward_eval_by_isa[GANFW_CPU_ISA_COUNT] =
    GANFW_ISA_TABLE(bn_forward_eval);

typedef void (*bn_backward_fn)(ganfw_backend *be, int32_t dt, int64_t N, int64_t C, int64_t HW,
                               const void *x, const void *dy, const float *gamma,
                               const float *save_mean, const float *save_invstd, void *dx,
                               float *dgamma, float *dbeta, int accumulate);
static const bn_backward_fn bn_backward_by_isa[GANFW_CPU_ISA_COUNT] = GANFW_ISA_TABLE(bn_backward);

/* The activations' dtype goes to the kernels, which convert 16-bit pieces themselves. */
ganfw_status ganfw_cpu_op_batchnorm2d_train(ganfw_backend *be, ganfw_op *op) {
  const int64_t *d = op->shape.d;
  bn_forward_train_by_isa[ganfw_cpu_isa_level()](
      be, op->dtype, d[0], d[1], d[2], op->in[0], op->in[1], op->in[2], op->out[0], op->out[1],
      op->out[2], (float)op->sc[0], (float)op->sc[1], op->out[3], op->out[4]);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_op_batchnorm2d_eval(ganfw_backend *be, ganfw_op *op) {
  const int64_t *d = op->shape.d;
  bn_forward_eval_by_isa[ganfw_cpu_isa_level()](be, op->dtype, d[0], d[1], d[2], op->in[0],
                                                op->in[1], op->in[2], op->out[0], op->in[3],
                                                op->in[4], (float)op->sc[0]);
  return GANFW_OK;
}

/* dx may be dy (cpu_backend.c answers GANFW_OP_IN_PLACE with yes): each channel tile sums its
 * dy before the second pass writes its dx, element by element from the same element of dy
 * (for 16-bit dtypes, a piece after converting the same piece of dy), and tiles own disjoint
 * channels. */
ganfw_status ganfw_cpu_op_batchnorm2d_backward(ganfw_backend *be, ganfw_op *op) {
  const int64_t *d = op->shape.d;
  bn_backward_by_isa[ganfw_cpu_isa_level()](be, op->dtype, d[0], d[1], d[2], op->in[0], op->in[1],
                                            op->in[2], op->in[3], op->in[4], op->out[0],
                                            op->grad[0], op->grad[1], ganfw_cpu_accumulate(op));
  return GANFW_OK;
}
