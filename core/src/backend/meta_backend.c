/* The meta backend, for planning: the real step code runs on it and the caching allocator
 * does exactly what it would do on the real device, but no device memory is touched and
 * no kernel runs. raw_alloc hands out unique fake addresses (non-canonical, so a stray
 * dereference faults at once), copies to the host read zeros, reductions return 0, and
 * the workspace sizes and the capacity are asked of the backend a real run would use
 * (its "shadow"), so that the allocator sees the same requests. */
#include <string.h>

#include "backend/backend.h"

/* Fake device addresses: 2 MiB aligned, a 2 MiB gap between segments, never reused. On
 * x86-64 and AArch64 addresses with the top bit set are not user addresses. */
#define META_BASE  ((uintptr_t)0xA000000000000000ull)
#define META_ALIGN ((uintptr_t)2 << 20)

static uintptr_t next_address = META_BASE;

static void *meta_raw_alloc(ganfw_backend *be, size_t bytes) {
  (void)be;
  if (bytes == 0 || bytes > ((uintptr_t)1 << 56)) return NULL;
  uintptr_t p = next_address;
  uintptr_t span = ((uintptr_t)bytes + META_ALIGN - 1) & ~(META_ALIGN - 1);
  next_address += span + META_ALIGN;
  if (next_address < META_BASE) next_address = META_BASE; /* wrapped after 2^63 bytes */
  return (void *)p;
}

static void meta_raw_free(ganfw_backend *be, void *ptr, size_t bytes) {
  (void)be, (void)ptr, (void)bytes;
}

/* The real backend behind a meta one (be->impl), the CPU when none was given. */
static ganfw_backend *shadow_of(ganfw_backend *be) {
  return be->impl ? (ganfw_backend *)be->impl : ganfw_cpu_backend();
}

static ganfw_status meta_capacity(ganfw_backend *be, size_t *total, size_t *free_bytes) {
  ganfw_backend *sh = shadow_of(be);
  return sh->vt->capacity(sh, total, free_bytes);
}

static size_t meta_conv2d_workspace(ganfw_backend *be, const ganfw_conv2d_shape *s) {
  ganfw_backend *sh = shadow_of(be);
  return sh->vt->conv2d_workspace ? sh->vt->conv2d_workspace(sh, s) : 0;
}

static size_t meta_convt2d_workspace(ganfw_backend *be, const ganfw_convt2d_shape *s) {
  ganfw_backend *sh = shadow_of(be);
  return sh->vt->convt2d_workspace ? sh->vt->convt2d_workspace(sh, s) : 0;
}

static ganfw_status meta_copy_h2d(ganfw_backend *be, void *dst, const void *src, size_t bytes) {
  (void)be, (void)dst, (void)src, (void)bytes;
  return GANFW_OK;
}

/* The host side is real memory: it reads zeros (a loss of 0, no NaN found). */
static ganfw_status meta_copy_d2h(ganfw_backend *be, void *dst, const void *src, size_t bytes) {
  (void)be, (void)src;
  if (bytes) memset(dst, 0, bytes);
  return GANFW_OK;
}

static ganfw_status meta_copy_d2d(ganfw_backend *be, void *dst, const void *src, size_t bytes) {
  (void)be, (void)dst, (void)src, (void)bytes;
  return GANFW_OK;
}

static ganfw_status meta_synchronize(ganfw_backend *be) {
  (void)be;
  return GANFW_OK;
}

static void meta_set_threads(ganfw_backend *be, int threads) {
  (void)be, (void)threads;
}

static void meta_gemm(ganfw_backend *be, int ta, int tb, int64_t M, int64_t N, int64_t K,
                      float alpha, const float *A, int64_t lda, const float *B, int64_t ldb,
                      float beta, float *C, int64_t ldc) {
  (void)be, (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)alpha, (void)A, (void)lda;
  (void)B, (void)ldb, (void)beta, (void)C, (void)ldc;
}

static void meta_conv2d_forward(ganfw_backend *be, const ganfw_conv2d_shape *s, const float *x,
                                const float *w, const float *b, float *y, void *ws) {
  (void)be, (void)s, (void)x, (void)w, (void)b, (void)y, (void)ws;
}

