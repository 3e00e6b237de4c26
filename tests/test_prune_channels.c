/* Structured channel pruning (core/src/nn/prune_channels.h) and model.widths
 * (core/src/nn/net_widths.c, core/src/train/widths.c) on configs/resnet20_fashion.yaml over a
 * small generated MNIST-format folder: the dependency groups of ResNet-20, the widths of 50%
 * removal, the pruned net's eval forward against the original's with the removed channels
 * silenced, its plan against the unpruned one and against a measured step, the errors of bad
 * widths, and the pruned state_dict loaded strictly into PyTorch's CIFAR ResNet. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/error.h"
#include "base/log.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "nn/layer.h"
#include "nn/net.h"
#include "io/prune_file.h"
#include "nn/prune_channels.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"
#include "tools/plan.h"
#include "tools/report.h"
#include "train/run.h"
#include "train/session.h"
#include "testutil.h"

static char data_dir[] = "/tmp/ganfw_prune_chan_XXXXXX";
static char config[4200];
static char data_set[256];

static int suite_init(void) {
  if (!mkdtemp(data_dir) || gt_write_mnist(data_dir, 100, 10, 7) != 0) return -1;
  snprintf(config, sizeof config, "%s/configs/resnet20_fashion.yaml",
           getenv("GANFW_SOURCE_DIR") ? getenv("GANFW_SOURCE_DIR") : ".");
  snprintf(data_set, sizeof data_set, "data.path=%s", data_dir);
  return 0;
}

static int suite_clean(void) {
  char rm[160];
  snprintf(rm, sizeof rm, "rm -rf '%s'", data_dir);
  return system(rm) == 0 ? 0 : -1;
}

/* A session of the config with data_set, a batch of 8 and the extra sets[0..n); NULL with the
 * error left set when it does not open. */
typedef struct opened {
  ganfw_run *run;
  ganfw_session *s;
} opened;

static ganfw_status open_with(const char *const *extra, int n, opened *o) {
  const char *sets[16] = {data_set, "train.batch_size=8"};
  int k = 2;
  for (int i = 0; i < n && k < 16; i++) sets[k++] = extra[i];
  o->run = NULL, o->s = NULL;
  ganfw_status st = ganfw_run_open_file(config, sets, k, &o->run);
  if (st == GANFW_OK) st = ganfw_session_open(o->run, 1, NULL, &o->s);
  return st;
}

static void close_opened(opened *o) {
  ganfw_session_close(o->s);
  ganfw_run_close(o->run);
  o->s = NULL, o->run = NULL;
}

/* Random values in every BatchNorm's weight, bias and running statistics, so that gamma and
 * beta matter and differ per channel. */
static void perturb_batchnorms(ganfw_net *net, uint64_t seed) {
  for (int32_t i = 0; i < ganfw_net_layer_count(net); i++) {
    ganfw_layer *l = ganfw_net_layer_at(net, i);
    ganfw_batchnorm_args *bn = ganfw_batchnorm_of(l);
    if (!bn) continue;
    ganfw_tensor *t[4] = {l->param[0], l->param[1], bn->running_mean, bn->running_var};
    const float lo[4] = {0.5f, -0.5f, -0.2f, 0.5f}, hi[4] = {1.5f, 0.5f, 0.2f, 1.5f};
    for (int k = 0; k < 4; k++) {
      float *h = malloc((size_t)t[k]->numel * sizeof *h);
      CU_ASSERT_PTR_NOT_NULL_FATAL(h);
      gt_fill_uniform(h, t[k]->numel, lo[k], hi[k], seed + (uint64_t)(i * 4 + k));
      CU_ASSERT_EQUAL(ganfw_tensor_from_host(t[k], h, t[k]->numel * 4), GANFW_OK);
      free(h);
    }
  }
}

/* The index of the group whose producers include `layer`, or -1. */
static int32_t group_with(const ganfw_channel_prune_plan *p, const ganfw_net *net,
                          const char *layer) {
  const int32_t li = ganfw_net_layer_index(net, layer);
  for (int32_t g = 0; g < ganfw_channel_prune_group_count(p); g++) {
    ganfw_channel_group_info gi;
    CU_ASSERT_EQUAL_FATAL(ganfw_channel_prune_group_at(p, g, &gi), GANFW_OK);
    for (int32_t k = 0; k < gi.n_producers; k++)
      if (gi.producers[k] == li) return g;
  }
  return -1;
}

