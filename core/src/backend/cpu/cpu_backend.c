/* The CPU backend: the reference implementation of every op, OpenBLAS for GEMM, OpenMP
 * threads from device.threads. This file only fills the table; each kernel lives in its
 * own file beside it. */
#include "backend/cpu/cpu_ops.h"

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
};

static ganfw_backend cpu_backend = {.vt = &cpu_vt, .impl = 0};

ganfw_backend *ganfw_cpu_backend(void) {
  return &cpu_backend;
}