static void meta_conv2d_backward(ganfw_backend *be, const ganfw_conv2d_shape *s, const float *x,
                                 const float *w, const float *dy, float *dx, float *dw, float *db,
                                 int accumulate, void *ws) {
  (void)be, (void)s, (void)x, (void)w, (void)dy, (void)dx, (void)dw, (void)db, (void)accumulate;
  (void)ws;
}

static void meta_convt2d_forward(ganfw_backend *be, const ganfw_convt2d_shape *s, const float *x,
                                 const float *w, const float *b, float *y, void *ws) {
  (void)be, (void)s, (void)x, (void)w, (void)b, (void)y, (void)ws;
}

static void meta_convt2d_backward(ganfw_backend *be, const ganfw_convt2d_shape *s, const float *x,
                                  const float *w, const float *dy, float *dx, float *dw, float *db,
                                  int accumulate, void *ws) {
  (void)be, (void)s, (void)x, (void)w, (void)dy, (void)dx, (void)dw, (void)db, (void)accumulate;
  (void)ws;
}

static void meta_linear_forward(ganfw_backend *be, int64_t N, int64_t IN, int64_t OUT,
                                const float *x, const float *w, const float *b, float *y) {
  (void)be, (void)N, (void)IN, (void)OUT, (void)x, (void)w, (void)b, (void)y;
}

static void meta_linear_backward(ganfw_backend *be, int64_t N, int64_t IN, int64_t OUT,
                                 const float *x, const float *w, const float *dy, float *dx,
                                 float *dw, float *db, int accumulate) {
  (void)be, (void)N, (void)IN, (void)OUT, (void)x, (void)w, (void)dy, (void)dx, (void)dw;
  (void)db, (void)accumulate;
}

static void meta_bn_forward_train(ganfw_backend *be, int64_t N, int64_t C, int64_t HW,
                                  const float *x, const float *gamma, const float *beta, float *y,
                                  float *running_mean, float *running_var, float momentum,
                                  float eps, float *save_mean, float *save_invstd) {
  (void)be, (void)N, (void)C, (void)HW, (void)x, (void)gamma, (void)beta, (void)y;
  (void)running_mean, (void)running_var, (void)momentum, (void)eps, (void)save_mean;
  (void)save_invstd;
}

static void meta_bn_forward_eval(ganfw_backend *be, int64_t N, int64_t C, int64_t HW,
                                 const float *x, const float *gamma, const float *beta, float *y,
                                 const float *running_mean, const float *running_var, float eps) {
  (void)be, (void)N, (void)C, (void)HW, (void)x, (void)gamma, (void)beta, (void)y;
  (void)running_mean, (void)running_var, (void)eps;
}

static void meta_bn_backward(ganfw_backend *be, int64_t N, int64_t C, int64_t HW, const float *x,
                             const float *dy, const float *gamma, const float *save_mean,
                             const float *save_invstd, float *dx, float *dgamma, float *dbeta,
                             int accumulate) {
  (void)be, (void)N, (void)C, (void)HW, (void)x, (void)dy, (void)gamma, (void)save_mean;
  (void)save_invstd, (void)dx, (void)dgamma, (void)dbeta, (void)accumulate;
}

/* As the shadow does it, so that the plan sees the same input-gradient requests. */
static int32_t meta_bn_backward_in_place(ganfw_backend *be) {
  ganfw_backend *sh = shadow_of(be);
  return sh->vt->batchnorm2d_backward_in_place ? sh->vt->batchnorm2d_backward_in_place(sh) : 0;
}

static void meta_act_forward(ganfw_backend *be, int32_t kind, float alpha, int64_t n,
                             const float *x, float *y) {
  (void)be, (void)kind, (void)alpha, (void)n, (void)x, (void)y;
}

static void meta_act_backward(ganfw_backend *be, int32_t kind, float alpha, int64_t n,
                              const float *y, const float *dy, float *dx) {
  (void)be, (void)kind, (void)alpha, (void)n, (void)y, (void)dy, (void)dx;
}

static void meta_maxpool_forward(ganfw_backend *be, const ganfw_pool2d_shape *s, const float *x,
                                 float *y, int32_t *argmax) {
  (void)be, (void)s, (void)x, (void)y, (void)argmax;
}

static void meta_maxpool_backward(ganfw_backend *be, const ganfw_pool2d_shape *s, const float *dy,
                                  const int32_t *argmax, float *dx) {
  (void)be, (void)s, (void)dy, (void)argmax, (void)dx;
}

