/* The selective-recompute memory strategy (ganfw_recompute.so): for each chosen net, which
 * node outputs a tape keeps and which backward recomputes, chosen per tensor
 * (host->net_recompute). Keys:
 *   budget  the most activation bytes one forward's tape of a net may hold: the outputs it
 *           keeps, plus the largest stretch backward recomputes at once; the choice with the
 *           fewest recomputed FLOPs under it (a chain by dynamic programming, as Chen et al.,
 *           2016, with per-node costs). Absent: the fewest bytes, whatever the FLOPs.
 *   nets    the roles it applies to (default every net);
 *   drop    role -> the nodes (names or indices) to recompute, overriding the choice.
 * The model (per node: output bytes, whether a tape keeps it, forward FLOPs) comes from
 * host->net_node_info; the bytes a step really holds are what `ganfw plan` measures on the
 * meta backend, which runs the same executor. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ganfw/ganfw.h>

#define RC_MAX_NETS 64
#define RC_UNITS    512 /* the DP's resolution: budget / RC_UNITS bytes */
#define RC_MAX_CAPS 96  /* recomputed-stretch caps tried per net (all of them on small nets) */
#define RC_WORK     4e7 /* about the DP's inner steps per net: fewer caps on large nets */

typedef struct rc {
  const ganfw_host *host;
  ganfw_ctx *ctx;
  const ganfw_cfg *drop;          /* the `drop` map, or NULL */
  int64_t budget;                 /* bytes; 0: the fewest bytes */
  const ganfw_exec_options *opts; /* the session's, final once configure_net runs */
  const char *nets[RC_MAX_NETS];
  int32_t seen[RC_MAX_NETS];
  int32_t n_nets;
} rc;

/* One net's model: n nodes (the last is the net's output, always kept). */
typedef struct rc_model {
  int32_t n;
  double *bytes;        /* [n] output bytes for one forward (rows of the compute dtype) */
  double *flops;        /* [n] forward FLOPs for one forward */
  int32_t *kept;        /* [n] a tape holds the output when the node is not dropped */
  int32_t graph;        /* 1 when some node reads another than the one before it */
  int32_t *first_in;    /* [n] the lowest node a node reads (-1: the net's input) */
  int32_t *last_reader; /* [n] the last node that reads a node's output */
  /* stretch(j, i) for every -1 <= j < i < n, at [(j + 1) * (n + 1) + i] */
  double *sb, *sf, *sr;
} rc_model;

/* The result for one net. */
typedef struct rc_choice {
  uint8_t *drop; /* [n] */
  double peak;   /* the model's bytes: kept outputs + the largest recomputed stretch */
  double flops;  /* recomputed FLOPs per forward */
  int32_t exact; /* 1: optimal under the model (every stretch cap tried, a chain) */
} rc_choice;

static void rc_destroy(void *self) {
  free(self);
}

static ganfw_status read_nets(rc *c, const ganfw_cfg *cfg) {
  const ganfw_host *h = c->host;
  int64_t n = h->cfg_list_len(cfg, "nets");
  if (n < 0) return GANFW_ERR_CONFIG;
  if (n == 0 && h->cfg_child(cfg, "nets"))
    return h->error(c->ctx, GANFW_ERR_CONFIG,
                    "recompute: nets is empty; name the nets by role (generator, discriminator, "
                    "classifier, or a trainer plugin's) or leave the key out for every net");
  if (n > RC_MAX_NETS)
    return h->error(c->ctx, GANFW_ERR_CONFIG, "recompute: nets names %lld nets; at most %d",
                    (long long)n, RC_MAX_NETS);
  for (int64_t i = 0; i < n; i++) {
    const char *name = NULL;
    ganfw_status st = h->cfg_string(h->cfg_list_at(cfg, "nets", i), NULL, NULL, &name);
    if (st != GANFW_OK) return st;
    if (!name || !*name)
      return h->error(c->ctx, GANFW_ERR_CONFIG, "recompute: nets[%lld] is empty; give a role",
                      (long long)i);
    c->nets[c->n_nets++] = name;
  }
  return GANFW_OK;
}

