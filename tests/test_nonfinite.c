/* train.on_nonfinite: a NaN or inf loss or gradient without a loss scaler stops the run
 * (stop, the default) or skips that net's update (skip), naming the step, the net and the
 * first layer that went non-finite. The non-finite values are made at a known layer and
 * step by the test strategy tpnan (tests/plugins/nonfinite.c) or by a corrupt pixel:
 * stop keeps the checkpoints written before and exits with the runtime status; skip leaves
 * parameters, optimizer state and BatchNorm statistics bitwise as before the step and goes
 * on; a run without non-finite values is bitwise the same under both; a bad key value is
 * refused with its place and the nearest policy. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/error.h"
#include "config/config.h"
#include "io/safetensors.h"
#include "runtime/tensor.h"
#include "testutil.h"
#include "train/session.h"
#include "train/loop.h"
#include "train/trainer.h"

static char root[64], ganfw[4200], plugins[4200];
static char out[65536]; /* the last run_ganfw's output */

static const char *path_in(const char *rel) {
  static char buf[8][512];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
  return buf[k];
}

static int exists(const char *rel) {
  struct stat sb;
  return stat(path_in(rel), &sb) == 0;
}

static int contains(const char *text, const char *part) {
  if (strstr(text, part)) return 1;
  printf("\n  missing \"%s\" in:\n  %s\n", part, text);
  return 0;
}

/* The GAN (dcgan, 32x32, tiny) and classifier (cnn) configs; checkpoints every 2 steps. */
static void write_configs(void) {
  FILE *f = fopen(path_in("gan.yaml"), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "seed: 3\n"
          "device: {type: cpu, threads: 2}\n"
          "plugin_path: [%s]\n"
          "data: {dataset: mnist, path: %s/mnist, resize: 32}\n"
          "model: {plugin: dcgan, image_size: 32, nz: 16, ngf: 8, ndf: 8}\n"
          "optim: {plugin: adam, lr: 2.0e-4, betas: [0.5, 0.999]}\n"
          "train: {batch_size: 8, max_steps: 6, log_every: 1, sample_every: 0,"
          " checkpoint_every: 2}\n"
          "run: {out_dir: %s/gan, samples: 16}\n",
          plugins, root, root);
  fclose(f);
  f = fopen(path_in("cls.yaml"), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "seed: 3\n"
          "device: {type: cpu, threads: 2}\n"
          "plugin_path: [%s]\n"
          "data: {dataset: mnist, path: %s/mnist}\n"
          "model:\n"
          "  plugin: cnn\n"
          "  blocks:\n"
          "    - {channels: 8, pool: max, batchnorm: true}\n"
          "    - {channels: 16, pool: max, dropout: 0.1}\n"
          "  linear: [32]\n"
          "optim: {plugin: sgd, lr: 0.05, momentum: 0.9}\n"
          "train: {batch_size: 20, max_steps: 6, log_every: 1, checkpoint_every: 1}\n"
          "run: {out_dir: %s/cls}\n",
          plugins, root, root);
  fclose(f);
}

/* `ganfw CONFIG --set ...` in-process; the trainer of the config's model family. */
static ganfw_status train(const char *config, const char *const *sets, int nsets) {
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_status st = ganfw_run_open_file(path_in(config), sets, nsets, &run);
  if (st == GANFW_OK) st = ganfw_session_open(run, 1, NULL, &s);
  if (st == GANFW_OK) st = ganfw_config_check_unused(run->config);
  if (st == GANFW_OK) st = ganfw_train(s);
  ganfw_session_close(s);
  ganfw_run_close(run);
  return st;
}

