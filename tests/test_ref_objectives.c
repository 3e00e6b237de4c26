/* The GAN objective plugins and the training-loop knobs around them, against PyTorch 1.13
 * (tests/ref/gen_objectives.py):
 *   bce (with and without label smoothing), hinge, lsgan (two target settings) and wgan:
 *     every term's loss and gradient with respect to D's outputs, kinks and saturated
 *     logits included, through the loaded plugins (ganfw_bce.so, ...);
 *   wgan's weight clipping after a D step; clip_grad_norm_ (norm, clipped gradients);
 *   the GAN trainer with objective, train.d_steps_per_g_step and train.clip_grad_norm: G
 *     steps every n-th step (the optimizers' step counts), the norms in metrics.csv, D's
 *     weights within the clip, resume bitwise the uninterrupted run;
 *   the generator EMA against torch.lerp; in the trainer its averages in the checkpoint,
 *     resumed bitwise, and `ganfw sample` drawing with them unless --no-ema;
 *   optim.param_groups (no decay on 1-D parameters, another lr for D's first layer) in the
 *     same runs, so that resume covers each group's state; the split, and each group's
 *     rate on a cosine schedule;
 *   train.reuse_fake: num_batches_tracked 2 after 2 steps (4 without), weights bitwise those
 *     of the run that recomputes G(z);
 *   bad input refused naming the key, with nothing written. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "io/safetensors.h"
#include "plugin/plugin_host.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"
#include "testutil.h"
#include "tools/sample.h"
#include "train/ema.h"
#include "train/param_groups.h"
#include "train/session.h"
#include "train/loop.h"
#include "train/trainer.h"

static gt_ref *ref;
static ganfw_ctx *ctx;
static char root[64];

static int suite_init(void) {
  ref = gt_ref_open("objectives");
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 1, .seed = 1};
  if (!ref || ganfw_ctx_create(&opt, &ctx) != GANFW_OK) return -1;
  snprintf(root, sizeof root, "/tmp/ganfw_objective_XXXXXX");
  if (!mkdtemp(root)) return -1;
  char mnist[128];
  snprintf(mnist, sizeof mnist, "%s/mnist", root);
  if (mkdir(mnist, 0755) != 0) return -1;
  return gt_write_mnist(mnist, 96, 20, 5);
}

static int suite_clean(void) {
  gt_ref_close(ref);
  ganfw_ctx_destroy(ctx);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

/* A loaded objective plugin created from the YAML mapping `yaml` (its section). */
typedef struct loaded {
  ganfw_plugin *p;
  ganfw_config *cfg;
  const ganfw_objective_vt *vt;
  void *self;
} loaded;

static loaded load(const char *name, const char *yaml) {
  loaded l = {0};
  char path[160];
  snprintf(path, sizeof path, "%s/objective.yaml", root);
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f, "objective: %s\n", yaml);
  fclose(f);
  CU_ASSERT_EQUAL_FATAL(ganfw_plugin_load(name, GANFW_PLUGIN_OBJECTIVE, NULL, NULL, 0, &l.p),
                        GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_config_load(path, &l.cfg), GANFW_OK);
  const ganfw_cfg *section = ganfw_cfg_section(ganfw_config_root(l.cfg), "objective");
  CU_ASSERT_EQUAL_FATAL(ganfw_plugin_apply_config_keys(l.p, section), GANFW_OK);
  l.vt = ganfw_plugin_vtable(l.p);
  CU_ASSERT_EQUAL_FATAL(l.vt->create(ganfw_host_table(), ctx, section, &l.self), GANFW_OK);
  return l;
}

static void unload(loaded *l) {
  l->vt->destroy(l->self);
  ganfw_config_destroy(l->cfg);
  ganfw_plugin_unload(l->p);
}

