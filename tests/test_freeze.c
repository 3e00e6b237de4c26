/* Frozen layers, model.init_from and `ganfw score` on small synthetic MNIST runs: freezing
 * the cnn's conv blocks removes exactly their gradient and Adam-state bytes (in the session
 * and in `ganfw plan`), frozen weights stay put while the rest train, init_from copies a
 * checkpoint's weights, and score reports values in range, reproducibly for a seed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "runtime/alloc.h"
#include "io/checkpoint.h"
#include "base/error.h"
#include "nn/net.h"
#include "tools/plan.h"
#include "io/safetensors.h"
#include "tools/score.h"
#include "train/session.h"
#include "runtime/tensor.h"
#include "testutil.h"
#include "train/loop.h"
#include "train/trainer.h"

static char root[64];

static const char *path_in(const char *rel) {
  static char buf[8][1024];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
  return buf[k];
}

/* A small cnn classifier (two conv blocks with BatchNorm, a hidden linear layer) with Adam
 * on 32x32 synthetic MNIST; `model_extra` lines go into the model section. */
static void write_classifier(const char *name, const char *out_dir, const char *data_extra,
                             const char *model_extra, int64_t steps, int seed) {
  FILE *f = fopen(path_in(name), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "seed: %d\n"
          "device: {type: cpu, threads: 2}\n"
          "data: {dataset: mnist, path: %s/mnist%s}\n"
          "model:\n"
          "  plugin: cnn\n"
          "  blocks:\n"
          "    - {channels: 8, pool: max}\n"
          "    - {channels: 16, pool: max}\n"
          "  linear: [32]\n"
          "%s"
          "optim: {plugin: adam, lr: 0.003}\n"
          "train: {batch_size: 16, max_steps: %lld, log_every: 0, checkpoint_every: %lld}\n"
          "run: {out_dir: %s/%s}\n",
          seed, root, data_extra, model_extra, (long long)steps, (long long)steps, root, out_dir);
  fclose(f);
}

static ganfw_status open_session(const char *config, ganfw_run **run, ganfw_session **s) {
  *s = NULL;
  ganfw_status st = ganfw_run_open_file(config, NULL, 0, run);
  if (st == GANFW_OK) st = ganfw_session_open(*run, 1, NULL, s);
  if (st == GANFW_OK) st = ganfw_config_check_unused((*run)->config);
  return st;
}

static ganfw_status train(const char *config) {
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_status st = open_session(config, &run, &s);
  if (st == GANFW_OK) st = ganfw_train(s);
  if (st != GANFW_OK) printf("\n  %s: %s\n", config, ganfw_error_message());
  ganfw_session_close(s);
  ganfw_run_close(run);
  return st;
}

static int suite_init(void) {
  snprintf(root, sizeof root, "/tmp/ganfw_freeze_XXXXXX");
  if (!mkdtemp(root)) return -1;
  if (mkdir(path_in("mnist"), 0755) != 0) return -1;
  return gt_write_mnist(path_in("mnist"), 160, 40, 11);
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

/* Bytes the allocator gives the gradients (and, times 2, Adam's state) of the frozen
 * parameters of `net`; checks that exactly the layers under "features" are frozen. */
static int64_t frozen_bytes(ganfw_net *net, int64_t *n_frozen) {
  int64_t bytes = 0;
  *n_frozen = 0;
  for (int64_t i = 0; i < ganfw_net_param_count(net); i++) {
    ganfw_param_info info = {.struct_size = sizeof info};
    CU_ASSERT_EQUAL_FATAL(ganfw_net_param_info(net, i, &info), GANFW_OK);
    const int in_features = strncmp(info.name, "features.", 9) == 0;
    CU_ASSERT_EQUAL(!info.trainable, in_features);
    CU_ASSERT_EQUAL(info.grad == NULL, in_features);
    if (info.trainable) continue;
    bytes += (int64_t)ganfw_alloc_round_size((size_t)info.value->nbytes);
    (*n_frozen)++;
  }
  return bytes;
}

static void fill_batch(ganfw_session *s, ganfw_tensor **x, ganfw_tensor **y) {
  const int64_t B = 16;
  int64_t xs[4] = {B, 1, 32, 32};
  *x = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "x");
  *y = ganfw_tensor_create(s->ctx, GANFW_DTYPE_I32, 1, &B, GANFW_MEM_DATA, "y");
  float *hx = malloc((size_t)(*x)->nbytes);
  int32_t hy[16];
  for (int64_t i = 0; i < B; i++)
    CU_ASSERT_EQUAL(ganfw_dataset_get(s->data, i, 0, hx + i * 1024, &hy[i]), GANFW_OK);
  ganfw_tensor_from_host(*x, hx, (*x)->nbytes);
  ganfw_tensor_from_host(*y, hy, sizeof hy);
  free(hx);
}

