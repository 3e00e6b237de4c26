/* Trainer plugins end to end on a small synthetic MNIST: the autoencoder trainer (plugins/
 * trainers/autoencoder) with the convae model learns as an AE and as a VAE, writes its
 * scalars, test evaluation, sample grid and a checkpoint of every net and optimizer;
 * resume is bitwise the uninterrupted run; the plan on the meta backend equals the
 * measured step (also with micro-batches); bad configs name the key. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/error.h"
#include "config/config.h"
#include "testutil.h"
#include "io/safetensors.h"
#include "tools/eval.h"
#include "plan/probe.h"
#include "tools/sample.h"
#include "train/session.h"
#include "train/train_program.h"

static char root[64];

static const char *path_in(const char *rel) {
  static char buf[8][1024];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
  return buf[k];
}

static int exists(const char *rel) {
  struct stat sb;
  return stat(path_in(rel), &sb) == 0;
}

/* A config: the convae model and the autoencoder trainer, `extra` lines appended. */
static void write_config(const char *name, int vae, const char *extra) {
  FILE *f = fopen(path_in(name), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "seed: 3\n"
          "device: {type: cpu, threads: 2}\n"
          "data: {dataset: mnist, path: %s/mnist%s}\n"
          "model: {plugin: convae, latent: 4, channels: 4, vae: %s, output: %s}\n"
          "trainer: {plugin: autoencoder, vae: %s}\n"
          "train: {batch_size: 20, epochs: 2, log_every: 1, checkpoint_every: 6, "
          "sample_every: 6}\n"
          "%s",
          root, vae ? ", normalize: {mean: [0.0], std: [1.0]}" : "", vae ? "true" : "false",
          vae ? "none" : "tanh", vae ? "true" : "false", extra);
  fclose(f);
}

static int suite_init(void) {
  snprintf(root, sizeof root, "/tmp/ganfw_trainer_XXXXXX");
  if (!mkdtemp(root)) return -1;
  if (mkdir(path_in("mnist"), 0755) != 0) return -1;
  return gt_write_mnist(path_in("mnist"), 240, 100, 5);
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

static void check_learns(int vae, const char *dir) {
  char cfg[64], extra[512];
  snprintf(cfg, sizeof cfg, "%s.yaml", dir);
  snprintf(extra, sizeof extra, "optim: {plugin: adam, lr: 0.003}\nrun: {out_dir: %s}\n",
           path_in(dir));
  write_config(cfg, vae, extra);
  ganfw_status st = gt_train(path_in(cfg), NULL, 0);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  char metrics[1100], eval[1100];
  snprintf(metrics, sizeof metrics, "%s/metrics.csv", path_in(dir));
  snprintf(eval, sizeof eval, "%s/eval.csv", path_in(dir));
  double loss[64], test[8];
  int n = 0, ne = 0;
  n = gt_csv_column(metrics, 2, loss, 64);
  CU_ASSERT_EQUAL(n, 24); /* 12 full batches an epoch, every step logged */
  CU_ASSERT(n > 2 && loss[n - 1] < 0.8 * loss[0]);
  ne = gt_csv_column(eval, 3, test, 8); /* the first scalar after step,epoch,images: loss */
  CU_ASSERT_EQUAL(ne, 2);               /* once per epoch */
  CU_ASSERT(ne == 2 && test[1] < test[0] * 1.05 && test[1] > 0);
  char rel[256];
  snprintf(rel, sizeof rel, "%s/samples/step_000024.png", dir);
  CU_ASSERT(exists(rel));
  snprintf(rel, sizeof rel, "%s/checkpoints/step_00000024.safetensors", dir);
  CU_ASSERT(exists(rel));
}

static void test_ae_learns(void) {
  check_learns(0, "ae");
}

static void test_vae_learns(void) {
  check_learns(1, "vae");
}

/* `ganfw eval` and `ganfw sample` on the VAE's run: the test scalars of its evaluate() (the
 * ELBO as eval.csv has it after the last epoch) and the trainer's grid. */
static void test_eval_and_sample_a_run(void) {
  char text[4096] = "";
  FILE *f = tmpfile();
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  ganfw_eval_args ea = {.source = path_in("vae")};
  ganfw_status st = ganfw_eval(&ea, f);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  rewind(f);
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = '\0';
  fclose(f);
  const char *elbo = strstr(text, "elbo");
  CU_ASSERT_PTR_NOT_NULL_FATAL(elbo);
  double got = strtod(elbo + 4, NULL), want[8];
  char eval[1100];
  snprintf(eval, sizeof eval, "%s/eval.csv", path_in("vae"));
  int ne = 0;
  ne = gt_csv_column(eval, 6, want, 8); /* step,epoch,images,loss,loss_rec,kl,elbo */
  CU_ASSERT_EQUAL_FATAL(ne, 2);
  CU_ASSERT(got < 0 && fabs(got - want[1]) <= 1e-4 * fabs(want[1]));
  char png[1100];
  snprintf(png, sizeof png, "%s/grid.png", path_in("vae"));
  ganfw_sample_args sa = {.source = path_in("vae"), .output = png, .n = 6, .nrow = 6};
  st = ganfw_sample(&sa);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL(st, GANFW_OK);
  CU_ASSERT(exists("vae/grid.png"));
}

/* 12 steps straight against 6 + 6 from the checkpoint of step 6: the same weights and
 * optimizer states, bit for bit (the VAE draws eps from the run's RNG every step). */
static void test_resume_is_bitwise(void) {
  CU_ASSERT_EQUAL_FATAL(mkdir(path_in("vae_b"), 0755), 0);
  CU_ASSERT_EQUAL_FATAL(mkdir(path_in("vae_b/checkpoints"), 0755), 0);
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", path_in("vae/checkpoints/step_00000006.safetensors"),
           path_in("vae_b/checkpoints/"));
  CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
  char out[512];
  snprintf(out, sizeof out, "run.out_dir=%s", path_in("vae_b"));
  const char *sets[] = {out, "train.resume=latest", "train.max_steps=12"};
  ganfw_status st = gt_train(path_in("vae.yaml"), sets, 3);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  static const char *const keys[] = {"step", "rng_offset"};
  gt_assert_same_checkpoint(path_in("vae/checkpoints/step_00000012.safetensors"),
                            path_in("vae_b/checkpoints/step_00000012.safetensors"), keys, 2);
}

