/* The layout facts of the public ABI structs, as an X-macro list shared by check_c.c and
 * check_cpp.cpp: each compiler computes every entry, and the C++ side checks that both
 * languages see the same sizes and offsets. */
#ifndef GANFW_TEST_HEADERS_LAYOUT_H
#define GANFW_TEST_HEADERS_LAYOUT_H

#include <stddef.h>

#include "ganfw/ganfw.h"

#define GANFW_LAYOUT(X)                                                                            \
  X(sizeof(ganfw_plugin_desc))                                                                     \
  X(offsetof(ganfw_plugin_desc, kind))                                                             \
  X(offsetof(ganfw_plugin_desc, name))                                                             \
  X(offsetof(ganfw_plugin_desc, version))                                                          \
  X(offsetof(ganfw_plugin_desc, description))                                                      \
  X(offsetof(ganfw_plugin_desc, vtable))                                                           \
  X(sizeof(ganfw_host))                                                                            \
  X(offsetof(ganfw_host, error))                                                                   \
  X(offsetof(ganfw_host, cfg_child))                                                               \
  X(offsetof(ganfw_host, tensor_create))                                                           \
  X(offsetof(ganfw_host, foreach_fill))                                                            \
  X(offsetof(ganfw_host, foreach_nonfinite))                                                       \
  X(offsetof(ganfw_host, rng_uniform))                                                             \
  X(sizeof(ganfw_param_info))                                                                      \
  X(offsetof(ganfw_param_info, value))                                                             \
  X(sizeof(ganfw_tensor))                                                                          \
  X(offsetof(ganfw_tensor, shape))                                                                 \
  X(offsetof(ganfw_tensor, numel))                                                                 \
  X(offsetof(ganfw_tensor, ndim))                                                                  \
  X(offsetof(ganfw_tensor, name))                                                                  \
  X(offsetof(ganfw_tensor, impl))                                                                  \
  X(sizeof(ganfw_model_vt))                                                                        \
  X(offsetof(ganfw_model_vt, family))                                                              \
  X(offsetof(ganfw_model_vt, create))                                                              \
  X(offsetof(ganfw_model_vt, latent_dim))                                                          \
  X(sizeof(ganfw_data_info))                                                                       \
  X(sizeof(ganfw_optim_vt))                                                                        \
  X(offsetof(ganfw_optim_vt, create))                                                              \
  X(offsetof(ganfw_optim_vt, step))                                                                \
  X(offsetof(ganfw_optim_vt, set_step))                                                            \
  X(sizeof(ganfw_param))                                                                           \
  X(sizeof(ganfw_memory_vt))                                                                       \
  X(offsetof(ganfw_memory_vt, configure))                                                          \
  X(offsetof(ganfw_memory_vt, after_backward))                                                     \
  X(sizeof(ganfw_exec_options))                                                                    \
  X(offsetof(ganfw_exec_options, micro_batches))                                                   \
  X(offsetof(ganfw_exec_options, batch_size))                                                      \
  X(offsetof(ganfw_exec_options, shard_optimizer))                                                 \
  X(offsetof(ganfw_host, error_message))                                                           \
  X(offsetof(ganfw_host, get_extension))                                                           \
  X(offsetof(ganfw_model_vt, kind))                                                                \
  X(offsetof(ganfw_model_vt, get_extension))                                                       \
  X(offsetof(ganfw_optim_vt, kind))                                                                \
  X(offsetof(ganfw_optim_vt, get_extension))                                                       \
  X(offsetof(ganfw_memory_vt, kind))                                                               \
  X(offsetof(ganfw_memory_vt, get_extension))                                                      \
  X(sizeof(ganfw_memory_stats))                                                                    \
  X(offsetof(ganfw_memory_stats, num_ooms))                                                        \
  X(sizeof(ganfw_config_key))                                                                      \
  X(offsetof(ganfw_config_key, def_floats))                                                        \
  X(sizeof(ganfw_config_keys))                                                                     \
  X(sizeof(ganfw_layer_def))                                                                       \
  X(offsetof(ganfw_layer_def, workspace_bytes))                                                    \
  X(offsetof(ganfw_layer_def, destroy))                                                            \
  X(sizeof(ganfw_layer_call))                                                                      \
  X(offsetof(ganfw_layer_call, name))                                                              \
  X(offsetof(ganfw_host, tensor_add))                                                              \
  X(offsetof(ganfw_host, layer_add_buffer))                                                        \
  X(sizeof(ganfw_objective_vt))                                                                    \
  X(offsetof(ganfw_objective_vt, loss))                                                            \
  X(offsetof(ganfw_objective_vt, get_extension))                                                   \
  X(sizeof(ganfw_layer_plugin_vt))                                                                 \
  X(offsetof(ganfw_layer_plugin_vt, def))                                                          \
  X(offsetof(ganfw_layer_plugin_vt, get_extension))

#endif