static ganfw_channel_prune_plan *plan_half(ganfw_net *net) {
  ganfw_channel_prune_opts o = {.importance = GANFW_CHANNEL_IMPORTANCE_L1, .amount = 0.5};
  ganfw_channel_prune_plan *p = NULL;
  ganfw_status st = ganfw_channel_prune_plan_create(net, &o, &p);
  if (st != GANFW_OK) printf("\n  %s", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  return p;
}

/* The three residual groups, the nine inner conv1 groups, the logits kept; 50% removal. */
static void test_groups(void) {
  opened o;
  CU_ASSERT_EQUAL_FATAL(open_with(NULL, 0, &o), GANFW_OK);
  ganfw_net *net = o.s->classifier;
  ganfw_channel_prune_plan *p = plan_half(net);
  char *text = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_channel_prune_describe(p, &text), GANFW_OK);
  printf("\n%s", text);
  free(text);
  CU_ASSERT_EQUAL(ganfw_channel_prune_group_count(p), 3 + 9 + 1);
  static const struct {
    const char *producers[5];
    int64_t channels;
  } residual[] = {
      {{"conv1", "layer1.0.conv2", "layer1.1.conv2", "layer1.2.conv2", NULL}, 16},
      {{"layer2.0.conv2", "layer2.0.shortcut.0", "layer2.1.conv2", "layer2.2.conv2", NULL}, 32},
      {{"layer3.0.conv2", "layer3.0.shortcut.0", "layer3.1.conv2", "layer3.2.conv2", NULL}, 64},
  };
  for (int r = 0; r < 3; r++) {
    const int32_t g = group_with(p, net, residual[r].producers[0]);
    CU_ASSERT_FATAL(g >= 0);
    ganfw_channel_group_info gi;
    CU_ASSERT_EQUAL_FATAL(ganfw_channel_prune_group_at(p, g, &gi), GANFW_OK);
    CU_ASSERT_EQUAL(gi.n_producers, 4);
    for (int k = 0; k < 4; k++) CU_ASSERT_EQUAL(group_with(p, net, residual[r].producers[k]), g);
    CU_ASSERT_EQUAL(gi.channels, residual[r].channels);
    CU_ASSERT_EQUAL(gi.kept, residual[r].channels / 2); /* 8 / 16 / 32 */
    CU_ASSERT(gi.prunable);
    CU_ASSERT_EQUAL(gi.n_norms, 4); /* bn1 or bn2 of each producer, shortcut.1 */
  }
  for (int s = 1; s <= 3; s++)
    for (int b = 0; b < 3; b++) {
      char name[64];
      snprintf(name, sizeof name, "layer%d.%d.conv1", s, b);
      const int32_t g = group_with(p, net, name);
      CU_ASSERT_FATAL(g >= 0);
      ganfw_channel_group_info gi;
      CU_ASSERT_EQUAL_FATAL(ganfw_channel_prune_group_at(p, g, &gi), GANFW_OK);
      CU_ASSERT_EQUAL(gi.n_producers, 1);
      CU_ASSERT_EQUAL(gi.n_consumers, 1); /* its block's conv2 */
      CU_ASSERT_EQUAL(gi.kept * 2, gi.channels);
    }
  const int32_t g = group_with(p, net, "linear");
  ganfw_channel_group_info gi;
  CU_ASSERT_EQUAL_FATAL(ganfw_channel_prune_group_at(p, g, &gi), GANFW_OK);
  CU_ASSERT_FALSE(gi.prunable); /* the logits */
  CU_ASSERT_EQUAL(gi.kept, 10);
  CU_ASSERT_PTR_NOT_NULL(strstr(gi.why, "output"));
  /* the width map: every conv but the linear, halved */
  ganfw_net_width w[64];
  const int32_t nw = ganfw_channel_prune_widths(p, w, 64);
  CU_ASSERT_EQUAL(nw, 1 + 9 * 2 + 2); /* stem, conv1 and conv2 of each block, 2 shortcuts */
  const ganfw_channel_prune_plan *one[] = {p};
  CU_ASSERT_EQUAL_FATAL(ganfw_channel_prune_widths_text(one, 1, &text), GANFW_OK);
  printf("  model.widths: %s\n", text);
  CU_ASSERT_EQUAL(strncmp(text, "{conv1: 8, layer1: {0: {conv1: 8, conv2: 8}", 43), 0);
  free(text);
  ganfw_channel_prune_plan_destroy(p);
  close_opened(&o);
}