/* The parameters of `net` as one host array (allocated, *n floats). */
static float *params_to_host(ganfw_net *net, int64_t *n) {
  *n = 0;
  for (int64_t i = 0; i < ganfw_net_param_count(net); i++) {
    ganfw_param_info info = {.struct_size = sizeof info};
    ganfw_net_param_info(net, i, &info);
    *n += info.value->numel;
  }
  float *h = malloc((size_t)*n * sizeof *h);
  int64_t at = 0;
  for (int64_t i = 0; i < ganfw_net_param_count(net); i++) {
    ganfw_param_info info = {.struct_size = sizeof info};
    ganfw_net_param_info(net, i, &info);
    ganfw_tensor_to_host(info.value, h + at, info.value->nbytes);
    at += info.value->numel;
  }
  return h;
}

static int64_t expected_grad_bytes;

static void test_freeze_bytes(void) {
  write_classifier("plain.yaml", "plain", ", resize: 32", "", 2, 3);
  write_classifier("frozen.yaml", "frozen", ", resize: 32", "  freeze: [features]\n", 2, 3);
  ganfw_run *ra = NULL, *rb = NULL;
  ganfw_session *a = NULL, *b = NULL;
  CU_ASSERT_EQUAL_FATAL(open_session(path_in("plain.yaml"), &ra, &a), GANFW_OK);
  ganfw_status st = open_session(path_in("frozen.yaml"), &rb, &b);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  int64_t n_frozen = 0;
  const int64_t bytes = frozen_bytes(b->classifier, &n_frozen);
  CU_ASSERT(n_frozen >= 4); /* two conv weights, two BatchNorm weights and biases */
  expected_grad_bytes = bytes;
  ganfw_alloc_stats sa, sb;
  ganfw_alloc_get_stats(a->ctx->alloc, &sa);
  ganfw_alloc_get_stats(b->ctx->alloc, &sb);
  const int64_t dg = sa.category[GANFW_MEM_GRAD].current - sb.category[GANFW_MEM_GRAD].current;
  const int64_t ds =
      sa.category[GANFW_MEM_OPTIM_STATE].current - sb.category[GANFW_MEM_OPTIM_STATE].current;
  printf("\n  frozen: %lld tensors; grad %lld -> %lld B (-%lld), optim_state %lld -> %lld B "
         "(-%lld), expected -%lld and -%lld ",
         (long long)n_frozen, (long long)sa.category[GANFW_MEM_GRAD].current,
         (long long)sb.category[GANFW_MEM_GRAD].current, (long long)dg,
         (long long)sa.category[GANFW_MEM_OPTIM_STATE].current,
         (long long)sb.category[GANFW_MEM_OPTIM_STATE].current, (long long)ds, (long long)bytes,
         (long long)(2 * bytes));
  CU_ASSERT(bytes > 0);
  CU_ASSERT_EQUAL(dg, bytes);
  CU_ASSERT_EQUAL(ds, 2 * bytes);
  CU_ASSERT_EQUAL(sa.category[GANFW_MEM_PARAM].current, sb.category[GANFW_MEM_PARAM].current);

  /* one step each: frozen weights keep their values, the rest move; backward stops at the
   * first trainable layer, so the frozen run's step needs no more activation memory */
  int64_t np = 0, np2 = 0;
  float *before = params_to_host(b->classifier, &np);
  ganfw_classifier *ca = NULL, *cb = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_classifier_create(a, &ca), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_classifier_create(b, &cb), GANFW_OK);
  ganfw_tensor *xa, *ya, *xb, *yb;
  fill_batch(a, &xa, &ya);
  fill_batch(b, &xb, &yb);
  ganfw_classifier_stats cs;
  ganfw_alloc_reset_peak(a->ctx->alloc);
  ganfw_alloc_reset_peak(b->ctx->alloc);
  CU_ASSERT_EQUAL(ganfw_classifier_step(ca, xa, ya, &cs), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_classifier_step(cb, xb, yb, &cs), GANFW_OK);
  ganfw_alloc_get_stats(a->ctx->alloc, &sa);
  ganfw_alloc_get_stats(b->ctx->alloc, &sb);
  const int64_t pa = sa.category[GANFW_MEM_ACTIVATION].peak + sa.category[GANFW_MEM_WORKSPACE].peak;
  const int64_t pb = sb.category[GANFW_MEM_ACTIVATION].peak + sb.category[GANFW_MEM_WORKSPACE].peak;
  printf("\n  step activation+workspace peak: all trainable %lld B, conv blocks frozen %lld B ",
         (long long)pa, (long long)pb);
  CU_ASSERT(pb <= pa);
  CU_ASSERT_EQUAL(sb.category[GANFW_MEM_ACTIVATION].current, 0);
  float *after = params_to_host(b->classifier, &np2);
  CU_ASSERT_EQUAL_FATAL(np, np2);
  int64_t at = 0, frozen_changed = 0, trainable_changed = 0;
  for (int64_t i = 0; i < ganfw_net_param_count(b->classifier); i++) {
    ganfw_param_info info = {.struct_size = sizeof info};
    ganfw_net_param_info(b->classifier, i, &info);
    int changed = memcmp(before + at, after + at, (size_t)info.value->nbytes) != 0;
    if (info.trainable)
      trainable_changed += changed;
    else
      frozen_changed += changed;
    at += info.value->numel;
  }
  CU_ASSERT_EQUAL(frozen_changed, 0);
  CU_ASSERT(trainable_changed >= 4);
  free(before);
  free(after);
  ganfw_tensor_destroy(xa);
  ganfw_tensor_destroy(ya);
  ganfw_tensor_destroy(xb);
  ganfw_tensor_destroy(yb);
  ganfw_classifier_destroy(ca);
  ganfw_classifier_destroy(cb);
  ganfw_session_close(a);
  ganfw_session_close(b);
  ganfw_run_close(ra);
  ganfw_run_close(rb);
}