/* train.ema of a trainer's net: the checkpoint holds "decoder_ema.*" beside "decoder.*",
 * the averages lagging the weights; an unknown or frozen net is refused. */
static void test_ema_of_a_net(void) {
  char extra[512];
  snprintf(extra, sizeof extra, "optim: {plugin: adam, lr: 0.01}\nrun: {out_dir: %s}\n",
           path_in("ema"));
  write_config("ema.yaml", 0, extra);
  const char *sets[] = {"train.max_steps=6", "train.ema.net=decoder", "train.ema.decay=0.5"};
  ganfw_status st = gt_train(path_in("ema.yaml"), sets, 3);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path_in("ema/checkpoints/step_00000006.safetensors"), &f),
                        GANFW_OK);
  int averaged = 0, lagging = 0;
  for (int64_t i = 0; i < ganfw_st_count(f); i++) {
    const ganfw_st_tensor *t = ganfw_st_at(f, i);
    if (strncmp(t->name, "decoder_ema.", 12) != 0) continue;
    char name[512];
    snprintf(name, sizeof name, "decoder.%s", t->name + 12);
    const ganfw_st_tensor *w = ganfw_st_find(f, name);
    CU_ASSERT_PTR_NOT_NULL_FATAL(w);
    CU_ASSERT_EQUAL_FATAL(w->nbytes, t->nbytes);
    averaged++;
    lagging += memcmp(w->data, t->data, (size_t)t->nbytes) != 0;
  }
  CU_ASSERT(averaged >= 4); /* weights and biases of the decoder's layers */
  CU_ASSERT_EQUAL(lagging, averaged);
  CU_ASSERT_PTR_NULL(ganfw_st_find(f, "encoder_ema.net.0.weight"));
  ganfw_st_close(f);
  const char *bad[] = {"train.max_steps=1", "train.ema.net=decodr"};
  CU_ASSERT_NOT_EQUAL(gt_train(path_in("ema.yaml"), bad, 2), GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "train.ema.net 'decodr'"));
  const char *none[] = {"train.max_steps=1", "train.ema.decay=0.5"};
  CU_ASSERT_NOT_EQUAL(gt_train(path_in("ema.yaml"), none, 2), GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "name the net to average"));
  ganfw_error_clear();
}