static void meta_avgpool_forward(ganfw_backend *be, const ganfw_pool2d_shape *s, const float *x,
                                 float *y) {
  (void)be, (void)s, (void)x, (void)y;
}

static void meta_avgpool_backward(ganfw_backend *be, const ganfw_pool2d_shape *s, const float *dy,
                                  float *dx) {
  (void)be, (void)s, (void)dy, (void)dx;
}

static void meta_dropout_forward(ganfw_backend *be, int64_t n, float p, uint64_t seed,
                                 uint64_t offset, const float *x, float *y, uint8_t *mask) {
  (void)be, (void)n, (void)p, (void)seed, (void)offset, (void)x, (void)y, (void)mask;
}

static void meta_dropout_backward(ganfw_backend *be, int64_t n, float p, const uint8_t *mask,
                                  const float *dy, float *dx) {
  (void)be, (void)n, (void)p, (void)mask, (void)dy, (void)dx;
}

static void meta_bce_forward(ganfw_backend *be, int64_t n, const float *logits,
                             const float *targets, float *loss) {
  (void)be, (void)n, (void)logits, (void)targets, (void)loss;
}

static void meta_bce_backward(ganfw_backend *be, int64_t n, const float *logits,
                              const float *targets, float dloss, float *dx) {
  (void)be, (void)n, (void)logits, (void)targets, (void)dloss, (void)dx;
}

static void meta_xent_forward(ganfw_backend *be, int64_t N, int64_t classes, const float *logits,
                              const int32_t *labels, double smoothing, float *loss) {
  (void)be, (void)N, (void)classes, (void)logits, (void)labels, (void)smoothing, (void)loss;
}

static void meta_xent_backward(ganfw_backend *be, int64_t N, int64_t classes, const float *logits,
                               const int32_t *labels, double smoothing, float dloss, float *dx) {
  (void)be, (void)N, (void)classes, (void)logits, (void)labels, (void)smoothing, (void)dloss,
      (void)dx;
}

/* Element-wise ops by shape: in place with a scalar, out = f(a, b), y op= f(x). */
static void meta_inplace(ganfw_backend *be, int64_t n, float *x, float v) {
  (void)be, (void)n, (void)x, (void)v;
}

static void meta_binary(ganfw_backend *be, int64_t n, float *out, const float *a, const float *b) {
  (void)be, (void)n, (void)out, (void)a, (void)b;
}

static void meta_axpy(ganfw_backend *be, int64_t n, float *y, float alpha, const float *x) {
  (void)be, (void)n, (void)y, (void)alpha, (void)x;
}

static void meta_ternary(ganfw_backend *be, int64_t n, float *y, float v, const float *a,
                         const float *b) {
  (void)be, (void)n, (void)y, (void)v, (void)a, (void)b;
}

static void meta_unary(ganfw_backend *be, int64_t n, float *out, const float *x) {
  (void)be, (void)n, (void)out, (void)x;
}

static void meta_lerp(ganfw_backend *be, int64_t n, float *y, const float *x, float w) {
  (void)be, (void)n, (void)y, (void)x, (void)w;
}

static double meta_reduce(ganfw_backend *be, int64_t n, const float *x) {
  (void)be, (void)n, (void)x;
  return 0.0;
}

static int32_t meta_nonfinite(ganfw_backend *be, int64_t n, const float *x) {
  (void)be, (void)n, (void)x;
  return 0;
}

static void meta_to_half(ganfw_backend *be, int64_t n, const float *x, uint16_t *y) {
  (void)be, (void)n, (void)x, (void)y;
}

static void meta_from_half(ganfw_backend *be, int64_t n, const uint16_t *x, float *y) {
  (void)be, (void)n, (void)x, (void)y;
}

static void meta_rng(ganfw_backend *be, int64_t n, uint64_t seed, uint64_t offset, float a, float b,
                     float *out) {
  (void)be, (void)n, (void)seed, (void)offset, (void)a, (void)b, (void)out;
}

/* Native 16-bit compute as the shadow has it, so that the layers take the same path (and
 * ask for the same workspaces) as on the real device. */
static uint32_t meta_lp_ops(ganfw_backend *be, int32_t dtype) {
  ganfw_backend *sh = shadow_of(be);
  return sh->vt->lp_ops ? sh->vt->lp_ops(sh, dtype) : 0;
}