static void test_plan_shows_savings(void) {
  CU_ASSERT_FATAL(expected_grad_bytes > 0);
  ganfw_probe_result pa, pb;
  ganfw_status st = ganfw_plan_make(gt_config(path_in("plain.yaml"), NULL, 0), 0, NULL, &pa);
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  st = ganfw_plan_make(gt_config(path_in("frozen.yaml"), NULL, 0), 0, NULL, &pb);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  const int64_t dg = pa.peak_category[GANFW_MEM_GRAD] - pb.peak_category[GANFW_MEM_GRAD];
  const int64_t ds =
      pa.peak_category[GANFW_MEM_OPTIM_STATE] - pb.peak_category[GANFW_MEM_OPTIM_STATE];
  printf("\n  setup grad %lld %lld peak grad %lld %lld",
         (long long)pa.setup_category[GANFW_MEM_GRAD], (long long)pb.setup_category[GANFW_MEM_GRAD],
         (long long)pa.peak_category[GANFW_MEM_GRAD], (long long)pb.peak_category[GANFW_MEM_GRAD]);
  printf("\n  plan: grad -%lld B, optim_state -%lld B, peak %lld -> %lld B ", (long long)dg,
         (long long)ds, (long long)pa.peak_allocated, (long long)pb.peak_allocated);
  CU_ASSERT_EQUAL(dg, expected_grad_bytes);
  CU_ASSERT_EQUAL(ds, 2 * expected_grad_bytes);
  CU_ASSERT(pb.peak_allocated < pa.peak_allocated);
  ganfw_probe_result_free(&pa);
  ganfw_probe_result_free(&pb);
}