/* The ganfw binary with args (NULL-terminated): its exit code, its output in `out`. */
static int run_ganfw(const char *const *args) {
  char cmd[8192];
  int n = snprintf(cmd, sizeof cmd, "'%s'", ganfw);
  for (const char *const *a = args; *a; a++) n += snprintf(cmd + n, sizeof cmd - n, " '%s'", *a);
  snprintf(cmd + n, sizeof cmd - n, " 2>&1");
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  size_t len = fread(out, 1, sizeof out - 1, p);
  out[len] = '\0';
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Every tensor of checkpoints a and b is byte for byte the same (weights, BatchNorm
 * buffers, optimizer state); with `position`, the run position metadata too. */
static void assert_same_tensors(const char *a, const char *b, int position) {
  ganfw_st_file *fa = NULL, *fb = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path_in(a), &fa), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path_in(b), &fb), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_count(fa), ganfw_st_count(fb));
  int64_t differ = 0;
  for (int64_t i = 0; i < ganfw_st_count(fa); i++) {
    const ganfw_st_tensor *ta = ganfw_st_at(fa, i);
    const ganfw_st_tensor *tb = ganfw_st_find(fb, ta->name);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tb);
    CU_ASSERT_EQUAL_FATAL(ta->nbytes, tb->nbytes);
    if (memcmp(ta->data, tb->data, (size_t)ta->nbytes) != 0 && differ++ < 3)
      printf("\n  %s differs between %s and %s\n", ta->name, a, b);
  }
  CU_ASSERT_EQUAL(differ, 0);
  const char *keys[] = {"step", "epoch", "loader_position", "rng_offset", "seed"};
  for (size_t i = 0; position && i < sizeof keys / sizeof keys[0]; i++)
    CU_ASSERT_STRING_EQUAL(ganfw_st_metadata(fa, keys[i]), ganfw_st_metadata(fb, keys[i]));
  ganfw_st_close(fa);
  ganfw_st_close(fb);
}

/* The number of tensors that differ between checkpoints a and b. */
static int64_t tensors_differing(const char *a, const char *b) {
  ganfw_st_file *fa = NULL, *fb = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path_in(a), &fa), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path_in(b), &fb), GANFW_OK);
  int64_t differ = 0;
  for (int64_t i = 0; i < ganfw_st_count(fa); i++) {
    const ganfw_st_tensor *ta = ganfw_st_at(fa, i), *tb = ganfw_st_find(fb, ta->name);
    differ += !tb || memcmp(ta->data, tb->data, (size_t)ta->nbytes) != 0;
  }
  ganfw_st_close(fa);
  ganfw_st_close(fb);
  return differ;
}

/* The value of column `name` in the last row of a CSV file; NAN when absent. */
static double last_value(const char *rel, const char *name) {
  FILE *f = fopen(path_in(rel), "r");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  char header[4096], line[4096], last[4096] = "";
  CU_ASSERT_PTR_NOT_NULL_FATAL(fgets(header, sizeof header, f));
  while (fgets(line, sizeof line, f)) memcpy(last, line, sizeof last);
  fclose(f);
  int col = 0;
  for (char *tok = strtok(header, ",\n"); tok; tok = strtok(NULL, ",\n"), col++)
    if (strcmp(tok, name) == 0) break;
  char *p = last;
  for (int c = 0; c < col && p; c++)
    if ((p = strchr(p, ','))) p++;
  return p && *p ? strtod(p, NULL) : NAN;
}

/* --set of the test strategy: `net`'s layer `layer` goes non-finite at `step`. */
static const char *poison_set(const char *net, const char *layer, int step, const char *poison,
                              const char *value) {
  static char buf[4][256];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k],
           "memory=[{plugin: tpnan, net: %s, layer: %s, at_step: %d, poison: %s, value: \"%s\"}]",
           net, layer, step, poison, value);
  return buf[k];
}

static const char *out_set(const char *dir) {
  static char buf[4][600];
  static int k;
  k = (k + 1) % 4;
  snprintf(buf[k], sizeof buf[k], "run.out_dir=%s", path_in(dir));
  return buf[k];
}

