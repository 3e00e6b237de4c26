/* pool2d layer: max or average pooling [N,C,H,W] -> [N,C,P,Q]. Max keeps the argmax
 * (int32 per output) for backward; average keeps only the input shape. Args: kind,
 * kernel, stride, padding. */
#include <string.h>

#include "nn/layer.h"

static ganfw_pool2d_shape pool_shape(const ganfw_layer *l, const int64_t *in) {
  ganfw_pool2d_shape s = {.N = in[0],
                          .C = in[1],
                          .H = in[2],
                          .W = in[3],
                          .R = l->arg[1],
                          .S = l->arg[1],
                          .stride_h = l->arg[2],
                          .stride_w = l->arg[2],
                          .pad_h = l->arg[3],
                          .pad_w = l->arg[3]};
  return s;
}

static ganfw_status pool_infer(const ganfw_layer *l, const int64_t *in, int32_t in_ndim,
                               int64_t *out, int32_t *out_ndim) {
  ganfw_pool2d_shape s = pool_shape(l, in);
  if (in_ndim != 4 || ganfw_pool2d_shape_init(&s) != GANFW_OK)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "a %d-dim input of %lldx%lld is too small for window %lld, stride "
                             "%lld, padding %lld",
                             (int)in_ndim, (long long)in[2], (long long)in[3], (long long)l->arg[1],
                             (long long)l->arg[2], (long long)l->arg[3]);
  out[0] = s.N, out[1] = s.C, out[2] = s.P, out[3] = s.Q;
  *out_ndim = 4;
  return GANFW_OK;
}

static ganfw_status pool_forward(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x,
                                 ganfw_tensor **y, ganfw_saved *saved) {
  ganfw_pool2d_shape s = pool_shape(l, x->shape);
  ganfw_pool2d_shape_init(&s);
  int64_t out[4] = {s.N, s.C, s.P, s.Q};
  const int max = l->arg[0] == GANFW_POOL_MAX;
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
  if (max)
    ex->be->vt->maxpool2d_forward(ex->be, &s, xf, yf, argmax->data);
  else
    ex->be->vt->avgpool2d_forward(ex->be, &s, xf, yf);
  ganfw_layer_store_out(ex, &sc);
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
  if (l->arg[0] == GANFW_POOL_MAX)
    ex->be->vt->maxpool2d_backward(ex->be, &s, dyf, saved->t[0]->data, gf);
  else
    ex->be->vt->avgpool2d_backward(ex->be, &s, dyf, gf);
  ganfw_layer_store_out(ex, &sc);
  *dx = g;
  return GANFW_OK;
}

const ganfw_layer_vt ganfw_layer_pool2d = {
    .type = "pool2d",
    .infer = pool_infer,
    .forward = pool_forward,
    .backward = pool_backward,
};