static size_t meta_conv2d_workspace_lp(ganfw_backend *be, int32_t dtype,
                                       const ganfw_conv2d_shape *s) {
  ganfw_backend *sh = shadow_of(be);
  return sh->vt->conv2d_workspace_lp ? sh->vt->conv2d_workspace_lp(sh, dtype, s) : 0;
}

static size_t meta_convt2d_workspace_lp(ganfw_backend *be, int32_t dtype,
                                        const ganfw_convt2d_shape *s) {
  ganfw_backend *sh = shadow_of(be);
  return sh->vt->convt2d_workspace_lp ? sh->vt->convt2d_workspace_lp(sh, dtype, s) : 0;
}

static void meta_conv2d_forward_lp(ganfw_backend *be, int32_t dtype, const ganfw_conv2d_shape *s,
                                   const void *x, const void *w, const float *b, void *y,
                                   void *ws) {
  (void)be, (void)dtype, (void)s, (void)x, (void)w, (void)b, (void)y, (void)ws;
}

static void meta_conv2d_backward_lp(ganfw_backend *be, int32_t dtype, const ganfw_conv2d_shape *s,
                                    const void *x, const void *w, const void *dy, void *dx,
                                    float *dw, float *db, int accumulate, void *ws) {
  (void)be, (void)dtype, (void)s, (void)x, (void)w, (void)dy, (void)dx, (void)dw, (void)db;
  (void)accumulate, (void)ws;
}

static void meta_convt2d_forward_lp(ganfw_backend *be, int32_t dtype, const ganfw_convt2d_shape *s,
                                    const void *x, const void *w, const float *b, void *y,
                                    void *ws) {
  (void)be, (void)dtype, (void)s, (void)x, (void)w, (void)b, (void)y, (void)ws;
}

static void meta_convt2d_backward_lp(ganfw_backend *be, int32_t dtype, const ganfw_convt2d_shape *s,
                                     const void *x, const void *w, const void *dy, void *dx,
                                     float *dw, float *db, int accumulate, void *ws) {
  (void)be, (void)dtype, (void)s, (void)x, (void)w, (void)dy, (void)dx, (void)dw, (void)db;
  (void)accumulate, (void)ws;
}

static void meta_linear_forward_lp(ganfw_backend *be, int32_t dtype, int64_t N, int64_t IN,
                                   int64_t OUT, const void *x, const void *w, const float *b,
                                   void *y) {
  (void)be, (void)dtype, (void)N, (void)IN, (void)OUT, (void)x, (void)w, (void)b, (void)y;
}

static void meta_linear_backward_lp(ganfw_backend *be, int32_t dtype, int64_t N, int64_t IN,
                                    int64_t OUT, const void *x, const void *w, const void *dy,
                                    void *dx, float *dw, float *db, int accumulate) {
  (void)be, (void)dtype, (void)N, (void)IN, (void)OUT, (void)x, (void)w, (void)dy, (void)dx;
  (void)dw, (void)db, (void)accumulate;
}

static void meta_bn_forward_train_lp(ganfw_backend *be, int32_t dtype, int64_t N, int64_t C,
                                     int64_t HW, const void *x, const float *gamma,
                                     const float *beta, void *y, float *running_mean,
                                     float *running_var, float momentum, float eps,
                                     float *save_mean, float *save_invstd) {
  (void)be, (void)dtype, (void)N, (void)C, (void)HW, (void)x, (void)gamma, (void)beta, (void)y;
  (void)running_mean, (void)running_var, (void)momentum, (void)eps, (void)save_mean;
  (void)save_invstd;
}

static void meta_bn_forward_eval_lp(ganfw_backend *be, int32_t dtype, int64_t N, int64_t C,
                                    int64_t HW, const void *x, const float *gamma,
                                    const float *beta, void *y, const float *running_mean,
                                    const float *running_var, float eps) {
  (void)be, (void)dtype, (void)N, (void)C, (void)HW, (void)x, (void)gamma, (void)beta, (void)y;
  (void)running_mean, (void)running_var, (void)eps;
}

