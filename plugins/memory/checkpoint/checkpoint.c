/* The gradient-checkpointing memory strategy (ganfw_checkpoint.so): splits each chosen net
 * (L nodes in the order they run) into segments whose inputs alone the tape keeps; backward
 * recomputes each segment (host->net_checkpoint). Keys: segments (K, default 2), nets (the
 * roles it applies to, default every net), boundaries (role -> first nodes of the segments
 * after the first, by index or by name, overriding segments for that net). In a graph net
 * (ABI 1.3) a segment can only start where one tensor crosses (host->net_cut_ok): K equal
 * segments then start at the allowed nodes nearest the equal split. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganfw/ganfw.h>

#define CKPT_MAX_STARTS 4096 /* more explicit boundaries than any net has layers */
#define CKPT_MAX_NETS   64

typedef struct ckpt {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  const ganfw_cfg *boundaries; /* the `boundaries` map, or NULL */
  int64_t segments;
  /* `nets`: the roles to checkpoint as written (borrowed from the config), each marked once
   * the core hands a net of that role over; none: every net */
  const char *nets[CKPT_MAX_NETS];
  int32_t seen[CKPT_MAX_NETS];
  int32_t n_nets;
  int32_t checked;     /* step_end checked that every named role exists */
  const char **bounds; /* the current net's explicit starts as written (an index or a node
                          name, borrowed from the config), or NULL */
  int32_t n_bounds;
} ckpt;

static void ckpt_destroy(void *self) {
  ckpt *c = self;
  if (!c) return;
  free((void *)c->bounds);
  free(c);
}

/* `nets`: a list of role names (the trainer's: generator, discriminator, classifier for the
 * built-in ones; encoder, decoder, student, ... for a trainer plugin); absent: every net. */
static ganfw_status read_nets(ckpt *c, const ganfw_cfg *cfg) {
  const ganfw_host *h = c->host;
  int64_t n = h->cfg_list_len(cfg, "nets");
  if (n < 0) return GANFW_ERR_CONFIG;
  if (n == 0 && h->cfg_child(cfg, "nets"))
    return h->error(c->ctx, GANFW_ERR_CONFIG,
                    "checkpoint: nets is empty; name the nets to checkpoint by role (generator, "
                    "discriminator, classifier, or a trainer plugin's: encoder, ...) or leave the "
                    "key out for every net");
  if (n > CKPT_MAX_NETS)
    return h->error(c->ctx, GANFW_ERR_CONFIG, "checkpoint: nets names %lld nets; at most %d",
                    (long long)n, CKPT_MAX_NETS);
  for (int64_t i = 0; i < n; i++) {
    const char *name = NULL;
    ganfw_status st = h->cfg_string(h->cfg_list_at(cfg, "nets", i), NULL, NULL, &name);
    if (st != GANFW_OK) return st;
    if (!name || !*name)
      return h->error(c->ctx, GANFW_ERR_CONFIG,
                      "checkpoint: nets[%lld] is empty; give a net's role (generator, "
                      "discriminator, classifier, or a trainer plugin's)",
                      (long long)i);
    c->nets[c->n_nets++] = name;
  }
  return GANFW_OK;
}

/* Whether the net of `role` is checkpointed (marking it seen). */
static int selected(ckpt *c, const char *role) {
  if (c->n_nets == 0) return 1;
  int hit = 0;
  for (int32_t i = 0; i < c->n_nets; i++)
    if (strcmp(c->nets[i], role) == 0) hit = c->seen[i] = 1;
  return hit;
}

/* `boundaries.<role>` of the net handed over now: node indices >= 1 or node names, checked
 * against the net by bound_index. Loaded into c->bounds (NULL: none given). */
