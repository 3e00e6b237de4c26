/* The file of a channel-pruned model (see prune_file.h): nn/prune_channels.c's cut tensors
 * collected into a safetensors writer under their nets' prefixes. */
#include "io/prune_file.h"

#include <stdio.h>

#include "base/error.h"
#include "io/safetensors.h"

typedef struct collect {
  ganfw_st_writer *w;
  const char *net; /* the prefix */
} collect;

static ganfw_status add_tensor(void *user, const ganfw_channel_pruned *t) {
  const collect *c = user;
  char name[512];
  snprintf(name, sizeof name, "%s.%s", c->net, t->name);
  if (t->counter) return ganfw_st_writer_add_raw(c->w, name, "I64", 0, NULL, t->counter);
  return ganfw_st_writer_add(c->w, name, GANFW_DTYPE_F32, t->ndim, t->shape, t->data);
}

ganfw_status ganfw_channel_prune_write(const ganfw_channel_prune_plan *const *p, int32_t n,
                                       const char *path) {
  ganfw_st_writer *w = ganfw_st_writer_create();
  if (!w) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  ganfw_status st = ganfw_st_writer_metadata(w, "format", "pt");
  for (int32_t k = 0; k < n && st == GANFW_OK; k++) {
    collect c = {.w = w, .net = ganfw_net_name(ganfw_channel_prune_plan_net(p[k]))};
    st = ganfw_channel_prune_each(p[k], add_tensor, &c);
  }
  if (st == GANFW_OK) st = ganfw_st_writer_write(w, path);
  ganfw_st_writer_destroy(w);
  return st;
}
