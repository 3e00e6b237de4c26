/* f32 arithmetic for the layers' double-backward members (layer.h, ganfw_g2): one backend op
 * per call, so that a formula written with them runs on every backend that runs the op
 * list (op.h), the meta backend included (plans count these buffers as they count any). */
#include "backend/ops.h"
#include "nn/layer.h"
#include "runtime/tensor_cast.h"

static int32_t keep(ganfw_g2 *c, ganfw_tensor *t) {
  if (!t) {
    c->st = ganfw_error_code() ? ganfw_error_code() : GANFW_ERR_OOM;
    return 0;
  }
  if (c->n == GANFW_G2_MAX) {
    ganfw_tensor_destroy(t);
    c->st = ganfw_layer_error(c->l, GANFW_ERR_INTERNAL, "double backward: more than %d buffers",
                              GANFW_G2_MAX);
    return 0;
  }
  c->t[c->n++] = t;
  return 1;
}

float *ganfw_g2_buf(ganfw_g2 *c, int64_t n) {
  if (c->st != GANFW_OK) return NULL;
  ganfw_tensor *t = ganfw_layer_tensor(c->l, c->ex, GANFW_DTYPE_F32, 1, &n, GANFW_MEM_WORKSPACE);
  return keep(c, t) ? t->data : NULL;
}

float *ganfw_g2_f32(ganfw_g2 *c, ganfw_tensor *t) {
  if (c->st != GANFW_OK) return NULL;
  ganfw_tensor *f = ganfw_tensor_as_dtype(t, GANFW_DTYPE_F32, GANFW_MEM_WORKSPACE);
  return keep(c, f) ? f->data : NULL;
}

ganfw_tensor *ganfw_g2_tensor(ganfw_g2 *c, const ganfw_tensor *like) {
  if (c->st != GANFW_OK) return NULL;
  ganfw_tensor *t = ganfw_layer_tensor(c->l, c->ex, GANFW_DTYPE_F32, like->ndim, like->shape,
                                       GANFW_MEM_ACTIVATION);
  if (!t) c->st = ganfw_error_code() ? ganfw_error_code() : GANFW_ERR_OOM;
  return t;
}

static void run(ganfw_g2 *c, ganfw_op *op) {
  if (c->st == GANFW_OK) c->st = ganfw_layer_op(c->l, c->ex, op);
}

void ganfw_g2_bin(ganfw_g2 *c, int32_t f, int64_t R, int64_t m, float *out, const float *a,
                  int32_t a_col, const float *b, int32_t b_col) {
  ganfw_op op = {.kind = GANFW_OP_BINARY,
                 .mode = f,
                 .shape.bcast = ganfw_bcast_rows(R, m, a_col, b_col),
                 .in = {a, b},
                 .out = {out}};
  run(c, &op);
}

void ganfw_g2_rowsum(ganfw_g2 *c, int64_t R, int64_t m, double scale, const float *x, float *out) {
  ganfw_op op = {.kind = GANFW_OP_REDUCE_SUM,
                 .shape.reduce = {.dim = {1, 1, R, m}, .mask = 1u << 3},
                 .in = {x},
                 .out = {out},
                 .sc = {scale}};
  run(c, &op);
}

void ganfw_g2_unary(ganfw_g2 *c, int32_t f, int64_t n, float *out, const float *x, float a,
                    float b) {
  ganfw_op op = {
      .kind = GANFW_OP_UNARY, .mode = f, .shape.d = {n}, .in = {x}, .out = {out}, .sc = {a, b}};
  run(c, &op);
}

void ganfw_g2_addcmul(ganfw_g2 *c, int64_t n, float *y, float v, const float *a, const float *b) {
  ganfw_op op = {.kind = GANFW_OP_ADDCMUL, .shape.d = {n}, .in = {a, b}, .out = {y}, .sc = {v}};
  run(c, &op);
}

ganfw_status ganfw_g2_end(ganfw_g2 *c) {
  for (int32_t i = 0; i < c->n; i++) ganfw_tensor_destroy(c->t[i]);
  c->n = 0;
  return c->st;
}

ganfw_status ganfw_layer_backward2_by_forward(ganfw_layer *l, const ganfw_exec *ex,
                                              ganfw_saved *saved, ganfw_tensor *dy, int32_t n,
                                              ganfw_tensor *const *u, ganfw_tensor **du,
                                              ganfw_tensor **ax, int32_t param_grads) {
  (void)saved, (void)dy, (void)ax, (void)param_grads;
  *du = NULL;
  for (int32_t k = 0; k < n; k++)
    if (!u[k]) return GANFW_OK; /* the executor fills a join's missing tangents with zeros */
  ganfw_exec f32 = *ex;
  f32.dtype = GANFW_DTYPE_F32;
  f32.update_stats = 0;
  return l->vt->forward_n ? l->vt->forward_n(l, &f32, n, u, du, NULL)
                          : l->vt->forward(l, &f32, u[0], du, NULL);
}

int32_t ganfw_layer_backward2_no_dy(const ganfw_layer *l) {
  (void)l;
  return 0;
}