/* The eval output of net on x ([4,1,28,28]) into a malloc'ed array of 40 values. */
static float *eval_forward(ganfw_net *net, ganfw_tensor *x) {
  ganfw_net_set_train(net, 0, 0);
  ganfw_tensor *y = NULL;
  ganfw_status st = ganfw_net_forward(net, x, NULL, &y);
  if (st != GANFW_OK) printf("\n  %s", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(y->numel, 40);
  float *h = malloc(40 * sizeof *h);
  CU_ASSERT_EQUAL_FATAL(ganfw_tensor_to_host(y, h, 40 * 4), GANFW_OK);
  ganfw_tensor_destroy(y);
  return h;
}

/* Sets gamma and beta of every BatchNorm of a pruned group to 0 on the removed channels. */
static void silence_removed(const ganfw_channel_prune_plan *p, ganfw_net *net) {
  for (int32_t g = 0; g < ganfw_channel_prune_group_count(p); g++) {
    ganfw_channel_group_info gi;
    CU_ASSERT_EQUAL_FATAL(ganfw_channel_prune_group_at(p, g, &gi), GANFW_OK);
    if (gi.kept == gi.channels) continue;
    CU_ASSERT_EQUAL_FATAL(gi.n_norms, gi.n_producers); /* a BatchNorm after each producer */
    for (int32_t k = 0; k < gi.n_norms; k++) {
      ganfw_layer *l = ganfw_net_layer_at(net, gi.norms[k]);
      for (int t = 0; t < 2; t++) {
        float h[64];
        CU_ASSERT_EQUAL_FATAL(ganfw_tensor_to_host(l->param[t], h, gi.channels * 4), GANFW_OK);
        for (int64_t c = 0, j = 0; c < gi.channels; c++) {
          if (j < gi.kept && gi.keep[j] == c)
            j++;
          else
            h[c] = 0.0f;
        }
        CU_ASSERT_EQUAL(ganfw_tensor_from_host(l->param[t], h, gi.channels * 4), GANFW_OK);
      }
    }
  }
}

/* A pruned net computes what the original computes with the removed channels silenced.
 * Construction: in eval mode a BatchNorm channel with gamma = beta = 0 outputs exactly 0,
 * whatever its input. Every producer of ResNet-20 (the stem, each conv1, conv2 and
 * shortcut.0) is followed by a BatchNorm, so silencing the BatchNorms of a group on its
 * removed channels makes those channels 0 in every tensor of the group: in a residual group
 * the add sums bn2's 0 with the shortcut's, which is a silenced shortcut.1 or (identity) the
 * previous block's relu(add), 0 by induction from relu(bn1) = 0 of the stem; in an inner
 * group relu(bn1) is 0. A zero input channel adds exactly 0 to every consumer (the convs have
 * no bias on their inputs; global average pooling of 0 is 0), so the kept channels, and the
 * logits, are the values the narrow net computes from its sliced weights, up to the order in
 * which the convolutions sum (1e-5). Zeroing only the producers' filters would not do: the
 * BatchNorm after them would still add beta. */
static void test_forward_equals(void) {
  char file[160];
  snprintf(file, sizeof file, "%s/pruned.safetensors", data_dir);
  opened a;
  CU_ASSERT_EQUAL_FATAL(open_with(NULL, 0, &a), GANFW_OK);
  ganfw_net *net = a.s->classifier;
  perturb_batchnorms(net, 11);
  ganfw_channel_prune_plan *p = plan_half(net);
  const ganfw_channel_prune_plan *one[] = {p};
  CU_ASSERT_EQUAL_FATAL(ganfw_channel_prune_write(one, 1, file), GANFW_OK);
  char *widths = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_channel_prune_widths_text(one, 1, &widths), GANFW_OK);
  char set_w[4096], set_init[256];
  snprintf(set_w, sizeof set_w, "model.widths=%s", widths);
  snprintf(set_init, sizeof set_init, "model.init_from=%s", file);
  free(widths);
  const char *extra[] = {set_w, set_init};
  opened b;
  ganfw_status st = open_with(extra, 2, &b);
  if (st != GANFW_OK) printf("\n  %s", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT(ganfw_net_param_count(b.s->classifier) == ganfw_net_param_count(net));
  const int64_t shape[4] = {4, 1, 28, 28};
  ganfw_tensor *x = ganfw_tensor_create(a.s->ctx, GANFW_DTYPE_F32, 4, shape, GANFW_MEM_DATA, "x");
  ganfw_tensor *xb = ganfw_tensor_create(b.s->ctx, GANFW_DTYPE_F32, 4, shape, GANFW_MEM_DATA, "x");
  CU_ASSERT_PTR_NOT_NULL_FATAL(x);
  CU_ASSERT_PTR_NOT_NULL_FATAL(xb);
  gt_fill_uniform(x->data, x->numel, -1, 1, 5);
  memcpy(xb->data, x->data, (size_t)x->numel * 4);
  float *full = eval_forward(net, x);
  silence_removed(p, net);
  float *silenced = eval_forward(net, x);
  float *pruned = eval_forward(b.s->classifier, xb);
  double err = 0, scale = 0, moved = 0;
  for (int i = 0; i < 40; i++) {
    err = fmax(err, fabs((double)pruned[i] - silenced[i]));
    scale = fmax(scale, fabs((double)silenced[i]));
    moved = fmax(moved, fabs((double)full[i] - silenced[i]));
  }
  printf("\n  pruned vs silenced: max diff %.3g (logits up to %.3g); silencing moved them %.3g",
         err, scale, moved);
  CU_ASSERT(err <= 1e-5 * fmax(1.0, scale));
  CU_ASSERT(moved > 1e-3); /* the removed channels mattered: the test could fail */
  /* PyTorch: the CIFAR ResNet with these widths loads the file strictly and computes the
   * same logits */
  if (gt_python_has("torch")) {
    char io[160], cmd[8192];
    snprintf(io, sizeof io, "%s/io.safetensors", data_dir);
    ganfw_st_writer *w = ganfw_st_writer_create();
    const int64_t yshape[2] = {4, 10};
    CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "x", GANFW_DTYPE_F32, 4, shape, x->data), GANFW_OK);
    CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "y", GANFW_DTYPE_F32, 2, yshape, pruned), GANFW_OK);
    CU_ASSERT_EQUAL_FATAL(ganfw_st_writer_write(w, io), GANFW_OK);
    ganfw_st_writer_destroy(w);
    const char *src = getenv("GANFW_SOURCE_DIR");
    int len = snprintf(cmd, sizeof cmd,
                       "/usr/bin/python3 '%s/tests/check_pruned_resnet_torch.py' '%s' --resnet "
                       "1,16,10 --stage 16,3,1 --stage 32,3,2 --stage 64,3,2 --io '%s'",
                       src ? src : ".", file, io);
    ganfw_net_width nw[64];
    const int32_t n = ganfw_channel_prune_widths(p, nw, 64);
    for (int32_t k = 0; k < n && len < (int)sizeof cmd - 64; k++)
      len += snprintf(cmd + len, sizeof cmd - (size_t)len, " --width %s=%lld", nw[k].layer,
                      (long long)nw[k].width);
    snprintf(cmd + len, sizeof cmd - (size_t)len, " 2>&1");
    printf("\n");
    fflush(stdout);
    const int rc = system(cmd);
    CU_ASSERT(WIFEXITED(rc) && WEXITSTATUS(rc) == 0);
  } else {
    printf("\n  (no torch: the PyTorch load is skipped) ");
  }
  free(full);
  free(silenced);
  free(pruned);
  ganfw_tensor_destroy(x);
  ganfw_tensor_destroy(xb);
  ganfw_channel_prune_plan_destroy(p);
  close_opened(&b);
  close_opened(&a);
}