static int msg_has(const char *s) {
  return strstr(ganfw_error_message(), s) != NULL;
}

static void test_freeze_items_and_errors(void) {
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  /* an inclusive index range and a single layer name */
  write_classifier("range.yaml", "range", ", resize: 32", "  freeze: [\"0-1\", classifier.0]\n", 2,
                   3);
  CU_ASSERT_EQUAL_FATAL(open_session(path_in("range.yaml"), &run, &s), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(ganfw_net_layer_name(s->classifier, 0), "features.0");
  CU_ASSERT(!ganfw_net_layer_trainable(s->classifier, 0));
  CU_ASSERT(!ganfw_net_layer_trainable(s->classifier, 1));
  CU_ASSERT(ganfw_net_layer_trainable(s->classifier, 2));
  int found = 0;
  for (int32_t i = 0; i < ganfw_net_layer_count(s->classifier); i++) {
    const char *name = ganfw_net_layer_name(s->classifier, i);
    if (strcmp(name, "classifier.0") == 0) found = !ganfw_net_layer_trainable(s->classifier, i);
    if (strncmp(name, "features.4", 10) == 0)
      CU_ASSERT(ganfw_net_layer_trainable(s->classifier, i));
  }
  CU_ASSERT(found);
  ganfw_session_close(s);
  ganfw_run_close(run);

  write_classifier("bad1.yaml", "bad1", ", resize: 32", "  freeze: [feature]\n", 2, 3);
  CU_ASSERT_EQUAL(open_session(path_in("bad1.yaml"), &run, &s), GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("model.freeze[0]") && msg_has("'feature'"));
  printf("\n  %s ", ganfw_error_message());
  ganfw_session_close(s);
  ganfw_run_close(run);
  write_classifier("bad2.yaml", "bad2", ", resize: 32", "  freeze: [\"3-999\"]\n", 2, 3);
  CU_ASSERT_EQUAL(open_session(path_in("bad2.yaml"), &run, &s), GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("model.freeze[0]") && msg_has("3-999"));
  ganfw_session_close(s);
  ganfw_run_close(run);
  write_classifier("bad3.yaml", "bad3", ", resize: 32", "  freeze: [\"generator:main.0\"]\n", 2, 3);
  CU_ASSERT_EQUAL(open_session(path_in("bad3.yaml"), &run, &s), GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("model.freeze[0]"));
  ganfw_session_close(s);
  ganfw_run_close(run);
}

/* --- model.init_from ----------------------------------------------------------------- */

static void test_init_from(void) {
  write_classifier("src.yaml", "src", ", resize: 32", "", 3, 3);
  CU_ASSERT_EQUAL_FATAL(train(path_in("src.yaml")), GANFW_OK);
  const char *ckpt = path_in("src/checkpoints/step_00000003.safetensors");
  char extra[1200];
  snprintf(extra, sizeof extra, "  init_from: %s\n", ckpt);
  write_classifier("init.yaml", "init", ", resize: 32", extra, 2, 9);
  write_classifier("noinit.yaml", "noinit", ", resize: 32", "", 2, 9);
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(ckpt, &f), GANFW_OK);
  const char *configs[2] = {path_in("init.yaml"), path_in("noinit.yaml")};
  for (int c = 0; c < 2; c++) {
    ganfw_run *run = NULL;
    ganfw_session *s = NULL;
    ganfw_status st = open_session(configs[c], &run, &s);
    if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
    CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
    int64_t same = 0, n = ganfw_net_param_count(s->classifier);
    for (int64_t i = 0; i < n; i++) {
      ganfw_param_info info = {.struct_size = sizeof info};
      ganfw_net_param_info(s->classifier, i, &info);
      char key[256];
      snprintf(key, sizeof key, "classifier.%s", info.name);
      const ganfw_st_tensor *t = ganfw_st_find(f, key);
      CU_ASSERT_PTR_NOT_NULL_FATAL(t);
      CU_ASSERT_EQUAL_FATAL(t->nbytes, info.value->nbytes);
      float *h = malloc((size_t)t->nbytes);
      ganfw_tensor_to_host(info.value, h, t->nbytes);
      same += memcmp(h, t->data, (size_t)t->nbytes) == 0;
      free(h);
    }
    /* BatchNorm running statistics come along too */
    ganfw_net_buffer buf;
    CU_ASSERT_FATAL(ganfw_net_buffer_at(s->classifier, 0, &buf) && buf.tensor);
    const ganfw_st_tensor *t = ganfw_st_find(f, "classifier.features.1.running_mean");
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    float rm[8];
    ganfw_tensor_to_host(buf.tensor, rm, sizeof rm);
    if (c == 0) {
      CU_ASSERT_EQUAL(same, n);
      CU_ASSERT_EQUAL(memcmp(rm, t->data, sizeof rm), 0);
    } else {
      CU_ASSERT(same < n / 2); /* seed 9's own initialisation differs (weights) */
    }
    ganfw_session_close(s);
    ganfw_run_close(run);
  }
  ganfw_st_close(f);
  /* a different architecture: a shape mismatch names the tensor */
  snprintf(extra, sizeof extra, "  init_from: %s\n", ckpt);
  FILE *g = fopen(path_in("wide.yaml"), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(g);
  fprintf(g,
          "device: {type: cpu, threads: 2}\n"
          "data: {dataset: mnist, path: %s/mnist, resize: 32}\n"
          "model: {plugin: cnn, blocks: [{channels: 4, pool: max}], linear: [32], init_from: %s}\n"
          "optim: {plugin: adam}\n"
          "train: {batch_size: 16, max_steps: 1}\n"
          "run: {out_dir: %s/wide}\n",
          root, ckpt, root);
  fclose(g);
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  CU_ASSERT_NOT_EQUAL(open_session(path_in("wide.yaml"), &run, &s), GANFW_OK);
  printf("\n  %s ", ganfw_error_message());
  CU_ASSERT(msg_has("features.0.weight") && msg_has("model.init_from"));
  ganfw_session_close(s);
  ganfw_run_close(run);
}

/* Copies every "classifier.*" tensor of the checkpoint `src` into `dst` as a PyTorch
 * safetensors file ({"format": "pt"}, no crc32s), plus `extra` (an F32 [n] tensor of zeros)
 * when not NULL; `bare`: without the "classifier." prefix, as model.state_dict() names them. */
static void write_pt_copy(const char *src, const char *dst, const char *extra, int64_t n,
                          int bare) {
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(src, &f), GANFW_OK);
  ganfw_st_writer *w = ganfw_st_writer_create();
  CU_ASSERT_PTR_NOT_NULL_FATAL(w);
  CU_ASSERT_EQUAL(ganfw_st_writer_metadata(w, "format", "pt"), GANFW_OK);
  for (int64_t i = 0; i < ganfw_st_count(f); i++) {
    const ganfw_st_tensor *t = ganfw_st_at(f, i);
    if (strncmp(t->name, "classifier.", 11) != 0) continue;
    CU_ASSERT_EQUAL(ganfw_st_writer_add_raw(w, t->name + (bare ? 11 : 0), t->dtype_name, t->ndim,
                                            t->shape, t->data),
                    GANFW_OK);
  }
  float zeros[64] = {0};
  if (extra)
    CU_ASSERT_EQUAL(ganfw_st_writer_add(w, extra, GANFW_DTYPE_F32, 1, &n, zeros), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_st_writer_write(w, dst), GANFW_OK);
  ganfw_st_writer_destroy(w);
  ganfw_st_close(f);
}