static void meta_bn_backward_lp(ganfw_backend *be, int32_t dtype, int64_t N, int64_t C, int64_t HW,
                                const void *x, const void *dy, const float *gamma,
                                const float *save_mean, const float *save_invstd, void *dx,
                                float *dgamma, float *dbeta, int accumulate) {
  (void)be, (void)dtype, (void)N, (void)C, (void)HW, (void)x, (void)dy, (void)gamma;
  (void)save_mean, (void)save_invstd, (void)dx, (void)dgamma, (void)dbeta, (void)accumulate;
}

static void meta_act_forward_lp(ganfw_backend *be, int32_t dtype, int32_t kind, float alpha,
                                int64_t n, const void *x, void *y) {
  (void)be, (void)dtype, (void)kind, (void)alpha, (void)n, (void)x, (void)y;
}

static void meta_act_backward_lp(ganfw_backend *be, int32_t dtype, int32_t kind, float alpha,
                                 int64_t n, const void *y, const void *dy, void *dx) {
  (void)be, (void)dtype, (void)kind, (void)alpha, (void)n, (void)y, (void)dy, (void)dx;
}

static void meta_upsample(ganfw_backend *be, int32_t mode, int64_t planes, int64_t H, int64_t W,
                          const float *in, float *out) {
  (void)be, (void)mode, (void)planes, (void)H, (void)W, (void)in, (void)out;
}

static void meta_groupnorm_forward(ganfw_backend *be, int64_t N, int64_t C, int64_t HW, int64_t G,
                                   const float *x, const float *gamma, const float *beta, float eps,
                                   float *y, double *save_mean, double *save_invstd) {
  (void)be, (void)N, (void)C, (void)HW, (void)G, (void)x, (void)gamma, (void)beta, (void)eps;
  (void)y, (void)save_mean, (void)save_invstd;
}

static void meta_groupnorm_backward(ganfw_backend *be, int64_t N, int64_t C, int64_t HW, int64_t G,
                                    const float *x, const float *dy, const float *gamma,
                                    const double *save_mean, const double *save_invstd, float *dx,
                                    float *dgamma, float *dbeta, int accumulate) {
  (void)be, (void)N, (void)C, (void)HW, (void)G, (void)x, (void)dy, (void)gamma;
  (void)save_mean, (void)save_invstd, (void)dx, (void)dgamma, (void)dbeta, (void)accumulate;
}

static void meta_embedding_forward(ganfw_backend *be, int64_t N, int64_t D, const int32_t *ids,
                                   const float *w, float *y) {
  (void)be, (void)N, (void)D, (void)ids, (void)w, (void)y;
}

static void meta_embedding_backward(ganfw_backend *be, int64_t N, int64_t num, int64_t D,
                                    const int32_t *ids, const float *dy, float *dw,
                                    int accumulate) {
  (void)be, (void)N, (void)num, (void)D, (void)ids, (void)dy, (void)dw, (void)accumulate;
}

static void meta_transpose01(ganfw_backend *be, int64_t A, int64_t B, int64_t C, const float *x,
                             float *y) {
  (void)be, (void)A, (void)B, (void)C, (void)x, (void)y;
}

static void meta_unary_map(ganfw_backend *be, int32_t op, int64_t n, float *out, const float *x,
                           float a, float b) {
  (void)be, (void)op, (void)n, (void)out, (void)x, (void)a, (void)b;
}

static void meta_binary_map(ganfw_backend *be, int32_t op, const ganfw_bcast_shape *s, float *out,
                            const float *a, const float *b) {
  (void)be, (void)op, (void)s, (void)out, (void)a, (void)b;
}

static void meta_reduce_sum(ganfw_backend *be, const ganfw_reduce_shape *s, double scale,
                            const float *x, float *out) {
  (void)be, (void)s, (void)scale, (void)x, (void)out;
}

static void meta_channel_affine(ganfw_backend *be, int64_t N, int64_t C, int64_t inner,
                                const float *x, const float *s, const float *b, float *y) {
  (void)be, (void)N, (void)C, (void)inner, (void)x, (void)s, (void)b, (void)y;
}