static int suite_init(void) {
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  if (!build) return -1;
  snprintf(ganfw, sizeof ganfw, "%s/ganfw", build);
  snprintf(plugins, sizeof plugins, "%s/tests/plugins", build);
  snprintf(root, sizeof root, "/tmp/ganfw_nonfinite_XXXXXX");
  if (!mkdtemp(root) || mkdir(path_in("mnist"), 0755) != 0) return -1;
  return gt_write_mnist(path_in("mnist"), 200, 40, 5);
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

/* --- the key ---------------------------------------------------------------------------- */

static void test_bad_policy_is_refused(void) {
  write_configs();
  FILE *f = fopen(path_in("typo.yaml"), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs("extends: gan.yaml\n"
        "train:\n"
        "  on_nonfinite: skp\n",
        f);
  fclose(f);
  ganfw_status st = train("typo.yaml", NULL, 0);
  CU_ASSERT_EQUAL(st, GANFW_ERR_CONFIG);
  const char *msg = ganfw_error_message();
  CU_ASSERT(contains(msg, "typo.yaml:3:17: train.on_nonfinite: 'skp' is not a policy"));
  CU_ASSERT(contains(msg, "expected stop"));
  CU_ASSERT(contains(msg, "(did you mean 'skip'?)"));
  /* from --set, a far-off word gets no suggestion */
  const char *sets[] = {"train.on_nonfinite=ignore"};
  CU_ASSERT_EQUAL(train("gan.yaml", sets, 1), GANFW_ERR_CONFIG);
  msg = ganfw_error_message();
  CU_ASSERT(contains(msg, "--set train.on_nonfinite=ignore: train.on_nonfinite: 'ignore'"));
  CU_ASSERT_PTR_NULL(strstr(msg, "did you mean"));
  const char *zero[] = {"train.max_nonfinite_skips=0"};
  CU_ASSERT_EQUAL(train("gan.yaml", zero, 1), GANFW_ERR_CONFIG);
  CU_ASSERT(contains(ganfw_error_message(), "train.max_nonfinite_skips: 0 is out of range"));
  /* `ganfw validate` refuses it too, with the config error's exit code */
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"validate", path_in("typo.yaml"), NULL}), 2);
  CU_ASSERT(contains(out, "did you mean 'skip'?"));
}

/* --- the GAN ------------------------------------------------------------------------------ */

/* A run with nothing non-finite is bitwise the same under stop and skip (skip copies the
 * BatchNorm statistics each step but puts nothing back). */