/* model.init_from is strict by default, as PyTorch's load_state_dict: a checkpoint whose
 * layer indices shifted (a Dropout after the hidden Linear renumbers the output layer
 * classifier.2 -> classifier.3) used to load with warnings and leave the output layer
 * random; it is now an error naming the tensors, and init_from_strict: false loads what
 * matches. A conv bias the model lacks (a conv before BatchNorm has none here) is an error
 * too. A PyTorch-written file ({"format": "pt"}) loads. */
static void test_init_from_strict(void) {
  write_classifier("strict_src.yaml", "strict_src", ", resize: 32", "", 1, 3);
  CU_ASSERT_EQUAL_FATAL(train(path_in("strict_src.yaml")), GANFW_OK);
  char ckpt[1024], pt[1024], biased[1024], extra[3200];
  snprintf(ckpt, sizeof ckpt, "%s", path_in("strict_src/checkpoints/step_00000001.safetensors"));
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;

  snprintf(extra, sizeof extra, "  linear_dropout: 0.25\n  init_from: %s\n", ckpt);
  write_classifier("shift.yaml", "shift", ", resize: 32", extra, 1, 4);
  CU_ASSERT_EQUAL(open_session(path_in("shift.yaml"), &run, &s), GANFW_ERR_CONFIG);
  printf("\n  %s ", ganfw_error_message());
  CU_ASSERT(msg_has("model.init_from") &&
            msg_has("classifier.classifier.3.weight, classifier.classifier.3.bias are missing") &&
            msg_has("classifier.classifier.2.weight") && msg_has("init_from_strict: false"));
  ganfw_session_close(s);
  ganfw_run_close(run);

  snprintf(extra, sizeof extra,
           "  linear_dropout: 0.25\n  init_from: %s\n  init_from_strict: false\n", ckpt);
  write_classifier("shift_lax.yaml", "shift_lax", ", resize: 32", extra, 1, 4);
  ganfw_status st = open_session(path_in("shift_lax.yaml"), &run, &s);
  if (st != GANFW_OK) printf("\n  %s ", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  ganfw_param_info info = {.struct_size = sizeof info};
  CU_ASSERT_EQUAL(ganfw_net_param_info(s->classifier, 0, &info), GANFW_OK);
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(ckpt, &f), GANFW_OK);
  const ganfw_st_tensor *t = ganfw_st_find(f, "classifier.features.0.weight");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(memcmp(t->data, info.value->data, (size_t)t->nbytes), 0);
  ganfw_st_close(f);
  ganfw_session_close(s);
  ganfw_run_close(run);

  /* The same weights written by PyTorch's safetensors helpers load into the same model,
   * with the net's prefix or with model.state_dict()'s bare names. */
  for (int bare = 0; bare < 2; bare++) {
    snprintf(pt, sizeof pt, "%s",
             path_in(bare ? "strict_src/bare.safetensors" : "strict_src/pt.safetensors"));
    write_pt_copy(ckpt, pt, NULL, 0, bare);
    snprintf(extra, sizeof extra, "  init_from: %s\n", pt);
    write_classifier("pt.yaml", bare ? "bare" : "pt", ", resize: 32", extra, 1, 4);
    st = open_session(path_in("pt.yaml"), &run, &s);
    if (st != GANFW_OK) printf("\n  %s ", ganfw_error_message());
    CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
    CU_ASSERT_EQUAL(ganfw_net_param_info(s->classifier, 0, &info), GANFW_OK);
    CU_ASSERT_EQUAL_FATAL(ganfw_st_open(ckpt, &f), GANFW_OK);
    t = ganfw_st_find(f, "classifier.features.0.weight");
    CU_ASSERT_EQUAL(memcmp(t->data, info.value->data, (size_t)t->nbytes), 0);
    ganfw_st_close(f);
    ganfw_session_close(s);
    ganfw_run_close(run);
  }

  /* A conv bias before BatchNorm (PyTorch's default bias=True): this model has none. */
  snprintf(biased, sizeof biased, "%s", path_in("strict_src/biased.safetensors"));
  write_pt_copy(ckpt, biased, "classifier.features.0.bias", 8, 0);
  snprintf(extra, sizeof extra, "  init_from: %s\n", biased);
  write_classifier("biased.yaml", "biased", ", resize: 32", extra, 1, 4);
  CU_ASSERT_EQUAL(open_session(path_in("biased.yaml"), &run, &s), GANFW_ERR_CONFIG);
  printf("\n  %s ", ganfw_error_message());
  CU_ASSERT(msg_has("classifier.features.0.bias") && msg_has("has no bias") &&
            msg_has("model.init_from"));
  ganfw_session_close(s);
  ganfw_run_close(run);
}

