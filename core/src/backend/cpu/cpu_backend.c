/* The CPU backend: the reference implementation of every op, OpenBLAS for GEMM, OpenMP
 * threads from device.threads. This file fills the table and says which 16-bit groups run
 * natively; each kernel lives in its own file beside it. */
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
 * dot products where the CPU has them (gemm_bf16.c), so that amp keeps its memory and runs
 * at full batch (the layers' converting path, core/src/nn/layer_dtype.c, goes in chunks).
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

uint32_t ganfw_cpu_lp_ops(ganfw_backend *be, int32_t dtype) {
  (void)be;
  pthread_once(&lp_once, read_lp_env);
  if (atomic_load_explicit(&lp_off, memory_order_relaxed) ||
      (dtype != GANFW_DTYPE_F16 && dtype != GANFW_DTYPE_BF16))
    return 0;
  return CPU_LP_GROUPS;
}

const char *ganfw_cpu_lp_describe(int32_t dtype) {
  static _Thread_local char line[256];
  const char *name = dtype == GANFW_DTYPE_BF16 ? "bf16" : "f16";
  if (!ganfw_cpu_lp_ops(NULL, dtype)) {
    snprintf(line, sizeof line,
             "%s on the CPU: every layer converts its 16-bit tensors to f32 in chunks "
             "(GANFW_CPU_LP=0)",
             name);
    return line;
  }
  const int dot = dtype == GANFW_DTYPE_BF16 && ganfw_cpu_have_bf16_dot();
  snprintf(line, sizeof line,
           "%s on the CPU: conv, conv-transpose, BatchNorm and activations read and write %s "
           "(%s conversions inside the kernels, %s SIMD); convolutions multiply on %s, sums in "
           "f32; other layers convert",
           name, name,
           dtype == GANFW_DTYPE_BF16 ? "shift"
           : ganfw_cpu_use_f16c()    ? "F16C"
                                     : "portable scalar",
           ganfw_cpu_isa_name(ganfw_cpu_isa_level()),
           dot ? "bf16 dot products (AVX-512 BF16)" : "f32 GEMMs");
  return line;
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
    .gemm = ganfw_cpu_gemm,
    .conv2d_workspace = ganfw_cpu_conv2d_workspace,
    .conv2d_forward = ganfw_cpu_conv2d_forward,
    .conv2d_backward = ganfw_cpu_conv2d_backward,
    .convt2d_workspace = ganfw_cpu_convt2d_workspace,
    .convt2d_forward = ganfw_cpu_convt2d_forward,
    .convt2d_backward = ganfw_cpu_convt2d_backward,
    .linear_forward = ganfw_cpu_linear_forward,
    .linear_backward = ganfw_cpu_linear_backward,
    .batchnorm2d_forward_train = ganfw_cpu_batchnorm2d_forward_train,
    .batchnorm2d_forward_eval = ganfw_cpu_batchnorm2d_forward_eval,
    .batchnorm2d_backward = ganfw_cpu_batchnorm2d_backward,
    .batchnorm2d_backward_in_place = ganfw_cpu_batchnorm2d_backward_in_place,
    .act_forward = ganfw_cpu_act_forward,
    .act_backward = ganfw_cpu_act_backward,
    .maxpool2d_forward = ganfw_cpu_maxpool2d_forward,
    .maxpool2d_backward = ganfw_cpu_maxpool2d_backward,
    .avgpool2d_forward = ganfw_cpu_avgpool2d_forward,
    .avgpool2d_backward = ganfw_cpu_avgpool2d_backward,
    .dropout_forward = ganfw_cpu_dropout_forward,
    .dropout_backward = ganfw_cpu_dropout_backward,
    .bce_logits_forward = ganfw_cpu_bce_logits_forward,
    .bce_logits_backward = ganfw_cpu_bce_logits_backward,
    .softmax_xent_forward = ganfw_cpu_softmax_xent_forward,
    .softmax_xent_backward = ganfw_cpu_softmax_xent_backward,
    .fill = ganfw_cpu_fill,
    .scale = ganfw_cpu_scale,
    .add_scalar = ganfw_cpu_add_scalar,
    .add = ganfw_cpu_add,
    .axpy = ganfw_cpu_axpy,
    .mul = ganfw_cpu_mul,
    .addcmul = ganfw_cpu_addcmul,
    .addcdiv = ganfw_cpu_addcdiv,
    .sqrt = ganfw_cpu_sqrt,
    .lerp = ganfw_cpu_lerp,
    .maximum = ganfw_cpu_maximum,
    .sum = ganfw_cpu_sum,
    .sumsq = ganfw_cpu_sumsq,
    .nonfinite = ganfw_cpu_nonfinite,
    .f32_to_f16 = ganfw_cpu_f32_to_f16,
    .f16_to_f32 = ganfw_cpu_f16_to_f32,
    .f32_to_bf16 = ganfw_cpu_f32_to_bf16,
    .bf16_to_f32 = ganfw_cpu_bf16_to_f32,
    .rng_uniform = ganfw_cpu_rng_uniform,
    .rng_normal = ganfw_cpu_rng_normal,
    .upsample2d_forward = ganfw_cpu_upsample2d_forward,
    .upsample2d_backward = ganfw_cpu_upsample2d_backward,
    .groupnorm_forward = ganfw_cpu_groupnorm_forward,
    .groupnorm_backward = ganfw_cpu_groupnorm_backward,
    .embedding_forward = ganfw_cpu_embedding_forward,
    .embedding_backward = ganfw_cpu_embedding_backward,
    .transpose01 = ganfw_cpu_transpose01,
    .unary = ganfw_cpu_unary,
    .binary = ganfw_cpu_binary,
    .reduce_sum = ganfw_cpu_reduce_sum,
    .channel_affine = ganfw_cpu_channel_affine,
    .lp_ops = ganfw_cpu_lp_ops,
    .conv2d_workspace_lp = ganfw_cpu_conv2d_workspace_lp,
    .conv2d_forward_lp = ganfw_cpu_conv2d_forward_lp,
    .conv2d_backward_lp = ganfw_cpu_conv2d_backward_lp,
    .convt2d_workspace_lp = ganfw_cpu_convt2d_workspace_lp,
    .convt2d_forward_lp = ganfw_cpu_convt2d_forward_lp,
    .convt2d_backward_lp = ganfw_cpu_convt2d_backward_lp,
    .batchnorm2d_forward_train_lp = ganfw_cpu_batchnorm2d_forward_train_lp,
    .batchnorm2d_forward_eval_lp = ganfw_cpu_batchnorm2d_forward_eval_lp,
    .batchnorm2d_backward_lp = ganfw_cpu_batchnorm2d_backward_lp,
    .act_forward_lp = ganfw_cpu_act_forward_lp,
    .act_backward_lp = ganfw_cpu_act_backward_lp,
};

static ganfw_backend cpu_backend = {.vt = &cpu_vt, .impl = 0};

ganfw_backend *ganfw_cpu_backend(void) {
  return &cpu_backend;
}