/* Every term of plugin `name` (created from `yaml`) against the reference `ref_name`. */
static void check_objective(const char *name, const char *yaml, const char *ref_name) {
  loaded l = load(name, yaml);
  int64_t n = 0;
  const float *y = gt_ref_f32(ref, "y", &n, NULL, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(y);
  const char *terms[] = {"d_real", "d_fake", "g"};
  float *dy = gt_alloc((size_t)n * sizeof *dy);
  for (int32_t t = 0; t < GANFW_OBJ_TERM_COUNT; t++) {
    char key[96];
    snprintf(key, sizeof key, "%s_%s_loss", ref_name, terms[t]);
    const double want = gt_ref_scalar(ref, key);
    double got = 0;
    CU_ASSERT_EQUAL_FATAL(l.vt->loss(l.self, t, n, y, &got, dy), GANFW_OK);
    if (!(fabs(got - want) <= 1e-9 * fmax(1.0, fabs(want))))
      printf("\n  %s %s: loss %.12g, PyTorch %.12g\n", ref_name, terms[t], got, want);
    CU_ASSERT(fabs(got - want) <= 1e-9 * fmax(1.0, fabs(want)));
    snprintf(key, sizeof key, "%s_%s_grad", ref_name, terms[t]);
    const float *want_dy = gt_ref_f32(ref, key, NULL, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(want_dy);
    CU_ASSERT(gt_check_close(key, dy, want_dy, n, 1e-6, 1e-9) <= 1e-6);
    double no_grad = 0; /* dy NULL: the loss alone */
    CU_ASSERT_EQUAL(l.vt->loss(l.self, t, n, y, &no_grad, NULL), GANFW_OK);
    CU_ASSERT_EQUAL(no_grad, got);
  }
  double x;
  CU_ASSERT_EQUAL(l.vt->loss(l.self, 7, n, y, &x, dy), GANFW_ERR_INVALID_ARG); /* no such term */
  ganfw_error_clear();
  gt_free(dy);
  unload(&l);
}

static void test_bce(void) {
  check_objective("bce", "{plugin: bce}", "bce");
  check_objective("bce", "{plugin: bce, label_smoothing: 0.1}", "bce_ls");
}
static void test_hinge(void) {
  check_objective("hinge", "{plugin: hinge}", "hinge");
}
static void test_lsgan(void) {
  check_objective("lsgan", "{plugin: lsgan}", "lsgan");
  check_objective("lsgan", "{plugin: lsgan, a: -1, b: 1, c: 0}", "lsgan2");
}
static void test_wgan(void) {
  check_objective("wgan", "{plugin: wgan}", "wgan");
}

/* bce's summary is the mean sigmoid (D(x) as a probability); the others show the mean. */
static void test_summary(void) {
  loaded b = load("bce", "{plugin: bce}"), w = load("wgan", "{plugin: wgan}");
  const float y[3] = {0.0f, 2.0f, -1.0f};
  const double want = (0.5 + 1 / (1 + exp(-2.0)) + 1 / (1 + exp(1.0))) / 3;
  CU_ASSERT_PTR_NOT_NULL_FATAL(b.vt->summary);
  CU_ASSERT_DOUBLE_EQUAL(b.vt->summary(b.self, 3, y), want, 1e-12);
  CU_ASSERT_PTR_NULL(w.vt->summary);
  unload(&b);
  unload(&w);
}

/* wgan clamps every parameter it is handed to [-clip, clip] and leaves the rest alone. */
static void test_wgan_clip(void) {
  loaded l = load("wgan", "{plugin: wgan, clip: 0.05}");
  CU_ASSERT_PTR_NOT_NULL_FATAL(l.vt->after_d_step);
  int64_t shape[1] = {64};
  ganfw_tensor *t = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 1, shape, GANFW_MEM_PARAM, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  float v[64], back[64];
  gt_fill_uniform(v, 64, -0.2f, 0.2f, 9);
  CU_ASSERT_EQUAL(ganfw_tensor_from_host(t, v, sizeof v), GANFW_OK);
  ganfw_param p = {"w", t, NULL};
  CU_ASSERT_EQUAL(l.vt->after_d_step(l.self, &p, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_tensor_to_host(t, back, sizeof back), GANFW_OK);
  int64_t clamped = 0;
  for (int i = 0; i < 64; i++) {
    const float want = v[i] < -0.05f ? -0.05f : v[i] > 0.05f ? 0.05f : v[i];
    CU_ASSERT_EQUAL(back[i], want);
    clamped += want != v[i];
  }
  CU_ASSERT(clamped > 10); /* the test clamps something */
  ganfw_tensor_destroy(t);
  unload(&l);
}

/* ganfw_clip_grad_norm against torch.nn.utils.clip_grad_norm_, below and above the norm. */
static void test_clip_grad_norm(void) {
  ganfw_session s = {.ctx = ctx};
  ganfw_param params[3];
  ganfw_tensor *g[3];
  for (int i = 0; i < 3; i++) {
    char key[32];
    int64_t shape[4], n = 0;
    int nd = 0;
    snprintf(key, sizeof key, "clip_grad%d", i);
    const float *v = gt_ref_f32(ref, key, &n, shape, &nd);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    g[i] = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, nd, shape, GANFW_MEM_GRAD, key);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g[i]);
    params[i] = (ganfw_param){"p", g[i], g[i]};
  }
  s.optim[0].params = params;
  s.optim[0].n_params = 3;
  const char *tags[] = {"low", "high"};
  for (int k = 0; k < 2; k++) {
    for (int i = 0; i < 3; i++) {
      char key[32];
      int64_t n = 0;
      snprintf(key, sizeof key, "clip_grad%d", i);
      const float *v = gt_ref_f32(ref, key, &n, NULL, NULL);
      CU_ASSERT_EQUAL(ganfw_tensor_from_host(g[i], v, n * 4), GANFW_OK);
    }
    char key[48];
    snprintf(key, sizeof key, "clip_%s_max", tags[k]);
    const double max_norm = gt_ref_scalar(ref, key);
    snprintf(key, sizeof key, "clip_%s_norm", tags[k]);
    const double want_norm = gt_ref_scalar(ref, key);
    double norm = 0;
    CU_ASSERT_EQUAL(ganfw_clip_grad_norm(&s, 0, max_norm, &norm), GANFW_OK);
    CU_ASSERT(fabs(norm - want_norm) <= 1e-6 * want_norm);
    for (int i = 0; i < 3; i++) {
      snprintf(key, sizeof key, "clip_%s_out%d", tags[k], i);
      int64_t n = 0;
      const float *want = gt_ref_f32(ref, key, &n, NULL, NULL);
      float *got = gt_alloc((size_t)n * 4);
      CU_ASSERT_EQUAL(ganfw_tensor_to_host(g[i], got, n * 4), GANFW_OK);
      CU_ASSERT(gt_check_close(key, got, want, n, 1e-6, 1e-9) <= 1e-6);
      gt_free(got);
    }
  }
  for (int i = 0; i < 3; i++) ganfw_tensor_destroy(g[i]);
}

/* ganfw_ema over five steps of a parameter: a copy up to start (2), then lerp. */
static void test_ema_formula(void) {
  int64_t shape[2] = {3, 5};
  ganfw_tensor *w = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 2, shape, GANFW_MEM_PARAM, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(w);
  ganfw_param p = {"w", w, NULL};
  ganfw_session s = {.ctx = ctx};
  s.optim[0].params = &p;
  s.optim[0].n_params = 1;
  s.nets[0] = (ganfw_session_net){.role = "generator", .optim = 0};
  s.n_nets = 1;
  const float zeros[15] = {0};
  CU_ASSERT_EQUAL(ganfw_tensor_from_host(w, zeros, sizeof zeros), GANFW_OK);
  ganfw_ema *e = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_ema_create(&s, 0, 0.9, 2, &e), GANFW_OK);
  for (int t = 1; t <= 5; t++) {
    char key[32];
    snprintf(key, sizeof key, "ema_param%d", t);
    CU_ASSERT_EQUAL(ganfw_tensor_from_host(w, gt_ref_f32(ref, key, NULL, NULL, NULL), 60),
                    GANFW_OK);
    ganfw_ema_update(e, ctx->be, t);
    float got[15];
    CU_ASSERT_EQUAL(ganfw_tensor_to_host(e->avg[0], got, sizeof got), GANFW_OK);
    snprintf(key, sizeof key, "ema_after%d", t);
    CU_ASSERT(gt_check_close(key, got, gt_ref_f32(ref, key, NULL, NULL, NULL), 15, 1e-6, 1e-9) <=
              1e-6);
  }
  ganfw_ema_destroy(e);
  ganfw_tensor_destroy(w);
}

