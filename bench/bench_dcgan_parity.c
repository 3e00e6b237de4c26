/* The ganfw half of the long-horizon parity check (bench/run_parity.sh): trains a GAN config
 * for S steps exactly as `ganfw CONFIG` does (the same model initialisation, loader batches
 * and noise, drawn in the same order from the same RNG) and writes what the PyTorch half
 * (bench/dcgan_parity_torch.py) needs to replay the same run and where to compare it:
 *
 *   OUT/init.safetensors     G and D state_dicts before step 1 ("generator.main.0.weight", ...)
 *   OUT/inputs.safetensors   every step's real batch "x.NNNNNN" [N,C,H,W] and noise "z.NNNNNN"
 *                            [N,nz,1,1], as the step received them (after the transforms)
 *   OUT/weights.safetensors  both nets' parameters after the steps of --dump
 * ("sNNNNNN.<net>.<name>") and the gradients their optimizers stepped with
 * ("sNNNNNN.grad.<net>.<name>") OUT/ganfw.csv            per step: the losses, D(x), D(G(z)), and
 * the L2 norms of each net's parameters and of the gradients its optimizer stepped with
 *
 *   build/bench/bench_dcgan_parity CONFIG OUT [--steps 300] [--dump 1,10,100,300] [--set
 * KEY=VALUE]...
 *
 * Run from the repository root (the plugins come from the build tree). device.memory_layout
 * is set to caching: the planned layout gives the same bits and needs a plan first. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "data/data.h"
#include "io/safetensors.h"
#include "runtime/tensor.h"
#include "train/run.h"
#include "train/session.h"
#include "train/trainer.h"

#define PARITY_MAX_SETS  32
#define PARITY_MAX_DUMPS 64

typedef struct parity_args {
  const char *config, *out;
  int64_t steps;
  int64_t dumps[PARITY_MAX_DUMPS];
  int32_t n_dumps;
  const char *sets[PARITY_MAX_SETS];
  int32_t n_sets;
} parity_args;

static int usage(const char *why) {
  fprintf(stderr,
          "bench_dcgan_parity: %s\n"
          "usage: bench_dcgan_parity CONFIG OUT [--steps 300] [--dump 1,10,100,300] [--set "
          "KEY=VALUE]...\n",
          why);
  return 2;
}

/* "1,10,100" into a->dumps; 0 on a malformed list. */
static int parse_dumps(const char *s, parity_args *a) {
  a->n_dumps = 0;
  while (*s) {
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (end == s || v < 1 || a->n_dumps == PARITY_MAX_DUMPS) return 0;
    a->dumps[a->n_dumps++] = v;
    s = *end == ',' ? end + 1 : end;
    if (*end && *end != ',') return 0;
  }
  return a->n_dumps > 0;
}

static int parse_args(int argc, char **argv, parity_args *a) {
  *a = (parity_args){.steps = 300, .n_dumps = 4, .dumps = {1, 10, 100, 300}};
  int pos = 0;
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(argv[i], "--steps") == 0 && v) {
      a->steps = strtoll(v, NULL, 10);
      if (a->steps < 1 || a->steps > 100000) return usage("--steps: 1..100000");
      i++;
    } else if (strcmp(argv[i], "--dump") == 0 && v) {
      if (!parse_dumps(v, a)) return usage("--dump: a list of steps such as 1,10,100");
      i++;
    } else if (strcmp(argv[i], "--set") == 0 && v) {
      if (a->n_sets == PARITY_MAX_SETS - 1) return usage("too many --set");
      a->sets[a->n_sets++] = v;
      i++;
    } else if (argv[i][0] == '-') {
      return usage("unknown option or a missing value");
    } else if (pos == 0) {
      a->config = argv[i], pos++;
    } else if (pos == 1) {
      a->out = argv[i], pos++;
    } else {
      return usage("too many operands");
    }
  }
  if (pos != 2) return usage("needs CONFIG and OUT");
  a->sets[a->n_sets++] = "device.memory_layout=caching";
  return -1;
}

/* Adds `net`'s parameters to w as "<prefix><role>.<name>" (f32 copies), or with `grads`
 * their gradients as "<prefix>grad.<role>.<name>". */
static ganfw_status add_net(ganfw_st_writer *w, ganfw_net *net, const char *prefix,
                            const char *role, int grads) {
  const int64_t n = ganfw_net_param_count(net);
  for (int64_t i = 0; i < n; i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    ganfw_status st = ganfw_net_param_info(net, i, &p);
    if (st != GANFW_OK) return st;
    ganfw_tensor *t = grads ? p.grad : p.value;
    if (!t) continue;
    float *host = malloc((size_t)t->nbytes);
    if (!host) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
    char name[512];
    snprintf(name, sizeof name, "%s%s%s.%s", prefix, grads ? "grad." : "", role, p.name);
    st = ganfw_tensor_to_host(t, host, t->nbytes);
    if (st == GANFW_OK) st = ganfw_st_writer_add(w, name, t->dtype, t->ndim, t->shape, host);
    free(host);
    if (st != GANFW_OK) return st;
  }
  return GANFW_OK;
}

