/* A session's data parallelism (see dp.h). */
#include "train/dp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
#include "plugin/plugin_host.h"
#include "runtime/alloc.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"
#include "train/reducer.h"
#include "train/zero.h"

/* The resolved config as text so far (defaults recorded up to here included). */
static ganfw_status config_text(const ganfw_session *s, char **text) {
  size_t len = 0;
  *text = NULL;
  FILE *f = open_memstream(text, &len);
  if (!f) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  ganfw_status st = ganfw_config_write_resolved(s->run->config, f);
  fclose(f);
  if (st != GANFW_OK) {
    free(*text);
    *text = NULL;
  }
  return st;
}

/* The nets of the session: G and D, the classifier, or a trainer plugin's by role. */
static int32_t nets_of(const ganfw_session *s, ganfw_net **nets) {
  int32_t n = 0;
  if (s->family == GANFW_MODEL_NETS) {
    for (int32_t r = 0; r < s->n_nets; r++) nets[n++] = s->nets[r].net;
    return n;
  }
  if (s->generator) nets[n++] = s->generator;
  if (s->discriminator) nets[n++] = s->discriminator;
  if (s->classifier) nets[n++] = s->classifier;
  return n;
}

/* Rank 0's buffers (BatchNorm running statistics, counters) on every rank; its parameters
 * too when `params`. */
static ganfw_status broadcast_state(ganfw_session *s, int32_t params) {
  ganfw_net *nets[GANFW_MAX_NETS];
  const int32_t n = nets_of(s, nets);
  ganfw_status st = GANFW_OK;
  for (int32_t k = 0; k < n && st == GANFW_OK; k++) {
    const int64_t np = params ? ganfw_net_param_count(nets[k]) : 0;
    for (int64_t i = 0; i < np && st == GANFW_OK; i++) {
      ganfw_param_info info = {.struct_size = sizeof info};
      st = ganfw_net_param_info(nets[k], i, &info);
      if (st == GANFW_OK)
        st = ganfw_dist_bcast(s->dist, info.value->data, info.value->nbytes, 0,
                              "rank 0's parameters");
    }
    ganfw_net_buffer b;
    for (int64_t i = 0; st == GANFW_OK && ganfw_net_buffer_at(nets[k], i, &b); i++)
      st = b.tensor ? ganfw_dist_bcast(s->dist, b.tensor->data, b.tensor->nbytes, 0,
                                       "rank 0's BatchNorm statistics")
                    : ganfw_dist_bcast(s->dist, b.counter, sizeof *b.counter, 0,
                                       "rank 0's BatchNorm statistics");
  }
  return st;
}

/* The plugins the run loaded, in the config's order (the same on every rank whose config
 * agrees with rank 0's). */
enum { MAX_RUN_PLUGINS = 4 + GANFW_MAX_ROLE_MODELS + GANFW_MAX_MEMORY_PLUGINS };
static int32_t run_plugins(const ganfw_run *run, const ganfw_plugin **out) {
  const ganfw_plugin *one[] = {run->model, run->optim, run->objective, run->trainer};
  int32_t n = 0;
  for (size_t i = 0; i < sizeof one / sizeof one[0]; i++)
    if (one[i]) out[n++] = one[i];
  for (int32_t i = 0; i < run->n_role_models; i++)
    if (run->role_model[i]) out[n++] = run->role_model[i];
  for (int32_t i = 0; i < run->n_memory; i++)
    if (run->memory[i]) out[n++] = run->memory[i];
  return n;
}

/* A build of a plugin as the ranks compare it: the hash of its file, the ABI it was built
 * for. Zero: no plugin in that place. */
typedef struct plugin_build {
  uint64_t hash;
  uint32_t abi_major, abi_minor;
} plugin_build;

enum { PLUGIN_PATH_BYTES = 512 };

static int same_build(const plugin_build *a, const plugin_build *b) {
  return a->hash == b->hash && a->abi_major == b->abi_major && a->abi_minor == b->abi_minor;
}