/* --- the trainer with the new keys ------------------------------------------------------- */

static const char *path_in(const char *rel) {
  static char buf[8][512];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
  return buf[k];
}

static void write_config_with(const char *extra, const char *objective) {
  FILE *f = fopen(path_in("gan.yaml"), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "seed: 3\n"
          "device: {type: cpu, threads: 2}\n"
          "data: {dataset: mnist, path: %s/mnist, resize: 32}\n"
          "model: {plugin: dcgan, image_size: 32, nz: 16, ngf: 8, ndf: 8}\n"
          "optim: {plugin: adam, lr: 2.0e-4, betas: [0.5, 0.999], weight_decay: 0.01,"
          " param_groups: [{select: bias_and_norm, weight_decay: 0},"
          " {prefix: main.0, net: discriminator, lr: 1.0e-4}]}\n"
          "train: {batch_size: 8, max_steps: 6, log_every: 1, sample_every: 3,"
          " checkpoint_every: 3, d_steps_per_g_step: 2, clip_grad_norm: {generator: 0.5,"
          " discriminator: 100}, ema: {decay: 0.9, start: 2}}\n"
          "%s"
          "run: {out_dir: %s/a, samples: 16}\n%s",
          root, objective, root, extra);
  fclose(f);
}

static void write_config(const char *extra) {
  write_config_with(extra, "objective: {plugin: wgan, clip: 0.02}\n");
}

