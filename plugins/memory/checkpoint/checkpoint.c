/* The gradient-checkpointing memory strategy (ganfw_checkpoint.so): splits each chosen net
 * (a sequence of L layers) into segments whose inputs alone the tape keeps; backward
 * recomputes each segment (host->net_checkpoint). Keys: segments (K, default 2), nets (the
 * roles it applies to, default every net), boundaries (role -> first layers of the
 * segments after the first, overriding segments for that net). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganfw/ganfw.h>

#define CKPT_MAX_STARTS 4096 /* more explicit boundaries than any net has layers */

/* The roles a net can have, in the order the core hands them to configure_net. */
enum { ROLE_GENERATOR, ROLE_DISCRIMINATOR, ROLE_CLASSIFIER, ROLE_COUNT };
static const char *const role_names[ROLE_COUNT] = {"generator", "discriminator", "classifier"};

typedef struct ckpt {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  int64_t segments;
  int32_t selected[ROLE_COUNT]; /* 1: checkpoint the net of this role */
  int32_t *bounds[ROLE_COUNT];  /* explicit starts, or NULL */
  int32_t n_bounds[ROLE_COUNT];
} ckpt;

static int role_index(const char *name) {
  for (int r = 0; r < ROLE_COUNT; r++)
    if (strcmp(name, role_names[r]) == 0) return r;
  return -1;
}

static void ckpt_destroy(void *self) {
  ckpt *c = self;
  if (!c) return;
  for (int r = 0; r < ROLE_COUNT; r++) free(c->bounds[r]);
  free(c);
}

/* `nets`: a list of role names; absent: every net. */
static ganfw_status read_nets(ckpt *c, const ganfw_cfg *cfg) {
  const ganfw_host *h = c->host;
  int64_t n = h->cfg_list_len(cfg, "nets");
  if (n < 0) return GANFW_ERR_CONFIG;
  if (n == 0 && h->cfg_child(cfg, "nets"))
    return h->error(c->ctx, GANFW_ERR_CONFIG,
                    "checkpoint: nets is empty; name the nets to checkpoint (generator, "
                    "discriminator, classifier) or leave the key out for every net");
  for (int r = 0; r < ROLE_COUNT; r++) c->selected[r] = n == 0;
  for (int64_t i = 0; i < n; i++) {
    const char *name = NULL;
    ganfw_status st = h->cfg_string(h->cfg_list_at(cfg, "nets", i), NULL, NULL, &name);
    if (st != GANFW_OK) return st;
    int r = name ? role_index(name) : -1;
    if (r < 0)
      return h->error(c->ctx, GANFW_ERR_CONFIG,
                      "checkpoint: nets[%lld] is '%s'; a net is one of generator, discriminator, "
                      "classifier",
                      (long long)i, name ? name : "null");
    c->selected[r] = 1;
  }
  return GANFW_OK;
}

/* `boundaries.<role>`: strictly increasing layer indices >= 1. */
static ganfw_status read_boundaries(ckpt *c, const ganfw_cfg *cfg) {
  const ganfw_host *h = c->host;
  const ganfw_cfg *b = h->cfg_child(cfg, "boundaries");
  if (!b) return GANFW_OK;
  for (int r = 0; r < ROLE_COUNT; r++) {
    const char *role = role_names[r];
    int64_t n = h->cfg_list_len(b, role);
    if (n < 0) return GANFW_ERR_CONFIG;
    if (n == 0) {
      if (h->cfg_child(b, role))
        return h->error(c->ctx, GANFW_ERR_CONFIG,
                        "checkpoint: boundaries.%s is empty; give the first layer of each "
                        "segment after the first (e.g. [3, 6]), or leave the %s out",
                        role, role);
      continue;
    }
    if (n > CKPT_MAX_STARTS)
      return h->error(c->ctx, GANFW_ERR_CONFIG,
                      "checkpoint: boundaries.%s has %lld entries; at most %d", role, (long long)n,
                      CKPT_MAX_STARTS);
    if (!c->selected[r])
      return h->error(c->ctx, GANFW_ERR_CONFIG,
                      "checkpoint: boundaries.%s is set but nets does not name the %s; add it "
                      "to nets or remove boundaries.%s",
                      role, role, role);
    c->bounds[r] = malloc((size_t)n * sizeof *c->bounds[r]);
    if (!c->bounds[r]) return h->error(c->ctx, GANFW_ERR_OOM, "checkpoint: out of host memory");
    c->n_bounds[r] = (int32_t)n;
    for (int64_t i = 0; i < n; i++) {
      int64_t v = 0;
      ganfw_status st = h->cfg_int(h->cfg_list_at(b, role, i), NULL, 0, &v);
      if (st != GANFW_OK) return st;
      int64_t lo = i == 0 ? 1 : (int64_t)c->bounds[r][i - 1] + 1;
      if (v < lo || v > INT32_MAX)
        return h->error(c->ctx, GANFW_ERR_CONFIG,
                        "checkpoint: boundaries.%s[%lld] is %lld; the layer indices must "
                        "increase strictly and start at 1 or more (layer 0 always begins the "
                        "first segment)",
                        role, (long long)i, (long long)v);
      c->bounds[r][i] = (int32_t)v;
    }
  }
  return GANFW_OK;
}