static void test_gan_clean_run_same_under_both(void) {
  write_configs();
  const char *stop[] = {out_set("gan_ref"), "train.max_steps=3"};
  const char *skip[] = {out_set("gan_clean_skip"), "train.max_steps=3", "train.on_nonfinite=skip"};
  CU_ASSERT_EQUAL_FATAL(train("gan.yaml", stop, 2), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(train("gan.yaml", skip, 3), GANFW_OK);
  assert_same_tensors("gan_ref/checkpoints/step_00000003.safetensors",
                      "gan_clean_skip/checkpoints/step_00000003.safetensors", 1);
  CU_ASSERT_EQUAL(last_value("gan_clean_skip/metrics.csv", "nonfinite_skips"), 0.0);
}

/* NaN weights of discriminator.main.2 in step 4: the CLI stops with the runtime status, the
 * message names the step, the net, the loss and the layer; the checkpoint of step 2 is the
 * one a clean run writes, and none of step 4 exists. */
static void test_gan_stop_names_step_net_layer(void) {
  write_configs();
  const char *ref[] = {out_set("gan_ref"), "train.max_steps=3"};
  CU_ASSERT_EQUAL_FATAL(train("gan.yaml", ref, 2), GANFW_OK);
  int code =
      run_ganfw((const char *[]){path_in("gan.yaml"), "--set", out_set("gan_stop"), "--set",
                                 poison_set("discriminator", "main.2", 4, "weight", "nan"), NULL});
  CU_ASSERT_EQUAL(code, 1); /* EXIT_RUNTIME: GANFW_ERR_NUMERIC */
  CU_ASSERT(contains(out, "numeric error: step 4: the discriminator's loss loss_d (real) is nan"));
  CU_ASSERT(contains(out, "the first non-finite output is that of layer discriminator.main.2 "
                          "(conv2d, layer 3 of"));
  CU_ASSERT(contains(out, "whose parameters already hold NaN or inf"));
  CU_ASSERT(contains(out, "stopped before the discriminator's update (train.on_nonfinite: stop)"));
  CU_ASSERT(exists("gan_stop/checkpoints/step_00000002.safetensors"));
  CU_ASSERT(!exists("gan_stop/checkpoints/step_00000004.safetensors"));
  CU_ASSERT(exists("gan_stop/memory.json"));
  assert_same_tensors("gan_ref/checkpoints/step_00000002.safetensors",
                      "gan_stop/checkpoints/step_00000002.safetensors", 1);
}

/* The same poison under skip: step 4 changes nothing (its checkpoint holds step 3's
 * weights, BatchNorm statistics and Adam state bitwise), steps 5 and 6 learn again, the
 * warning names step, net and layer, and metrics.csv counts one skipped step. */
static void test_gan_skip_keeps_state_and_goes_on(void) {
  write_configs();
  const char *ref[] = {out_set("gan_ref"), "train.max_steps=3"};
  CU_ASSERT_EQUAL_FATAL(train("gan.yaml", ref, 2), GANFW_OK);
  int code = run_ganfw((const char *[]){path_in("gan.yaml"), "--set", out_set("gan_skip"), "--set",
                                        poison_set("discriminator", "main.2", 4, "weight", "nan"),
                                        "--set", "train.on_nonfinite=skip", NULL});
  CU_ASSERT_EQUAL_FATAL(code, 0);
  CU_ASSERT(contains(out, "step 4: the discriminator's loss loss_d (real) is nan: the first "
                          "non-finite output is that of layer discriminator.main.2"));
  CU_ASSERT(contains(out, "both updates were skipped (train.on_nonfinite: skip; 1 in a row"));
  assert_same_tensors("gan_ref/checkpoints/step_00000003.safetensors",
                      "gan_skip/checkpoints/step_00000004.safetensors", 0);
  CU_ASSERT(tensors_differing("gan_skip/checkpoints/step_00000004.safetensors",
                              "gan_skip/checkpoints/step_00000006.safetensors") > 0);
  CU_ASSERT_EQUAL(last_value("gan_skip/metrics.csv", "step"), 6.0);
  CU_ASSERT_EQUAL(last_value("gan_skip/metrics.csv", "nonfinite_skips"), 1.0);
}

/* NaN gradients of discriminator.main.5 after the backward of step 3: the forward was
 * finite, the gradient is named. */
static void test_gan_gradient_named(void) {
  write_configs();
  const char *sets[] = {out_set("gan_grad"),
                        poison_set("discriminator", "main.5", 3, "grad", "nan")};
  CU_ASSERT_EQUAL(train("gan.yaml", sets, 2), GANFW_ERR_NUMERIC);
  const char *msg = ganfw_error_message();
  CU_ASSERT(contains(msg, "step 3: the discriminator's loss loss_d is"));
  CU_ASSERT(contains(msg, "(the forward was finite), and its gradients hold NaN or inf: the "
                          "gradient of layer discriminator.main.5 (conv2d"));
  CU_ASSERT(contains(msg, "went non-finite first (in backward order)"));
  CU_ASSERT(exists("gan_grad/checkpoints/step_00000002.safetensors"));
  CU_ASSERT(!exists("gan_grad/checkpoints/step_00000004.safetensors"));
}

/* Non-finite weights are never written: NaN weights set at the end of step 3, when a
 * checkpoint of step 3 is due, stop the run there and no checkpoint of step 3 exists. */
static void test_gan_nonfinite_weights_not_checkpointed(void) {
  write_configs();
  const char *sets[] = {out_set("gan_guard"), "train.checkpoint_every=1",
                        poison_set("generator", "main.0", 4, "weight", "inf")};
  CU_ASSERT_EQUAL(train("gan.yaml", sets, 3), GANFW_ERR_NUMERIC);
  const char *msg = ganfw_error_message();
  CU_ASSERT(contains(msg, "step 3: the generator's layer generator.main.0 (conv_transpose2d"));
  CU_ASSERT(contains(msg, "no checkpoint of them is written"));
  CU_ASSERT(exists("gan_guard/checkpoints/step_00000002.safetensors"));
  CU_ASSERT(!exists("gan_guard/checkpoints/step_00000003.safetensors"));
}

/* --- the step itself: one net skipped, the other learns ----------------------------------- */

/* All parameter values of a net and, with `buffers`, its BatchNorm buffers, concatenated
 * (free()). */
static float *state_copy(ganfw_net *net, int buffers, int64_t *total) {
  int64_t n = 0;
  ganfw_net_buffer b;
  for (int64_t i = 0; i < ganfw_net_param_count(net); i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    ganfw_net_param_info(net, i, &p);
    n += p.value->numel;
  }
  for (int64_t i = 0; buffers && ganfw_net_buffer_at(net, i, &b); i++)
    n += b.tensor ? b.tensor->numel : 2;
  float *buf = malloc((size_t)n * sizeof *buf), *at = buf;
  for (int64_t i = 0; i < ganfw_net_param_count(net); i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    ganfw_net_param_info(net, i, &p);
    ganfw_tensor_to_host(p.value, at, p.value->nbytes);
    at += p.value->numel;
  }
  for (int64_t i = 0; buffers && ganfw_net_buffer_at(net, i, &b); i++) {
    if (b.tensor) {
      ganfw_tensor_to_host(b.tensor, at, b.tensor->nbytes);
      at += b.tensor->numel;
    } else {
      memcpy(at, b.counter, sizeof *b.counter);
      at += 2;
    }
  }
  *total = n;
  return buf;
}

/* One inf pixel in the real batch of step 2 under skip: D's update (and only it) is skipped
 * with D's parameters and BatchNorm statistics bitwise as before, G learns; the note says the
 * real batch held the value (the loss of an inf logit input is NaN, printed "nan" whatever
 * its sign bit). Under stop the same step fails naming the batch, D's parameters untouched. */
static void test_gan_step_inf_pixel(void) {
  for (int policy = 0; policy < 2; policy++) {
    char cfg[600];
    snprintf(cfg, sizeof cfg,
             "seed: 1\n"
             "device: {type: cpu, threads: 2}\n"
             "model: {plugin: dcgan, image_size: 32, channels: 1, nz: 16, ngf: 8, ndf: 8}\n"
             "optim: {plugin: adam, lr: 2.0e-4, betas: [0.5, 0.999]}\n"
             "train: {batch_size: 8, max_steps: 1, on_nonfinite: %s}\n",
             policy ? "skip" : "stop");
    FILE *f = fopen(path_in("step.yaml"), "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fputs(cfg, f);
    fclose(f);
    ganfw_run *run = NULL;
    ganfw_session *s = NULL;
    ganfw_gan *gan = NULL;
    ganfw_data_info info = {.struct_size = sizeof info, .channels = 1, .height = 32, .width = 32};
    ganfw_status st = ganfw_run_open_file(path_in("step.yaml"), NULL, 0, &run);
    if (st == GANFW_OK) st = ganfw_session_open(run, 0, &info, &s);
    if (st == GANFW_OK) st = ganfw_gan_create(s, &gan);
    CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
    const int64_t xs[4] = {8, 1, 32, 32}, zs[4] = {8, 16, 1, 1};
    ganfw_tensor *x = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "x");
    ganfw_tensor *z = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, zs, GANFW_MEM_DATA, "z");
    CU_ASSERT_FATAL(x && z);
    for (int step = 0; step < 4; step++) {
      gt_fill_uniform(x->data, x->numel, -1, 1, 100 + (uint64_t)step);
      gt_fill_uniform(z->data, z->numel, -2, 2, 200 + (uint64_t)step);
      if (step == 2) ((float *)x->data)[77] = INFINITY;
      int64_t nd = 0, ng = 0;
      /* stop: the run ends, so BatchNorm's statistics are not put back; skip: they are */
      float *d0 = state_copy(s->discriminator, policy, &nd);
      float *g0 = state_copy(s->generator, policy, &ng);
      ganfw_gan_stats gs;
      st = ganfw_gan_step(gan, x, z, &gs);
      float *d1 = state_copy(s->discriminator, policy, &nd);
      float *g1 = state_copy(s->generator, policy, &ng);
      const int d_same = memcmp(d0, d1, (size_t)nd * 4) == 0;
      const int g_same = memcmp(g0, g1, (size_t)ng * 4) == 0;
      free(d0), free(d1), free(g0), free(g1);
      if (step != 2) {
        CU_ASSERT_EQUAL(st, GANFW_OK);
        CU_ASSERT(!d_same && !g_same && !gs.nonfinite_d && !gs.nonfinite_g);
        continue;
      }
      CU_ASSERT(d_same);
      if (policy == 0) {
        CU_ASSERT_EQUAL(st, GANFW_ERR_NUMERIC);
        CU_ASSERT(contains(ganfw_error_message(),
                           "the discriminator's loss loss_d (real) is nan: the real batch already "
                           "holds NaN or inf before the first layer, discriminator.main.0"));
        break;
      }
      CU_ASSERT_EQUAL(st, GANFW_OK);
      CU_ASSERT(gs.nonfinite_d && !gs.nonfinite_g && !g_same);
      CU_ASSERT(contains(gs.nonfinite, "the real batch already holds NaN or inf"));
    }
    ganfw_tensor_destroy(x);
    ganfw_tensor_destroy(z);
    ganfw_gan_destroy(gan);
    ganfw_session_close(s);
    ganfw_run_close(run);
  }
}