static ganfw_status rc_create(const ganfw_host *host, ganfw_ctx *ctx, const ganfw_cfg *cfg,
                              void **self) {
  *self = NULL;
  if (!GANFW_HOST_HAS(host, net_recompute) || !host->net_recompute || !host->net_node_info)
    return host->error(ctx, GANFW_ERR_PLUGIN,
                       "recompute: this core's host table has no net_recompute; use a ganfw "
                       "core of ABI %d.%d or later",
                       GANFW_ABI_MAJOR, GANFW_ABI_MINOR);
  rc *c = calloc(1, sizeof *c);
  if (!c) return host->error(ctx, GANFW_ERR_OOM, "recompute: out of host memory");
  c->host = host;
  c->ctx = ctx;
  ganfw_status st = host->cfg_bytes(cfg, "budget", 0, &c->budget);
  if (st == GANFW_OK && c->budget < 0)
    st = host->error(ctx, GANFW_ERR_CONFIG,
                     "recompute: budget is %lld bytes; give a size such as 12MiB (absent: the "
                     "fewest bytes the nets reach)",
                     (long long)c->budget);
  if (st == GANFW_OK) st = read_nets(c, cfg);
  c->drop = host->cfg_child(cfg, "drop");
  if (st != GANFW_OK) {
    free(c);
    return st;
  }
  *self = c;
  return GANFW_OK;
}

static ganfw_status rc_configure(void *self, ganfw_exec_options *opts) {
  ((rc *)self)->opts = opts;
  return GANFW_OK;
}

static int selected(rc *c, const char *role) {
  if (c->n_nets == 0) return 1;
  int hit = 0;
  for (int32_t i = 0; i < c->n_nets; i++)
    if (strcmp(c->nets[i], role) == 0) hit = c->seen[i] = 1;
  return hit;
}

static void model_free(rc_model *m) {
  free(m->first_in);
  free(m->last_reader);
  free(m->sb);
  free(m->sf);
  free(m->sr);
  free(m->bytes);
  free(m->flops);
  free(m->kept);
}

static ganfw_status model_tables(rc *c, rc_model *m);

static ganfw_status model_of(rc *c, ganfw_net *net, rc_model *m) {
  const ganfw_host *h = c->host;
  const ganfw_exec_options *o = c->opts;
  const double rows = (double)(o->batch_size > 0 ? o->batch_size : 1) /
                      (double)(o->micro_batches > 0 ? o->micro_batches : 1);
  const double size = o->compute_dtype == GANFW_DTYPE_F32 ? 4.0 : 2.0;
  m->n = h->net_layer_count(net);
  m->bytes = calloc((size_t)m->n + 1, sizeof *m->bytes);
  m->flops = calloc((size_t)m->n + 1, sizeof *m->flops);
  m->kept = calloc((size_t)m->n + 1, sizeof *m->kept);
  m->first_in = calloc((size_t)m->n + 1, sizeof *m->first_in);
  m->last_reader = calloc((size_t)m->n + 1, sizeof *m->last_reader);
  m->graph = 0;
  if (!m->bytes || !m->flops || !m->kept || !m->first_in || !m->last_reader)
    return h->error(c->ctx, GANFW_ERR_OOM, "recompute: out of host memory");
  for (int32_t i = 0; i < m->n; i++) {
    ganfw_node_info ni = {.struct_size = sizeof ni};
    ganfw_status st = h->net_node_info(net, i, &ni);
    if (st != GANFW_OK) return st;
    m->bytes[i] = (double)ni.out_elems * rows * size;
    m->flops[i] = ni.flops * rows;
    m->kept[i] = ni.kept;
    if (ni.n_in != 1 || ni.in[0] != i - 1) m->graph = 1;
    m->first_in[i] = i;
    m->last_reader[i] = i == m->n - 1 ? m->n : i;
    for (int32_t k = 0; k < ni.n_in; k++) {
      if (ni.in[k] < m->first_in[i]) m->first_in[i] = ni.in[k];
      if (ni.in[k] >= 0 && i > m->last_reader[ni.in[k]]) m->last_reader[ni.in[k]] = i;
    }
  }
  return model_tables(c, m);
}