/* How many tensors named `prefix`* differ between two checkpoints of a run (-1: unreadable
 * or not the same tensors). */
static int differing(const char *a, const char *b, const char *prefix) {
  ganfw_st_file *fa = NULL, *fb = NULL;
  int n = -1;
  if (ganfw_st_open(path_in(a), &fa) == GANFW_OK && ganfw_st_open(path_in(b), &fb) == GANFW_OK) {
    n = 0;
    for (int64_t i = 0; i < ganfw_st_count(fa) && n >= 0; i++) {
      const ganfw_st_tensor *x = ganfw_st_at(fa, i), *y = ganfw_st_find(fb, x->name);
      if (strncmp(x->name, prefix, strlen(prefix)) != 0) continue;
      if (!y || y->nbytes != x->nbytes)
        n = -1;
      else
        n += memcmp(x->data, y->data, (size_t)x->nbytes) != 0;
    }
  }
  ganfw_st_close(fa);
  ganfw_st_close(fb);
  return n;
}

/* train.update_every: {decoder: 3}: the decoder's optimizer steps on steps 3, 6, ... only
 * (its weights stay as they were through steps 1 and 2), the encoder's on every step; the
 * plan measures a step that updates both; a role the trainer lacks and a scalar are
 * refused naming the key. */
static void test_update_every(void) {
  char extra[512];
  snprintf(extra, sizeof extra, "optim: {plugin: adam, lr: 0.01}\nrun: {out_dir: %s}\n",
           path_in("every"));
  write_config("every.yaml", 0, extra);
  const char *sets[] = {"train.max_steps=3", "train.checkpoint_every=1",
                        "train.update_every.decoder=3"};
  ganfw_status st = gt_train(path_in("every.yaml"), sets, 3);
  if (st != GANFW_OK) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  const char *c1 = "every/checkpoints/step_00000001.safetensors",
             *c2 = "every/checkpoints/step_00000002.safetensors",
             *c3 = "every/checkpoints/step_00000003.safetensors";
  CU_ASSERT_EQUAL(differing(c1, c2, "decoder."), 0);
  CU_ASSERT(differing(c2, c3, "decoder.") >= 4);
  CU_ASSERT(differing(c1, c2, "encoder.") >= 4);
  CU_ASSERT(differing(c2, c3, "encoder.") >= 4);
  /* the plan's step updates every net: the same bytes as without the key */
  ganfw_probe_options opt = {.meta = 1, .warmup = 1, .steps = 1, .real_data = 0};
  ganfw_probe_result with, without;
  CU_ASSERT_EQUAL_FATAL(ganfw_probe_run(gt_config(path_in("every.yaml"), sets + 2, 1), &opt, &with),
                        GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_probe_run(gt_config(path_in("every.yaml"), NULL, 0), &opt, &without),
                        GANFW_OK);
  CU_ASSERT_EQUAL(with.peak_allocated, without.peak_allocated);
  CU_ASSERT_EQUAL(with.peak_category[GANFW_MEM_OPTIM_STATE],
                  without.peak_category[GANFW_MEM_OPTIM_STATE]);
  ganfw_probe_result_free(&with);
  ganfw_probe_result_free(&without);
  const char *bad[] = {"train.max_steps=1", "train.update_every.decodr=2"};
  CU_ASSERT_NOT_EQUAL(gt_train(path_in("every.yaml"), bad, 2), GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(),
                                "train.update_every.decodr: trainer 'autoencoder' drives "
                                "no net 'decodr' (its nets: encoder, decoder)"));
  const char *scalar[] = {"train.max_steps=1", "train.update_every=3"};
  CU_ASSERT_NOT_EQUAL(gt_train(path_in("every.yaml"), scalar, 2), GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "train.update_every is a map"));
  ganfw_error_clear();
}

/* The plan (meta backend) and the measured step agree exactly, per phase, with and
 * without micro-batches. */
