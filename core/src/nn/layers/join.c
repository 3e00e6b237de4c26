/* The layers that join several nodes of a graph net: add (torch.add, a residual
 * connection) and concat (torch.cat along dim 1), and the gradient sum the executor uses
 * where one node feeds several. Neither keeps anything for backward: add passes dy on to
 * every input, concat hands each input its slice of dy. Outputs and input gradients are in
 * the compute dtype; an input in another dtype (the net's f32 input under AMP) is converted
 * on the way. */
#include <string.h>

#include "nn/layer.h"
#include "runtime/tensor_cast.h"

/* f: a, b, out */
static ganfw_status add_rows(ganfw_layer *l, const ganfw_exec *ex, void *arg, int64_t n0,
                             int64_t rows, float *const *f) {
  (void)n0;
  const int64_t per_row = *(const int64_t *)arg;
  ganfw_op op = {
      .kind = GANFW_OP_ADD, .shape.d = {rows * per_row}, .in = {f[0], f[1]}, .out = {f[2]}};
  return ganfw_layer_op(l, ex, &op);
}

/* out = a + b element-wise, a and b of one shape; out may be a. */
static ganfw_status add_into(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *a, ganfw_tensor *b,
                             ganfw_tensor *out) {
  int64_t per_row = a->numel / a->shape[0];
  ganfw_tensor *io[3] = {a, b, out};
  return ganfw_layer_rows_run(l, ex, io, 2, 3, add_rows, &per_row);
}

/* a itself (retained) when nobody else holds it and it has the compute dtype, else a new
 * tensor of its shape in the compute dtype. */
static ganfw_tensor *reuse_or_new(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor *a) {
  if (ganfw_tensor_exclusive(a) && a->dtype == ex->dtype) return ganfw_tensor_retain(a);
  return ganfw_layer_tensor(l, ex, ex->dtype, a->ndim, a->shape, GANFW_MEM_ACTIVATION);
}

ganfw_status ganfw_join_accumulate(ganfw_layer *l, const ganfw_exec *ex, ganfw_tensor **acc,
                                   ganfw_tensor *g) {
  ganfw_tensor *out = reuse_or_new(l, ex, *acc);
  if (!out) return ganfw_error_code();
  ganfw_status st = add_into(l, ex, *acc, g, out);
  ganfw_tensor_destroy(*acc);
  *acc = out;
  return st;
}

/* "input k of n: [a,b,c,d]" for shape messages. */
static void shape_str(char *buf, size_t cap, const int64_t *s, int32_t nd) {
  size_t o = 0;
  buf[0] = 0;
  for (int32_t d = 0; d < nd && o < cap; d++)
    o += (size_t)snprintf(buf + o, cap - o, "%s%lld", d ? "," : "[", (long long)s[d]);
  if (o < cap) snprintf(buf + o, cap - o, "]");
}

/* The name of input k for messages: the node it reads. */
static const char *input_name(const ganfw_layer *l, int32_t k) {
  return l->in_name[k] ? l->in_name[k] : "(the node before)";
}

static ganfw_status add_infer(const ganfw_layer *l, int32_t n, const int64_t (*in)[GANFW_MAX_DIMS],
                              const int32_t *in_ndim, int64_t *out, int32_t *out_ndim) {
  for (int32_t k = 1; k < n; k++) {
    int same = in_ndim[k] == in_ndim[0];
    for (int32_t d = 1; same && d < in_ndim[0]; d++) same = in[k][d] == in[0][d];
    if (!same) {
      char a[96], b[96];
      shape_str(a, sizeof a, in[0], in_ndim[0]);
      shape_str(b, sizeof b, in[k], in_ndim[k]);
      return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                               "adds inputs of different shapes: %s is %s but %s is %s (batch "
                               "first); give the shortcut a projection (a 1x1 conv with the "
                               "stride) so both match",
                               input_name(l, 0), a, input_name(l, k), b);
    }
  }
  memcpy(out, in[0], sizeof(int64_t) * GANFW_MAX_DIMS);
  *out_ndim = in_ndim[0];
  return GANFW_OK;
}

static ganfw_status add_forward(ganfw_layer *l, const ganfw_exec *ex, int32_t n,
                                ganfw_tensor *const *x, ganfw_tensor **y, ganfw_saved *saved) {
  (void)saved;
  ganfw_tensor *out = reuse_or_new(l, ex, x[0]);
  if (!out) return ganfw_error_code();
  ganfw_status st = GANFW_OK;
  for (int32_t k = 1; k < n && st == GANFW_OK; k++)
    st = add_into(l, ex, k == 1 ? x[0] : out, x[k], out);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(out);
    return st;
  }
  *y = out;
  return GANFW_OK;
}

static ganfw_status add_backward(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                 ganfw_tensor *dy, int32_t n, const int32_t *want,
                                 ganfw_tensor **dx) {
  (void)l, (void)ex, (void)saved;
  for (int32_t k = 0; k < n; k++) dx[k] = want[k] ? ganfw_tensor_retain(dy) : NULL;
  return GANFW_OK;
}

const ganfw_layer_vt ganfw_layer_add = {
    .type = "add",
    .infer_n = add_infer,
    .forward_n = add_forward,
    .backward_n = add_backward,
    .backward2 = ganfw_layer_backward2_by_forward,
    .backward2_reads_dy = ganfw_layer_backward2_no_dy,
};