static ganfw_status train(const char *const *sets, int nsets) {
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_status st = ganfw_run_open_file(path_in("gan.yaml"), sets, nsets, &run);
  if (st == GANFW_OK) st = ganfw_session_open(run, 1, NULL, &s);
  if (st == GANFW_OK) st = ganfw_config_check_unused(run->config);
  if (st == GANFW_OK) st = ganfw_train(s);
  ganfw_session_close(s);
  ganfw_run_close(run);
  return st;
}

/* Column `name` of every row of metrics.csv in `dir` into v (at most 16 rows). */
static int read_column(const char *dir, const char *name, double *v) {
  char p[600];
  snprintf(p, sizeof p, "%s/metrics.csv", dir);
  FILE *f = fopen(p, "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  char line[2048];
  int col = -1, rows = 0;
  CU_ASSERT_PTR_NOT_NULL_FATAL(fgets(line, sizeof line, f));
  int k = 0;
  for (char *t = strtok(line, ",\n"); t; t = strtok(NULL, ",\n"), k++)
    if (strcmp(t, name) == 0) col = k;
  CU_ASSERT_FATAL(col >= 0);
  while (rows < 16 && fgets(line, sizeof line, f)) {
    k = 0;
    for (char *t = strtok(line, ",\n"); t; t = strtok(NULL, ",\n"), k++)
      if (k == col) v[rows] = atof(t);
    rows++;
  }
  fclose(f);
  return rows;
}

static void test_trainer_knobs(void) {
  write_config("");
  ganfw_status st = train(NULL, 0);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path_in("a/checkpoints/step_00000006.safetensors"), &f),
                        GANFW_OK);
  /* n_critic 2: D stepped 6 times, G 3 */
  CU_ASSERT_STRING_EQUAL(ganfw_st_metadata(f, "optim.discriminator.step"), "6");
  CU_ASSERT_STRING_EQUAL(ganfw_st_metadata(f, "optim.generator.step"), "3");
  /* wgan's clip: every D tensor that is a parameter lies in [-0.02, 0.02]; some at the edge */
  int64_t at_edge = 0, outside = 0, checked = 0;
  for (int64_t i = 0; i < ganfw_st_count(f); i++) {
    const ganfw_st_tensor *t = ganfw_st_at(f, i);
    if (strncmp(t->name, "discriminator.", 14) != 0 || !strstr(t->name, "weight") ||
        t->dtype != GANFW_DTYPE_F32)
      continue;
    const float *v = t->data;
    for (int64_t j = 0; j < t->nbytes / 4; j++) {
      outside += fabsf(v[j]) > 0.02f;
      at_edge += fabsf(v[j]) == 0.02f;
      checked++;
    }
  }
  ganfw_st_close(f);
  CU_ASSERT(checked > 1000);
  CU_ASSERT_EQUAL(outside, 0);
  CU_ASSERT(at_edge > 0);
  /* the norms before clipping: G's at or above 0 on its steps and repeated between them */
  double gn[16], dn[16], lg[16];
  CU_ASSERT_EQUAL(read_column(path_in("a"), "grad_norm_g", gn), 6);
  CU_ASSERT_EQUAL(read_column(path_in("a"), "grad_norm_d", dn), 6);
  CU_ASSERT_EQUAL(read_column(path_in("a"), "loss_g", lg), 6);
  CU_ASSERT_EQUAL(gn[0], 0); /* step 1 is D only */
  CU_ASSERT(gn[1] > 0 && gn[3] > 0 && gn[5] > 0);
  CU_ASSERT_EQUAL(gn[2], gn[1]);
  CU_ASSERT_EQUAL(lg[2], lg[1]);
  for (int i = 0; i < 6; i++) CU_ASSERT(dn[i] > 0 && isfinite(dn[i]));
}