/* The stretch of dropped nodes (j, i) between kept j (-1: the net's input) and kept i:
 * the bytes backward re-materialises at once (the outputs a tape would keep), the FLOPs it
 * recomputes (from the stretch's start to its last kept-by-a-tape node), and what keeping j
 * costs when nothing else holds it (the recomputation starts from it). */
static void stretch_of(const rc_model *m, int32_t j, int32_t i, double *bytes, double *flops,
                       double *root) {
  double b = 0, f = 0, run = 0;
  int32_t any = 0;
  for (int32_t k = j + 1; k < i; k++) {
    run += m->flops[k];
    if (m->kept[k]) {
      b += m->bytes[k];
      f = run;
      any = 1;
    }
  }
  /* a stretch is one where the model holds: one tensor crosses each of its ends (its nodes
   * read only the kept node before it or each other, and are read only up to the kept node
   * after it); across a residual connection it is not one (DBL_MAX bytes) */
  for (int32_t k = j + 1; k < i; k++)
    if (m->first_in[k] < j || m->last_reader[k] > i) b = DBL_MAX;
  *bytes = b;
  *flops = f;
  *root = any && j >= 0 && !m->kept[j] ? m->bytes[j] : 0.0;
}

/* stretch_of from the model's table (model_tables). */
static void stretch(const rc_model *m, int32_t j, int32_t i, double *bytes, double *flops,
                    double *root) {
  const size_t at = (size_t)(j + 1) * (size_t)(m->n + 1) + (size_t)i;
  *bytes = m->sb[at];
  *flops = m->sf[at];
  *root = m->sr[at];
}

static ganfw_status model_tables(rc *c, rc_model *m) {
  const size_t cells = (size_t)(m->n + 1) * (size_t)(m->n + 1);
  m->sb = calloc(cells, sizeof *m->sb);
  m->sf = calloc(cells, sizeof *m->sf);
  m->sr = calloc(cells, sizeof *m->sr);
  if (!m->sb || !m->sf || !m->sr)
    return c->host->error(c->ctx, GANFW_ERR_OOM, "recompute: out of host memory");
  for (int32_t j = -1; j < m->n; j++)
    for (int32_t i = j + 1; i < m->n; i++) {
      const size_t at = (size_t)(j + 1) * (size_t)(m->n + 1) + (size_t)i;
      stretch_of(m, j, i, &m->sb[at], &m->sf[at], &m->sr[at]);
    }
  return GANFW_OK;
}

/* The kept node i's own bytes on the tape (the net's output is the caller's). */
static double own(const rc_model *m, int32_t i) {
  return i < m->n - 1 && m->kept[i] ? m->bytes[i] : 0.0;
}

static int dbl_cmp(const void *a, const void *b) {
  const double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* Nodes are 0..n-1; the DP's positions are p = node + 1 (0: the net's input, always there).
 * For a cap M on the recomputed stretch, best[p][r] is the fewest FLOPs of a prefix whose
 * last kept node is p - 1 with r units of kept bytes; the answer is the cheapest over M
 * with M + rest <= budget. budget <= 0: the fewest bytes (cost ignored). */