static ganfw_status ckpt_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                                void **self) {
  *self = NULL;
  if (!GANFW_HOST_HAS(host, net_checkpoint) || !host->net_checkpoint || !host->net_layer_count)
    return host->error(ctx, GANFW_ERR_PLUGIN,
                       "checkpoint: this core's host table has no net_checkpoint; use a ganfw "
                       "core of ABI %d.%d or later",
                       GANFW_ABI_MAJOR, GANFW_ABI_MINOR);
  ckpt *c = calloc(1, sizeof *c);
  if (!c) return host->error(ctx, GANFW_ERR_OOM, "checkpoint: out of host memory");
  c->host = host;
  c->ctx = ctx;
  ganfw_status st = host->cfg_int(cfg, "segments", 2, &c->segments);
  if (st == GANFW_OK && (c->segments < 1 || c->segments > CKPT_MAX_STARTS))
    st = host->error(ctx, GANFW_ERR_CONFIG,
                     "checkpoint: segments is %lld; it must be between 1 (no checkpointing) and "
                     "the number of layers of the net",
                     (long long)c->segments);
  if (st == GANFW_OK) st = read_nets(c, cfg);
  if (st == GANFW_OK) st = read_boundaries(c, cfg);
  if (st != GANFW_OK) {
    ckpt_destroy(c);
    return st;
  }
  *self = c;
  return GANFW_OK;
}

static ganfw_status ckpt_configure(void *self, ganfw_exec_options *opts) {
  return GANFW_OK; /* nothing global: the segments are per net */
}

/* K segments of L layers: segment k (k = 1..K-1) starts at ceil(k*L/K). The segments
 * differ by at most one layer, the longer ones first, and a boundary never falls on layer
 * 0 or past the last layer when K <= L. */
static void equal_starts(int32_t layers, int32_t k_segments, int32_t *starts) {
  for (int32_t k = 1; k < k_segments; k++)
    starts[k - 1] = (int32_t)(((int64_t)k * layers + k_segments - 1) / k_segments);
}

static ganfw_status ckpt_configure_net(void *self, const char *role, ganfw_net *net) {
  ckpt *c = self;
  const ganfw_host *h = c->host;
  int r = role ? role_index(role) : -1;
  if (r < 0 || !c->selected[r]) return GANFW_OK;
  const int32_t layers = h->net_layer_count(net);
  int32_t *starts = c->bounds[r];
  int32_t n = c->n_bounds[r];
  int32_t *owned = NULL;
  if (starts) {
    if (starts[n - 1] > layers - 1)
      return h->error(c->ctx, GANFW_ERR_CONFIG,
                      "checkpoint: boundaries.%s has layer %d but the %s has %d layers "
                      "(0..%d); a segment must start at 1..%d",
                      role, (int)starts[n - 1], role, (int)layers, (int)(layers - 1),
                      (int)(layers - 1));
  } else {
    if (c->segments > layers)
      return h->error(c->ctx, GANFW_ERR_CONFIG,
                      "checkpoint: segments is %lld but the %s has only %d layers; use at most "
                      "%d, or leave the %s out of nets",
                      (long long)c->segments, role, (int)layers, (int)layers, role);
    n = (int32_t)c->segments - 1;
    if (n == 0) {
      h->log(c->ctx, GANFW_LOG_INFO, "checkpoint: %s: 1 segment, not checkpointed", role);
      return h->net_checkpoint(net, NULL, 0);
    }
    owned = malloc((size_t)n * sizeof *owned);
    if (!owned) return h->error(c->ctx, GANFW_ERR_OOM, "checkpoint: out of host memory");
    equal_starts(layers, (int32_t)c->segments, owned);
    starts = owned;
  }
  ganfw_status st = h->net_checkpoint(net, starts, n);
  if (st == GANFW_OK) {
    char layout[256];
    size_t used = 0;
    for (int32_t i = 0; i < n && used + 16 < sizeof layout; i++)
      used += (size_t)snprintf(layout + used, sizeof layout - used, "%s%d", i ? ", " : "",
                               (int)starts[i]);
    h->log(c->ctx, GANFW_LOG_INFO, "checkpoint: %s: %d segments of %d layers, starting at 0, %s",
           role, (int)(n + 1), (int)layers, layout);
  }
  free(owned);
  return st;
}

static const ganfw_memory_vt ckpt_vt = {
    .struct_size = sizeof(ganfw_memory_vt),
    .kind = GANFW_VT_TAG_MEMORY,
    .create = ckpt_create,
    .destroy = ckpt_destroy,
    .configure = ckpt_configure,
    .configure_net = ckpt_configure_net,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      .abi_major = GANFW_ABI_MAJOR,
      .abi_minor = GANFW_ABI_MINOR,
      .struct_size = sizeof(ganfw_plugin_desc),
      .kind = GANFW_PLUGIN_MEMORY,
      .name = "checkpoint",
      .version = "1.0.0",
      .description = "gradient checkpointing: keep segment inputs, recompute in backward",
      .vtable = &ckpt_vt,
  };
  return &desc;
}
