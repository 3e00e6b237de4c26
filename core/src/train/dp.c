/* A session's data parallelism (see dp.h). */
#include "train/dp.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/log.h"
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
  ganfw_dist_fault_point(s->dist, step);
  ganfw_dist_step_begin(s->dist, step);
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