static ganfw_status solve(rc *c, const rc_model *m, double budget, const char *role,
                          rc_choice *out) {
  const int32_t n = m->n, P = n + 1;
  /* candidate caps: every stretch's bytes */
  size_t ncap = 0, capn = (size_t)P * (size_t)P / 2 + 2;
  double *caps = malloc(capn * sizeof *caps);
  if (!caps) return c->host->error(c->ctx, GANFW_ERR_OOM, "recompute: out of host memory");
  caps[ncap++] = 0;
  for (int32_t j = -1; j < n; j++)
    for (int32_t i = j + 2; i < n; i++) {
      double b, f, r;
      stretch(m, j, i, &b, &f, &r);
      if (b > 0 && b < DBL_MAX && ncap < capn) caps[ncap++] = b;
    }
  qsort(caps, ncap, sizeof *caps, dbl_cmp);
  size_t u = 0;
  for (size_t k = 0; k < ncap; k++)
    if (u == 0 || caps[k] != caps[u - 1]) caps[u++] = caps[k];
  ncap = u;
  /* Fewest bytes: for each cap, the least kept bytes (a shortest path); the smallest sum. */
  double least = DBL_MAX;
  size_t least_cap = 0; /* the cap at which the fewest bytes are reached: always tried below */
  double *dist = malloc((size_t)P * sizeof *dist);
  if (!dist) {
    free(caps);
    return c->host->error(c->ctx, GANFW_ERR_OOM, "recompute: out of host memory");
  }
  for (size_t k = 0; k < ncap; k++) {
    for (int32_t p = 0; p < P; p++) dist[p] = p == 0 ? 0 : DBL_MAX;
    for (int32_t p = 1; p < P; p++)
      for (int32_t q = 0; q < p; q++) {
        double b, f, r;
        stretch(m, q - 1, p - 1, &b, &f, &r);
        if (dist[q] == DBL_MAX || b > caps[k]) continue;
        const double d = dist[q] + r + own(m, p - 1);
        if (d < dist[p]) dist[p] = d;
      }
    if (dist[P - 1] + caps[k] < least) {
      least = dist[P - 1] + caps[k];
      least_cap = k;
    }
  }
  free(dist);
  if (budget <= 0) budget = least;
  if (budget < least) {
    free(caps);
    return c->host->error(c->ctx, GANFW_ERR_CONFIG,
                          "recompute: budget %.2f MiB is below what the %s's tape can be "
                          "brought to: %.2f MiB (the outputs that must stay, such as the inputs "
                          "recomputation starts from, plus the largest stretch it recomputes at "
                          "once); raise budget to at least %.2f MiB, or add amp or accumulate "
                          "(fewer bytes per tensor) before recompute",
                          budget / 1048576.0, role, least / 1048576.0, least / 1048576.0);
  }
  /* The cheapest under the budget. */
  const double unit = budget / RC_UNITS;
  const int32_t R = RC_UNITS + 1;
  double *best = malloc((size_t)P * (size_t)R * sizeof *best);
  int32_t *from = malloc((size_t)P * (size_t)R * 2 * sizeof *from);
  uint8_t *win = calloc((size_t)n + 1, 1);
  if (!best || !from || !win) {
    free(best);
    free(from);
    free(win);
    free(caps);
    return c->host->error(c->ctx, GANFW_ERR_OOM, "recompute: out of host memory");
  }
  size_t max_caps = (size_t)(RC_WORK / ((double)P * (double)P * (double)R));
  if (max_caps > RC_MAX_CAPS) max_caps = RC_MAX_CAPS;
  if (max_caps < 8) max_caps = 8;
  const size_t stride = ncap > max_caps ? (ncap + max_caps - 1) / max_caps : 1;
  double best_cost = DBL_MAX, best_peak = 0;
  for (size_t step = 0; step < ncap; step += stride) {
    /* the sampled caps, and least_cap in place of the sample just below it */
    const size_t k = step <= least_cap && least_cap < step + stride ? least_cap : step;
    const double M = caps[k];
    if (M > budget) break;
    const int32_t rmax = (int32_t)floor((budget - M) / unit + 1e-9);
    for (size_t e = 0; e < (size_t)P * (size_t)R; e++) best[e] = DBL_MAX;
    best[0] = 0;
    for (int32_t p = 1; p < P; p++)
      for (int32_t q = 0; q < p; q++) {
        double b, f, r;
        stretch(m, q - 1, p - 1, &b, &f, &r);
        if (b > M) continue;
        const int32_t add = (int32_t)ceil((r + own(m, p - 1)) / unit - 1e-9);
        for (int32_t s = 0; s + add <= rmax; s++) {
          const double v = best[(size_t)q * R + s];
          if (v == DBL_MAX) continue;
          double *dst = &best[(size_t)p * R + s + add];
          if (v + f < *dst) {
            *dst = v + f;
            from[((size_t)p * R + s + add) * 2] = q;
            from[((size_t)p * R + s + add) * 2 + 1] = s;
          }
        }
      }
    int32_t at = -1;
    for (int32_t s = 0; s <= rmax; s++)
      if (best[(size_t)(P - 1) * R + s] < (at < 0 ? DBL_MAX : best[(size_t)(P - 1) * R + at]))
        at = s;
    if (at < 0 || best[(size_t)(P - 1) * R + at] >= best_cost) continue;
    best_cost = best[(size_t)(P - 1) * R + at];
    /* walk back: the kept positions; everything between is dropped */
    for (int32_t i = 0; i < n; i++) win[i] = 1;
    double peak = 0, seg = 0;
    for (int32_t p = P - 1, s = at; p > 0;) {
      const int32_t q = from[((size_t)p * R + s) * 2], s2 = from[((size_t)p * R + s) * 2 + 1];
      win[p - 1] = 0;
      double b, f, r;
      stretch(m, q - 1, p - 1, &b, &f, &r);
      peak += r + own(m, p - 1);
      if (b > seg) seg = b;
      p = q;
      s = s2;
    }
    best_peak = peak + seg;
    memcpy(out->drop, win, (size_t)n);
  }
  free(best);
  free(from);
  free(win);
  free(caps);
  if (best_cost == DBL_MAX) { /* the unit rounding lost the last bytes: a little more room */
    if (budget >= least * (1.0 + 64.0 / RC_UNITS))
      return c->host->error(c->ctx, GANFW_ERR_INTERNAL,
                            "recompute: %s: no choice found under %.2f MiB although %.2f MiB is "
                            "reachable",
                            role, budget / 1048576.0, least / 1048576.0);
    return solve(c, m, (budget > least ? budget : least) * (1.0 + 8.0 / RC_UNITS), role, out);
  }
  out->peak = best_peak;
  out->flops = best_cost;
  out->exact = stride == 1 && !m->graph;
  return GANFW_OK;
}

