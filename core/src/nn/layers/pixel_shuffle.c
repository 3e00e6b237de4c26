/* pixel_shuffle and pixel_unshuffle layers (PyTorch's nn.PixelShuffle(r), the sub-pixel
 * upsampling of super-resolution and GAN generators, and nn.PixelUnshuffle(r)):
 *   pixel_shuffle   x [N,C*r*r,H,W] -> y [N,C,H*r,W*r]
 *   pixel_unshuffle x [N,C,H*r,W*r] -> y [N,C*r*r,H,W]
 * Each is one backend op (op.h's PIXEL_SHUFFLE, PIXEL_UNSHUFFLE) and the other's backward. They
 * only move elements, so they run on the whole batch in the compute dtype, f32, f16 or bf16
 * alike, with no f32 copies. Keeps nothing for backward but the input shape. Args:
 * ganfw_pixel_shuffle_args in l->impl, made by the builder at the end of this file. */
#include <stdlib.h>
#include <string.h>

#include "nn/layer.h"
#include "nn/net.h"

typedef struct ganfw_pixel_shuffle_args {
  int64_t factor;    /* r: the upscale (shuffle) or downscale (unshuffle) factor */
  int32_t unshuffle; /* 0: pixel_shuffle; 1: pixel_unshuffle */
} ganfw_pixel_shuffle_args;

static const ganfw_pixel_shuffle_args *args_of(const ganfw_layer *l) {
  return l->impl;
}

static ganfw_status ps_infer(const ganfw_layer *l, const int64_t *in, int32_t in_ndim, int64_t *out,
                             int32_t *out_ndim) {
  const ganfw_pixel_shuffle_args *a = args_of(l);
  const int64_t r = a->factor;
  if (in_ndim != 4)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "expects [N,C,H,W] input, gets %d dims (reshape a [N,F] input "
                             "first)",
                             (int)in_ndim);
  if (!a->unshuffle && in[1] % (r * r) != 0)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "pixel_shuffle(%lld) needs channels divisible by %lld (the factor "
                             "squared), gets %lld channels; make the layer before it output a "
                             "multiple of %lld",
                             (long long)r, (long long)(r * r), (long long)in[1],
                             (long long)(r * r));
  if (a->unshuffle && (in[2] % r != 0 || in[3] % r != 0))
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "pixel_unshuffle(%lld) needs a height and width divisible by %lld, "
                             "gets %lldx%lld; resize or pad the input to a multiple of %lld",
                             (long long)r, (long long)r, (long long)in[2], (long long)in[3],
                             (long long)r);
  out[0] = in[0];
  out[1] = a->unshuffle ? in[1] * r * r : in[1] / (r * r);
  out[2] = a->unshuffle ? in[2] / r : in[2] * r;
  out[3] = a->unshuffle ? in[3] / r : in[3] * r;
  *out_ndim = 4;
  return GANFW_OK;
}

/* The op that moves x (of shape `in`, the layer's input; dtype) into y: forward, or the
 * inverse for backward. d: N, C (the high-resolution side's channels), H, W (the low-resolution
 * side's size), r. */
static ganfw_status ps_run(const ganfw_layer *l, const ganfw_exec *ex, const int64_t *in,
                           int32_t backward, const void *x, void *y) {
  const ganfw_pixel_shuffle_args *a = args_of(l);
  const int64_t r = a->factor;
  const int32_t unshuffle = a->unshuffle != backward; /* which way this call moves */
  ganfw_op op = {.kind = unshuffle ? GANFW_OP_PIXEL_UNSHUFFLE : GANFW_OP_PIXEL_SHUFFLE,
                 .dtype = ex->dtype,
                 .in = {x},
                 .out = {y}};
  if (a->unshuffle) { /* in is the high-resolution side */
    const int64_t d[5] = {in[0], in[1], in[2] / r, in[3] / r, r};
    memcpy(op.shape.d, d, sizeof d);
  } else {
    const int64_t d[5] = {in[0], in[1] / (r * r), in[2], in[3], r};
    memcpy(op.shape.d, d, sizeof d);
  }
  return ganfw_layer_op(l, ex, &op);
}