/* --- ganfw score ---------------------------------------------------------------------- */

static void write_gan(const char *name, const char *out_dir, const char *model_extra) {
  FILE *f = fopen(path_in(name), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "seed: 3\n"
          "device: {type: cpu, threads: 2}\n"
          "data: {dataset: mnist, path: %s/mnist, resize: 32}\n"
          "model: {plugin: dcgan, image_size: 32, nz: 16, ngf: 8, ndf: 8%s}\n"
          "optim: {plugin: adam, lr: 2.0e-4, betas: [0.5, 0.999]}\n"
          "train: {batch_size: 8, max_steps: 4, log_every: 0, sample_every: 0,"
          " checkpoint_every: 4}\n"
          "run: {out_dir: %s/%s}\n",
          root, model_extra, root, out_dir);
  fclose(f);
}

static char *score_text(const ganfw_score_args *a, ganfw_score_result *r, ganfw_status *st) {
  char *text = NULL;
  size_t len = 0;
  FILE *m = open_memstream(&text, &len);
  *st = ganfw_score(a, r, m);
  fclose(m);
  return text;
}

static void test_score(void) {
  write_gan("gan.yaml", "gan", "");
  CU_ASSERT_EQUAL_FATAL(train(path_in("gan.yaml")), GANFW_OK);
  write_classifier("judge.yaml", "judge", ", resize: 32", "", 20, 3);
  CU_ASSERT_EQUAL_FATAL(train(path_in("judge.yaml")), GANFW_OK);
  ganfw_score_args a = {.source = path_in("gan"),
                        .classifier = path_in("judge/checkpoints/step_00000020.safetensors"),
                        .n = 300,
                        .batch = 64,
                        .has_seed = 1,
                        .seed = 7};
  ganfw_score_result r1, r2;
  ganfw_status st;
  char *t1 = score_text(&a, &r1, &st);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  char *t2 = score_text(&a, &r2, &st);
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  printf("\n%s", t1);
  CU_ASSERT_STRING_EQUAL(t1, t2); /* deterministic for a seed */
  CU_ASSERT_EQUAL(r1.n, 300);
  CU_ASSERT_EQUAL(r1.classes, 10);
  CU_ASSERT(r1.confidence >= 0.1 && r1.confidence <= 1.0);
  CU_ASSERT(r1.entropy >= 0 && r1.entropy <= log(10.0) + 1e-9);
  CU_ASSERT(r1.inception >= 1.0 && r1.inception <= 10.0 + 1e-9);
  int64_t total = 0;
  for (int j = 0; j < 10; j++) total += r1.histogram[j];
  CU_ASSERT_EQUAL(total, 300);
  free(t1);
  free(t2);
  /* another seed: other images, other numbers */
  a.seed = 8;
  char *t3 = score_text(&a, &r2, &st);
  CU_ASSERT_EQUAL(st, GANFW_OK);
  CU_ASSERT(r2.confidence != r1.confidence);
  free(t3);

  /* the command line, from run folders */
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  char cmd[2048], out[4096];
  snprintf(cmd, sizeof cmd, "'%s/ganfw' score '%s' --classifier '%s' -n 100 --batch 50 --seed 7 -q",
           build ? build : ".", path_in("gan"), path_in("judge"));
  FILE *p = popen(cmd, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  size_t len = fread(out, 1, sizeof out - 1, p);
  out[len] = '\0';
  int status = pclose(p);
  CU_ASSERT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "inception score: "));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "class entropy: "));

  /* a classifier of 28x28 images cannot judge 32x32 ones */
  write_classifier("judge28.yaml", "judge28", "", "", 1, 3);
  CU_ASSERT_EQUAL_FATAL(train(path_in("judge28.yaml")), GANFW_OK);
  a.classifier = path_in("judge28");
  a.n = 10;
  char *t4 = score_text(&a, &r2, &st);
  CU_ASSERT_EQUAL(st, GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("[1,32,32]") && msg_has("[1,28,28]"));
  printf("  %s ", ganfw_error_message());
  free(t4);
}