/* The L2 norms of `net`'s trainable parameters and of their gradients, in double. */
static ganfw_status norms(ganfw_net *net, double *w_norm, double *g_norm) {
  double w2 = 0, g2 = 0;
  const int64_t n = ganfw_net_param_count(net);
  for (int64_t i = 0; i < n; i++) {
    ganfw_param_info p = {.struct_size = sizeof p};
    ganfw_status st = ganfw_net_param_info(net, i, &p);
    if (st != GANFW_OK) return st;
    if (!p.trainable || !p.grad) continue;
    const int64_t k = p.value->numel;
    float *host = malloc((size_t)k * 2 * sizeof(float));
    if (!host) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
    st = ganfw_tensor_to_host(p.value, host, p.value->nbytes);
    if (st == GANFW_OK) st = ganfw_tensor_to_host(p.grad, host + k, p.grad->nbytes);
    for (int64_t j = 0; j < k && st == GANFW_OK; j++) {
      w2 += (double)host[j] * host[j];
      g2 += (double)host[k + j] * host[k + j];
    }
    free(host);
    if (st != GANFW_OK) return st;
  }
  *w_norm = sqrt(w2);
  *g_norm = sqrt(g2);
  return GANFW_OK;
}

/* Adds a copy of t as `name`, through the host buffer `host` (t's size at least). */
static ganfw_status add_host(ganfw_st_writer *w, const char *name, ganfw_tensor *t, float *host) {
  ganfw_status st = ganfw_tensor_to_host(t, host, t->nbytes);
  return st ? st : ganfw_st_writer_add(w, name, GANFW_DTYPE_F32, t->ndim, t->shape, host);
}

/* Adds a copy of t as "<what>.NNNNNN". */
static ganfw_status add_step(ganfw_st_writer *w, const char *what, int64_t step, ganfw_tensor *t,
                             float *host) {
  char name[64];
  snprintf(name, sizeof name, "%s.%06lld", what, (long long)step);
  return add_host(w, name, t, host);
}

/* Step 1's forwards without a tape, before its update: "probe.fake" = G(z), "probe.real_logits"
 * = D(x), "probe.fake_logits" = D(G(z)) (BatchNorm in training mode, as in the step; the
 * running statistics this moves are not read in training). */
static ganfw_status probe(ganfw_st_writer *w, ganfw_session *s, ganfw_tensor *x, ganfw_tensor *z,
                          float *host) {
  ganfw_tensor *fake = NULL, *lr = NULL, *lf = NULL;
  ganfw_status st = ganfw_net_forward(s->generator, z, NULL, &fake);
  if (st == GANFW_OK) st = ganfw_net_forward(s->discriminator, x, NULL, &lr);
  if (st == GANFW_OK) st = ganfw_net_forward(s->discriminator, fake, NULL, &lf);
  if (st == GANFW_OK) st = add_host(w, "probe.fake", fake, host);
  if (st == GANFW_OK) st = add_host(w, "probe.real_logits", lr, host);
  if (st == GANFW_OK) st = add_host(w, "probe.fake_logits", lf, host);
  ganfw_tensor_destroy(fake);
  ganfw_tensor_destroy(lr);
  ganfw_tensor_destroy(lf);
  return st;
}