static ganfw_status read_boundaries(ckpt *c, const char *role, int sel) {
  const ganfw_host *h = c->host;
  free((void *)c->bounds);
  c->bounds = NULL;
  c->n_bounds = 0;
  if (!c->boundaries || !h->cfg_child(c->boundaries, role)) return GANFW_OK;
  const ganfw_cfg *b = c->boundaries;
  int64_t n = h->cfg_list_len(b, role);
  if (n < 0) return GANFW_ERR_CONFIG;
  if (n == 0)
    return h->error(c->ctx, GANFW_ERR_CONFIG,
                    "checkpoint: boundaries.%s is empty; give the first layer of each segment "
                    "after the first (e.g. [3, 6] or [layer2.0.conv1]), or leave the %s out",
                    role, role);
  if (n > CKPT_MAX_STARTS)
    return h->error(c->ctx, GANFW_ERR_CONFIG,
                    "checkpoint: boundaries.%s has %lld entries; at most %d", role, (long long)n,
                    CKPT_MAX_STARTS);
  if (!sel)
    return h->error(c->ctx, GANFW_ERR_CONFIG,
                    "checkpoint: boundaries.%s is set but nets does not name the %s; add it to "
                    "nets or remove boundaries.%s",
                    role, role, role);
  c->bounds = calloc((size_t)n, sizeof *c->bounds);
  if (!c->bounds) return h->error(c->ctx, GANFW_ERR_OOM, "checkpoint: out of host memory");
  c->n_bounds = (int32_t)n;
  for (int64_t i = 0; i < n; i++) {
    ganfw_status st = h->cfg_string(h->cfg_list_at(b, role, i), NULL, NULL, &c->bounds[i]);
    if (st != GANFW_OK) return st;
    if (!c->bounds[i] || !*c->bounds[i])
      return h->error(c->ctx, GANFW_ERR_CONFIG,
                      "checkpoint: boundaries.%s[%lld] is empty; give a layer index or a "
                      "layer name",
                      role, (long long)i);
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
  if (st == GANFW_OK) c->boundaries = host->cfg_child(cfg, "boundaries");
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

/* 1 when a segment of `net` may start at node `start` (every node of a straight net, and
 * of any net on a core without net_cut_ok). */
static int32_t cut_ok(const ganfw_host *h, ganfw_net *net, int32_t start) {
  return !GANFW_HOST_HAS(h, net_cut_ok) || !h->net_cut_ok || h->net_cut_ok(net, start);
}

/* K segments of L nodes: segment k (k = 1..K-1) starts at the allowed node nearest
 * ceil(k*L/K) (the lower one on a tie) after the previous start. In a straight net every
 * node is allowed: the segments differ by at most one layer, the longer ones first. Returns
 * the number of starts found (fewer than K-1 when the net has fewer allowed cuts). */
static int32_t equal_starts(const ganfw_host *h, ganfw_net *net, int32_t layers, int32_t k_segments,
                            int32_t *starts) {
  int32_t n = 0;
  for (int32_t k = 1; k < k_segments; k++) {
    const int32_t want = (int32_t)(((int64_t)k * layers + k_segments - 1) / k_segments);
    const int32_t lo = n > 0 ? starts[n - 1] + 1 : 1;
    int32_t best = -1;
    for (int32_t d = 0; best < 0 && (want - d >= lo || want + d < layers); d++) {
      if (want - d >= lo && want - d < layers && cut_ok(h, net, want - d))
        best = want - d;
      else if (want + d >= lo && want + d < layers && cut_ok(h, net, want + d))
        best = want + d;
    }
    if (best >= 0) starts[n++] = best;
  }
  return n;
}

/* Boundary i of the net of `role` as a node index: a number, or a name the net has. */
static ganfw_status bound_index(ckpt *c, const char *role, int32_t i, ganfw_net *net,
                                int32_t layers, int32_t *out) {
  const ganfw_host *h = c->host;
  const char *v = c->bounds[i];
  char *end = NULL;
  long long idx = strtoll(v, &end, 10);
  if (end && *end == 0) {
    if (idx < 1 || idx > layers - 1)
      return h->error(c->ctx, GANFW_ERR_CONFIG,
                      "checkpoint: boundaries.%s[%d] is %lld but the %s has %d layers (0..%d); "
                      "a segment must start at 1..%d",
                      role, (int)i, idx, role, (int)layers, (int)(layers - 1), (int)(layers - 1));
    *out = (int32_t)idx;
    return GANFW_OK;
  }
  int32_t k =
      GANFW_HOST_HAS(h, net_layer_index) && h->net_layer_index ? h->net_layer_index(net, v) : -1;
  if (k < 1)
    return h->error(c->ctx, GANFW_ERR_CONFIG,
                    "checkpoint: boundaries.%s[%d] is '%s', %s; give a layer index (1..%d) or "
                    "the name of a layer after the first",
                    role, (int)i, v,
                    k == 0 ? "the first layer, which always begins the first segment"
                           : "which names no layer of the net",
                    (int)(layers - 1));
  *out = k;
  return GANFW_OK;
}

static ganfw_status ckpt_configure_net(void *self, const char *role, ganfw_net *net) {
  ckpt *c = self;
  const ganfw_host *h = c->host;
  if (!role) return GANFW_OK;
  const int sel = selected(c, role);
  ganfw_status st = read_boundaries(c, role, sel);
  if (st != GANFW_OK || !sel) return st;
  const int32_t layers = h->net_layer_count(net);
  int32_t n = c->bounds ? c->n_bounds : (int32_t)c->segments - 1;
  if (!c->bounds && c->segments > layers)
    return h->error(c->ctx, GANFW_ERR_CONFIG,
                    "checkpoint: segments is %lld but the %s has only %d layers; use at most "
                    "%d, or leave the %s out of nets",
                    (long long)c->segments, role, (int)layers, (int)layers, role);
  if (n == 0) {
    h->log(c->ctx, GANFW_LOG_INFO, "checkpoint: %s: 1 segment, not checkpointed", role);
    return h->net_checkpoint(net, NULL, 0);
  }
  int32_t *starts = malloc((size_t)n * sizeof *starts);
  if (!starts) return h->error(c->ctx, GANFW_ERR_OOM, "checkpoint: out of host memory");
  if (c->bounds) {
    for (int32_t i = 0; i < n && st == GANFW_OK; i++) {
      st = bound_index(c, role, i, net, layers, &starts[i]);
      if (st == GANFW_OK && i > 0 && starts[i] <= starts[i - 1])
        st = h->error(c->ctx, GANFW_ERR_CONFIG,
                      "checkpoint: boundaries.%s[%d] is %s (layer %d), not after "
                      "boundaries.%s[%d] (layer %d); the segment starts must increase strictly, "
                      "in the order the layers run",
                      role, (int)i, c->bounds[i], (int)starts[i], role, (int)i - 1,
                      (int)starts[i - 1]);
    }
  } else {
    int32_t found = equal_starts(h, net, layers, (int32_t)c->segments, starts);
    if (found < n)
      h->log(c->ctx, GANFW_LOG_WARN,
             "checkpoint: %s: only %d places where one tensor crosses; %d segments instead of "
             "%lld",
             role, (int)found, (int)found + 1, (long long)c->segments);
    n = found;
  }
  int32_t refused = 0; /* the core refused the starts (a cut where two tensors cross) */
  if (st == GANFW_OK) refused = (st = h->net_checkpoint(net, starts, n)) != GANFW_OK;
  if (st == GANFW_OK) {
    char layout[256];
    size_t used = 0;
    for (int32_t i = 0; i < n && used + 16 < sizeof layout; i++)
      used += (size_t)snprintf(layout + used, sizeof layout - used, "%s%d", i ? ", " : "",
                               (int)starts[i]);
    h->log(c->ctx, GANFW_LOG_INFO, "checkpoint: %s: %d segments of %d layers, starting at 0%s%s",
           role, (int)(n + 1), (int)layers, n ? ", " : "", layout);
  } else if (refused && c->bounds && GANFW_HOST_HAS(h, error_message)) {
    char why[768];
    snprintf(why, sizeof why, "%s", h->error_message());
    st = h->error(c->ctx, st, "checkpoint: boundaries.%s: %s", role, why);
  }
  free(starts);
  return st;
}

/* After the last net was handed over: a role in `nets` that none had is a typo or a net of
 * another trainer. */
static ganfw_status ckpt_configure_done(void *self) {
  ckpt *c = self;
  for (int32_t i = 0; i < c->n_nets; i++)
    if (!c->seen[i])
      return c->host->error(c->ctx, GANFW_ERR_CONFIG,
                            "checkpoint: nets[%d] is '%s', and no net of this run has that role "
                            "(the trainer's roles: generator, discriminator, classifier for the "
                            "built-in ones; docs/TRAINERS.md lists a plugin's)",
                            (int)i, c->nets[i]);
  return GANFW_OK;
}

static const ganfw_memory_vt ckpt_vt = {
    .struct_size = sizeof(ganfw_memory_vt),
    .kind = GANFW_VT_TAG_MEMORY,
    .create = ckpt_create,
    .destroy = ckpt_destroy,
    .configure = ckpt_configure,
    .configure_net = ckpt_configure_net,
    .configure_done = ckpt_configure_done,
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