/* A GAN's items name their net; both nets train with their frozen parts kept. */
static void test_gan_freeze(void) {
  write_gan("ganf.yaml", "ganf", ", freeze: [\"generator:main.0\", \"discriminator:0-1\"]");
  CU_ASSERT_EQUAL_FATAL(train(path_in("ganf.yaml")), GANFW_OK);
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  CU_ASSERT_EQUAL_FATAL(open_session(path_in("ganf.yaml"), &run, &s), GANFW_OK);
  CU_ASSERT(!ganfw_net_layer_trainable(s->generator, 0));
  CU_ASSERT(ganfw_net_layer_trainable(s->generator, 1));
  CU_ASSERT(!ganfw_net_layer_trainable(s->discriminator, 0));
  CU_ASSERT(!ganfw_net_layer_trainable(s->discriminator, 1));
  CU_ASSERT(ganfw_net_layer_trainable(s->discriminator, 2));
  /* the frozen first generator layer still holds its initial weights after training */
  ganfw_param_info info = {.struct_size = sizeof info};
  CU_ASSERT_EQUAL_FATAL(ganfw_net_param_info(s->generator, 0, &info), GANFW_OK);
  CU_ASSERT(!info.trainable);
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path_in("ganf/checkpoints/step_00000004.safetensors"), &f),
                        GANFW_OK);
  const ganfw_st_tensor *t = ganfw_st_find(f, "generator.main.0.weight");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  float *h = malloc((size_t)t->nbytes);
  ganfw_tensor_to_host(info.value, h, t->nbytes);
  CU_ASSERT_EQUAL(memcmp(h, t->data, (size_t)t->nbytes), 0); /* same seed, same init */
  free(h);
  CU_ASSERT_PTR_NULL(ganfw_st_find(f, "optim.generator.main.0.weight.exp_avg"));
  ganfw_st_close(f);
  ganfw_session_close(s);
  ganfw_run_close(run);
  write_gan("ganbad.yaml", "ganbad", ", freeze: [main.0]");
  CU_ASSERT_EQUAL(open_session(path_in("ganbad.yaml"), &run, &s), GANFW_ERR_CONFIG);
  CU_ASSERT(msg_has("generator: or discriminator:"));
  ganfw_session_close(s);
  ganfw_run_close(run);
}

static CU_TestInfo tests[] = {{"freeze_bytes", test_freeze_bytes},
                              {"plan_shows_savings", test_plan_shows_savings},
                              {"freeze_items_and_errors", test_freeze_items_and_errors},
                              {"init_from", test_init_from},
                              {"init_from_strict", test_init_from_strict},
                              {"gan_freeze", test_gan_freeze},
                              {"score", test_score},
                              CU_TEST_INFO_NULL};

int main(void) {
  return gt_run_fixture("freeze", tests, suite_init, suite_clean);
}