/* `drop.<role>`: explicit nodes by name or index. *n < 0 when none is given. */
static ganfw_status explicit_drop(rc *c, const char *role, ganfw_net *net, uint8_t *drop,
                                  int32_t *n) {
  const ganfw_host *h = c->host;
  *n = -1;
  if (!c->drop || !h->cfg_child(c->drop, role)) return GANFW_OK;
  const int64_t len = h->cfg_list_len(c->drop, role);
  if (len < 0) return GANFW_ERR_CONFIG;
  const int32_t layers = h->net_layer_count(net);
  *n = 0;
  for (int64_t i = 0; i < len; i++) {
    const char *v = NULL;
    ganfw_status st = h->cfg_string(h->cfg_list_at(c->drop, role, i), NULL, NULL, &v);
    if (st != GANFW_OK) return st;
    char *end = NULL;
    long long idx = v ? strtoll(v, &end, 10) : -1;
    int32_t k = v && end && *end == 0 ? (int32_t)idx : h->net_layer_index(net, v ? v : "");
    if (k < 0 || k >= layers - 1)
      return h->error(c->ctx, GANFW_ERR_CONFIG,
                      "recompute: drop.%s[%lld] is '%s', %s; give a node index (0..%d) or a "
                      "node name other than the last (the net's output is always kept)",
                      role, (long long)i, v ? v : "",
                      k == layers - 1 ? "the net's output"
                      : k >= layers   ? "past the last node"
                                      : "no node",
                      (int)layers - 2);
    drop[k] = 1;
  }
  for (int32_t k = 0; k < layers; k++) *n += drop[k];
  return GANFW_OK;
}

/* The FLOPs backward recomputes for the dropped set: each run of dropped nodes from its
 * start to its last node whose output a tape would keep. */
static double recomputed_flops(const rc_model *m, const uint8_t *drop) {
  double total = 0;
  for (int32_t i = 0; i < m->n;) {
    if (!drop[i]) {
      i++;
      continue;
    }
    int32_t end = i;
    while (end < m->n && drop[end]) end++;
    double b, f, r;
    stretch(m, i - 1, end, &b, &f, &r);
    total += f;
    i = end;
  }
  return total;
}