/* The checkpoint holds the generator's averages beside its weights, different from them
 * after averaging began; `ganfw sample` draws with the averages unless --no-ema. */
static void test_ema_in_checkpoint_and_sample(void) {
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path_in("a/checkpoints/step_00000006.safetensors"), &f),
                        GANFW_OK);
  const ganfw_st_tensor *raw = ganfw_st_find(f, "generator.main.0.weight");
  const ganfw_st_tensor *avg = ganfw_st_find(f, "generator_ema.main.0.weight");
  CU_ASSERT_PTR_NOT_NULL_FATAL(raw);
  CU_ASSERT_PTR_NOT_NULL_FATAL(avg);
  CU_ASSERT_EQUAL_FATAL(raw->nbytes, avg->nbytes);
  CU_ASSERT_NOT_EQUAL(memcmp(raw->data, avg->data, (size_t)raw->nbytes), 0);
  CU_ASSERT_PTR_NULL(ganfw_st_find(f, "generator_ema.main.1.running_mean")); /* params only */
  ganfw_st_close(f);
  ganfw_sample_args a = {.source = path_in("a"), .output = path_in("ema.png"), .n = 16, .nrow = 4};
  CU_ASSERT_EQUAL_FATAL(ganfw_sample(&a), GANFW_OK);
  a.output = path_in("raw.png");
  a.no_ema = 1;
  CU_ASSERT_EQUAL_FATAL(ganfw_sample(&a), GANFW_OK);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "cmp -s '%s' '%s'", path_in("ema.png"), path_in("raw.png"));
  CU_ASSERT_NOT_EQUAL(system(cmd), 0); /* the two grids differ */
}

/* 3 steps (the resume lands between a D-only step and a G step), then resume to 6:
 * bitwise the uninterrupted run of test_trainer_knobs. */
static void test_resume_bitwise(void) {
  write_config("");
  char out[600];
  snprintf(out, sizeof out, "run.out_dir=%s", path_in("b"));
  const char *first[] = {"train.max_steps=3", out};
  CU_ASSERT_EQUAL_FATAL(train(first, 2), GANFW_OK);
  const char *second[] = {out, "train.resume=latest"};
  ganfw_status st = train(second, 2);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  gt_assert_same_checkpoint(path_in("a/checkpoints/step_00000006.safetensors"),
                            path_in("b/checkpoints/step_00000006.safetensors"), NULL, 0);
}

/* Each bad input: exit code 2's status, a message naming `needle`, no run folder. */
static void refused(const char *set, const char *needle) {
  write_config("");
  char out[600];
  snprintf(out, sizeof out, "run.out_dir=%s", path_in("bad"));
  const char *sets[] = {out, set};
  ganfw_status st = train(sets, 2);
  CU_ASSERT(st == GANFW_ERR_CONFIG || st == GANFW_ERR_PLUGIN);
  if (!strstr(ganfw_error_message(), needle))
    printf("\n  '%s': expected '%s' in: %s\n", set, needle, ganfw_error_message());
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), needle));
  struct stat sb;
  CU_ASSERT_NOT_EQUAL(stat(path_in("bad"), &sb), 0);
  ganfw_error_clear();
}