/* --- concat ------------------------------------------------------------------------------ */

static ganfw_status concat_infer(const ganfw_layer *l, int32_t n,
                                 const int64_t (*in)[GANFW_MAX_DIMS], const int32_t *in_ndim,
                                 int64_t *out, int32_t *out_ndim) {
  if (in_ndim[0] < 2)
    return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                             "concatenates along dim 1, but %s has %d dims", input_name(l, 0),
                             (int)in_ndim[0]);
  memcpy(out, in[0], sizeof(int64_t) * GANFW_MAX_DIMS);
  for (int32_t k = 1; k < n; k++) {
    int same = in_ndim[k] == in_ndim[0];
    for (int32_t d = 2; same && d < in_ndim[0]; d++) same = in[k][d] == in[0][d];
    if (!same) {
      char a[96], b[96];
      shape_str(a, sizeof a, in[0], in_ndim[0]);
      shape_str(b, sizeof b, in[k], in_ndim[k]);
      return ganfw_layer_error(l, GANFW_ERR_INVALID_ARG,
                               "concatenates channels of inputs that differ elsewhere: %s is %s "
                               "but %s is %s (batch first); every dimension but dim 1 must "
                               "match (upsample or pool one of them)",
                               input_name(l, 0), a, input_name(l, k), b);
    }
    out[1] += in[k][1];
  }
  *out_ndim = in_ndim[0];
  return GANFW_OK;
}

/* Copies, per sample, `inner` * esize bytes between a compact tensor and a slice of the
 * channels of a wider one: to_wide 1 copies src (compact) into wide at channel offset off. */
static ganfw_status slice_copy(const ganfw_exec *ex, ganfw_tensor *wide, ganfw_tensor *part,
                               int64_t off, int to_wide) {
  const size_t es = ganfw_dtype_size(wide->dtype);
  const int64_t N = wide->shape[0];
  const int64_t wide_row = wide->numel / N, part_row = part->numel / N;
  const int64_t inner = part_row / part->shape[1]; /* elements per channel */
  char *w = wide->data, *p = part->data;
  for (int64_t s = 0; s < N; s++) {
    char *wp = w + ((size_t)(s * wide_row + off * inner)) * es;
    char *pp = p + (size_t)(s * part_row) * es;
    ganfw_status st = to_wide ? ex->be->vt->copy_d2d(ex->be, wp, pp, (size_t)part_row * es)
                              : ex->be->vt->copy_d2d(ex->be, pp, wp, (size_t)part_row * es);
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

static ganfw_status concat_forward(ganfw_layer *l, const ganfw_exec *ex, int32_t n,
                                   ganfw_tensor *const *x, ganfw_tensor **y, ganfw_saved *saved) {
  int64_t shape[GANFW_MAX_DIMS];
  memcpy(shape, x[0]->shape, sizeof shape);
  for (int32_t k = 1; k < n; k++) shape[1] += x[k]->shape[1];
  ganfw_tensor *out = ganfw_layer_tensor(l, ex, ex->dtype, x[0]->ndim, shape, GANFW_MEM_ACTIVATION);
  if (!out) return ganfw_error_code();
  ganfw_status st = GANFW_OK;
  for (int32_t k = 0, off = 0; k < n && st == GANFW_OK; off += (int32_t)x[k]->shape[1], k++) {
    ganfw_tensor *part = ganfw_tensor_as_dtype(x[k], ex->dtype, GANFW_MEM_WORKSPACE);
    st = part ? slice_copy(ex, out, part, off, 1) : ganfw_error_code();
    ganfw_tensor_destroy(part);
  }
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(out);
    return ganfw_layer_error(l, st, "copying an input into the output failed");
  }
  (void)saved; /* backward needs only the inputs' channels, l->in_c */
  *y = out;
  return GANFW_OK;
}

static ganfw_status concat_backward(ganfw_layer *l, const ganfw_exec *ex, ganfw_saved *saved,
                                    ganfw_tensor *dy, int32_t n, const int32_t *want,
                                    ganfw_tensor **dx) {
  (void)saved;
  ganfw_status st = GANFW_OK;
  int64_t off = 0;
  for (int32_t k = 0; k < n; k++) {
    dx[k] = NULL;
    const int64_t c = l->in_c[k];
    if (want[k] && st == GANFW_OK) {
      int64_t shape[GANFW_MAX_DIMS];
      memcpy(shape, dy->shape, sizeof shape);
      shape[1] = c;
      dx[k] = ganfw_layer_tensor(l, ex, dy->dtype, dy->ndim, shape, GANFW_MEM_ACTIVATION);
      st = dx[k] ? slice_copy(ex, dy, dx[k], off, 0) : ganfw_error_code();
    }
    off += c;
  }
  if (st != GANFW_OK)
    for (int32_t k = 0; k < n; k++) {
      ganfw_tensor_destroy(dx[k]);
      dx[k] = NULL;
    }
  return st;
}

const ganfw_layer_vt ganfw_layer_concat = {
    .type = "concat",
    .infer_n = concat_infer,
    .forward_n = concat_forward,
    .backward_n = concat_backward,
    .backward2 = ganfw_layer_backward2_by_forward,
    .backward2_reads_dy = ganfw_layer_backward2_no_dy,
};
