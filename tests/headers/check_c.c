/* Built as C11 with -pedantic -Werror by tests/headers.cmake: every public header compiles
 * as ISO C, its fixed layout facts hold, and its macros work. Called from check_cpp.cpp. */
#include "layout.h"

#include <stdio.h>
#include <string.h>

/* The fields every version of the ABI keeps in place. */
_Static_assert(offsetof(ganfw_plugin_desc, abi_major) == 0, "abi_major first");
_Static_assert(offsetof(ganfw_plugin_desc, abi_minor) == 4, "abi_minor second");
_Static_assert(offsetof(ganfw_plugin_desc, struct_size) == 8, "struct_size third");
_Static_assert(offsetof(ganfw_host, abi_major) == 0, "host abi_major first");
_Static_assert(offsetof(ganfw_host, struct_size) == 8, "host struct_size third");
_Static_assert(offsetof(ganfw_model_vt, struct_size) == 0, "vtables start with struct_size");
_Static_assert(offsetof(ganfw_optim_vt, struct_size) == 0, "vtables start with struct_size");
_Static_assert(offsetof(ganfw_memory_vt, struct_size) == 0, "vtables start with struct_size");
_Static_assert(offsetof(ganfw_objective_vt, struct_size) == 0 &&
                   offsetof(ganfw_objective_vt, kind) == 4,
               "the objective vtable starts with struct_size and its kind tag");
/* The kind tag sits where 1.0 had the spare field (optimizer, memory) or after the 1.0
 * members (model, whose second field is family). */
_Static_assert(offsetof(ganfw_optim_vt, kind) == 4 && offsetof(ganfw_memory_vt, kind) == 4,
               "kind tag in the spare field");
_Static_assert(offsetof(ganfw_model_vt, kind) ==
                   offsetof(ganfw_model_vt, latent_dim) + sizeof(void *),
               "model kind tag after the 1.0 members");
_Static_assert(sizeof(ganfw_param) == 3 * sizeof(void *), "ganfw_param is frozen");
_Static_assert(offsetof(ganfw_exec_options, struct_size) == 0, "options start with struct_size");
_Static_assert(offsetof(ganfw_data_info, struct_size) == 0, "data info starts with struct_size");
_Static_assert(sizeof(ganfw_status) == 4, "ganfw_status is int32_t");
_Static_assert(offsetof(ganfw_layer_plugin_vt, struct_size) == 0 &&
                   offsetof(ganfw_layer_plugin_vt, kind) == 4,
               "the layer plugin vtable starts with struct_size and its kind tag");
_Static_assert(GANFW_PLUGIN_KIND_COUNT == 6 && GANFW_DTYPE_COUNT == 5 && GANFW_MEM_COUNT == 8,
               "enum counts");

#define LAYOUT_VALUE(e) (e),
#define LAYOUT_NAME(e)  #e,
static const size_t layout_c[] = {GANFW_LAYOUT(LAYOUT_VALUE)};
static const char *const layout_names[] = {GANFW_LAYOUT(LAYOUT_NAME)};

size_t ganfw_headers_layout_c(const size_t **values, const char *const **names);
int ganfw_headers_check_c(void);

size_t ganfw_headers_layout_c(const size_t **values, const char *const **names) {
  *values = layout_c;
  *names = layout_names;
  return sizeof layout_c / sizeof layout_c[0];
}

static ganfw_status plugin_error(ganfw_ctx *ctx, ganfw_status code, const char *fmt, ...) {
  (void)ctx;
  (void)fmt;
  return code;
}

/* Runtime checks of the macros; returns the number of failures. */
int ganfw_headers_check_c(void) {
  int failures = 0;
  ganfw_host host;
  memset(&host, 0, sizeof host);
  host.abi_major = GANFW_ABI_MAJOR;
  host.abi_minor = GANFW_ABI_MINOR;
  host.error = plugin_error;
  /* A core whose table ends before rng_normal. */
  host.struct_size = (uint32_t)offsetof(ganfw_host, rng_normal);
  failures += !GANFW_HOST_HAS(&host, foreach_nonfinite);
  failures += GANFW_HOST_HAS(&host, rng_normal);
  host.struct_size = (uint32_t)sizeof host;
  failures += !GANFW_HOST_HAS(&host, rng_uniform);
  failures += host.error(NULL, GANFW_ERR_PLUGIN, "x") != GANFW_ERR_PLUGIN;

  ganfw_plugin_desc d = {GANFW_ABI_MAJOR,
                         GANFW_ABI_MINOR,
                         sizeof(ganfw_plugin_desc),
                         GANFW_PLUGIN_OPTIM,
                         "x",
                         "1.0.0",
                         "header check",
                         NULL};
  failures += d.struct_size != sizeof d || d.kind != GANFW_PLUGIN_OPTIM;
  failures += strcmp(GANFW_PLUGIN_ENTRY_SYMBOL, "ganfw_plugin_entry") != 0;
  failures += strcmp(GANFW_VERSION_STRING, "") == 0;
  ganfw_tensor t;
  memset(&t, 0, sizeof t);
  t.ndim = GANFW_MAX_DIMS;
  failures += (size_t)t.ndim != sizeof t.shape / sizeof t.shape[0];
  if (failures) fprintf(stderr, "C header checks: %d failed\n", failures);
  return failures;
}