/* The widths of 50% removal as one --set, from a plan of the config. */
static void half_widths(char *set, size_t cap) {
  opened a;
  CU_ASSERT_EQUAL_FATAL(open_with(NULL, 0, &a), GANFW_OK);
  ganfw_channel_prune_plan *p = plan_half(a.s->classifier);
  const ganfw_channel_prune_plan *one[] = {p};
  char *text = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_channel_prune_widths_text(one, 1, &text), GANFW_OK);
  snprintf(set, cap, "model.widths=%s", text);
  free(text);
  ganfw_channel_prune_plan_destroy(p);
  close_opened(&a);
}

/* `ganfw plan` of the pruned config: a smaller peak than the unpruned one, and the planned
 * bytes of a step those a real step allocates. */
static void test_plan(void) {
  char set_w[4096];
  half_widths(set_w, sizeof set_w);
  const char *full_sets[] = {data_set, "train.batch_size=8"};
  const char *pruned_sets[] = {data_set, "train.batch_size=8", set_w};
  ganfw_probe_result full, pruned, real;
  memset(&real, 0, sizeof real);
  CU_ASSERT_EQUAL_FATAL(ganfw_report_plan(gt_config(config, full_sets, 2), &full), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_report_plan(gt_config(config, pruned_sets, 3), &pruned), GANFW_OK);
  printf("\n  peak allocated: unpruned %lld B, pruned %lld B", (long long)full.peak_allocated,
         (long long)pruned.peak_allocated);
  CU_ASSERT(pruned.peak_allocated < full.peak_allocated);
  ganfw_probe_result_free(&pruned);
  ganfw_probe_result_free(&full);
  const ganfw_run_config *rc = gt_config(config, pruned_sets, 3);
  CU_ASSERT_EQUAL_FATAL(ganfw_plan_make(rc, 0, NULL, &pruned), GANFW_OK);
  ganfw_status st = ganfw_plan_measure(rc, &pruned, NULL, &real);
  if (st != GANFW_OK) printf("\n  %s", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  printf("\n  pruned: planned %lld B, measured %lld B allocated; reserved %lld / %lld",
         (long long)pruned.peak_allocated, (long long)real.peak_allocated,
         (long long)pruned.peak_reserved, (long long)real.peak_reserved);
  CU_ASSERT_EQUAL(pruned.peak_allocated, real.peak_allocated);
  CU_ASSERT_EQUAL(pruned.peak_reserved, real.peak_reserved);
  ganfw_probe_result_free(&pruned);
  ganfw_probe_result_free(&real);
}

/* Opening the config with `set` fails with a config error whose message holds every one of
 * want[0..n). */
static void expect_error(const char *set, const char *const *want, int n) {
  opened o;
  const char *extra[] = {set};
  ganfw_status st = open_with(extra, 1, &o);
  const char *msg = ganfw_error_message();
  printf("\n  %s -> %s", set, st ? msg : "(opened)");
  CU_ASSERT_EQUAL(st, GANFW_ERR_CONFIG);
  for (int k = 0; k < n && st; k++) CU_ASSERT_PTR_NOT_NULL(strstr(msg, want[k]));
  ganfw_error_clear();
  close_opened(&o);
}

static void test_width_errors(void) {
  /* the stem alone: the add of layer1.0 meets 16 channels of bn2 and 8 of the stem's relu */
  expect_error("model.widths.conv1=8", (const char *[]){"layer1.0.add", "layer1.0.bn2", "relu"}, 3);
  expect_error("model.widths.layer1.0.conv9=8",
               (const char *[]){"model.widths.layer1.0.conv9", "did you mean 'layer1.0.conv1'"}, 2);
  expect_error("model.widths.layer1.0.conv1=17",
               (const char *[]){"model.widths.layer1.0.conv1", "out of range", "16"}, 3);
  expect_error("model.widths.layer1.0.conv1=0",
               (const char *[]){"model.widths.layer1.0.conv1", "out of range"}, 2);
  expect_error("model.widths.linear=5",
               (const char *[]){"model.widths.linear", "output", "cannot change"}, 3);
  expect_error("model.widths.bn1=8", (const char *[]){"model.widths.bn1", "batchnorm2d"}, 2);
  expect_error("model.widths.discriminator:conv1=8",
               (const char *[]){"no net 'discriminator'", "classifier"}, 2);
  /* a width that keeps the group consistent opens */
  opened o;
  const char *ok[] = {"model.widths.layer2.1.conv1=3"};
  CU_ASSERT_EQUAL(open_with(ok, 1, &o), GANFW_OK);
  close_opened(&o);
}

static void test_prune_errors(void) {
  opened o;
  CU_ASSERT_EQUAL_FATAL(open_with(NULL, 0, &o), GANFW_OK);
  ganfw_net *net = o.s->classifier;
  ganfw_channel_prune_plan *p = NULL;
  /* every channel: round(0.99 * 16) = 16 */
  ganfw_channel_prune_opts all = {.importance = GANFW_CHANNEL_IMPORTANCE_L1, .amount = 0.99};
  CU_ASSERT_EQUAL(ganfw_channel_prune_plan_create(net, &all, &p), GANFW_ERR_INVALID_ARG);
  printf("\n  %s", ganfw_error_message());
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "would remove all"));
  CU_ASSERT_PTR_NULL(p);
  /* the logits */
  const ganfw_channel_prune_amount out = {"linear", 0.5};
  ganfw_channel_prune_opts o_out = {
      .importance = GANFW_CHANNEL_IMPORTANCE_L1, .amounts = &out, .n_amounts = 1};
  CU_ASSERT_EQUAL(ganfw_channel_prune_plan_create(net, &o_out, &p), GANFW_ERR_INVALID_ARG);
  printf("\n  %s", ganfw_error_message());
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "linear"));
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "output"));
  /* an unknown layer */
  const ganfw_channel_prune_amount typo = {"layer1.0.cnv1", 0.5};
  ganfw_channel_prune_opts o_typo = {
      .importance = GANFW_CHANNEL_IMPORTANCE_L1, .amounts = &typo, .n_amounts = 1};
  CU_ASSERT_EQUAL(ganfw_channel_prune_plan_create(net, &o_typo, &p), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "did you mean 'layer1.0.conv1'"));
  /* an amount out of range */
  ganfw_channel_prune_opts o_big = {.importance = GANFW_CHANNEL_IMPORTANCE_L1, .amount = 1.0};
  CU_ASSERT_EQUAL(ganfw_channel_prune_plan_create(net, &o_big, &p), GANFW_ERR_INVALID_ARG);
  /* one group by a layer, Python's rounding: round(0.3125 * 16) = round(5.0) = 5,
   * round(0.15625 * 16) = round(2.5) = 2 (half to even) */
  const ganfw_channel_prune_amount one[] = {{"layer1.1.conv1", 0.3125},
                                            {"layer1.2.conv1", 0.15625}};
  ganfw_channel_prune_opts o_one = {
      .importance = GANFW_CHANNEL_IMPORTANCE_L2, .amounts = one, .n_amounts = 2};
  CU_ASSERT_EQUAL_FATAL(ganfw_channel_prune_plan_create(net, &o_one, &p), GANFW_OK);
  ganfw_net_width w[8];
  CU_ASSERT_EQUAL(ganfw_channel_prune_widths(p, w, 8), 2);
  CU_ASSERT_STRING_EQUAL(w[0].layer, "layer1.1.conv1");
  CU_ASSERT_EQUAL(w[0].width, 11);
  CU_ASSERT_EQUAL(w[1].width, 14);
  ganfw_channel_prune_plan_destroy(p);
  /* only the groups of the layers named: layer2's residual group, its four producers */
  const char *const only[] = {"layer2.0.shortcut.0"};
  ganfw_channel_prune_opts o_only = {
      .importance = GANFW_CHANNEL_IMPORTANCE_L1, .amount = 0.5, .layers = only, .n_layers = 1};
  CU_ASSERT_EQUAL_FATAL(ganfw_channel_prune_plan_create(net, &o_only, &p), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_channel_prune_widths(p, w, 8), 4);
  for (int k = 0; k < 4; k++) CU_ASSERT_EQUAL(w[k].width, 16);
  CU_ASSERT_STRING_EQUAL(w[0].layer, "layer2.0.conv2");
  CU_ASSERT_STRING_EQUAL(w[1].layer, "layer2.0.shortcut.0");
  ganfw_channel_prune_plan_destroy(p);
  const char *const logits[] = {"linear"};
  o_only.layers = logits;
  CU_ASSERT_EQUAL(ganfw_channel_prune_plan_create(net, &o_only, &p), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "the net's output"));
  /* bn_gamma keeps the channels of the largest |gamma| */
  ganfw_layer *bn = ganfw_net_layer_at(net, ganfw_net_layer_index(net, "layer1.0.bn1"));
  float gamma[16];
  for (int c = 0; c < 16; c++) gamma[c] = (c % 4 == 1) ? -2.0f : 0.1f * (float)c / 16.0f;
  CU_ASSERT_EQUAL_FATAL(ganfw_tensor_from_host(bn->param[0], gamma, sizeof gamma), GANFW_OK);
  const ganfw_channel_prune_amount quarter = {"layer1.0.conv1", 0.75};
  ganfw_channel_prune_opts o_bn = {
      .importance = GANFW_CHANNEL_IMPORTANCE_BN_GAMMA, .amounts = &quarter, .n_amounts = 1};
  CU_ASSERT_EQUAL_FATAL(ganfw_channel_prune_plan_create(net, &o_bn, &p), GANFW_OK);
  ganfw_channel_group_info gi;
  CU_ASSERT_EQUAL_FATAL(ganfw_channel_prune_group_at(p, group_with(p, net, "layer1.0.conv1"), &gi),
                        GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(gi.kept, 4);
  for (int k = 0; k < 4; k++) CU_ASSERT_EQUAL(gi.keep[k], 4 * k + 1);
  ganfw_channel_prune_plan_destroy(p);
  close_opened(&o);
}