static void test_bad_input(void) {
  refused("train.d_steps_per_g_step=0", "train.d_steps_per_g_step");
  refused("train.clip_grad_norm.generator=-1", "train.clip_grad_norm.generator");
  refused("objective.plugin=adam", "objective.plugin");
  refused("objective.plugin=hinje", "hinge");
  refused("objective.clip=-0.1", "objective.clip");
  refused("objective.plugin=bce", "unknown key 'clip'"); /* wgan's key is not bce's */
  refused("train.label_smoothing=0.1", "train.label_smoothing");
  refused("train.ema.decay=1", "train.ema.decay");
  refused("train.ema.decay=0", "train.ema.decay");
  refused("train.ema.start=-5", "train.ema.start");
  refused("train.reuse_fake=maybe", "train.reuse_fake");
  refused("optim.param_groups=[{prefix: main.42}]", "optim.param_groups[0].prefix: 'main.42'");
  refused("optim.param_groups=[{prefix: main.0, net: critic}]", "optim.param_groups[0].net");
  refused("optim.param_groups=[{select: biases}]", "optim.param_groups[0].select");
  refused("optim.param_groups=[{prefix: main.0, momentum: 0.9}]",
          "unknown key 'momentum' in section 'optim.param_groups[0]'");
  refused("optim.param_groups=[{prefix: main.0, warmup_steps: 5}]",
          "optim.param_groups[0].warmup_steps");
  refused("optim.param_groups=[{select: all}, {prefix: main.0}]", "optim.param_groups[1]");
}

/* optim.param_groups in the trainer's session: the parameters split by first match, each
 * group's rate on the schedule from its own base (cosine: half of it half-way). */
static void test_param_groups_session(void) {
  write_config("");
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  const char *cosine[] = {"optim.schedule=cosine"};
  CU_ASSERT_EQUAL_FATAL(ganfw_run_open_file(path_in("gan.yaml"), cosine, 1, &run), GANFW_OK);
  ganfw_status st = ganfw_session_open(run, 1, NULL, &s);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  for (int32_t k = 0; k < 2; k++) {
    const ganfw_session_optim *o = &s->optim[k];
    CU_ASSERT_EQUAL_FATAL(ganfw_param_groups_count(o), 3);
    int64_t one_dim = 0, main0 = 0;
    for (int64_t i = 0; i < o->n_params; i++) {
      if (o->params[i].value->ndim <= 1)
        one_dim++;
      else if (k == 1 && strncmp(o->params[i].name, "main.0.", 7) == 0)
        main0++;
    }
    CU_ASSERT(one_dim > 0);
    CU_ASSERT_EQUAL(ganfw_param_group_size(o, 1), one_dim);
    CU_ASSERT_EQUAL(ganfw_param_group_size(o, 2), main0); /* D's main.0 only */
    CU_ASSERT_EQUAL(ganfw_param_group_size(o, 0) + one_dim + main0, o->n_params);
  }
  ganfw_session_optim *d = &s->optim[1];
  ganfw_optim_set_lr(d, &s->schedule, 3, 6);
  CU_ASSERT_DOUBLE_EQUAL(d->lr, 1.0e-4, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(ganfw_param_group_lr(d, 0), 1.0e-4, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(ganfw_param_group_lr(d, 1), 1.0e-4, 1e-12);
  CU_ASSERT_DOUBLE_EQUAL(ganfw_param_group_lr(d, 2), 0.5e-4, 1e-12);
  /* the checkpoint names every parameter's state as without groups */
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path_in("a/checkpoints/step_00000006.safetensors"), &f),
                        GANFW_OK);
  for (int32_t k = 0; k < 2; k++)
    for (int64_t i = 0; i < s->optim[k].n_params; i++) {
      char key[300];
      snprintf(key, sizeof key, "optim.%s.%s.exp_avg", s->optim[k].role,
               s->optim[k].params[i].name);
      if (!ganfw_st_find(f, key)) printf("\n  %s missing\n", key);
      CU_ASSERT_PTR_NOT_NULL(ganfw_st_find(f, key));
    }
  ganfw_st_close(f);
  ganfw_session_close(s);
  ganfw_run_close(run);
}

