/* Element-type conversion of tensors (see tensor_cast.h): f32 <-> f16 and f32 <-> bf16
 * through the backend's cast kernels, same-dtype copies through copy_d2d. */
#include "runtime/tensor_cast.h"

#include "runtime/ctx.h"
#include "base/error.h"
#include "runtime/tensor.h"

static int is_float(int32_t dtype) {
  return dtype == GANFW_DTYPE_F32 || dtype == GANFW_DTYPE_F16 || dtype == GANFW_DTYPE_BF16;
}

ganfw_status ganfw_cast(ganfw_backend *be, int64_t n, int32_t src_dtype, const void *src,
                        int32_t dst_dtype, void *dst) {
  if (n <= 0) return GANFW_OK;
  if (src_dtype == dst_dtype && is_float(src_dtype))
    return be->vt->copy_d2d(be, dst, src, (size_t)n * ganfw_dtype_size(src_dtype));
  const int lp_src = src_dtype == GANFW_DTYPE_F16 || src_dtype == GANFW_DTYPE_BF16;
  const int lp_dst = dst_dtype == GANFW_DTYPE_F16 || dst_dtype == GANFW_DTYPE_BF16;
  if (!(src_dtype == GANFW_DTYPE_F32 && lp_dst) && !(lp_src && dst_dtype == GANFW_DTYPE_F32))
    return ganfw_error_set(GANFW_ERR_UNSUPPORTED,
                           "no conversion from %s to %s (one side must be f32)",
                           ganfw_dtype_name(src_dtype), ganfw_dtype_name(dst_dtype));
  ganfw_op op = {.kind = lp_dst ? GANFW_OP_CAST_FROM_F32 : GANFW_OP_CAST_TO_F32,
                 .dtype = lp_dst ? dst_dtype : src_dtype,
                 .shape.d = {n},
                 .in = {src},
                 .out = {dst}};
  return ganfw_backend_run(be, &op);
}

ganfw_tensor *ganfw_tensor_as_dtype(ganfw_tensor *t, int32_t dtype, int32_t category) {
  if (t->dtype == dtype) return ganfw_tensor_retain(t);
  ganfw_ctx *ctx = ganfw_tensor_ctx(t);
  ganfw_tensor *out = ganfw_tensor_create(ctx, dtype, t->ndim, t->shape, category, t->name);
  if (!out) return NULL;
  ganfw_status st = ganfw_cast(ctx->be, t->numel, t->dtype, t->data, dtype, out->data);
  if (st != GANFW_OK) {
    ganfw_tensor_destroy(out);
    return NULL;
  }
  return out;
}