/* --- the classifier ------------------------------------------------------------------------ */

/* Finite but huge (1e38) weights of the first conv in step 3: its output overflows, the
 * message names it (its parameters being finite), the run stops before the update. */
static void test_classifier_stop_names_layer(void) {
  write_configs();
  const char *sets[] = {out_set("cls_stop"),
                        poison_set("classifier", "features.0", 3, "weight", "1e38")};
  CU_ASSERT_EQUAL(train("cls.yaml", sets, 2), GANFW_ERR_NUMERIC);
  const char *msg = ganfw_error_message();
  CU_ASSERT(contains(msg, "step 3: the classifier's cross-entropy loss is"));
  CU_ASSERT(contains(msg, "the first non-finite output is that of layer classifier.features.0 "
                          "(conv2d, layer 1 of"));
  CU_ASSERT_PTR_NULL(strstr(msg, "whose parameters"));
  CU_ASSERT(contains(msg, "stopped before the classifier's update"));
  CU_ASSERT(exists("cls_stop/checkpoints/step_00000002.safetensors"));
  CU_ASSERT(!exists("cls_stop/checkpoints/step_00000003.safetensors"));
}

/* NaN gradients of the last linear layer (classifier.2) in step 3 under skip: the checkpoint of
 * step 3 is step 2's bitwise (weights, BatchNorm statistics, momentum), step 4 learns; and the
 * clean run is the same under both policies. */