/* train.reuse_fake: G runs forward once a step, so its BatchNorm layers count one batch a
 * step (2 after 2 steps, as PyTorch's DC-GAN example; 4 without), and the weights are
 * bitwise those of the run that recomputes G(z). */
static void test_reuse_fake(void) {
  write_config_with("", "");
  const char *runs[2][4] = {{"run.out_dir=PLACE", "train.max_steps=2", "train.d_steps_per_g_step=1",
                             "train.reuse_fake=true"},
                            {"run.out_dir=PLACE", "train.max_steps=2", "train.d_steps_per_g_step=1",
                             "train.reuse_fake=false"}};
  const char *dirs[2] = {"reuse", "recompute"};
  char out[2][600];
  for (int r = 0; r < 2; r++) {
    snprintf(out[r], sizeof out[r], "run.out_dir=%s", path_in(dirs[r]));
    runs[r][0] = out[r];
    ganfw_status st = train(runs[r], 4);
    if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
    CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  }
  ganfw_st_file *f[2] = {NULL, NULL};
  for (int r = 0; r < 2; r++) {
    char p[700];
    snprintf(p, sizeof p, "%s/checkpoints/step_00000002.safetensors", path_in(dirs[r]));
    CU_ASSERT_EQUAL_FATAL(ganfw_st_open(p, &f[r]), GANFW_OK);
  }
  const ganfw_st_tensor *nb[2], *w[2];
  for (int r = 0; r < 2; r++) {
    nb[r] = ganfw_st_find(f[r], "generator.main.1.num_batches_tracked");
    w[r] = ganfw_st_find(f[r], "generator.main.0.weight");
    CU_ASSERT_PTR_NOT_NULL_FATAL(nb[r]);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w[r]);
  }
  int64_t counts[2];
  memcpy(&counts[0], nb[0]->data, 8);
  memcpy(&counts[1], nb[1]->data, 8);
  CU_ASSERT_EQUAL(counts[0], 2);
  CU_ASSERT_EQUAL(counts[1], 4);
  CU_ASSERT_EQUAL(memcmp(w[0]->data, w[1]->data, (size_t)w[0]->nbytes), 0);
  const ganfw_st_tensor *dw[2] = {ganfw_st_find(f[0], "discriminator.main.0.weight"),
                                  ganfw_st_find(f[1], "discriminator.main.0.weight")};
  CU_ASSERT_EQUAL(memcmp(dw[0]->data, dw[1]->data, (size_t)dw[0]->nbytes), 0);
  ganfw_st_close(f[0]);
  ganfw_st_close(f[1]);
}

static void test_bad_objective_sections(void) {
  write_config("");
  const char *sets[] = {"objective.plugin=bce", "objective.label_smoothing=0.7"};
  CU_ASSERT_EQUAL(train(sets, 2), GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "label_smoothing"));
  ganfw_error_clear();
}

int main(void) {
  CU_TestInfo tests[] = {
      {"bce loss and gradient = PyTorch", test_bce},
      {"hinge loss and gradient = PyTorch", test_hinge},
      {"lsgan loss and gradient = PyTorch", test_lsgan},
      {"wgan loss and gradient = PyTorch", test_wgan},
      {"summaries: bce's mean sigmoid, the others none", test_summary},
      {"wgan clamps D's parameters", test_wgan_clip},
      {"clip_grad_norm = torch.nn.utils.clip_grad_norm_", test_clip_grad_norm},
      {"ema = torch.lerp after start", test_ema_formula},
      {"trainer: n_critic, clipping, wgan clip, norms in metrics", test_trainer_knobs},
      {"trainer: EMA in the checkpoint, sample uses it", test_ema_in_checkpoint_and_sample},
      {"trainer: resume with the new keys is bitwise", test_resume_bitwise},
      {"bad input refused naming the key, nothing written", test_bad_input},
      {"bad objective keys refused", test_bad_objective_sections},
      {"param groups: split, rates, checkpoint names", test_param_groups_session},
      {"reuse_fake: G forward once a step, same weights", test_reuse_fake},
      CU_TEST_INFO_NULL,
  };
  return gt_run_fixture("objectives", tests, suite_init, suite_clean);
}