static const ganfw_backend_vt meta_vt = {
    .name = "meta",
    .raw_alloc = meta_raw_alloc,
    .raw_free = meta_raw_free,
    .capacity = meta_capacity,
    .copy_h2d = meta_copy_h2d,
    .copy_d2h = meta_copy_d2h,
    .copy_d2d = meta_copy_d2d,
    .synchronize = meta_synchronize,
    .set_threads = meta_set_threads,
    .gemm = meta_gemm,
    .conv2d_workspace = meta_conv2d_workspace,
    .conv2d_forward = meta_conv2d_forward,
    .conv2d_backward = meta_conv2d_backward,
    .convt2d_workspace = meta_convt2d_workspace,
    .convt2d_forward = meta_convt2d_forward,
    .convt2d_backward = meta_convt2d_backward,
    .linear_forward = meta_linear_forward,
    .linear_backward = meta_linear_backward,
    .batchnorm2d_forward_train = meta_bn_forward_train,
    .batchnorm2d_forward_eval = meta_bn_forward_eval,
    .batchnorm2d_backward = meta_bn_backward,
    .batchnorm2d_backward_in_place = meta_bn_backward_in_place,
    .act_forward = meta_act_forward,
    .act_backward = meta_act_backward,
    .maxpool2d_forward = meta_maxpool_forward,
    .maxpool2d_backward = meta_maxpool_backward,
    .avgpool2d_forward = meta_avgpool_forward,
    .avgpool2d_backward = meta_avgpool_backward,
    .dropout_forward = meta_dropout_forward,
    .dropout_backward = meta_dropout_backward,
    .bce_logits_forward = meta_bce_forward,
    .bce_logits_backward = meta_bce_backward,
    .softmax_xent_forward = meta_xent_forward,
    .softmax_xent_backward = meta_xent_backward,
    .fill = meta_inplace,
    .scale = meta_inplace,
    .add_scalar = meta_inplace,
    .add = meta_binary,
    .axpy = meta_axpy,
    .mul = meta_binary,
    .addcmul = meta_ternary,
    .addcdiv = meta_ternary,
    .sqrt = meta_unary,
    .lerp = meta_lerp,
    .maximum = meta_unary,
    .sum = meta_reduce,
    .sumsq = meta_reduce,
    .nonfinite = meta_nonfinite,
    .f32_to_f16 = meta_to_half,
    .f16_to_f32 = meta_from_half,
    .f32_to_bf16 = meta_to_half,
    .bf16_to_f32 = meta_from_half,
    .rng_uniform = meta_rng,
    .rng_normal = meta_rng,
    .lp_ops = meta_lp_ops,
    .conv2d_workspace_lp = meta_conv2d_workspace_lp,
    .conv2d_forward_lp = meta_conv2d_forward_lp,
    .conv2d_backward_lp = meta_conv2d_backward_lp,
    .convt2d_workspace_lp = meta_convt2d_workspace_lp,
    .convt2d_forward_lp = meta_convt2d_forward_lp,
    .convt2d_backward_lp = meta_convt2d_backward_lp,
    .linear_forward_lp = meta_linear_forward_lp,
    .linear_backward_lp = meta_linear_backward_lp,
    .batchnorm2d_forward_train_lp = meta_bn_forward_train_lp,
    .batchnorm2d_forward_eval_lp = meta_bn_forward_eval_lp,
    .batchnorm2d_backward_lp = meta_bn_backward_lp,
    .act_forward_lp = meta_act_forward_lp,
    .act_backward_lp = meta_act_backward_lp,
    .upsample2d_forward = meta_upsample,
    .upsample2d_backward = meta_upsample,
    .groupnorm_forward = meta_groupnorm_forward,
    .groupnorm_backward = meta_groupnorm_backward,
    .embedding_forward = meta_embedding_forward,
    .embedding_backward = meta_embedding_backward,
    .transpose01 = meta_transpose01,
    .unary = meta_unary_map,
    .binary = meta_binary_map,
    .reduce_sum = meta_reduce_sum,
    .channel_affine = meta_channel_affine,
};

/* One meta backend per shadow (there are few real backends: cpu, cuda). */
#define MAX_SHADOWS 4
static ganfw_backend metas[MAX_SHADOWS];

ganfw_backend *ganfw_meta_backend(ganfw_backend *shadow) {
  if (!shadow) shadow = ganfw_cpu_backend();
  for (int i = 0; i < MAX_SHADOWS; i++) {
    if (!metas[i].vt) {
      metas[i] = (ganfw_backend){.vt = &meta_vt, .impl = shadow};
      return &metas[i];
    }
    if (metas[i].impl == shadow) return &metas[i];
  }
  return NULL;
}