/* A new tensor of shape[0..4) in the compute dtype holding t moved by ps_run: t's own data when
 * t has the compute dtype, else a copy converted to it (an f32 data batch under amp). */
static ganfw_status ps_move(ganfw_layer *l, const ganfw_exec *ex, const int64_t *in,
                            int32_t backward, ganfw_tensor *t, const int64_t *shape,
                            ganfw_tensor **out) {
  ganfw_tensor *o = ganfw_layer_tensor(l, ex, ex->dtype, 4, shape, GANFW_MEM_ACTIVATION);
  if (!o) return ganfw_error_code();
  ganfw_layer_scratch sc = {0};
  const void *src = ganfw_layer_lp_in(l, ex, &sc, t);
  ganfw_status st = src ? ps_run(l, ex, in, backward, src, o->data) : ganfw_error_code();
  ganfw_layer_scratch_release(&sc);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(o);
    return st;
  }
  *out = o;
  return GANFW_OK;
}

static ganfw_status ps_forward(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *x,
                               ganfw_tensor **y, ganfw_saved *saved) {
  int64_t out[4];
  int32_t nd;
  ganfw_status st = ps_infer(l, x->shape, x->ndim, out, &nd);
  if (st == GANFW_OK) st = ps_move(l, ex, x->shape, 0, x, out, y);
  if (st == GANFW_OK && saved) {
    memcpy(saved->shape, x->shape, sizeof saved->shape);
    saved->ndim = x->ndim;
  }
  return st;
}

static ganfw_status ps_backward(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                ganfw_tensor *dy, ganfw_tensor **dx, int32_t param_grads,
                                int32_t accumulate) {
  (void)param_grads, (void)accumulate;
  if (!dx) return GANFW_OK;
  return ps_move(l, ex, saved->shape, 1, dy, saved->shape, dx);
}

static void ps_release(ganfw_layer *l) {
  free(l->impl);
  l->impl = NULL;
}

static const ganfw_layer_vt pixel_shuffle_vt = {
    .type = "pixel_shuffle",
    .infer = ps_infer,
    .forward = ps_forward,
    .backward = ps_backward,
    .release = ps_release,
    .backward2 = ganfw_layer_backward2_by_forward,
    .backward2_reads_dy = ganfw_layer_backward2_no_dy,
};

static const ganfw_layer_vt pixel_unshuffle_vt = {
    .type = "pixel_unshuffle",
    .infer = ps_infer,
    .forward = ps_forward,
    .backward = ps_backward,
    .release = ps_release,
    .backward2 = ganfw_layer_backward2_by_forward,
    .backward2_reads_dy = ganfw_layer_backward2_no_dy,
};

ganfw_status ganfw_net_pixel_shuffle(ganfw_net *net, const char *name, int64_t factor,
                                     int32_t unshuffle) {
  if (factor < 1 || factor > 1024 || (unshuffle != 0 && unshuffle != 1))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "net %s, layer %s: pixel_shuffle takes a factor from 1 to 1024 and "
                           "unshuffle 0 (nn.PixelShuffle) or 1 (nn.PixelUnshuffle), got factor "
                           "%lld and unshuffle %d",
                           ganfw_net_name(net), name ? name : "?", (long long)factor,
                           (int)unshuffle);
  ganfw_pixel_shuffle_args *a = malloc(sizeof *a);
  if (!a) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  *a = (ganfw_pixel_shuffle_args){.factor = factor, .unshuffle = unshuffle};
  ganfw_layer *l = NULL;
  ganfw_status st =
      ganfw_net_append(net, unshuffle ? &pixel_unshuffle_vt : &pixel_shuffle_vt, name, &l);
  if (st != GANFW_OK) {
    free(a);
    return st;
  }
  l->impl = a;
  return GANFW_OK;
}