/* "PATH (ABI 1.5, file hash 0123456789abcdef)" into buf. */
static const char *build_words(const char *path, const plugin_build *b, char *buf, size_t cap) {
  char hash[40];
  if (b->hash)
    snprintf(hash, sizeof hash, "file hash %016llx", (unsigned long long)b->hash);
  else
    snprintf(hash, sizeof hash, "file unreadable");
  snprintf(buf, cap, "%s (ABI %u.%u, %s)", path, (unsigned)b->abi_major, (unsigned)b->abi_minor,
           hash);
  return buf;
}

/* The message of plugin k that differs between the ranks: rank 0's file and each differing
 * rank's (paths[rank * MAX_RUN_PLUGINS + k]). */
static ganfw_status plugin_mismatch(const char *name, int32_t k, int32_t ranks,
                                    const plugin_build *all, const char (*paths)[PLUGIN_PATH_BYTES],
                                    int32_t other_plugins) {
  char msg[3072], one[PLUGIN_PATH_BYTES + 96];
  size_t len = 0;
  int32_t listed = 0, more = 0;
  len += (size_t)snprintf(msg, sizeof msg,
                          "plugin '%s' is not the same build on every rank: rank 0 loaded %s", name,
                          build_words(paths[k], &all[k], one, sizeof one));
  for (int32_t p = 1; p < ranks; p++) {
    const int32_t i = p * MAX_RUN_PLUGINS + k;
    if (same_build(&all[i], &all[k])) continue;
    if (listed == 4 || len + sizeof one + 32 >= sizeof msg) {
      more++;
      continue;
    }
    len += (size_t)snprintf(msg + len, sizeof msg - len, ", rank %d %s", (int)p,
                            build_words(paths[i], &all[i], one, sizeof one));
    listed++;
  }
  if (more) len += (size_t)snprintf(msg + len, sizeof msg - len, ", and %d more ranks", (int)more);
  if (other_plugins)
    len += (size_t)snprintf(msg + len, sizeof msg - len, " (and %d other plugin%s differ%s)",
                            (int)other_plugins, other_plugins > 1 ? "s" : "",
                            other_plugins > 1 ? "" : "s");
  return ganfw_error_set(GANFW_ERR_PLUGIN,
                         "%s: install the same build of every plugin on every node (copy rank "
                         "0's file there, or point plugin_path or " GANFW_PLUGIN_PATH_ENV " at "
                         "one copy), then start the job again",
                         msg);
}

/* Refuses a job whose ranks loaded different builds of a plugin under the same config (the
 * config check cannot see them): every rank compares each plugin's file hash and ABI with
 * the others', and on a difference every rank stops with the same message, naming the
 * plugin and the file of each rank that differs. */
static ganfw_status check_plugins(ganfw_session *s) {
  if (!ganfw_dist_sends(s->dist)) return GANFW_OK; /* a plan of N ranks: one process */
  const ganfw_plugin *pl[MAX_RUN_PLUGINS];
  const int32_t n = run_plugins(s->run, pl), R = s->dist->size;
  plugin_build mine[MAX_RUN_PLUGINS];
  memset(mine, 0, sizeof mine);
  for (int32_t k = 0; k < n; k++) {
    const ganfw_plugin_desc *desc = ganfw_plugin_desc_of(pl[k]);
    mine[k] = (plugin_build){ganfw_plugin_file_hash(pl[k]), desc->abi_major, desc->abi_minor};
  }
  plugin_build *all = calloc((size_t)R * MAX_RUN_PLUGINS, sizeof *all);
  if (!all) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  ganfw_status st = ganfw_dist_allgather(s->dist, mine, sizeof mine, all, "the plugins' builds");
  int32_t first = -1, differ = 0; /* the same on every rank: all[] is */
  for (int32_t k = 0; st == GANFW_OK && k < MAX_RUN_PLUGINS; k++) {
    int32_t d = 0;
    for (int32_t p = 1; p < R; p++) d |= !same_build(&all[p * MAX_RUN_PLUGINS + k], &all[k]);
    if (d && first < 0) first = k;
    differ += d;
  }
  if (st != GANFW_OK || first < 0) {
    free(all);
    return st;
  }
  /* A difference: every rank's paths, to name the files. */
  char(*paths)[PLUGIN_PATH_BYTES] =
      calloc((size_t)R * MAX_RUN_PLUGINS + MAX_RUN_PLUGINS, sizeof *paths);
  if (!paths) {
    free(all);
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  }
  char(*own)[PLUGIN_PATH_BYTES] = paths + (size_t)R * MAX_RUN_PLUGINS;
  for (int32_t k = 0; k < n; k++) {
    const char *path = ganfw_plugin_path(pl[k]);
    const size_t len = strlen(path);
    if (len < PLUGIN_PATH_BYTES)
      memcpy(own[k], path, len);
    else /* the end of the path says most */
      snprintf(own[k], PLUGIN_PATH_BYTES, "...%s", path + len - (PLUGIN_PATH_BYTES - 4));
  }
  st = ganfw_dist_allgather(s->dist, own, (int64_t)sizeof *paths * MAX_RUN_PLUGINS, paths,
                            "the plugins' files");
  if (st == GANFW_OK) {
    const char *name = first < n ? ganfw_plugin_name(pl[first]) : "(none on rank 0)";
    st = plugin_mismatch(name, first, R, all, (const char(*)[PLUGIN_PATH_BYTES])paths, differ - 1);
  }
  free(paths);
  free(all);
  return st;
}

