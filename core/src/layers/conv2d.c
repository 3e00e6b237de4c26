/* conv2d layer: x [N,C,H,W] * weight [K,C,R,S] (+ bias [K]) -> y [N,K,P,Q]. Keeps x for
 * backward; the im2col workspace is taken from the allocator for each call. Args: C, K,
 * kernel, stride, padding, -, bias. */
#include "layer.h"

static ganfw_conv2d_shape conv_shape(const ganfw_layer *l, const int64_t *in) {
  ganfw_conv2d_shape s = {.N = in[0],
                          .C = in[1],
                          .H = in[2],
                          .W = in[3],
                          .K = l->arg[1],
                          .R = l->arg[2],
                          .S = l->arg[2],
                          .stride_h = l->arg[3],
                          .stride_w = l->arg[3],
                          .pad_h = l->arg[4],
                          .pad_w = l->arg[4]};
  return s;
}

static ganfw_status conv_infer(const ganfw_layer *l, const int64_t *in, int32_t in_ndim,
                               int64_t *out, int32_t *out_ndim) {
  if (in_ndim != 4 || in[1] != l->arg[0])
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "expects [N,%lld,H,W] input, gets %d dims with %lld channels",
                             (long long)l->arg[0], (int)in_ndim, (long long)in[1]);
  ganfw_conv2d_shape s = conv_shape(l, in);
  if (ganfw_conv2d_shape_init(&s) != GANFW_OK)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "a %lldx%lld input is too small for kernel %lld, stride %lld, "
                             "padding %lld",
                             (long long)in[2], (long long)in[3], (long long)l->arg[2],
                             (long long)l->arg[3], (long long)l->arg[4]);
  out[0] = s.N, out[1] = s.K, out[2] = s.P, out[3] = s.Q;
  *out_ndim = 4;
  return GANFW_OK;
}

static ganfw_status conv_init(ganfw_layer *l, const int64_t *in, int32_t in_ndim) {
  int64_t w[4] = {l->arg[1], l->arg[0], l->arg[2], l->arg[2]};
  ganfw_status st = ganfw_layer_add_param(l, 0, "weight", 4, w);
  if (st == GANFW_OK && l->arg[6]) st = ganfw_layer_add_param(l, 1, "bias", 1, &l->arg[1]);
  if (st == GANFW_OK) st = ganfw_layer_init_uniform(l, l->arg[0] * l->arg[2] * l->arg[2]);
  return st;
}

/* One kernel call over rows of the batch (see ganfw_layer_rows_run). */
typedef struct conv_call {
  ganfw_conv2d_shape s;
  const float *p[GANFW_LAYER_MAX_PARAMS]; /* weight, bias as the kernel uses them */
  int32_t param_grads, accumulate;
} conv_call;

/* f: x, y */
static ganfw_status conv_forward_rows(ganfw_layer *l, const ganfw_exec *ex, void *arg, int64_t n0,
                                      int64_t rows, float *const *f) {
  const conv_call *c = arg;
  ganfw_conv2d_shape s = c->s;
  s.N = rows;
  ganfw_status st;
  ganfw_tensor *ws = ganfw_layer_workspace(l, ex, ex->be->vt->conv2d_workspace(ex->be, &s), &st);
  if (st != GANFW_OK) return st;
  ex->be->vt->conv2d_forward(ex->be, &s, f[0], c->p[0], c->p[1], f[1], ws ? ws->data : NULL);
  ganfw_tensor_destroy(ws);
  return GANFW_OK;
}

/* f: x, dy, dx (or NULL) */
static ganfw_status conv_backward_rows(ganfw_layer *l, const ganfw_exec *ex, void *arg, int64_t n0,
                                       int64_t rows, float *const *f) {
  const conv_call *c = arg;
  ganfw_conv2d_shape s = c->s;
  s.N = rows;
  ganfw_status st;
  ganfw_tensor *ws = ganfw_layer_workspace(l, ex, ex->be->vt->conv2d_workspace(ex->be, &s), &st);
  if (st != GANFW_OK) return st;
  ex->be->vt->conv2d_backward(ex->be, &s, f[0], c->p[0], f[1], f[2],
                              c->param_grads ? l->grad[0]->data : NULL,
                              c->param_grads && l->grad[1] ? l->grad[1]->data : NULL,
                              c->accumulate || n0 > 0, ws ? ws->data : NULL);
  ganfw_tensor_destroy(ws);
  return GANFW_OK;
}

static ganfw_status conv_forward(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x,
                                 ganfw_tensor **y, ganfw_saved *saved) {
  conv_call c = {.s = conv_shape(l, x->shape)};
  ganfw_conv2d_shape_init(&c.s);
  int64_t out[4] = {c.s.N, c.s.K, c.s.P, c.s.Q};
  ganfw_tensor *t = ganfw_layer_tensor(l, ex, ex->dtype, 4, out, GANFW_MEM_ACTIVATION);
  if (!t) return ganfw_error_code();
  ganfw_layer_scratch ps = {0};
  ganfw_tensor *io[2] = {x, t};
  ganfw_status st = ganfw_layer_f32_params(l, ex, &ps, c.p);
  if (st == GANFW_OK) st = ganfw_layer_rows_run(l, ex, io, 1, 2, conv_forward_rows, &c);
  ganfw_layer_scratch_release(&ps);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(t);
    return st;
  }
  if (saved) saved->t[0] = ganfw_tensor_retain(x);
  *y = t;
  return GANFW_OK;
}

static ganfw_status conv_backward(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                  ganfw_tensor *dy, ganfw_tensor **dx, int32_t param_grads,
                                  int32_t accumulate) {
  ganfw_tensor *x = saved->t[0];
  conv_call c = {
      .s = conv_shape(l, x->shape), .param_grads = param_grads, .accumulate = accumulate};
  ganfw_conv2d_shape_init(&c.s);
  ganfw_tensor *g = NULL;
  if (dx) {
    g = ganfw_layer_tensor(l, ex, ex->dtype, 4, x->shape, GANFW_MEM_ACTIVATION);
    if (!g) return ganfw_error_code();
  }
  if (!g && !param_grads) return GANFW_OK;
  ganfw_layer_scratch ps = {0};
  ganfw_tensor *io[3] = {x, dy, g};
  ganfw_status st = ganfw_layer_f32_params(l, ex, &ps, c.p);
  if (st == GANFW_OK) st = ganfw_layer_rows_run(l, ex, io, 2, 3, conv_backward_rows, &c);
  ganfw_layer_scratch_release(&ps);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(g);
    return st;
  }
  if (dx) *dx = g;
  return GANFW_OK;
}

const ganfw_layer_vt ganfw_layer_conv2d = {
    .type = "conv2d",
    .infer = conv_infer,
    .init = conv_init,
    .forward = conv_forward,
    .backward = conv_backward,
};
