/* Typed wrappers over the op descriptors (op.h), one per op as the callers knew them: each
 * fills a ganfw_op and runs it with ganfw_backend_run, so that a call reads as the op's
 * signature and its status comes back. Layers build their descriptors with ganfw_layer_op
 * (nn/layer.h) instead, which names the layer on failure. Ops that answer a value (sum,
 * sumsq, nonfinite) return it; when the backend fails, with the error recorded, sum and
 * sumsq answer NaN and nonfinite 1, so that a caller reading only the value stops.
 * The _lp forms take the activations' dtype (op.h). */
#ifndef GANFW_BACKEND_OPS_H
#define GANFW_BACKEND_OPS_H

#include "backend/backend.h"

/* The workspace bytes of a convolution, the same for its forward and backward. */
static inline size_t ganfw_be_conv2d_workspace_lp(ganfw_backend *be, int32_t dtype,
                                                  const ganfw_conv2d_shape *s) {
  ganfw_op op = {.kind = GANFW_OP_CONV2D_FORWARD, .dtype = dtype, .shape.conv = *s};
  return ganfw_backend_workspace(be, &op);
}
static inline size_t ganfw_be_conv2d_workspace(ganfw_backend *be, const ganfw_conv2d_shape *s) {
  return ganfw_be_conv2d_workspace_lp(be, GANFW_DTYPE_F32, s);
}
static inline size_t ganfw_be_convt2d_workspace_lp(ganfw_backend *be, int32_t dtype,
                                                   const ganfw_convt2d_shape *s) {
  ganfw_op op = {.kind = GANFW_OP_CONVT2D_FORWARD, .dtype = dtype, .shape.convt = *s};
  return ganfw_backend_workspace(be, &op);
}
static inline size_t ganfw_be_convt2d_workspace(ganfw_backend *be, const ganfw_convt2d_shape *s) {
  return ganfw_be_convt2d_workspace_lp(be, GANFW_DTYPE_F32, s);
}

/* 1 when BatchNorm's backward may write dx over dy (in f32 and 16 bits alike). */
static inline int32_t ganfw_be_batchnorm2d_backward_in_place(ganfw_backend *be) {
  ganfw_op op = {.kind = GANFW_OP_BATCHNORM2D_BACKWARD, .flags = GANFW_OP_IN_PLACE};
  return ganfw_backend_supports(be, &op);
}

/* The groups of GANFW_LP_* (backend.h) the backend computes natively in dtype. */
static inline uint32_t ganfw_be_lp_ops(ganfw_backend *be, int32_t dtype) {
  static const int32_t first[4] = {GANFW_OP_CONV2D_FORWARD, GANFW_OP_LINEAR_FORWARD,
                                   GANFW_OP_BATCHNORM2D_TRAIN, GANFW_OP_ACT_FORWARD};
  uint32_t groups = 0;
  if (dtype == GANFW_DTYPE_F32) return 0;
  for (int i = 0; i < 4; i++) {
    ganfw_op op = {.kind = first[i], .dtype = dtype};
    if (ganfw_backend_supports(be, &op)) groups |= 1u << i;
  }
  return groups;
}

