/* The penalties of train/penalty.h: per-sample squared norms on the device (one product and
 * one sum per channel plane), the few numbers per sample on the host, and the gradient as
 * one broadcast product of gx with a coefficient per sample and channel. */
#include "train/penalty.h"

#include <math.h>
#include <stdlib.h>

#include "backend/ops.h"
#include "base/error.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"
#include "runtime/tensor_cast.h"

ganfw_status ganfw_penalty_grad(ganfw_ctx *ctx, int32_t kind, double weight, ganfw_tensor *gx,
                                double scale, int64_t channels, double out_scale, double *value,
                                ganfw_tensor **v) {
  *v = NULL;
  *value = 0;
  ganfw_backend *be = ctx->be;
  const int64_t N = gx->shape[0], C = gx->ndim > 1 ? gx->shape[1] : 1;
  const int64_t inner = gx->numel / (N * C), keep = channels > 0 && channels < C ? channels : C;
  ganfw_tensor *g = ganfw_tensor_as_dtype(gx, GANFW_DTYPE_F32, GANFW_MEM_WORKSPACE);
  int64_t nc = N * C;
  ganfw_tensor *sq = g ? ganfw_tensor_create(ctx, GANFW_DTYPE_F32, gx->ndim, gx->shape,
                                             GANFW_MEM_ACTIVATION, "penalty.grad")
                       : NULL;
  ganfw_tensor *coef =
      sq ? ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 1, &nc, GANFW_MEM_WORKSPACE, "penalty.coef")
         : NULL;
  float *host = coef ? malloc((size_t)nc * sizeof *host) : NULL;
  ganfw_status st =
      host ? GANFW_OK
           : (ganfw_error_code() ? ganfw_error_code()
                                 : ganfw_error_set(GANFW_ERR_OOM, "out of host memory"));
  if (st == GANFW_OK) st = ganfw_be_mul(be, gx->numel, sq->data, g->data, g->data);
  ganfw_reduce_shape planes = {.dim = {1, 1, nc, inner}, .mask = 1u << 3};
  if (st == GANFW_OK) st = ganfw_be_reduce_sum(be, &planes, 1.0, sq->data, coef->data);
  if (st == GANFW_OK) st = ganfw_tensor_to_host(coef, host, nc * (int64_t)sizeof *host);
  double total = 0;
  const double s2 = scale * scale;
  for (int64_t n = 0; n < N && st == GANFW_OK; n++) {
    double ss = 0;
    for (int64_t c = 0; c < keep; c++) ss += host[n * C + c];
    ss /= s2;
    const double norm = sqrt(ss);
    double k; /* dP/dg_n = k g_n (g the unscaled gradient) */
    if (kind == GANFW_PENALTY_GP) {
      total += (norm - 1) * (norm - 1);
      k = norm > 0 ? 2.0 * weight * (norm - 1) / norm / (double)N : 0.0;
    } else {
      total += ss;
      k = weight / (double)N;
    }
    for (int64_t c = 0; c < C; c++) host[n * C + c] = c < keep ? (float)(k * out_scale / scale) : 0;
  }
  *value = kind == GANFW_PENALTY_GP ? weight * total / (double)N : 0.5 * weight * total / (double)N;
  if (st == GANFW_OK) st = ganfw_tensor_from_host(coef, host, nc * (int64_t)sizeof *host);
  const ganfw_bcast_shape rows = ganfw_bcast_rows(nc, inner, 0, 1);
  if (st == GANFW_OK)
    st = ganfw_be_binary(be, GANFW_BINARY_MUL, &rows, sq->data, g->data, coef->data);
  free(host);
  ganfw_tensor_destroy(coef);
  ganfw_tensor_destroy(g);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(sq);
    return st;
  }
  *v = sq; /* the gradient, written over the squares */
  return GANFW_OK;
}