static ganfw_status run(const parity_args *a) {
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  ganfw_gan *gan = NULL;
  ganfw_loader *loader = NULL;
  ganfw_tensor *x = NULL, *z = NULL;
  float *host_x = NULL, *host_z = NULL;
  FILE *csv = NULL;
  ganfw_st_writer *init = ganfw_st_writer_create(), *inputs = ganfw_st_writer_create(),
                  *weights = ganfw_st_writer_create();
  char path[4096];
  ganfw_status st =
      init && inputs && weights ? GANFW_OK : ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  if (st == GANFW_OK) st = ganfw_run_open_file(a->config, a->sets, a->n_sets, &run);
  if (st == GANFW_OK) st = ganfw_session_open(run, 1, NULL, &s);
  if (st == GANFW_OK && (s->family != GANFW_MODEL_GAN || s->n_classes))
    st = ganfw_error_set(GANFW_ERR_UNSUPPORTED, "%s: not an unconditional GAN", a->config);
  if (st == GANFW_OK) st = ganfw_loader_create(s->data, &s->loader_cfg, &loader);
  if (st == GANFW_OK) st = ganfw_gan_create(s, &gan);
  if (st == GANFW_OK) st = add_net(init, s->generator, "", "generator", 0);
  if (st == GANFW_OK) st = add_net(init, s->discriminator, "", "discriminator", 0);
  if (st == GANFW_OK) {
    snprintf(path, sizeof path, "%s/init.safetensors", a->out);
    st = ganfw_st_writer_write(init, path);
  }
  if (st != GANFW_OK) goto done;
  const ganfw_host *host = ganfw_host_table();
  const int64_t B = s->train.batch_size;
  int64_t xs[4] = {B, s->data_info.channels, s->data_info.height, s->data_info.width};
  int64_t zs[4] = {B, s->nz, 1, 1};
  x = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "batch");
  z = ganfw_tensor_create(s->ctx, GANFW_DTYPE_F32, 4, zs, GANFW_MEM_DATA, "noise");
  host_x = x ? malloc((size_t)x->nbytes) : NULL;
  host_z = z ? malloc((size_t)z->nbytes) : NULL;
  snprintf(path, sizeof path, "%s/ganfw.csv", a->out);
  csv = fopen(path, "w");
  if (!x || !z || !host_x || !host_z || !csv) {
    st = csv ? ganfw_error_set(GANFW_ERR_OOM, "out of memory")
             : ganfw_error_set(GANFW_ERR_IO, "%s: cannot write", path);
    goto done;
  }
  fprintf(csv, "step,loss_d,loss_g,d_x,d_g_z1,d_g_z2,w_norm_g,w_norm_d,g_norm_g,g_norm_d\n");
  /* train/train_gan.c's order: the batch, then the noise, then the step */
  for (int64_t step = 1; step <= a->steps;) {
    ganfw_batch_info bi;
    if ((st = ganfw_loader_next(loader, host_x, NULL, &bi)) != GANFW_OK) break;
    if (bi.n < B) continue; /* a short last batch (drop_last: false), as the trainer skips it */
    if ((st = ganfw_tensor_from_host(x, host_x, x->nbytes)) ||
        (st = host->rng_normal(s->ctx, z, 0.0f, 1.0f)) ||
        (st = add_step(inputs, "x", step, x, host_x)) ||
        (st = add_step(inputs, "z", step, z, host_z)))
      break;
    if (step == 1 && (st = probe(inputs, s, x, z, host_x)) != GANFW_OK) break;
    ganfw_gan_stats gs;
    if ((st = ganfw_gan_step(gan, x, z, &gs)) != GANFW_OK) break;
    double wg, wd, gg, gd;
    if ((st = norms(s->generator, &wg, &gg)) || (st = norms(s->discriminator, &wd, &gd))) break;
    fprintf(csv, "%lld,%.9g,%.9g,%.9g,%.9g,%.9g,%.12g,%.12g,%.12g,%.12g\n", (long long)step,
            gs.loss_d, gs.loss_g, gs.d_x, gs.d_g_z1, gs.d_g_z2, wg, wd, gg, gd);
    for (int32_t i = 0; i < a->n_dumps; i++)
      if (a->dumps[i] == step) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "s%06lld.", (long long)step);
        if ((st = add_net(weights, s->generator, prefix, "generator", 0)) ||
            (st = add_net(weights, s->discriminator, prefix, "discriminator", 0)) ||
            (st = add_net(weights, s->generator, prefix, "generator", 1)) ||
            (st = add_net(weights, s->discriminator, prefix, "discriminator", 1)))
          goto done;
      }
    if (step % 50 == 0) fprintf(stderr, "bench_dcgan_parity: step %lld\n", (long long)step);
    step++;
  }
  if (st == GANFW_OK) {
    snprintf(path, sizeof path, "%s/inputs.safetensors", a->out);
    st = ganfw_st_writer_write(inputs, path);
  }
  if (st == GANFW_OK) {
    snprintf(path, sizeof path, "%s/weights.safetensors", a->out);
    st = ganfw_st_writer_write(weights, path);
  }
done:
  if (csv && fclose(csv) != 0 && st == GANFW_OK)
    st = ganfw_error_set(GANFW_ERR_IO, "%s/ganfw.csv: write failed", a->out);
  free(host_x);
  free(host_z);
  ganfw_tensor_destroy(x);
  ganfw_tensor_destroy(z);
  ganfw_gan_destroy(gan);
  ganfw_loader_destroy(loader);
  ganfw_session_close(s);
  ganfw_run_close(run);
  ganfw_st_writer_destroy(init);
  ganfw_st_writer_destroy(inputs);
  ganfw_st_writer_destroy(weights);
  return st;
}

int main(int argc, char **argv) {
  parity_args a;
  int rc = parse_args(argc, argv, &a);
  if (rc >= 0) return rc;
  ganfw_status st = run(&a);
  if (st == GANFW_OK) return 0;
  const char *msg = ganfw_error_message();
  fprintf(stderr, "bench_dcgan_parity: %s: %s\n", ganfw_status_name(st),
          *msg ? msg : "(no message)");
  return 1;
}