static inline ganfw_status ganfw_be_conv2d_forward_lp(ganfw_backend *be, int32_t dtype,
                                                      const ganfw_conv2d_shape *s, const void *x,
                                                      const void *w, const float *b, void *y,
                                                      void *ws) {
  ganfw_op op = {.kind = GANFW_OP_CONV2D_FORWARD,
                 .dtype = dtype,
                 .shape.conv = *s,
                 .ws = ws,
                 .in = {x, w, b},
                 .out = {y}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_conv2d_backward_lp(ganfw_backend *be, int32_t dtype,
                                                       const ganfw_conv2d_shape *s, const void *x,
                                                       const void *w, const void *dy, void *dx,
                                                       float *dw, float *db, int accumulate,
                                                       void *ws) {
  ganfw_op op = {.kind = GANFW_OP_CONV2D_BACKWARD,
                 .dtype = dtype,
                 .shape.conv = *s,
                 .flags = accumulate ? GANFW_OP_ACCUMULATE : 0,
                 .ws = ws,
                 .in = {x, w, dy},
                 .out = {dx},
                 .grad = {dw, db}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_convt2d_forward_lp(ganfw_backend *be, int32_t dtype,
                                                       const ganfw_convt2d_shape *s, const void *x,
                                                       const void *w, const float *b, void *y,
                                                       void *ws) {
  ganfw_op op = {.kind = GANFW_OP_CONVT2D_FORWARD,
                 .dtype = dtype,
                 .shape.convt = *s,
                 .ws = ws,
                 .in = {x, w, b},
                 .out = {y}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_convt2d_backward_lp(ganfw_backend *be, int32_t dtype,
                                                        const ganfw_convt2d_shape *s, const void *x,
                                                        const void *w, const void *dy, void *dx,
                                                        float *dw, float *db, int accumulate,
                                                        void *ws) {
  ganfw_op op = {.kind = GANFW_OP_CONVT2D_BACKWARD,
                 .dtype = dtype,
                 .shape.convt = *s,
                 .flags = accumulate ? GANFW_OP_ACCUMULATE : 0,
                 .ws = ws,
                 .in = {x, w, dy},
                 .out = {dx},
                 .grad = {dw, db}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_linear_forward_lp(ganfw_backend *be, int32_t dtype, int64_t N,
                                                      int64_t IN, int64_t OUT, const void *x,
                                                      const void *w, const float *b, void *y) {
  ganfw_op op = {.kind = GANFW_OP_LINEAR_FORWARD,
                 .dtype = dtype,
                 .shape.d = {N, IN, OUT},
                 .in = {x, w, b},
                 .out = {y}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_linear_backward_lp(ganfw_backend *be, int32_t dtype, int64_t N,
                                                       int64_t IN, int64_t OUT, const void *x,
                                                       const void *w, const void *dy, void *dx,
                                                       float *dw, float *db, int accumulate) {
  ganfw_op op = {.kind = GANFW_OP_LINEAR_BACKWARD,
                 .dtype = dtype,
                 .flags = accumulate ? GANFW_OP_ACCUMULATE : 0,
                 .shape.d = {N, IN, OUT},
                 .in = {x, w, dy},
                 .out = {dx},
                 .grad = {dw, db}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_batchnorm2d_forward_train_lp(
    ganfw_backend *be, int32_t dtype, int64_t N, int64_t C, int64_t HW, const void *x,
    const float *gamma, const float *beta, void *y, float *running_mean, float *running_var,
    float momentum, float eps, float *save_mean, float *save_invstd) {
  ganfw_op op = {.kind = GANFW_OP_BATCHNORM2D_TRAIN,
                 .dtype = dtype,
                 .shape.d = {N, C, HW},
                 .in = {x, gamma, beta},
                 .out = {y, running_mean, running_var, save_mean, save_invstd},
                 .sc = {momentum, eps}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status
ganfw_be_batchnorm2d_forward_eval_lp(ganfw_backend *be, int32_t dtype, int64_t N, int64_t C,
                                     int64_t HW, const void *x, const float *gamma,
                                     const float *beta, void *y, const float *running_mean,
                                     const float *running_var, float eps) {
  ganfw_op op = {.kind = GANFW_OP_BATCHNORM2D_EVAL,
                 .dtype = dtype,
                 .shape.d = {N, C, HW},
                 .in = {x, gamma, beta, running_mean, running_var},
                 .out = {y},
                 .sc = {eps}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status
ganfw_be_batchnorm2d_backward_lp(ganfw_backend *be, int32_t dtype, int64_t N, int64_t C, int64_t HW,
                                 const void *x, const void *dy, const float *gamma,
                                 const float *save_mean, const float *save_invstd, void *dx,
                                 float *dgamma, float *dbeta, int accumulate) {
  ganfw_op op = {.kind = GANFW_OP_BATCHNORM2D_BACKWARD,
                 .dtype = dtype,
                 .flags = accumulate ? GANFW_OP_ACCUMULATE : 0,
                 .shape.d = {N, C, HW},
                 .in = {x, dy, gamma, save_mean, save_invstd},
                 .out = {dx},
                 .grad = {dgamma, dbeta}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_act_forward_lp(ganfw_backend *be, int32_t dtype, int32_t kind,
                                                   float alpha, int64_t n, const void *x, void *y) {
  ganfw_op op = {.kind = GANFW_OP_ACT_FORWARD,
                 .dtype = dtype,
                 .mode = kind,
                 .shape.d = {n},
                 .in = {x},
                 .out = {y},
                 .sc = {alpha}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_act_backward_lp(ganfw_backend *be, int32_t dtype, int32_t kind,
                                                    float alpha, int64_t n, const void *y,
                                                    const void *dy, void *dx) {
  ganfw_op op = {.kind = GANFW_OP_ACT_BACKWARD,
                 .dtype = dtype,
                 .mode = kind,
                 .shape.d = {n},
                 .in = {y, dy},
                 .out = {dx},
                 .sc = {alpha}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_gemm(ganfw_backend *be, int trans_a, int trans_b, int64_t M,
                                         int64_t N, int64_t K, float alpha, const float *A,
                                         int64_t lda, const float *B, int64_t ldb, float beta,
                                         float *C, int64_t ldc) {
  ganfw_op op = {.kind = GANFW_OP_GEMM,
                 .mode = (trans_a ? 1 : 0) | (trans_b ? 2 : 0),
                 .shape.d = {M, N, K, lda, ldb, ldc},
                 .in = {A, B},
                 .out = {C},
                 .sc = {alpha, beta}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_conv2d_forward(ganfw_backend *be, const ganfw_conv2d_shape *s,
                                                   const float *x, const float *w, const float *b,
                                                   float *y, void *ws) {
  return ganfw_be_conv2d_forward_lp(be, GANFW_DTYPE_F32, s, x, w, b, y, ws);
}

static inline ganfw_status ganfw_be_conv2d_backward(ganfw_backend *be, const ganfw_conv2d_shape *s,
                                                    const float *x, const float *w, const float *dy,
                                                    float *dx, float *dw, float *db, int accumulate,
                                                    void *ws) {
  return ganfw_be_conv2d_backward_lp(be, GANFW_DTYPE_F32, s, x, w, dy, dx, dw, db, accumulate, ws);
}

static inline ganfw_status ganfw_be_convt2d_forward(ganfw_backend *be, const ganfw_convt2d_shape *s,
                                                    const float *x, const float *w, const float *b,
                                                    float *y, void *ws) {
  return ganfw_be_convt2d_forward_lp(be, GANFW_DTYPE_F32, s, x, w, b, y, ws);
}

static inline ganfw_status ganfw_be_convt2d_backward(ganfw_backend *be,
                                                     const ganfw_convt2d_shape *s, const float *x,
                                                     const float *w, const float *dy, float *dx,
                                                     float *dw, float *db, int accumulate,
                                                     void *ws) {
  return ganfw_be_convt2d_backward_lp(be, GANFW_DTYPE_F32, s, x, w, dy, dx, dw, db, accumulate, ws);
}

static inline ganfw_status ganfw_be_linear_forward(ganfw_backend *be, int64_t N, int64_t IN,
                                                   int64_t OUT, const float *x, const float *w,
                                                   const float *b, float *y) {
  return ganfw_be_linear_forward_lp(be, GANFW_DTYPE_F32, N, IN, OUT, x, w, b, y);
}

static inline ganfw_status ganfw_be_linear_backward(ganfw_backend *be, int64_t N, int64_t IN,
                                                    int64_t OUT, const float *x, const float *w,
                                                    const float *dy, float *dx, float *dw,
                                                    float *db, int accumulate) {
  return ganfw_be_linear_backward_lp(be, GANFW_DTYPE_F32, N, IN, OUT, x, w, dy, dx, dw, db,
                                     accumulate);
}

static inline ganfw_status
ganfw_be_batchnorm2d_forward_train(ganfw_backend *be, int64_t N, int64_t C, int64_t HW,
                                   const float *x, const float *gamma, const float *beta, float *y,
                                   float *running_mean, float *running_var, float momentum,
                                   float eps, float *save_mean, float *save_invstd) {
  return ganfw_be_batchnorm2d_forward_train_lp(be, GANFW_DTYPE_F32, N, C, HW, x, gamma, beta, y,
                                               running_mean, running_var, momentum, eps, save_mean,
                                               save_invstd);
}

static inline ganfw_status ganfw_be_batchnorm2d_forward_eval(ganfw_backend *be, int64_t N,
                                                             int64_t C, int64_t HW, const float *x,
                                                             const float *gamma, const float *beta,
                                                             float *y, const float *running_mean,
                                                             const float *running_var, float eps) {
  return ganfw_be_batchnorm2d_forward_eval_lp(be, GANFW_DTYPE_F32, N, C, HW, x, gamma, beta, y,
                                              running_mean, running_var, eps);
}

static inline ganfw_status
ganfw_be_batchnorm2d_backward(ganfw_backend *be, int64_t N, int64_t C, int64_t HW, const float *x,
                              const float *dy, const float *gamma, const float *save_mean,
                              const float *save_invstd, float *dx, float *dgamma, float *dbeta,
                              int accumulate) {
  return ganfw_be_batchnorm2d_backward_lp(be, GANFW_DTYPE_F32, N, C, HW, x, dy, gamma, save_mean,
                                          save_invstd, dx, dgamma, dbeta, accumulate);
}

static inline ganfw_status ganfw_be_act_forward(ganfw_backend *be, int32_t kind, float alpha,
                                                int64_t n, const float *x, float *y) {
  return ganfw_be_act_forward_lp(be, GANFW_DTYPE_F32, kind, alpha, n, x, y);
}

static inline ganfw_status ganfw_be_act_backward(ganfw_backend *be, int32_t kind, float alpha,
                                                 int64_t n, const float *y, const float *dy,
                                                 float *dx) {
  return ganfw_be_act_backward_lp(be, GANFW_DTYPE_F32, kind, alpha, n, y, dy, dx);
}

static inline ganfw_status ganfw_be_maxpool2d_forward(ganfw_backend *be,
                                                      const ganfw_pool2d_shape *s, const float *x,
                                                      float *y, int32_t *argmax) {
  ganfw_op op = {
      .kind = GANFW_OP_MAXPOOL2D_FORWARD, .shape.pool = *s, .in = {x}, .out = {y, argmax}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_maxpool2d_backward(ganfw_backend *be,
                                                       const ganfw_pool2d_shape *s, const float *dy,
                                                       const int32_t *argmax, float *dx) {
  ganfw_op op = {
      .kind = GANFW_OP_MAXPOOL2D_BACKWARD, .shape.pool = *s, .in = {dy, argmax}, .out = {dx}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_avgpool2d_forward(ganfw_backend *be,
                                                      const ganfw_pool2d_shape *s, const float *x,
                                                      float *y) {
  ganfw_op op = {.kind = GANFW_OP_AVGPOOL2D_FORWARD, .shape.pool = *s, .in = {x}, .out = {y}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_avgpool2d_backward(ganfw_backend *be,
                                                       const ganfw_pool2d_shape *s, const float *dy,
                                                       float *dx) {
  ganfw_op op = {.kind = GANFW_OP_AVGPOOL2D_BACKWARD, .shape.pool = *s, .in = {dy}, .out = {dx}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_dropout_forward(ganfw_backend *be, int64_t n, float p,
                                                    uint64_t seed, uint64_t offset, const float *x,
                                                    float *y, uint8_t *mask) {
  ganfw_op op = {.kind = GANFW_OP_DROPOUT_FORWARD,
                 .seed = seed,
                 .offset = offset,
                 .shape.d = {n},
                 .in = {x},
                 .out = {y, mask},
                 .sc = {p}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_dropout_backward(ganfw_backend *be, int64_t n, float p,
                                                     const uint8_t *mask, const float *dy,
                                                     float *dx) {
  ganfw_op op = {
      .kind = GANFW_OP_DROPOUT_BACKWARD, .shape.d = {n}, .in = {mask, dy}, .out = {dx}, .sc = {p}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_bce_logits_forward(ganfw_backend *be, int64_t n,
                                                       const float *logits, const float *targets,
                                                       float *loss) {
  ganfw_op op = {
      .kind = GANFW_OP_BCE_LOGITS_FORWARD, .shape.d = {n}, .in = {logits, targets}, .out = {loss}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_bce_logits_backward(ganfw_backend *be, int64_t n,
                                                        const float *logits, const float *targets,
                                                        float dloss, float *dx) {
  ganfw_op op = {.kind = GANFW_OP_BCE_LOGITS_BACKWARD,
                 .shape.d = {n},
                 .in = {logits, targets},
                 .out = {dx},
                 .sc = {dloss}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_softmax_xent_forward(ganfw_backend *be, int64_t N,
                                                         int64_t classes, const float *logits,
                                                         const int32_t *labels, double smoothing,
                                                         float *loss) {
  ganfw_op op = {.kind = GANFW_OP_SOFTMAX_XENT_FORWARD,
                 .shape.d = {N, classes},
                 .in = {logits, labels},
                 .out = {loss},
                 .sc = {smoothing}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_softmax_xent_backward(ganfw_backend *be, int64_t N,
                                                          int64_t classes, const float *logits,
                                                          const int32_t *labels, double smoothing,
                                                          float dloss, float *dx) {
  ganfw_op op = {.kind = GANFW_OP_SOFTMAX_XENT_BACKWARD,
                 .shape.d = {N, classes},
                 .in = {logits, labels},
                 .out = {dx},
                 .sc = {smoothing, dloss}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_fill(ganfw_backend *be, int64_t n, float *x, float v) {
  ganfw_op op = {.kind = GANFW_OP_FILL, .shape.d = {n}, .out = {x}, .sc = {v}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_scale(ganfw_backend *be, int64_t n, float *x, float a) {
  ganfw_op op = {.kind = GANFW_OP_SCALE, .shape.d = {n}, .out = {x}, .sc = {a}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_add_scalar(ganfw_backend *be, int64_t n, float *x, float a) {
  ganfw_op op = {.kind = GANFW_OP_ADD_SCALAR, .shape.d = {n}, .out = {x}, .sc = {a}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_add(ganfw_backend *be, int64_t n, float *out, const float *a,
                                        const float *b) {
  ganfw_op op = {.kind = GANFW_OP_ADD, .shape.d = {n}, .in = {a, b}, .out = {out}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_axpy(ganfw_backend *be, int64_t n, float *y, float alpha,
                                         const float *x) {
  ganfw_op op = {.kind = GANFW_OP_AXPY, .shape.d = {n}, .in = {x}, .out = {y}, .sc = {alpha}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_mul(ganfw_backend *be, int64_t n, float *out, const float *a,
                                        const float *b) {
  ganfw_op op = {.kind = GANFW_OP_MUL, .shape.d = {n}, .in = {a, b}, .out = {out}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_addcmul(ganfw_backend *be, int64_t n, float *y, float v,
                                            const float *a, const float *b) {
  ganfw_op op = {.kind = GANFW_OP_ADDCMUL, .shape.d = {n}, .in = {a, b}, .out = {y}, .sc = {v}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_addcdiv(ganfw_backend *be, int64_t n, float *y, float v,
                                            const float *a, const float *b) {
  ganfw_op op = {.kind = GANFW_OP_ADDCDIV, .shape.d = {n}, .in = {a, b}, .out = {y}, .sc = {v}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_sqrt(ganfw_backend *be, int64_t n, float *out, const float *x) {
  ganfw_op op = {.kind = GANFW_OP_SQRT, .shape.d = {n}, .in = {x}, .out = {out}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_lerp(ganfw_backend *be, int64_t n, float *y, const float *x,
                                         float w) {
  ganfw_op op = {.kind = GANFW_OP_LERP, .shape.d = {n}, .in = {x}, .out = {y}, .sc = {w}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_maximum(ganfw_backend *be, int64_t n, float *y,
                                            const float *x) {
  ganfw_op op = {.kind = GANFW_OP_MAXIMUM, .shape.d = {n}, .in = {x}, .out = {y}};
  return ganfw_backend_run(be, &op);
}

static inline double ganfw_be_sum(ganfw_backend *be, int64_t n, const float *x) {
  ganfw_op op = {.kind = GANFW_OP_SUM, .shape.d = {n}, .in = {x}};
  return ganfw_backend_run(be, &op) == GANFW_OK ? op.result : __builtin_nan("");
}

static inline double ganfw_be_sumsq(ganfw_backend *be, int64_t n, const float *x) {
  ganfw_op op = {.kind = GANFW_OP_SUMSQ, .shape.d = {n}, .in = {x}};
  return ganfw_backend_run(be, &op) == GANFW_OK ? op.result : __builtin_nan("");
}

static inline int32_t ganfw_be_nonfinite(ganfw_backend *be, int64_t n, const float *x) {
  ganfw_op op = {.kind = GANFW_OP_NONFINITE, .shape.d = {n}, .in = {x}};
  return ganfw_backend_run(be, &op) == GANFW_OK ? (int32_t)op.result : 1;
}

/* f32 -> dtype (CAST_FROM_F32) or dtype -> f32 (CAST_TO_F32), dtype f16 or bf16. */
static inline ganfw_status ganfw_be_cast(ganfw_backend *be, int32_t kind, int32_t dtype, int64_t n,
                                         const void *x, void *y) {
  ganfw_op op = {.kind = kind, .dtype = dtype, .shape.d = {n}, .in = {x}, .out = {y}};
  return ganfw_backend_run(be, &op);
}
static inline ganfw_status ganfw_be_f32_to_f16(ganfw_backend *be, int64_t n, const float *x,
                                               uint16_t *y) {
  return ganfw_be_cast(be, GANFW_OP_CAST_FROM_F32, GANFW_DTYPE_F16, n, x, y);
}
static inline ganfw_status ganfw_be_f16_to_f32(ganfw_backend *be, int64_t n, const uint16_t *x,
                                               float *y) {
  return ganfw_be_cast(be, GANFW_OP_CAST_TO_F32, GANFW_DTYPE_F16, n, x, y);
}
static inline ganfw_status ganfw_be_f32_to_bf16(ganfw_backend *be, int64_t n, const float *x,
                                                uint16_t *y) {
  return ganfw_be_cast(be, GANFW_OP_CAST_FROM_F32, GANFW_DTYPE_BF16, n, x, y);
}
static inline ganfw_status ganfw_be_bf16_to_f32(ganfw_backend *be, int64_t n, const uint16_t *x,
                                                float *y) {
  return ganfw_be_cast(be, GANFW_OP_CAST_TO_F32, GANFW_DTYPE_BF16, n, x, y);
}

static inline ganfw_status ganfw_be_rng_uniform(ganfw_backend *be, int64_t n, uint64_t seed,
                                                uint64_t offset, float lo, float hi, float *out) {
  ganfw_op op = {.kind = GANFW_OP_RNG_UNIFORM,
                 .seed = seed,
                 .offset = offset,
                 .shape.d = {n},
                 .out = {out},
                 .sc = {lo, hi}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_rng_normal(ganfw_backend *be, int64_t n, uint64_t seed,
                                               uint64_t offset, float mean, float std, float *out) {
  ganfw_op op = {.kind = GANFW_OP_RNG_NORMAL,
                 .seed = seed,
                 .offset = offset,
                 .shape.d = {n},
                 .out = {out},
                 .sc = {mean, std}};
  return ganfw_backend_run(be, &op);
}

static inline int32_t ganfw_be_nonfinite_many(ganfw_backend *be, int64_t n, const float *const *x,
                                              const int64_t *numel) {
  ganfw_op op = {.kind = GANFW_OP_NONFINITE_MANY, .shape.d = {n}, .in = {x, numel}};
  return ganfw_backend_run(be, &op) == GANFW_OK ? (int32_t)op.result : 1;
}

static inline ganfw_status ganfw_be_upsample2d_forward(ganfw_backend *be, int32_t mode,
                                                       int64_t planes, int64_t H, int64_t W,
                                                       const float *x, float *y) {
  ganfw_op op = {.kind = GANFW_OP_UPSAMPLE2D_FORWARD,
                 .mode = mode,
                 .shape.d = {planes, H, W},
                 .in = {x},
                 .out = {y}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_upsample2d_backward(ganfw_backend *be, int32_t mode,
                                                        int64_t planes, int64_t H, int64_t W,
                                                        const float *dy, float *dx) {
  ganfw_op op = {.kind = GANFW_OP_UPSAMPLE2D_BACKWARD,
                 .mode = mode,
                 .shape.d = {planes, H, W},
                 .in = {dy},
                 .out = {dx}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_groupnorm_forward(ganfw_backend *be, int64_t N, int64_t C,
                                                      int64_t HW, int64_t G, const float *x,
                                                      const float *gamma, const float *beta,
                                                      float eps, float *y, double *save_mean,
                                                      double *save_invstd) {
  ganfw_op op = {.kind = GANFW_OP_GROUPNORM_FORWARD,
                 .shape.d = {N, C, HW, G},
                 .in = {x, gamma, beta},
                 .out = {y, save_mean, save_invstd},
                 .sc = {eps}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status
ganfw_be_groupnorm_backward(ganfw_backend *be, int64_t N, int64_t C, int64_t HW, int64_t G,
                            const float *x, const float *dy, const float *gamma,
                            const double *save_mean, const double *save_invstd, float *dx,
                            float *dgamma, float *dbeta, int accumulate) {
  ganfw_op op = {.kind = GANFW_OP_GROUPNORM_BACKWARD,
                 .flags = accumulate ? GANFW_OP_ACCUMULATE : 0,
                 .shape.d = {N, C, HW, G},
                 .in = {x, dy, gamma, save_mean, save_invstd},
                 .out = {dx},
                 .grad = {dgamma, dbeta}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_embedding_forward(ganfw_backend *be, int64_t N, int64_t D,
                                                      const int32_t *ids, const float *w,
                                                      float *y) {
  ganfw_op op = {.kind = GANFW_OP_EMBEDDING_FORWARD, .shape.d = {N, D}, .in = {ids, w}, .out = {y}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_embedding_backward(ganfw_backend *be, int64_t N, int64_t num,
                                                       int64_t D, const int32_t *ids,
                                                       const float *dy, float *dw, int accumulate) {
  ganfw_op op = {.kind = GANFW_OP_EMBEDDING_BACKWARD,
                 .flags = accumulate ? GANFW_OP_ACCUMULATE : 0,
                 .shape.d = {N, num, D},
                 .in = {ids, dy},
                 .grad = {dw}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_transpose01(ganfw_backend *be, int64_t A, int64_t B, int64_t C,
                                                const float *x, float *y) {
  ganfw_op op = {.kind = GANFW_OP_TRANSPOSE01, .shape.d = {A, B, C}, .in = {x}, .out = {y}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_unary(ganfw_backend *be, int32_t map, int64_t n, float *out,
                                          const float *x, float a, float b) {
  ganfw_op op = {
      .kind = GANFW_OP_UNARY, .mode = map, .shape.d = {n}, .in = {x}, .out = {out}, .sc = {a, b}};
  return ganfw_backend_run(be, &op);
}

/* The broadcast of a binary op over R rows of m values: out [R,m]; a and b each [R,m], or
 * with a_col / b_col 1 one value per row ([R,1], broadcast along the row). */
static inline ganfw_bcast_shape ganfw_bcast_rows(int64_t R, int64_t m, int32_t a_col,
                                                 int32_t b_col) {
  ganfw_bcast_shape s = {.dim = {1, 1, R, m},
                         .sa = {0, 0, a_col ? 1 : m, a_col ? 0 : 1},
                         .sb = {0, 0, b_col ? 1 : m, b_col ? 0 : 1},
                         .same = !a_col && !b_col};
  return s;
}

static inline ganfw_status ganfw_be_binary(ganfw_backend *be, int32_t map,
                                           const ganfw_bcast_shape *s, float *out, const float *a,
                                           const float *b) {
  ganfw_op op = {
      .kind = GANFW_OP_BINARY, .mode = map, .shape.bcast = *s, .in = {a, b}, .out = {out}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_reduce_sum(ganfw_backend *be, const ganfw_reduce_shape *s,
                                               double scale, const float *x, float *out) {
  ganfw_op op = {
      .kind = GANFW_OP_REDUCE_SUM, .shape.reduce = *s, .in = {x}, .out = {out}, .sc = {scale}};
  return ganfw_backend_run(be, &op);
}

static inline ganfw_status ganfw_be_channel_affine(ganfw_backend *be, int64_t N, int64_t C,
                                                   int64_t inner, const float *x, const float *s,
                                                   const float *b, float *y) {
  ganfw_op op = {
      .kind = GANFW_OP_CHANNEL_AFFINE, .shape.d = {N, C, inner}, .in = {x, s, b}, .out = {y}};
  return ganfw_backend_run(be, &op);
}

#endif
