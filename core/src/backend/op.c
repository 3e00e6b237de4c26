/* The op list's names and the checks every backend's run shares. */
#include "backend/backend.h"
#include "base/error.h"

static const char *const op_names[GANFW_OP_COUNT] = {
#define NAME_(K, name) [GANFW_OP_##K] = #name,
    GANFW_OP_LIST(NAME_)
#undef NAME_
};

_Static_assert(sizeof op_names / sizeof *op_names == GANFW_OP_COUNT, "every op kind has a name");

const char *ganfw_op_name(int32_t kind) {
  return kind >= 0 && kind < GANFW_OP_COUNT ? op_names[kind] : "?";
}

int32_t ganfw_op_any_dtype(int32_t kind) {
  return kind == GANFW_OP_PIXEL_SHUFFLE || kind == GANFW_OP_PIXEL_UNSHUFFLE;
}

static int in_range(const ganfw_op *op) {
  return op && op->kind >= 0 && op->kind < GANFW_OP_COUNT;
}

ganfw_status ganfw_backend_run(ganfw_backend *be, ganfw_op *op) {
  if (!in_range(op))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "backend %s: op kind %d is not an op",
                           be->vt->name, op ? (int)op->kind : -1);
  return be->vt->run(be, op);
}

int32_t ganfw_backend_supports(ganfw_backend *be, const ganfw_op *op) {
  return in_range(op) && be->vt->supports(be, op);
}

size_t ganfw_backend_workspace(ganfw_backend *be, const ganfw_op *op) {
  return in_range(op) ? be->vt->workspace(be, op) : 0;
}

const char *ganfw_backend_algorithm(ganfw_backend *be, const ganfw_op *op, int32_t pass) {
  return in_range(op) && be->vt->algorithm ? be->vt->algorithm(be, op, pass) : NULL;
}

uint32_t ganfw_op_lp_group(int32_t kind) {
  switch (kind) {
  case GANFW_OP_CONV2D_FORWARD:
  case GANFW_OP_CONV2D_BACKWARD:
  case GANFW_OP_CONVT2D_FORWARD:
  case GANFW_OP_CONVT2D_BACKWARD:
    return GANFW_LP_CONV;
  case GANFW_OP_LINEAR_FORWARD:
  case GANFW_OP_LINEAR_BACKWARD:
    return GANFW_LP_LINEAR;
  case GANFW_OP_BATCHNORM2D_TRAIN:
  case GANFW_OP_BATCHNORM2D_EVAL:
  case GANFW_OP_BATCHNORM2D_BACKWARD:
    return GANFW_LP_BATCHNORM;
  case GANFW_OP_ACT_FORWARD:
  case GANFW_OP_ACT_BACKWARD:
    return GANFW_LP_ACT;
  default:
    return 0;
  }
}

int32_t ganfw_op_supported(const ganfw_op *op, uint32_t lp_groups, uint32_t questions) {
  if (op->flags & ~(GANFW_OP_ACCUMULATE | questions)) return 0;
  if (op->dtype == GANFW_DTYPE_F32) return 1;
  if (op->dtype != GANFW_DTYPE_F16 && op->dtype != GANFW_DTYPE_BF16) return 0;
  if (op->kind == GANFW_OP_CAST_FROM_F32 || op->kind == GANFW_OP_CAST_TO_F32) return 1;
  return ganfw_op_any_dtype(op->kind) || (ganfw_op_lp_group(op->kind) & lp_groups) != 0;
}

static const char *dtype_name(int32_t dtype) {
  return dtype == GANFW_DTYPE_F32    ? "f32"
         : dtype == GANFW_DTYPE_F16  ? "f16"
         : dtype == GANFW_DTYPE_BF16 ? "bf16"
                                     : "an unknown dtype";
}

ganfw_status ganfw_op_dispatch(const ganfw_op_fn *table, ganfw_backend *be, ganfw_op *op) {
  if (!table[op->kind] || !be->vt->supports(be, op))
    return ganfw_error_set(GANFW_ERR_UNSUPPORTED, "the %s backend cannot run %s in %s",
                           be->vt->name, ganfw_op_name(op->kind), dtype_name(op->dtype));
  return table[op->kind](be, op);
}
