/* The CPU backend: the reference implementation of every op, OpenBLAS for GEMM, OpenMP
 * threads from device.threads. This file fills the table of ops (one ganfw_cpu_op_<name> per
 * kind of op.h, each in the file of its kernel beside this one) and says which ops run in
 * 16 bits and what workspace they need. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cast.h"
#include "backend/cpu/cpu_ops.h"
#include "backend/cpu/gemm_bf16.h"
#include "backend/cpu/isa.h"

/* The groups with native 16-bit kernels, for f16 and bf16 alike: they read and write 16-bit
 * activations and convert rows on the way (cast.h), and bf16 convolutions multiply on bf16
 * dot products or AMX tiles where the CPU has them (gemm_bf16.c), so that amp keeps its memory and
 * runs at full batch (the layers' converting path, core/src/nn/layer_dtype.c, goes in chunks).
 * GANFW_CPU_LP=0 in the environment (read once) keeps every layer on the converting path,
 * for benchmarks and tests. */
#define CPU_LP_GROUPS (GANFW_LP_CONV | GANFW_LP_BATCHNORM | GANFW_LP_ACT)

static pthread_once_t lp_once = PTHREAD_ONCE_INIT;
static atomic_int lp_off;

static void read_lp_env(void) {
  const char *v = getenv("GANFW_CPU_LP");
  atomic_store(&lp_off, v && strcmp(v, "0") == 0);
}

int ganfw_cpu_lp_set(int on) {
  pthread_once(&lp_once, read_lp_env);
  return !atomic_exchange(&lp_off, !on);
}

/* The groups of GANFW_LP_* that run natively in dtype. */
static uint32_t lp_groups(int32_t dtype) {
  pthread_once(&lp_once, read_lp_env);
  if (atomic_load_explicit(&lp_off, memory_order_relaxed) ||
      (dtype != GANFW_DTYPE_F16 && dtype != GANFW_DTYPE_BF16))
    return 0;
  return CPU_LP_GROUPS;
}

const char *ganfw_cpu_lp_describe(int32_t dtype) {
  static _Thread_local char line[320];
  const char *name = dtype == GANFW_DTYPE_BF16 ? "bf16" : "f16";
  if (!lp_groups(dtype)) {
    snprintf(line, sizeof line,
             "%s on the CPU: every layer converts its 16-bit tensors to f32 in chunks "
             "(GANFW_CPU_LP=0)",
             name);
    return line;
  }
  const int dot = dtype == GANFW_DTYPE_BF16 && ganfw_cpu_have_bf16_dot();
  const int amx = dot && ganfw_cpu_gemm_bf16_amx();
  snprintf(line, sizeof line,
           "%s on the CPU: conv, conv-transpose, BatchNorm and activations read and write %s "
           "(%s conversions inside the kernels, %s SIMD); convolutions multiply on %s, sums in "
           "f32; other layers convert",
           name, name,
           dtype == GANFW_DTYPE_BF16 ? "shift"
           : ganfw_cpu_use_f16c()    ? "F16C"
                                     : "portable scalar",
           ganfw_cpu_isa_name(ganfw_cpu_isa_level()),
           amx   ? "bf16 AMX tiles (AMX-BF16)"
           : dot ? "bf16 dot products (AVX-512 BF16)"
                 : "f32 GEMMs");
  return line;
}

/* Every op in f32 (a cast in f32 is a copy); in f16 and bf16 the casts, the ops that only
 * move elements and the groups of lp_groups(). The one question a flag asks that the CPU
 * answers yes is BatchNorm's in-place backward (dx over dy: batchnorm2d.c says why it is
 * safe). */
static int32_t cpu_supports(ganfw_backend *be, const ganfw_op *op) {
  (void)be;
  const uint32_t in_place = op->kind == GANFW_OP_BATCHNORM2D_BACKWARD ? GANFW_OP_IN_PLACE : 0;
  return ganfw_op_supported(op, lp_groups(op->dtype), in_place);
}

static size_t cpu_workspace(ganfw_backend *be, const ganfw_op *op) {
  switch (op->kind) {
  case GANFW_OP_CONV2D_FORWARD:
  case GANFW_OP_CONV2D_BACKWARD:
    return ganfw_cpu_conv2d_workspace(&op->shape.conv, op->dtype);
  case GANFW_OP_CONVT2D_FORWARD:
  case GANFW_OP_CONVT2D_BACKWARD:
    return ganfw_cpu_convt2d_workspace(&op->shape.convt, op->dtype);
  default:
    return 0;
  }
}

/* The convolutions' algorithms (conv2d.c); a convT's passes are its adjoint conv2d's with
 * forward and backward-data swapped. */
static const char *cpu_algorithm(ganfw_backend *be, const ganfw_op *op, int32_t pass) {
  (void)be;
  if (pass < 0 || pass >= GANFW_OP_PASS_COUNT) return NULL;
  switch (op->kind) {
  case GANFW_OP_CONV2D_FORWARD:
  case GANFW_OP_CONV2D_BACKWARD:
    return ganfw_cpu_conv2d_algorithm(&op->shape.conv, op->dtype, pass);
  case GANFW_OP_CONVT2D_FORWARD:
  case GANFW_OP_CONVT2D_BACKWARD:
    return ganfw_cpu_convt2d_algorithm(&op->shape.convt, op->dtype, pass);
  default:
    return NULL;
  }
}

static const ganfw_op_fn cpu_ops[GANFW_OP_COUNT] = {
#define CPU_OP_(K, name) [GANFW_OP_##K] = ganfw_cpu_op_##name,
    GANFW_OP_LIST(CPU_OP_)
#undef CPU_OP_
};

static ganfw_status cpu_run(ganfw_backend *be, ganfw_op *op) {
  return ganfw_op_dispatch(cpu_ops, be, op);
}

static const ganfw_backend_vt cpu_vt = {
    .name = "cpu",
    .raw_alloc = ganfw_cpu_raw_alloc,
    .raw_free = ganfw_cpu_raw_free,
    .capacity = ganfw_cpu_capacity,
    .copy_h2d = ganfw_cpu_copy_h2d,
    .copy_d2h = ganfw_cpu_copy_d2h,
    .copy_d2d = ganfw_cpu_copy_d2d,
    .synchronize = ganfw_cpu_synchronize,
    .set_threads = ganfw_cpu_set_threads,
    .supports = cpu_supports,
    .workspace = cpu_workspace,
    .run = cpu_run,
    .algorithm = cpu_algorithm,
};

static ganfw_backend cpu_backend = {.vt = &cpu_vt, .impl = 0};

ganfw_backend *ganfw_cpu_backend(void) {
  return &cpu_backend;
}