/* --- a hand-built graph: concat, conv_transpose2d, flatten -------------------------------- */

/* input [3,8,8] -> {c1 (8), c2 (6)} each with BatchNorm and ReLU -> concat (14) -> c3 (10) ->
 * t1 conv_transpose2d (4, 16x16) -> max pool 4 -> flatten (64) -> fc (5); widths[0..n) set. */
static ganfw_net *build_graph(ganfw_ctx *ctx, const ganfw_net_width *w, int32_t n) {
  ganfw_net *net = ganfw_net_create(ctx, "g");
  CU_ASSERT_PTR_NOT_NULL_FATAL(net);
  const char *cat[] = {"r1", "r2"};
  ganfw_status st = ganfw_net_conv2d(net, "c1", 3, 8, 3, 1, 1, 1);
  if (!st) st = ganfw_net_batchnorm2d(net, "b1", 8, 1e-5f, 0.1f);
  if (!st) st = ganfw_net_activation(net, "r1", GANFW_ACT_RELU, 0);
  if (!st) st = ganfw_net_input(net, "input");
  if (!st) st = ganfw_net_conv2d(net, "c2", 3, 6, 3, 1, 1, 1);
  if (!st) st = ganfw_net_batchnorm2d(net, "b2", 6, 1e-5f, 0.1f);
  if (!st) st = ganfw_net_activation(net, "r2", GANFW_ACT_RELU, 0);
  if (!st) st = ganfw_net_concat(net, "cat", cat, 2);
  if (!st) st = ganfw_net_conv2d(net, "c3", 14, 10, 3, 1, 1, 1);
  if (!st) st = ganfw_net_batchnorm2d(net, "b3", 10, 1e-5f, 0.1f);
  if (!st) st = ganfw_net_activation(net, "r3", GANFW_ACT_RELU, 0);
  if (!st) st = ganfw_net_conv_transpose2d(net, "t1", 10, 4, 2, 2, 0, 0, 1);
  if (!st) st = ganfw_net_batchnorm2d(net, "b4", 4, 1e-5f, 0.1f);
  if (!st) st = ganfw_net_activation(net, "r4", GANFW_ACT_RELU, 0);
  if (!st) st = ganfw_net_pool2d(net, "pool", GANFW_POOL_MAX, 4, 4, 0);
  if (!st) st = ganfw_net_flatten(net, "flat");
  if (!st) st = ganfw_net_linear(net, "fc", 64, 5, 1);
  if (!st) st = ganfw_net_set_widths(net, w, n);
  if (!st) st = ganfw_net_build(net, 3, 8, 8);
  if (st) printf("\n  %s", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  return net;
}

/* The concat's consumer reads each input's kept channels at its offset, the transposed conv
 * is cut on its dim 1 and read on dim 0, the linear after flatten keeps the kept channels'
 * 4x4 blocks: the narrow net built with the plan's widths and loaded from the file computes
 * what the silenced original does (the construction of test_forward_equals: a BatchNorm after
 * each producer). */
static void test_graph(void) {
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 1, .seed = 3};
  ganfw_ctx *ctx = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &ctx), GANFW_OK);
  ganfw_net *net = build_graph(ctx, NULL, 0);
  perturb_batchnorms(net, 21);
  ganfw_channel_prune_plan *p = plan_half(net);
  char *text = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_channel_prune_describe(p, &text), GANFW_OK);
  printf("\n%s", text);
  free(text);
  CU_ASSERT_EQUAL(ganfw_channel_prune_group_count(p), 5);
  ganfw_net_width w[8];
  const int32_t nw = ganfw_channel_prune_widths(p, w, 8);
  CU_ASSERT_EQUAL_FATAL(nw, 4);
  static const char *const names[] = {"c1", "c2", "c3", "t1"};
  static const int64_t kept[] = {4, 3, 5, 2};
  for (int k = 0; k < 4; k++) {
    CU_ASSERT_STRING_EQUAL(w[k].layer, names[k]);
    CU_ASSERT_EQUAL(w[k].width, kept[k]);
  }
  const ganfw_channel_prune_plan *one[] = {p};
  char file[160];
  snprintf(file, sizeof file, "%s/graph.safetensors", data_dir);
  CU_ASSERT_EQUAL_FATAL(ganfw_channel_prune_write(one, 1, file), GANFW_OK);
  ganfw_net *narrow = build_graph(ctx, w, nw);
  ganfw_ckpt_net cn = {.net = narrow};
  ganfw_ckpt_report rep = {0};
  ganfw_status st = ganfw_checkpoint_load_weights(file, &cn, 1, 0, &rep);
  if (st) printf("\n  %s", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  const int64_t shape[4] = {2, 3, 8, 8};
  ganfw_tensor *x = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 4, shape, GANFW_MEM_DATA, "x");
  CU_ASSERT_PTR_NOT_NULL_FATAL(x);
  gt_fill_uniform(x->data, x->numel, -1, 1, 9);
  silence_removed(p, net);
  ganfw_tensor *ya = NULL, *yb = NULL;
  ganfw_net_set_train(net, 0, 0);
  ganfw_net_set_train(narrow, 0, 0);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(net, x, NULL, &ya), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(narrow, x, NULL, &yb), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ya->numel, 10);
  float a[10], b[10];
  CU_ASSERT_EQUAL(ganfw_tensor_to_host(ya, a, sizeof a), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_tensor_to_host(yb, b, sizeof b), GANFW_OK);
  double err = 0, scale = 0;
  for (int i = 0; i < 10; i++) {
    err = fmax(err, fabs((double)a[i] - b[i]));
    scale = fmax(scale, fabs((double)a[i]));
  }
  printf("  narrow vs silenced: max diff %.3g (outputs up to %.3g)", err, scale);
  CU_ASSERT(err <= 1e-5 * fmax(1.0, scale));
  CU_ASSERT(scale > 1e-3);
  /* two nets: each net's names prefixed for model.widths */
  const ganfw_channel_prune_plan *two[] = {p, p};
  CU_ASSERT_EQUAL_FATAL(ganfw_channel_prune_widths_text(two, 2, &text), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(text, "{\"g:c1\": 4, \"g:c2\": 3, \"g:c3\": 5, \"g:t1\": 2}");
  free(text);
  ganfw_tensor_destroy(ya);
  ganfw_tensor_destroy(yb);
  ganfw_tensor_destroy(x);
  ganfw_channel_prune_plan_destroy(p);
  ganfw_net_destroy(narrow);
  ganfw_net_destroy(net);
  ganfw_ctx_destroy(ctx);
}