ganfw_status ganfw_dp_open(ganfw_session *s) {
  const ganfw_cfg *root = ganfw_config_root(s->run->config);
  ganfw_dist_settings set;
  ganfw_status st = ganfw_dist_settings_from_config(root, s->family == GANFW_MODEL_GAN, &set);
  if (st != GANFW_OK || ganfw_dist_world_size() <= 1) return st;
  const int32_t plan = s->run->ctx_opt.meta;
  if (s->ctx->device_type != GANFW_DEVICE_CPU)
    return ganfw_error_set(GANFW_ERR_UNSUPPORTED,
                           "%s: data-parallel training on CUDA needs NCCL, which this build does "
                           "not drive yet; run the ranks with device.type: cpu, or one process",
                           s->run->config_path);
  if ((st = ganfw_dist_create(&set, plan, &s->dist)) != GANFW_OK) return st;
  s->ctx->dist = s->dist;
  char *text = NULL;
  if ((st = config_text(s, &text)) == GANFW_OK)
    st = ganfw_dist_check_same(s->dist, text, "config.resolved.yaml");
  free(text);
  if (st == GANFW_OK) st = check_plugins(s);
  if (st != GANFW_OK) return st;
  const int64_t B = s->train.batch_size, N = s->dist->size;
  const ganfw_cfg *bs = ganfw_cfg_child(ganfw_cfg_section(root, "train"), "batch_size");
  if (B % N != 0)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: train.batch_size %lld (the global batch) does not split over %lld "
                           "ranks; make it a multiple of %lld",
                           ganfw_cfg_where(bs ? bs : root), (long long)B, (long long)N,
                           (long long)N);
  if ((B / N) % s->exec.micro_batches != 0)
    return ganfw_error_set(GANFW_ERR_CONFIG,
                           "%s: each of the %lld ranks gets %lld rows of train.batch_size %lld, "
                           "which %d micro-batches (accumulate) do not divide; pick a divisor",
                           ganfw_cfg_where(bs ? bs : root), (long long)N, (long long)(B / N),
                           (long long)B, (int)s->exec.micro_batches);
  s->exec.ranks = (int32_t)N;
  if (!plan && s->dist->rank == 0)
    ganfw_log(GANFW_LOG_INFO,
              "data-parallel: %lld ranks, %lld rows each of the global batch %lld, BatchNorm "
              "%s, gradient buckets of %lld KiB",
              (long long)N, (long long)(B / N), (long long)B, ganfw_dist_bn_name(set.batchnorm),
              (long long)(set.bucket_cap >> 10));
  return broadcast_state(s, 1);
}