static void test_classifier_skip_and_clean(void) {
  write_configs();
  const char *ref[] = {out_set("cls_ref"), "train.max_steps=4"};
  const char *clean[] = {out_set("cls_clean"), "train.max_steps=4", "train.on_nonfinite=skip"};
  const char *skip[] = {out_set("cls_skip"), "train.max_steps=4", "train.on_nonfinite=skip",
                        poison_set("classifier", "classifier.2", 3, "grad", "nan")};
  CU_ASSERT_EQUAL_FATAL(train("cls.yaml", ref, 2), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(train("cls.yaml", clean, 3), GANFW_OK);
  assert_same_tensors("cls_ref/checkpoints/step_00000004.safetensors",
                      "cls_clean/checkpoints/step_00000004.safetensors", 1);
  ganfw_status st = train("cls.yaml", skip, 4);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  assert_same_tensors("cls_ref/checkpoints/step_00000002.safetensors",
                      "cls_skip/checkpoints/step_00000002.safetensors", 1);
  assert_same_tensors("cls_skip/checkpoints/step_00000002.safetensors",
                      "cls_skip/checkpoints/step_00000003.safetensors", 0);
  CU_ASSERT(tensors_differing("cls_skip/checkpoints/step_00000003.safetensors",
                              "cls_skip/checkpoints/step_00000004.safetensors") > 0);
  CU_ASSERT_EQUAL(last_value("cls_skip/metrics.csv", "nonfinite_skips"), 1.0);
}

/* Skips in a row stop the run at train.max_nonfinite_skips (here 1: the first skip). */
static void test_classifier_skips_in_a_row_stop(void) {
  write_configs();
  const char *sets[] = {out_set("cls_limit"), "train.on_nonfinite=skip", "train.checkpoint_every=4",
                        "train.max_nonfinite_skips=1",
                        poison_set("classifier", "features.0", 3, "weight", "nan")};
  CU_ASSERT_EQUAL(train("cls.yaml", sets, 5), GANFW_ERR_NUMERIC);
  const char *msg = ganfw_error_message();
  CU_ASSERT(contains(msg, "step 3: the classifier's cross-entropy loss is nan"));
  CU_ASSERT(contains(msg, "1 steps in a row were skipped for NaN or inf values "
                          "(train.max_nonfinite_skips: 1)"));
}

/* amp without a scaler (bf16) reports NaN gradients itself; the key decides: skip skips
 * the update (step 3's checkpoint is step 2's), stop ends the run with amp's message. */
static void test_amp_without_scaler_follows_the_key(void) {
  write_configs();
  const char *memory = "memory=[{plugin: tpnan, net: classifier, layer: classifier.2, at_step: 3,"
                       " poison: grad, value: \"nan\"}, {plugin: amp, dtype: bf16}]";
  const char *skip[] = {out_set("amp_skip"), "train.max_steps=4", "train.on_nonfinite=skip",
                        memory};
  ganfw_status st = train("cls.yaml", skip, 4);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  assert_same_tensors("amp_skip/checkpoints/step_00000002.safetensors",
                      "amp_skip/checkpoints/step_00000003.safetensors", 0);
  CU_ASSERT_EQUAL(last_value("amp_skip/metrics.csv", "nonfinite_skips"), 1.0);
  const char *stop[] = {out_set("amp_stop"), "train.max_steps=4", memory};
  CU_ASSERT_EQUAL(train("cls.yaml", stop, 3), GANFW_ERR_NUMERIC);
  const char *msg = ganfw_error_message();
  CU_ASSERT(contains(msg, "step 3: memory strategy 'amp': amp: optimizer 0 has inf or NaN"));
  CU_ASSERT(contains(msg, "the gradient of layer classifier.classifier.2 (linear"));
  CU_ASSERT(!exists("amp_stop/checkpoints/step_00000003.safetensors"));
}

static CU_TestInfo tests[] = {
    {"a bad train.on_nonfinite is refused with its place", test_bad_policy_is_refused},
    {"GAN: a clean run is bitwise the same under stop and skip",
     test_gan_clean_run_same_under_both},
    {"GAN: stop names step, net, loss and layer; checkpoints kept",
     test_gan_stop_names_step_net_layer},
    {"GAN: skip keeps the state bitwise and goes on", test_gan_skip_keeps_state_and_goes_on},
    {"GAN: a non-finite gradient names its layer", test_gan_gradient_named},
    {"GAN: non-finite weights are never checkpointed", test_gan_nonfinite_weights_not_checkpointed},
    {"GAN step: an inf pixel skips D only", test_gan_step_inf_pixel},
    {"classifier: stop names the overflowing layer", test_classifier_stop_names_layer},
    {"classifier: skip keeps the state bitwise; clean runs equal", test_classifier_skip_and_clean},
    {"classifier: max_nonfinite_skips in a row stop the run", test_classifier_skips_in_a_row_stop},
    {"amp without a scaler follows the key", test_amp_without_scaler_follows_the_key},
    CU_TEST_INFO_NULL,
};

int main(void) {
  return gt_run_fixture("nonfinite", tests, suite_init, suite_clean);
}