/* A concat added to another tensor: its channels cannot be pruned consistently, so its
 * inputs' groups and the add's are kept, and asking for one of them names the concat. */
static void test_concat_add_refused(void) {
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 1, .seed = 3};
  ganfw_ctx *ctx = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &ctx), GANFW_OK);
  ganfw_net *net = ganfw_net_create(ctx, "h");
  const char *cat[] = {"a", "b"}, *sum[] = {"cat", "c"};
  ganfw_status st = ganfw_net_conv2d(net, "a", 3, 4, 1, 1, 0, 0);
  if (!st) st = ganfw_net_input(net, "input");
  if (!st) st = ganfw_net_conv2d(net, "b", 3, 4, 1, 1, 0, 0);
  if (!st) st = ganfw_net_concat(net, "cat", cat, 2);
  if (!st) st = ganfw_net_input(net, "input");
  if (!st) st = ganfw_net_conv2d(net, "c", 3, 8, 1, 1, 0, 0);
  if (!st) st = ganfw_net_add(net, "sum", sum, 2);
  if (!st) st = ganfw_net_conv2d(net, "d", 8, 2, 1, 1, 0, 0);
  if (!st) st = ganfw_net_build(net, 3, 4, 4);
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  ganfw_channel_prune_plan *p = NULL;
  const ganfw_channel_prune_amount half_c = {"c", 0.5};
  ganfw_channel_prune_opts o = {
      .importance = GANFW_CHANNEL_IMPORTANCE_L1, .amounts = &half_c, .n_amounts = 1};
  CU_ASSERT_EQUAL(ganfw_channel_prune_plan_create(net, &o, &p), GANFW_ERR_INVALID_ARG);
  printf("\n  %s", ganfw_error_message());
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "concat cat"));
  ganfw_channel_prune_opts all = {.importance = GANFW_CHANNEL_IMPORTANCE_L1, .amount = 0.5};
  CU_ASSERT_EQUAL_FATAL(ganfw_channel_prune_plan_create(net, &all, &p), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_channel_prune_widths(p, NULL, 0), 0); /* nothing prunable */
  ganfw_channel_prune_plan_destroy(p);
  ganfw_net_destroy(net);
  /* bn_gamma on a group without BatchNorm names it */
  net = ganfw_net_create(ctx, "k");
  st = ganfw_net_conv2d(net, "e", 3, 4, 1, 1, 0, 0);
  if (!st) st = ganfw_net_activation(net, "r", GANFW_ACT_RELU, 0);
  if (!st) st = ganfw_net_conv2d(net, "f", 4, 2, 1, 1, 0, 0);
  if (!st) st = ganfw_net_build(net, 3, 4, 4);
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  ganfw_channel_prune_opts bn = {.importance = GANFW_CHANNEL_IMPORTANCE_BN_GAMMA, .amount = 0.5};
  CU_ASSERT_EQUAL(ganfw_channel_prune_plan_create(net, &bn, &p), GANFW_ERR_INVALID_ARG);
  printf("\n  %s", ganfw_error_message());
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "group e"));
  ganfw_net_destroy(net);
  ganfw_ctx_destroy(ctx);
}