static ganfw_status rc_configure_net(void *self, const char *role, ganfw_net *net) {
  rc *c = self;
  const ganfw_host *h = c->host;
  if (!role) return GANFW_OK;
  const int sel = selected(c, role);
  if (c->drop && h->cfg_child(c->drop, role) && !sel)
    return h->error(c->ctx, GANFW_ERR_CONFIG,
                    "recompute: drop.%s is given, but the %s is not in nets; add it to nets or "
                    "remove drop.%s",
                    role, role, role);
  if (!sel) return GANFW_OK;
  rc_model m = {0};
  ganfw_status st = model_of(c, net, &m);
  rc_choice ch = {.drop = calloc((size_t)m.n + 1, 1)};
  int32_t nd = -1;
  if (st == GANFW_OK && !ch.drop) st = h->error(c->ctx, GANFW_ERR_OOM, "recompute: out of memory");
  if (st == GANFW_OK) st = explicit_drop(c, role, net, ch.drop, &nd);
  if (st == GANFW_OK && nd < 0) {
    st = solve(c, &m, (double)c->budget, role, &ch);
  }
  int32_t nodes_n = 0;
  int32_t *nodes = st == GANFW_OK ? malloc(((size_t)m.n + 1) * sizeof *nodes) : NULL;
  if (st == GANFW_OK && !nodes) st = h->error(c->ctx, GANFW_ERR_OOM, "recompute: out of memory");
  double total = 0, kept_bytes = 0, redo = 0;
  char list[512];
  size_t used = 0;
  list[0] = 0;
  for (int32_t i = 0; st == GANFW_OK && i < m.n; i++) {
    total += m.flops[i];
    if (ch.drop[i]) {
      nodes[nodes_n++] = i;
      if (used + 24 < sizeof list)
        used += (size_t)snprintf(list + used, sizeof list - used, "%s%d", used ? " " : "", (int)i);
    } else {
      kept_bytes += own(&m, i);
    }
  }
  if (st == GANFW_OK) st = h->net_recompute(net, nodes, nodes_n);
  if (st == GANFW_OK) {
    if (nd < 0) {
      redo = ch.flops;
      h->log(c->ctx, GANFW_LOG_INFO,
             "recompute: %s: recomputes nodes [%s]: its tape holds at most %.2f MiB by the "
             "model (budget %s%.2f MiB), %.1f%% of a forward's FLOPs again; %s",
             role, list, ch.peak / 1048576.0, c->budget > 0 ? "" : "none: least ",
             (c->budget > 0 ? (double)c->budget : ch.peak) / 1048576.0,
             total > 0 ? 100.0 * redo / total : 0.0,
             ch.exact ? "optimal under the model (a chain, every stretch cap tried)"
                      : "not proven optimal (a graph net by its chain order, or caps sampled)");
    } else {
      redo = recomputed_flops(&m, ch.drop);
      h->log(c->ctx, GANFW_LOG_INFO,
             "recompute: %s: recomputes nodes [%s] (drop.%s), keeps %.2f MiB, %.1f%% of a "
             "forward's FLOPs again",
             role, list, role, kept_bytes / 1048576.0, total > 0 ? 100.0 * redo / total : 0.0);
    }
  }
  free(nodes);
  free(ch.drop);
  model_free(&m);
  return st;
}

static ganfw_status rc_configure_done(void *self) {
  rc *c = self;
  for (int32_t i = 0; i < c->n_nets; i++)
    if (!c->seen[i])
      return c->host->error(c->ctx, GANFW_ERR_CONFIG,
                            "recompute: nets[%d] is '%s', and no net of this run has that role "
                            "(the trainer's roles: generator, discriminator, classifier for the "
                            "built-in ones; docs/TRAINERS.md lists a plugin's)",
                            (int)i, c->nets[i]);
  return GANFW_OK;
}

static const ganfw_memory_vt rc_vt = {
    .struct_size = sizeof(ganfw_memory_vt),
    .kind = GANFW_VT_TAG_MEMORY,
    .create = rc_create,
    .destroy = rc_destroy,
    .configure = rc_configure,
    .configure_net = rc_configure_net,
    .configure_done = rc_configure_done,
};

GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      .abi_major = GANFW_ABI_MAJOR,
      .abi_minor = GANFW_ABI_MINOR,
      .struct_size = sizeof(ganfw_plugin_desc),
      .kind = GANFW_PLUGIN_MEMORY,
      .name = "recompute",
      .version = "1.0.0",
      .description = "selective recompute: per tensor, the fewest recomputed FLOPs under a "
                     "byte budget",
      .vtable = &rc_vt,
  };
  return &desc;
}
