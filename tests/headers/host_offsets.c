/* Built by tests/headers.cmake (C11, -pedantic -Werror): the absolute offset of every entry
 * of the host table, pinned. The table only grows at its end; an entry inserted in the
 * middle (or one that changes type and size) moves the entries after it and fails this
 * build. The numbers are those of LP64 (x86-64, AArch64 Linux); other data models skip the
 * pins. Appending an entry: add its line here and move GANFW_HOST_SIZE. */
#include <stddef.h>
#include <stdint.h>

#include "ganfw/host.h"
#include "ganfw/memory.h"
#include "ganfw/optim.h"

#if UINTPTR_MAX == 0xffffffffffffffffu && SIZE_MAX == 0xffffffffffffffffu

#define PIN(member, offset)                                                                        \
  _Static_assert(offsetof(ganfw_host, member) == (offset), "ganfw_host." #member " moved")

PIN(abi_major, 0);
PIN(abi_minor, 4);
PIN(struct_size, 8);
PIN(reserved0, 12);
PIN(error, 16);
PIN(log, 24);
PIN(cfg_child, 32);
PIN(cfg_int, 40);
PIN(cfg_float, 48);
PIN(cfg_bool, 56);
PIN(cfg_string, 64);
PIN(cfg_bytes, 72);
PIN(cfg_list_len, 80);
PIN(cfg_list_at, 88);
PIN(tensor_create, 96);
PIN(tensor_destroy, 104);
PIN(tensor_from_host, 112);
PIN(tensor_to_host, 120);
PIN(foreach_fill, 128);
PIN(foreach_scale, 136);
PIN(foreach_add_scalar, 144);
PIN(foreach_axpy, 152);
PIN(foreach_mul, 160);
PIN(foreach_addcmul, 168);
PIN(foreach_addcdiv, 176);
PIN(foreach_sqrt, 184);
PIN(foreach_lerp, 192);
PIN(foreach_maximum, 200);
PIN(foreach_copy, 208);
PIN(foreach_sum, 216);
PIN(foreach_norm, 224);
PIN(foreach_nonfinite, 232);
PIN(rng_normal, 240);
PIN(rng_uniform, 248);
PIN(net_create, 256);
PIN(net_destroy, 264);
PIN(net_conv2d, 272);
PIN(net_conv_transpose2d, 280);
PIN(net_linear, 288);
PIN(net_batchnorm2d, 296);
PIN(net_activation, 304);
PIN(net_pool2d, 312);
PIN(net_dropout, 320);
PIN(net_flatten, 328);
PIN(net_reshape, 336);
PIN(net_build, 344);
PIN(net_param_count, 352);
PIN(net_param_info, 360);
PIN(net_layer_count, 368);
PIN(net_checkpoint, 376);
PIN(error_message, 384);
PIN(memory_stats, 392);
PIN(get_extension, 400);
PIN(net_upsample, 408);
PIN(net_global_avg_pool, 416);
PIN(net_groupnorm, 424);
PIN(net_instancenorm2d, 432);
PIN(net_layernorm, 440);
PIN(net_input, 448);
PIN(net_add, 456);
PIN(net_concat, 464);
PIN(net_embedding, 472);
PIN(net_spectral_norm, 480);
PIN(net_layer_index, 488);
PIN(net_cut_ok, 496);
PIN(tensor_add, 504);
PIN(tensor_sub, 512);
PIN(tensor_mul, 520);
PIN(tensor_div, 528);
PIN(tensor_maximum, 536);
PIN(tensor_minimum, 544);
PIN(tensor_abs, 552);
PIN(tensor_sign, 560);
PIN(tensor_exp, 568);
PIN(tensor_log, 576);
PIN(tensor_sqrt, 584);
PIN(tensor_rsqrt, 592);
PIN(tensor_clamp, 600);
PIN(tensor_mul_scalar, 608);
PIN(tensor_add_scalar, 616);
PIN(tensor_pow_scalar, 624);
PIN(tensor_sum, 632);
PIN(tensor_mean, 640);
PIN(tensor_channel_affine, 648);
PIN(net_custom, 656);
PIN(layer_add_param, 664);
PIN(layer_add_buffer, 672);
PIN(tensor_cat, 680); /* ABI 1.7 */
PIN(tensor_narrow, 688);
PIN(tensor_bmm, 696); /* ABI 1.8 */
PIN(tensor_softmax, 704);
PIN(tensor_softmax_backward, 712);
PIN(tensor_permute, 720);
PIN(tensor_reshape, 728);
PIN(tensor_gather, 736);
PIN(tensor_scatter_add, 744);
PIN(net_pixel_shuffle, 752);
PIN(net_node_info, 760); /* ABI 1.10 */
PIN(net_recompute, 768);
PIN(quantize_blockwise, 776);
PIN(dequantize_blockwise, 784);
PIN(quantize_dynamic_map, 792);

/* One past the last entry: a new entry appended moves this (and gets a PIN line above). */
#define GANFW_HOST_SIZE 800
_Static_assert(sizeof(ganfw_host) == GANFW_HOST_SIZE, "ganfw_host grew: pin the new entries");

/* Structs of ABI 1.1 whose layout plugins see. */
_Static_assert(offsetof(ganfw_memory_stats, limit) == 8, "memory_stats.limit");
_Static_assert(offsetof(ganfw_memory_stats, category) == 56, "memory_stats.category");
_Static_assert(offsetof(ganfw_memory_stats, num_ooms) == 56 + 2 * 8 * GANFW_MEM_STATS_CATEGORIES,
               "memory_stats.num_ooms");

/* Structs of ABI 1.3 whose layout plugins see (plugin layers). */
_Static_assert(offsetof(ganfw_layer_def, type) == 8, "layer_def.type");
_Static_assert(offsetof(ganfw_layer_def, infer) == 16, "layer_def.infer");
_Static_assert(offsetof(ganfw_layer_def, backward) == 56, "layer_def.backward");
_Static_assert(offsetof(ganfw_layer_def, backward2) == 72, "layer_def.backward2"); /* ABI 1.9 */
_Static_assert(sizeof(ganfw_layer_def) == 80, "ganfw_layer_def grew: pin the new members");
_Static_assert(offsetof(ganfw_layer_call, ctx) == 32, "layer_call.ctx");
_Static_assert(offsetof(ganfw_layer_call, buffer) == 64, "layer_call.buffer");
_Static_assert(sizeof(ganfw_layer_call) == 72, "ganfw_layer_call grew: pin the new members");

/* Structs of ABI 1.10 whose layout plugins see. */
_Static_assert(offsetof(ganfw_node_info, in) == 8, "node_info.in");
_Static_assert(offsetof(ganfw_node_info, name) == 24, "node_info.name");
_Static_assert(offsetof(ganfw_node_info, flops) == 48, "node_info.flops");
_Static_assert(sizeof(ganfw_node_info) == 56, "ganfw_node_info grew: pin the new members");
/* And the optimizer's step in parts and the
 * executor option of memory strategy step_in_backward. */
_Static_assert(offsetof(ganfw_optim_vt, get_extension) == 56, "optim_vt.get_extension");
_Static_assert(offsetof(ganfw_optim_vt, step_begin) == 64, "optim_vt.step_begin");
_Static_assert(offsetof(ganfw_optim_vt, step_param) == 72, "optim_vt.step_param");
_Static_assert(offsetof(ganfw_optim_vt, step_end) == 80, "optim_vt.step_end");
_Static_assert(sizeof(ganfw_optim_vt) == 88, "ganfw_optim_vt grew: pin the new members");
_Static_assert(offsetof(ganfw_exec_options, ranks) == 28, "exec_options.ranks");
_Static_assert(offsetof(ganfw_exec_options, step_in_backward) == 32,
               "exec_options.step_in_backward");
_Static_assert(sizeof(ganfw_exec_options) == 40, "ganfw_exec_options grew: pin the new members");

#endif

int ganfw_headers_host_offsets_pinned(void);
int ganfw_headers_host_offsets_pinned(void) {
#if UINTPTR_MAX == 0xffffffffffffffffu && SIZE_MAX == 0xffffffffffffffffu
  return 1;
#else
  return 0;
#endif
}