/* A model of two nets (configs/dcgan.yaml): "generator:main" names the generator's main.0,
 * whose narrower output the next conv_transpose2d and BatchNorm follow (a smaller plan); an
 * unprefixed name is refused asking for the net. */
static void test_gan_prefix(void) {
  char dcgan[4200];
  snprintf(dcgan, sizeof dcgan, "%s/configs/dcgan.yaml",
           getenv("GANFW_SOURCE_DIR") ? getenv("GANFW_SOURCE_DIR") : ".");
  const char *full_sets[] = {data_set, "train.batch_size=8"};
  const char *narrow_sets[] = {data_set, "train.batch_size=8", "model.widths.generator:main.0=64"};
  ganfw_probe_result full, narrow;
  CU_ASSERT_EQUAL_FATAL(ganfw_report_plan(gt_config(dcgan, full_sets, 2), &full), GANFW_OK);
  ganfw_status st = ganfw_report_plan(gt_config(dcgan, narrow_sets, 3), &narrow);
  if (st) printf("\n  %s", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT(narrow.peak_category[GANFW_MEM_PARAM] < full.peak_category[GANFW_MEM_PARAM]);
  ganfw_probe_result_free(&full);
  ganfw_probe_result_free(&narrow);
  const char *bare[] = {data_set, "train.batch_size=8", "model.widths.main.0=64"};
  ganfw_run *run = NULL;
  ganfw_session *s = NULL;
  st = ganfw_run_open_file(dcgan, bare, 3, &run);
  if (st == GANFW_OK) st = ganfw_session_open(run, 1, NULL, &s);
  printf("\n  %s", st ? ganfw_error_message() : "(opened)");
  CU_ASSERT_EQUAL(st, GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "\"generator:main.0\""));
  ganfw_error_clear();
  ganfw_session_close(s);
  ganfw_run_close(run);
}

static CU_TestInfo tests[] = {
    {"ResNet-20's groups: three residual, nine inner, the logits kept; 50% widths", test_groups},
    {"pruned forward == original with the removed channels silenced; PyTorch loads it",
     test_forward_equals},
    {"the pruned config plans smaller, and its plan is its measured step", test_plan},
    {"model.widths errors: a broken add, a typo, out of range, the output", test_width_errors},
    {"pruning errors: every channel, the logits, a typo; rounding; bn_gamma", test_prune_errors},
    {"a GAN's widths name the net: generator:main.0; unprefixed refused", test_gan_prefix},
    {"a graph of concat, conv_transpose2d, flatten: narrow == silenced", test_graph},
    {"a concat into an add: kept, named when asked for; bn_gamma without BatchNorm",
     test_concat_add_refused},
    CU_TEST_INFO_NULL,
};

int main(void) {
  ganfw_log_set_level(GANFW_LOG_WARN);
  return gt_run_fixture("prune_channels", tests, suite_init, suite_clean);
}
