/* pool2d layer: max or average pooling [N,C,H,W] -> [N,C,P,Q]. Max keeps the argmax
 * (int32 per output) for backward; average keeps only the input shape. Args:
 * ganfw_pool_args (layer.h). */
#include <string.h>

#include "nn/layer.h"

static ganfw_pool2d_shape pool_shape(const ganfw_layer *l, const int64_t *in) {
  const ganfw_pool_args *a = &l->args.pool;
  ganfw_pool2d_shape s = {.N = in[0],
                          .C = in[1],
                          .H = in[2],
                          .W = in[3],
                          .R = a->kernel,
                          .S = a->kernel,
                          .stride_h = a->stride,
                          .stride_w = a->stride,
                          .pad_h = a->padding,
                          .pad_w = a->padding};
  return s;
}

static ganfw_status pool_infer(const ganfw_layer *l, const int64_t *in, int32_t in_ndim,
                               int64_t *out, int32_t *out_ndim) {
  ganfw_pool2d_shape s = pool_shape(l, in);
  if (in_ndim != 4 || ganfw_pool2d_shape_init(&s) != GANFW_OK)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "a %d-dim input of %lldx%lld is too small for window %lld, stride "
                             "%lld, padding %lld",
                             (int)in_ndim, (long long)in[2], (long long)in[3],
                             (long long)l->args.pool.kernel, (long long)l->args.pool.stride,
                             (long long)l->args.pool.padding);
  out[0] = s.N, out[1] = s.C, out[2] = s.P, out[3] = s.Q;
  *out_ndim = 4;
  return GANFW_OK;
}

static ganfw_status pool_forward(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x,
                                 ganfw_tensor **y, ganfw_saved *saved) {
  ganfw_pool2d_shape s = pool_shape(l, x->shape);
  ganfw_pool2d_shape_init(&s);
  int64_t out[4] = {s.N, s.C, s.P, s.Q};
  const int max = l->args.pool.kind == GANFW_POOL_MAX;
  ganfw_tensor *t = ganfw_layer_tensor(l, ex, ex->dtype, 4, out, GANFW_MEM_ACTIVATION);
  ganfw_tensor *argmax =
      t && max ? ganfw_layer_tensor(l, ex, GANFW_DTYPE_I32, 4, out, GANFW_MEM_ACTIVATION) : NULL;
  ganfw_layer_scratch sc = {0};
  const float *xf = t && (argmax || !max) ? ganfw_layer_f32_in(l, ex, &sc, x) : NULL;
  float *yf = xf ? ganfw_layer_f32_out(l, ex, &sc, t) : NULL;
  if (!yf) {
    ganfw_status st = ganfw_error_code();
    ganfw_layer_scratch_release(&sc);
    ganfw_tensor_destroy(argmax);
    ganfw_tensor_destroy(t);
    return st;
  }
  ganfw_op op = {.kind = max ? GANFW_OP_MAXPOOL2D_FORWARD : GANFW_OP_AVGPOOL2D_FORWARD,
                 .shape.pool = s,
                 .in = {xf},
                 .out = {yf, max ? argmax->data : NULL}};
  ganfw_status st = ganfw_layer_op(l, ex, &op);
  if (st == GANFW_OK)
    st = ganfw_layer_store_out(l, ex, &sc);
  else
    ganfw_layer_scratch_release(&sc);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(argmax);
    ganfw_tensor_destroy(t);
    return st;
  }
  if (saved) {
    saved->t[0] = argmax;
    memcpy(saved->shape, x->shape, sizeof saved->shape);
    saved->ndim = x->ndim;
  } else {
    ganfw_tensor_destroy(argmax);
  }
  *y = t;
  return GANFW_OK;
}

static ganfw_status pool_backward(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                  ganfw_tensor *dy, ganfw_tensor **dx, int32_t param_grads,
                                  int32_t accumulate) {
  if (!dx) return GANFW_OK;
  ganfw_pool2d_shape s = pool_shape(l, saved->shape);
  ganfw_pool2d_shape_init(&s);
  ganfw_tensor *g =
      ganfw_layer_tensor(l, ex, ex->dtype, saved->ndim, saved->shape, GANFW_MEM_ACTIVATION);
  ganfw_layer_scratch sc = {0};
  const float *dyf = g ? ganfw_layer_f32_in(l, ex, &sc, dy) : NULL;
  float *gf = dyf ? ganfw_layer_f32_out(l, ex, &sc, g) : NULL;
  if (!gf) {
    ganfw_status st = ganfw_error_code();
    ganfw_layer_scratch_release(&sc);
    ganfw_tensor_destroy(g);
    return st;
  }
  const int max = l->args.pool.kind == GANFW_POOL_MAX;
  ganfw_op op = {.kind = max ? GANFW_OP_MAXPOOL2D_BACKWARD : GANFW_OP_AVGPOOL2D_BACKWARD,
                 .shape.pool = s,
                 .in = {dyf, max ? saved->t[0]->data : NULL},
                 .out = {gf}};
  ganfw_status st = ganfw_layer_op(l, ex, &op);
  if (st == GANFW_OK)
    st = ganfw_layer_store_out(l, ex, &sc);
  else
    ganfw_layer_scratch_release(&sc);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(g);
    return st;
  }
  *dx = g;
  return GANFW_OK;
}

const ganfw_layer_vt ganfw_layer_pool2d = {
    .type = "pool2d",
    .infer = pool_infer,
    .forward = pool_forward,
    .backward = pool_backward,
};