ganfw_status ganfw_dp_open_reducers(ganfw_session *s) {
  if (!ganfw_dist_parallel(s->dist)) return GANFW_OK;
  for (int32_t i = 0; i < s->n_optim; i++) {
    ganfw_session_optim *o = &s->optim[i];
    ganfw_status st =
        ganfw_reducer_create(s->ctx, s->dist, o->params, o->n_params, o->role, &s->reducer[i]);
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

void ganfw_dp_close(ganfw_session *s) {
  for (int32_t i = 0; i < GANFW_MAX_NETS; i++) {
    ganfw_reducer_destroy(s->reducer[i]);
    s->reducer[i] = NULL;
  }
  if (s->ctx) s->ctx->dist = NULL;
  ganfw_dist_destroy(s->dist);
  s->dist = NULL;
}

int32_t ganfw_dp_writes(const ganfw_session *s) {
  return !s->dist || s->dist->rank == 0;
}

int32_t ganfw_dp_ranks(const ganfw_session *s) {
  return ganfw_dist_parallel(s->dist) ? s->dist->size : 1;
}

int32_t ganfw_dp_rank(const ganfw_session *s) {
  return ganfw_dist_parallel(s->dist) ? s->dist->rank : 0;
}

int64_t ganfw_dp_local_batch(const ganfw_session *s) {
  return s->train.batch_size / ganfw_dp_ranks(s);
}

void ganfw_dp_loader_config(const ganfw_session *s, ganfw_loader_config *lc) {
  *lc = s->loader_cfg;
  if (!ganfw_dist_parallel(s->dist)) return;
  lc->shard_rank = s->dist->rank;
  lc->shard_count = s->dist->size;
  lc->shard_groups = s->exec.micro_batches;
}

ganfw_tensor *ganfw_dp_rows_tensor(ganfw_session *s, ganfw_tensor *global, const char *name) {
  if (!ganfw_dist_parallel(s->dist)) return ganfw_tensor_retain(global);
  int64_t shape[GANFW_MAX_DIMS];
  memcpy(shape, global->shape, sizeof(int64_t) * (size_t)global->ndim);
  shape[0] = ganfw_dp_local_batch(s);
  return ganfw_tensor_create(s->ctx, global->dtype, global->ndim, shape, global->category, name);
}

ganfw_status ganfw_dp_take_rows(ganfw_session *s, const ganfw_tensor *global, ganfw_tensor *local) {
  if (!ganfw_dist_parallel(s->dist)) return GANFW_OK;
  const int64_t groups = s->exec.micro_batches, m = global->shape[0] / groups;
  const int64_t per = m / s->dist->size, row = global->nbytes / global->shape[0];
  ganfw_backend *be = s->ctx->be;
  for (int64_t g = 0; g < groups; g++) {
    ganfw_status st = be->vt->copy_d2d(
        be, (char *)local->data + g * per * row,
        (const char *)global->data + (g * m + s->dist->rank * per) * row, (size_t)(per * row));
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

ganfw_status ganfw_dp_step_begin(ganfw_session *s, int64_t step) {
  if (!ganfw_dist_parallel(s->dist)) return GANFW_OK;
  ganfw_status st = ganfw_dist_fault_point(s->dist, step, 0);
  if (st != GANFW_OK) return st;
  ganfw_dist_step_begin(s->dist, step);
  if ((st = ganfw_dist_fault_point(s->dist, step, 1)) != GANFW_OK) return st;
  if (s->dist->set.batchnorm == GANFW_DIST_BN_LOCAL) return broadcast_state(s, 0);
  return GANFW_OK;
}

ganfw_status ganfw_dp_sync_buffers(ganfw_session *s) {
  if (!ganfw_dist_sends(s->dist) || s->dist->set.batchnorm != GANFW_DIST_BN_LOCAL) return GANFW_OK;
  return broadcast_state(s, 0);
}

void ganfw_dp_arm(ganfw_session *s, int32_t opt) {
  if (s->reducer[opt]) ganfw_reducer_arm(s->reducer[opt], s->optim[opt].net);
}

ganfw_status ganfw_dp_reduce(ganfw_session *s, int32_t opt) {
  if (!s->reducer[opt]) return GANFW_OK;
  return ganfw_reducer_finish(s->reducer[opt], s->optim[opt].net);
}

void ganfw_dp_disarm(ganfw_session *s, int32_t opt) {
  if (s->reducer[opt]) ganfw_net_set_grad_hook(s->optim[opt].net, NULL, NULL);
}

ganfw_status ganfw_dp_mean(ganfw_session *s, double *v, int32_t n, const char *what) {
  if (!ganfw_dist_sends(s->dist)) return GANFW_OK;
  ganfw_status st = ganfw_dist_allreduce_sum_f64(s->dist, v, n, what);
  for (int32_t i = 0; i < n && st == GANFW_OK; i++) v[i] /= s->dist->size;
  return st;
}

void ganfw_dp_local_begin(ganfw_session *s) {
  if (s->dist) s->dist->bn_local++;
}

void ganfw_dp_local_end(ganfw_session *s) {
  if (s->dist) s->dist->bn_local--;
}

ganfw_status ganfw_dp_before_save(ganfw_session *s) {
  ganfw_status st = GANFW_OK;
  for (int32_t i = 0; i < s->n_optim && st == GANFW_OK; i++) st = ganfw_zero_gather(&s->optim[i]);
  return st;
}

void ganfw_dp_after_save(ganfw_session *s) {
  for (int32_t i = 0; i < s->n_optim; i++) ganfw_zero_release(&s->optim[i]);
}

ganfw_status ganfw_dp_before_resume(ganfw_session *s) {
  ganfw_status st = GANFW_OK;
  for (int32_t i = 0; i < s->n_optim && st == GANFW_OK; i++) st = ganfw_zero_expand(&s->optim[i]);
  return st;
}

ganfw_status ganfw_dp_after_resume(ganfw_session *s, int32_t ok) {
  ganfw_status st = GANFW_OK;
  for (int32_t i = 0; i < s->n_optim; i++) {
    if (ok && st == GANFW_OK) st = ganfw_zero_scatter(&s->optim[i]);
    ganfw_zero_release(&s->optim[i]);
  }
  return st;
}

ganfw_status ganfw_dp_agree(ganfw_session *s, ganfw_status st, const char *what) {
  if (!ganfw_dist_sends(s->dist)) return st;
  int64_t code = s->dist->rank == 0 ? st : 0;
  ganfw_error_saved first;
  ganfw_error_save(&first, st);
  ganfw_status b = ganfw_dist_bcast(s->dist, &code, sizeof code, 0, what);
  if (b != GANFW_OK) return ganfw_error_first(&first, b);
  if (s->dist->rank == 0 || code == GANFW_OK) return st;
  return ganfw_error_set((ganfw_status)code, "rank 0 failed %s (its message says why)", what);
}

double ganfw_dp_take_comm_seconds(ganfw_session *s) {
  if (!s->dist) return 0;
  double t = s->dist->comm_seconds;
  s->dist->comm_seconds = 0;
  return t;
}

int32_t ganfw_dp_any(ganfw_session *s, int32_t flag, ganfw_status *st) {
  if (!ganfw_dist_sends(s->dist)) return flag;
  int64_t v = flag != 0;
  ganfw_status r = ganfw_dist_allreduce_max_i64(s->dist, &v, 1, "the stop signal");
  if (r != GANFW_OK && *st == GANFW_OK) *st = r;
  return v != 0;
}

ganfw_status ganfw_dp_gather_peaks(ganfw_session *s, ganfw_calibration *cal) {
  if (!ganfw_dist_sends(s->dist)) return GANFW_OK;
  const int32_t n =
      s->dist->size < GANFW_CALIBRATION_MAX_RANKS ? s->dist->size : GANFW_CALIBRATION_MAX_RANKS;
  int64_t *all = calloc((size_t)(3 * s->dist->size), sizeof *all);
  if (!all) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  ganfw_alloc_stats as;
  ganfw_alloc_get_stats(s->ctx->alloc, &as);
  int64_t *mine = all + 3 * s->dist->rank; /* the others' slots stay 0: a max gathers them */
  mine[0] = as.allocated.peak;
  mine[1] = as.reserved.peak;
  mine[2] = as.category[GANFW_MEM_COMM].peak;
  ganfw_status st =
      ganfw_dist_allreduce_max_i64(s->dist, all, 3 * s->dist->size, "every rank's memory peaks");
  for (int32_t r = 0; st == GANFW_OK && r < n; r++) {
    memcpy(cal->rank_peak[r], all + 3 * r, sizeof cal->rank_peak[r]);
    ganfw_log(GANFW_LOG_INFO, "rank %d: peak allocated %.2f MiB, reserved %.2f MiB (comm %.2f MiB)",
              (int)r, all[3 * r] / 1048576.0, all[3 * r + 1] / 1048576.0,
              all[3 * r + 2] / 1048576.0);
  }
  if (st == GANFW_OK) cal->n_ranks = n;
  free(all);
  return st;
}