static void test_plan_is_exact(void) {
  const char *variants[] = {"", "memory: [{plugin: accumulate, micro_batches: 2}]\n",
                            "memory: [{plugin: checkpoint, nets: [encoder, decoder]}]\n"};
  for (int v = 0; v < 3; v++) {
    char extra[512];
    snprintf(extra, sizeof extra, "optim: {plugin: adam}\n%srun: {out_dir: %s}\n", variants[v],
             path_in("plan"));
    write_config("plan.yaml", 1, extra);
    ganfw_probe_options opt = {.meta = 1, .warmup = 1, .steps = 1, .real_data = 0};
    ganfw_probe_result plan, real;
    CU_ASSERT_EQUAL_FATAL(ganfw_probe_run(gt_config(path_in("plan.yaml"), NULL, 0), &opt, &plan),
                          GANFW_OK);
    opt.meta = 0;
    CU_ASSERT_EQUAL_FATAL(ganfw_probe_run(gt_config(path_in("plan.yaml"), NULL, 0), &opt, &real),
                          GANFW_OK);
    CU_ASSERT_EQUAL(plan.peak_allocated, real.peak_allocated);
    CU_ASSERT_EQUAL(plan.n_phases, 2);
    CU_ASSERT_EQUAL(real.n_phases, 2);
    CU_ASSERT_STRING_EQUAL(ganfw_probe_phase_name(&plan, 0), "reconstruction pass");
    for (int k = 0; k < plan.n_phases; k++)
      CU_ASSERT_EQUAL(plan.phase[k].allocated, real.phase[k].allocated);
    CU_ASSERT(plan.peak_allocated > 0);
    ganfw_probe_result_free(&plan);
    ganfw_probe_result_free(&real);
  }
}

/* A config that must fail with `want` in the message. */
static void expect_error(const char *text, const char *want) {
  FILE *f = fopen(path_in("bad.yaml"), "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fprintf(f,
          "seed: 1\ndevice: {type: cpu, threads: 1}\ndata: {dataset: mnist, path: %s/mnist}\n"
          "train: {batch_size: 20, epochs: 1}\n%s",
          root, text);
  fclose(f);
  ganfw_status st = gt_train(path_in("bad.yaml"), NULL, 0);
  CU_ASSERT_NOT_EQUAL(st, GANFW_OK);
  if (!strstr(ganfw_error_message(), want))
    printf("\n  expected '%s' in: %s\n", want, ganfw_error_message());
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), want));
  ganfw_error_clear();
}

static void test_bad_configs(void) {
  /* a role the model does not build */
  expect_error("model: {plugin: cnn, blocks: [{channels: 4}]}\ntrainer: {plugin: autoencoder}\n"
               "optim: {plugin: adam}\n",
               "drives a net 'encoder' that model 'cnn' does not build");
  /* a model for a trainer plugin without one */
  expect_error("model: {plugin: convae}\noptim: {plugin: adam}\n", "trainer: {plugin: NAME}");
  /* a built-in trainer for the wrong family */
  expect_error("model: {plugin: convae}\ntrainer: {plugin: gan}\noptim: {plugin: adam}\n",
               "trainer.plugin 'gan' drives a GAN");
  /* an optimizer section for a net that does not exist */
  expect_error("model: {plugin: convae}\ntrainer: {plugin: autoencoder}\n"
               "optim: {plugin: adam, encoder: {lr: 0.001}, decodr: {lr: 0.001}}\n",
               "optim.decodr: trainer 'autoencoder' has no net 'decodr'");
  /* gradient checkpointing of a net no trainer role names */
  expect_error("model: {plugin: convae}\ntrainer: {plugin: autoencoder}\noptim: {plugin: adam}\n"
               "memory: [{plugin: checkpoint, nets: [encoder, decodr]}]\n",
               "nets[1] is 'decodr', and no net of this run has that role");
  /* per-net sections that leave a net without an optimizer */
  expect_error("model: {plugin: convae}\ntrainer: {plugin: autoencoder}\n"
               "optim: {plugin: adam, encoder: {lr: 0.001}}\n",
               "none for the decoder");
}

int main(void) {
  CU_TestInfo tests[] = {{"an AE learns; scalars, eval, samples, checkpoint", test_ae_learns},
                         {"a VAE learns", test_vae_learns},
                         {"ganfw eval and sample of a trainer's run", test_eval_and_sample_a_run},
                         {"resume is bitwise", test_resume_is_bitwise},
                         {"train.ema of a trainer's net", test_ema_of_a_net},
                         {"train.update_every: a net's n_critic ratio", test_update_every},
                         {"the plan equals the measured step", test_plan_is_exact},
                         {"bad configs name the key", test_bad_configs},
                         CU_TEST_INFO_NULL};
  return gt_run_fixture("trainer_plugin", tests, suite_init, suite_clean);
}
