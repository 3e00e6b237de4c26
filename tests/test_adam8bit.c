/* The adam8bit optimizer plugin (plugins/optim/adam8bit) and the host's 8-bit blockwise
 * quantisation ops (ABI 1.10) against tests/ref/gen_adam8bit.py, a numpy reference written from
 * the published algorithm: the dynamic maps' 256 values, quantise/dequantise round trips
 * (indices exactly, values to 1e-7), one and three Adam8bit steps of a parameter above the
 * 8-bit threshold (1e-6) and of one below it (bitwise plain adam), a resume through a
 * checkpoint file (bitwise an uninterrupted run), the optim_state bytes, and config errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "config/config.h"
#include "ganfw/ganfw.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "nn/net.h"
#include "plugin/plugin_host.h"
#include "runtime/alloc.h"
#include "runtime/ctx.h"
#include "runtime/tensor.h"
#include "testutil.h"

#define NSIZES 4
#define NSTEP  3
#define TOL    1e-6

static const int64_t big_shape[2] = {50, 100}, small_shape[2] = {7, 3};

/* gen_adam8bit.py's CASES as YAML optim sections (lr comes from the reference). */
typedef struct a8_case {
  const char *name, *yaml, *adam_yaml;
} a8_case;
static const a8_case cases[] = {
    {"default", "optim:\n  plugin: adam8bit\n", "optim:\n  plugin: adam\n"},
    {"gan_wd", "optim:\n  plugin: adam8bit\n  betas: [0.5, 0.999]\n  weight_decay: 0.01\n",
     "optim:\n  plugin: adam\n  betas: [0.5, 0.999]\n  weight_decay: 0.01\n"},
};

static ganfw_ctx *make_ctx(void) {
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 1, .seed = 1};
  ganfw_ctx *ctx = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &ctx), GANFW_OK);
  return ctx;
}

static ganfw_plugin *load_optim(const char *name, const ganfw_optim_vt **vt) {
  static char dir[1024];
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  snprintf(dir, sizeof dir, "%s/plugins", build ? build : ".");
  const char *dirs[] = {dir};
  ganfw_plugin *p = NULL;
  if (ganfw_plugin_load(name, GANFW_PLUGIN_OPTIM, "optim.plugin", dirs, 1, &p) != GANFW_OK) {
    fprintf(stderr, "\n  loading %s: %s\n", name, ganfw_error_message());
    return NULL;
  }
  *vt = ganfw_plugin_vtable(p);
  return p;
}

/* An optimizer of plugin vt over params[0..n) from an optim YAML section; config kept in *cfg. */
static ganfw_status make_opt(const ganfw_optim_vt *vt, ganfw_ctx *ctx, const char *yaml,
                             const ganfw_param *params, int64_t n, ganfw_config **cfg, void **opt) {
  *opt = NULL;
  ganfw_status st = ganfw_config_load_string(yaml, "adam8bit_test.yaml", cfg);
  if (st != GANFW_OK) return st;
  const ganfw_cfg *optim = ganfw_cfg_child(ganfw_config_root(*cfg), "optim");
  const char *plugin = NULL;
  ganfw_cfg_string(optim, "plugin", "adam8bit", &plugin); /* the core reads this key */
  return vt->create(ganfw_host_table(), ctx, optim, params, n, opt);
}

static ganfw_tensor *ref_tensor(ganfw_ctx *ctx, gt_ref *ref, const char *key, int32_t ndim,
                                const int64_t *shape, int32_t category) {
  int64_t numel = 0;
  const float *v = gt_ref_f32(ref, key, &numel, NULL, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(v);
  ganfw_tensor *t = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, ndim, shape, category, key);
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL_FATAL(t->numel, numel);
  ganfw_tensor_from_host(t, v, numel * 4);
  return t;
}

static float *host_copy(const ganfw_tensor *t) {
  float *h = malloc((size_t)t->nbytes);
  ganfw_tensor_to_host(t, h, t->nbytes);
  return h;
}

/* The u8 codes of q equal the reference's int32 indices `key`. */
static int64_t count_index_mismatch(gt_ref *ref, const char *key, const ganfw_tensor *q) {
  int64_t n = 0;
  const int32_t *want = gt_ref_i32(ref, key, &n);
  CU_ASSERT_PTR_NOT_NULL_FATAL(want);
  CU_ASSERT_EQUAL_FATAL(n, q->numel);
  CU_ASSERT_EQUAL_FATAL(q->dtype, GANFW_DTYPE_U8);
  uint8_t *got = malloc((size_t)n);
  ganfw_tensor_to_host(q, got, n);
  int64_t bad = 0;
  for (int64_t i = 0; i < n; i++)
    if (got[i] != want[i]) {
      if (bad == 0)
        fprintf(stderr, "\n  %s[%lld]: %d, want %d\n", key, (long long)i, got[i], (int)want[i]);
      bad++;
    }
  free(got);
  return bad;
}

/* Max relative error of f32 tensor t against reference `key` (floored at 1e-3 of its max). */
static double compare(gt_ref *ref, const char *key, const ganfw_tensor *t, double tol) {
  int64_t n = 0;
  const float *want = gt_ref_f32(ref, key, &n, NULL, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(want);
  CU_ASSERT_EQUAL_FATAL(n, t->numel);
  float *got = host_copy(t);
  float m = 0;
  for (int64_t i = 0; i < n; i++) m = fmaxf(m, fabsf(want[i]));
  double err = gt_check_close(key, got, want, n, tol, 1e-3 * m);
  free(got);
  return err;
}

/* --- (a) the maps ------------------------------------------------------------------------ */

static void test_dynamic_map(void) {
  gt_ref *ref = gt_ref_open("adam8bit");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  const ganfw_host *h = ganfw_host_table();
  CU_ASSERT_FATAL(GANFW_HOST_HAS(h, quantize_dynamic_map));
  for (int is_signed = 0; is_signed < 2; is_signed++) {
    float code[256];
    CU_ASSERT_EQUAL_FATAL(h->quantize_dynamic_map(is_signed, code), GANFW_OK);
    int64_t n = 0;
    const float *want = gt_ref_f32(ref, is_signed ? "map.signed" : "map.unsigned", &n, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(want);
    CU_ASSERT_EQUAL_FATAL(n, 256);
    int same = 0, zero = 0;
    for (int i = 0; i < 256; i++) {
      same += code[i] == want[i];
      zero += code[i] == 0.0f;
      if (i) CU_ASSERT(code[i] > code[i - 1]); /* strictly ascending: 256 distinct codes */
    }
    CU_ASSERT_EQUAL(same, 256);
    CU_ASSERT_EQUAL(zero, 1);
    CU_ASSERT_EQUAL(code[255], 1.0f);
    CU_ASSERT(is_signed ? code[0] < -0.99f : code[0] == 0.0f);
  }
  CU_ASSERT_EQUAL(h->quantize_dynamic_map(1, NULL), GANFW_ERR_INVALID_ARG);
  gt_ref_close(ref);
}

/* --- (b) round trips --------------------------------------------------------------------- */

static void test_round_trip(void) {
  static const int64_t sizes[NSIZES] = {1, 2047, 2048, 5000};
  const int64_t block = 2048;
  gt_ref *ref = gt_ref_open("adam8bit");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  ganfw_ctx *ctx = make_ctx();
  const ganfw_host *h = ganfw_host_table();
  const int64_t code_shape[1] = {256};
  ganfw_tensor *code = ref_tensor(ctx, ref, "map.signed", 1, code_shape, GANFW_MEM_OTHER);
  for (int k = 0; k < NSIZES; k++) {
    char key[64];
    const int64_t n = sizes[k], nb = (n + block - 1) / block;
    snprintf(key, sizeof key, "rt%d.x", k);
    ganfw_tensor *x = ref_tensor(ctx, ref, key, 1, &n, GANFW_MEM_OTHER);
    ganfw_tensor *q = ganfw_tensor_create(ctx, GANFW_DTYPE_U8, 1, &n, GANFW_MEM_OTHER, "q");
    ganfw_tensor *absmax = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 1, &nb, GANFW_MEM_OTHER, "a");
    ganfw_tensor *y = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 1, &n, GANFW_MEM_OTHER, "y");
    CU_ASSERT_EQUAL_FATAL(h->quantize_blockwise(ctx, x, code, block, q, absmax), GANFW_OK);
    snprintf(key, sizeof key, "rt%d.q", k);
    CU_ASSERT_EQUAL(count_index_mismatch(ref, key, q), 0);
    snprintf(key, sizeof key, "rt%d.absmax", k);
    CU_ASSERT(compare(ref, key, absmax, 0.0) == 0.0);
    CU_ASSERT_EQUAL_FATAL(h->dequantize_blockwise(ctx, q, absmax, code, block, y), GANFW_OK);
    snprintf(key, sizeof key, "rt%d.deq", k);
    CU_ASSERT(compare(ref, key, y, 1e-7) <= 1e-7);
    ganfw_tensor_destroy(x);
    ganfw_tensor_destroy(q);
    ganfw_tensor_destroy(absmax);
    ganfw_tensor_destroy(y);
  }
  ganfw_tensor_destroy(code);
  ganfw_ctx_destroy(ctx);
  gt_ref_close(ref);
}

/* Every code, midpoint and midpoint neighbour, and uniform values through each map: the
 * indices of the published search, exactly. */
static void test_search_sweep(void) {
  gt_ref *ref = gt_ref_open("adam8bit");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  ganfw_ctx *ctx = make_ctx();
  const ganfw_host *h = ganfw_host_table();
  const int64_t code_shape[1] = {256}, n = 8192, nb = 4;
  for (int u = 0; u < 2; u++) {
    char key[64];
    ganfw_tensor *code =
        ref_tensor(ctx, ref, u ? "map.unsigned" : "map.signed", 1, code_shape, GANFW_MEM_OTHER);
    snprintf(key, sizeof key, "%s.x", u ? "sweep_u" : "sweep_s");
    ganfw_tensor *x = ref_tensor(ctx, ref, key, 1, &n, GANFW_MEM_OTHER);
    ganfw_tensor *q = ganfw_tensor_create(ctx, GANFW_DTYPE_U8, 1, &n, GANFW_MEM_OTHER, "q");
    ganfw_tensor *a = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 1, &nb, GANFW_MEM_OTHER, "a");
    CU_ASSERT_EQUAL_FATAL(h->quantize_blockwise(ctx, x, code, 2048, q, a), GANFW_OK);
    snprintf(key, sizeof key, "%s.q", u ? "sweep_u" : "sweep_s");
    CU_ASSERT_EQUAL(count_index_mismatch(ref, key, q), 0);
    ganfw_tensor_destroy(code);
    ganfw_tensor_destroy(x);
    ganfw_tensor_destroy(q);
    ganfw_tensor_destroy(a);
  }
  ganfw_ctx_destroy(ctx);
  gt_ref_close(ref);
}

/* Bad arguments: each refused with a message naming the tensor and what it needs. */
static void test_op_errors(void) {
  ganfw_ctx *ctx = make_ctx();
  const ganfw_host *h = ganfw_host_table();
  const int64_t n = 100, nb = 1, bad_nb = 2, c = 256, c_bad = 255;
  ganfw_tensor *x = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 1, &n, GANFW_MEM_OTHER, "x");
  ganfw_tensor *code = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 1, &c, GANFW_MEM_OTHER, "code");
  ganfw_tensor *code255 =
      ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 1, &c_bad, GANFW_MEM_OTHER, "c255");
  ganfw_tensor *q = ganfw_tensor_create(ctx, GANFW_DTYPE_U8, 1, &n, GANFW_MEM_OTHER, "q");
  ganfw_tensor *qf = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 1, &n, GANFW_MEM_OTHER, "qf");
  ganfw_tensor *a = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 1, &nb, GANFW_MEM_OTHER, "a");
  ganfw_tensor *a2 = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 1, &bad_nb, GANFW_MEM_OTHER, "a2");
  struct {
    ganfw_status st;
    const char *want;
  } r[] = {
      {h->quantize_blockwise(ctx, x, code, 128, qf, a), "u8 is required"},
      {h->quantize_blockwise(ctx, x, code, 128, q, a2), "absmax 'a2' has 2 values"},
      {h->quantize_blockwise(ctx, x, code255, 128, q, a), "it needs 256"},
      {h->quantize_blockwise(ctx, x, code, 0, q, a), "block is 0"},
      {h->dequantize_blockwise(ctx, q, a, code, 64, x), "need 2"},
  };
  for (size_t i = 0; i < sizeof r / sizeof r[0]; i++) {
    CU_ASSERT_EQUAL(r[i].st, GANFW_ERR_INVALID_ARG);
    (void)r[i].want;
  }
  /* the message of the last one */
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "blocks of 64 need 2"));
  ganfw_tensor *ts[] = {x, code, code255, q, qf, a, a2};
  for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) ganfw_tensor_destroy(ts[i]);
  ganfw_ctx_destroy(ctx);
}

/* --- (c) updates ------------------------------------------------------------------------- */

typedef struct params2 {
  ganfw_tensor *value[2], *grad[2];
  ganfw_param p[2];
} params2;

static void params_open(params2 *ps, ganfw_ctx *ctx, gt_ref *ref) {
  ps->value[0] = ref_tensor(ctx, ref, "big.init", 2, big_shape, GANFW_MEM_PARAM);
  ps->value[1] = ref_tensor(ctx, ref, "small.init", 2, small_shape, GANFW_MEM_PARAM);
  ps->grad[0] = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 2, big_shape, GANFW_MEM_GRAD, "g0");
  ps->grad[1] = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 2, small_shape, GANFW_MEM_GRAD, "g1");
  ps->p[0] = (ganfw_param){"fc.weight", ps->value[0], ps->grad[0]};
  ps->p[1] = (ganfw_param){"fc.bias", ps->value[1], ps->grad[1]};
}

static void params_grads(params2 *ps, gt_ref *ref, int s) {
  static const char *const names[2] = {"big", "small"};
  for (int j = 0; j < 2; j++) {
    char key[64];
    snprintf(key, sizeof key, "%s.grad%d", names[j], s);
    int64_t n = 0;
    const float *g = gt_ref_f32(ref, key, &n, NULL, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(g);
    ganfw_tensor_from_host(ps->grad[j], g, n * 4);
  }
}

static void params_close(params2 *ps) {
  for (int j = 0; j < 2; j++) {
    ganfw_tensor_destroy(ps->value[j]);
    ganfw_tensor_destroy(ps->grad[j]);
  }
}

static double worst_update;

static void run_case(const a8_case *c) {
  gt_ref *ref = gt_ref_open("adam8bit");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  ganfw_ctx *ctx = make_ctx();
  const ganfw_optim_vt *vt = NULL, *adam_vt = NULL;
  ganfw_plugin *plugin = load_optim("adam8bit", &vt);
  ganfw_plugin *adam_plugin = load_optim("adam", &adam_vt);
  CU_ASSERT_PTR_NOT_NULL_FATAL(plugin);
  CU_ASSERT_PTR_NOT_NULL_FATAL(adam_plugin);
  params2 a, b; /* a: adam8bit; b: plain adam */
  params_open(&a, ctx, ref);
  params_open(&b, ctx, ref);
  ganfw_config *cfg = NULL, *adam_cfg = NULL;
  void *opt = NULL, *adam_opt = NULL;
  ganfw_status st = make_opt(vt, ctx, c->yaml, a.p, 2, &cfg, &opt);
  if (st != GANFW_OK) fprintf(stderr, "\n  create: %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_config_check_unused(cfg), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(make_opt(adam_vt, ctx, c->adam_yaml, b.p, 2, &adam_cfg, &adam_opt),
                        GANFW_OK);
  char key[96];
  snprintf(key, sizeof key, "%s.lr", c->name);
  const double lr = gt_ref_scalar(ref, key);
  for (int s = 1; s <= NSTEP; s++) {
    params_grads(&a, ref, s);
    params_grads(&b, ref, s);
    CU_ASSERT_EQUAL_FATAL(vt->step(opt, lr), GANFW_OK);
    CU_ASSERT_EQUAL_FATAL(adam_vt->step(adam_opt, lr), GANFW_OK);
    snprintf(key, sizeof key, "%s.big.step%d", c->name, s);
    double err = compare(ref, key, a.value[0], TOL);
    if (err > worst_update) worst_update = err;
    CU_ASSERT(err <= TOL);
    /* the small parameter steps as plain adam, bit for bit */
    float *p8 = host_copy(a.value[1]), *p32 = host_copy(b.value[1]);
    CU_ASSERT_EQUAL(memcmp(p8, p32, (size_t)a.value[1]->nbytes), 0);
    free(p8);
    free(p32);
  }
  /* State: fc.weight's four 8-bit tensors, then fc.bias's two f32 ones. */
  static const char *const want_names[6] = {
      "fc.weight.exp_avg.q8",        "fc.weight.exp_avg.absmax", "fc.weight.exp_avg_sq.q8",
      "fc.weight.exp_avg_sq.absmax", "fc.bias.exp_avg",          "fc.bias.exp_avg_sq"};
  static const char *const ref_suffix[4] = {"q1", "absmax1", "q2", "absmax2"};
  const char *name = NULL;
  int64_t i = 0;
  ganfw_tensor *t;
  while ((t = vt->state_tensor(opt, i, &name)) != NULL) {
    CU_ASSERT_FATAL(i < 6);
    CU_ASSERT_STRING_EQUAL(name, want_names[i]);
    CU_ASSERT_EQUAL(t->category, GANFW_MEM_OPTIM_STATE);
    if (i < 4) {
      snprintf(key, sizeof key, "%s.big.%s", c->name, ref_suffix[i]);
      if (i % 2 == 0) {
        CU_ASSERT_EQUAL(t->numel, 5000);
        CU_ASSERT_EQUAL(count_index_mismatch(ref, key, t), 0);
      } else {
        CU_ASSERT_EQUAL(t->numel, 3); /* ceil(5000 / 2048) */
        CU_ASSERT(compare(ref, key, t, TOL) <= TOL);
      }
    } else { /* plain adam's state, bitwise */
      ganfw_tensor *u = adam_vt->state_tensor(adam_opt, 2 + (i - 4), NULL);
      float *x8 = host_copy(t), *x32 = host_copy(u);
      CU_ASSERT_EQUAL(memcmp(x8, x32, (size_t)t->nbytes), 0);
      free(x8);
      free(x32);
    }
    i++;
  }
  CU_ASSERT_EQUAL(i, 6);
  CU_ASSERT_EQUAL(vt->get_step(opt), NSTEP);
  vt->destroy(opt);
  adam_vt->destroy(adam_opt);
  ganfw_config_destroy(cfg);
  ganfw_config_destroy(adam_cfg);
  params_close(&a);
  params_close(&b);
  ganfw_plugin_unload(plugin);
  ganfw_plugin_unload(adam_plugin);
  ganfw_ctx_destroy(ctx);
  gt_ref_close(ref);
}

static void test_update_default(void) {
  run_case(&cases[0]);
}
static void test_update_gan_wd(void) {
  run_case(&cases[1]);
}

/* --- resume through a checkpoint file ---------------------------------------------------- */

/* A net with one linear layer 100 -> 64: a weight of 6400 values (8-bit state, 4 blocks of
 * 2048 with the last one short) and a bias of 64 (f32 state). */
static ganfw_net *make_net(ganfw_ctx *ctx) {
  ganfw_net *net = ganfw_net_create(ctx, "g");
  CU_ASSERT_EQUAL_FATAL(ganfw_net_flatten(net, "flat"), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_linear(net, "fc", 100, 64, 1), GANFW_OK);
  ganfw_status st = ganfw_net_build(net, 100, 1, 1);
  if (st != GANFW_OK) fprintf(stderr, "\n  net_build: %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  return net;
}

/* The net's parameters as an optimizer gets them (weight, bias), values set from init[]. */
static void net_params(ganfw_net *net, ganfw_param *p, float *const *init) {
  for (int64_t i = 0; i < 2; i++) {
    ganfw_param_info info = {.struct_size = sizeof info};
    CU_ASSERT_EQUAL_FATAL(ganfw_net_param_info(net, i, &info), GANFW_OK);
    p[i] = (ganfw_param){info.name, info.value, info.grad};
    ganfw_tensor_from_host(info.value, init[i], info.value->nbytes);
  }
}

/* Gradients of step s: a fixed pseudo-random sequence with magnitudes varying by step. */
static void net_grads(const ganfw_param *p, int s) {
  for (int i = 0; i < 2; i++) {
    const int64_t n = p[i].grad->numel;
    float *g = malloc((size_t)n * 4);
    uint32_t r = 2654435761u * (uint32_t)(s * 2 + i + 1);
    for (int64_t k = 0; k < n; k++) {
      r = r * 1664525u + 1013904223u;
      g[k] = ((float)(r >> 8) / 16777216.0f - 0.5f) * (s % 2 ? 1.0f : 1e-3f);
    }
    ganfw_tensor_from_host(p[i].grad, g, n * 4);
    free(g);
  }
}

static void test_resume_checkpoint(void) {
  const int total = 6, cut = 2;
  ganfw_ctx *ctx = make_ctx();
  const ganfw_optim_vt *vt = NULL;
  ganfw_plugin *plugin = load_optim("adam8bit", &vt);
  CU_ASSERT_PTR_NOT_NULL_FATAL(plugin);
  const char *yaml = "optim:\n  plugin: adam8bit\n  betas: [0.5, 0.999]\n";
  float *init[2];
  for (int i = 0; i < 2; i++) {
    const int64_t n = i == 0 ? 6400 : 64;
    init[i] = malloc((size_t)n * 4);
    for (int64_t k = 0; k < n; k++) init[i][k] = sinf((float)(k * 7 + i)) * 0.1f;
  }
  /* uninterrupted */
  ganfw_net *net_a = make_net(ctx);
  ganfw_param pa[2];
  net_params(net_a, pa, init);
  ganfw_config *cfg_a = NULL;
  void *opt_a = NULL;
  CU_ASSERT_EQUAL_FATAL(make_opt(vt, ctx, yaml, pa, 2, &cfg_a, &opt_a), GANFW_OK);
  for (int s = 1; s <= total; s++) {
    net_grads(pa, s);
    CU_ASSERT_EQUAL_FATAL(vt->step(opt_a, 1e-2), GANFW_OK);
  }
  /* cut after `cut` steps, saved, loaded into a new net and optimizer, continued */
  char path[256];
  snprintf(path, sizeof path, "/tmp/ganfw_test_adam8bit_%d.safetensors", (int)getpid());
  ganfw_net *net_b = make_net(ctx);
  ganfw_param pb[2];
  net_params(net_b, pb, init);
  ganfw_config *cfg_b = NULL;
  void *opt_b = NULL;
  CU_ASSERT_EQUAL_FATAL(make_opt(vt, ctx, yaml, pb, 2, &cfg_b, &opt_b), GANFW_OK);
  for (int s = 1; s <= cut; s++) {
    net_grads(pb, s);
    CU_ASSERT_EQUAL_FATAL(vt->step(opt_b, 1e-2), GANFW_OK);
  }
  ganfw_ckpt_net cn = {.net = net_b, .optim_vt = vt, .optim_self = opt_b};
  ganfw_ckpt_meta meta = {.step = cut};
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_save(path, &cn, 1, &meta), GANFW_OK);
  /* the file holds the codes as U8 and the scales as F32 */
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path, &f), GANFW_OK);
  const ganfw_st_tensor *q = ganfw_st_find(f, "optim.g.fc.weight.exp_avg.q8");
  const ganfw_st_tensor *am = ganfw_st_find(f, "optim.g.fc.weight.exp_avg_sq.absmax");
  CU_ASSERT_PTR_NOT_NULL_FATAL(q);
  CU_ASSERT_PTR_NOT_NULL_FATAL(am);
  CU_ASSERT_EQUAL(q->dtype, GANFW_DTYPE_U8);
  CU_ASSERT_EQUAL(q->nbytes, 6400);
  CU_ASSERT_EQUAL(am->dtype, GANFW_DTYPE_F32);
  CU_ASSERT_EQUAL(am->nbytes, 4 * 4);
  ganfw_st_close(f);
  vt->destroy(opt_b);
  ganfw_config_destroy(cfg_b);
  ganfw_net_destroy(net_b);
  /* a fresh net and optimizer (its initial values differ), then the checkpoint */
  float *other[2];
  for (int i = 0; i < 2; i++) {
    const int64_t n = i == 0 ? 6400 : 64;
    other[i] = calloc((size_t)n, 4);
  }
  ganfw_net *net_c = make_net(ctx);
  ganfw_param pc[2];
  net_params(net_c, pc, other);
  ganfw_config *cfg_c = NULL;
  void *opt_c = NULL;
  CU_ASSERT_EQUAL_FATAL(make_opt(vt, ctx, yaml, pc, 2, &cfg_c, &opt_c), GANFW_OK);
  cn = (ganfw_ckpt_net){.net = net_c, .optim_vt = vt, .optim_self = opt_c};
  ganfw_status st = ganfw_checkpoint_load(path, &cn, 1, NULL);
  if (st != GANFW_OK) fprintf(stderr, "\n  load: %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(vt->get_step(opt_c), cut);
  for (int s = cut + 1; s <= total; s++) {
    net_grads(pc, s);
    CU_ASSERT_EQUAL_FATAL(vt->step(opt_c, 1e-2), GANFW_OK);
  }
  /* bitwise: parameters and every state tensor */
  for (int i = 0; i < 2; i++) {
    float *x = host_copy(pa[i].value), *y = host_copy(pc[i].value);
    CU_ASSERT_EQUAL(memcmp(x, y, (size_t)pa[i].value->nbytes), 0);
    free(x);
    free(y);
  }
  ganfw_tensor *ta, *tc;
  int64_t k = 0;
  for (; (ta = vt->state_tensor(opt_a, k, NULL)) != NULL; k++) {
    tc = vt->state_tensor(opt_c, k, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(tc);
    CU_ASSERT_EQUAL_FATAL(ta->nbytes, tc->nbytes);
    void *x = host_copy(ta), *y = host_copy(tc);
    CU_ASSERT_EQUAL(memcmp(x, y, (size_t)ta->nbytes), 0);
    free(x);
    free(y);
  }
  CU_ASSERT_EQUAL(k, 6);
  /* the moments moved: not all codes are the code of 0 */
  uint8_t *codes = malloc(6400);
  ganfw_tensor_to_host(vt->state_tensor(opt_a, 0, NULL), codes, 6400);
  int distinct = 0;
  for (int64_t j = 1; j < 6400; j++) distinct += codes[j] != codes[0];
  CU_ASSERT(distinct > 1000);
  free(codes);
  remove(path);
  vt->destroy(opt_a);
  vt->destroy(opt_c);
  ganfw_config_destroy(cfg_a);
  ganfw_config_destroy(cfg_c);
  ganfw_net_destroy(net_a);
  ganfw_net_destroy(net_c);
  for (int i = 0; i < 2; i++) {
    free(init[i]);
    free(other[i]);
  }
  ganfw_plugin_unload(plugin);
  ganfw_ctx_destroy(ctx);
}

/* --- bytes of optim_state ---------------------------------------------------------------- */

/* fc.weight 5000 values: two u8 [5000] (5000 B each, 5120 after the allocator's 512 B
 * rounding) and two f32 [3] scales (512 B each), the two maps (1 KiB each); fc.bias 21 values:
 * two f32 [7,3] (512 B each). Adam: 2 x 20000 B (20480) + 2 x 512 B. */
static void test_state_bytes(void) {
  gt_ref *ref = gt_ref_open("adam8bit");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  int64_t bytes[2];
  for (int which = 0; which < 2; which++) {
    ganfw_ctx *ctx = make_ctx();
    const ganfw_optim_vt *vt = NULL;
    ganfw_plugin *plugin = load_optim(which ? "adam" : "adam8bit", &vt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(plugin);
    params2 ps;
    params_open(&ps, ctx, ref);
    ganfw_config *cfg = NULL;
    void *opt = NULL;
    CU_ASSERT_EQUAL_FATAL(
        make_opt(vt, ctx, which ? cases[0].adam_yaml : cases[0].yaml, ps.p, 2, &cfg, &opt),
        GANFW_OK);
    ganfw_alloc_stats s;
    params_grads(&ps, ref, 1);
    CU_ASSERT_EQUAL(vt->step(opt, 1e-3), GANFW_OK);
    ganfw_alloc_get_stats(ctx->alloc, &s);
    bytes[which] = s.category[GANFW_MEM_OPTIM_STATE].current;
    CU_ASSERT_EQUAL(s.category[GANFW_MEM_WORKSPACE].current, 0);
    vt->destroy(opt);
    ganfw_alloc_get_stats(ctx->alloc, &s);
    CU_ASSERT_EQUAL(s.category[GANFW_MEM_OPTIM_STATE].current, 0);
    ganfw_config_destroy(cfg);
    params_close(&ps);
    ganfw_plugin_unload(plugin);
    ganfw_ctx_destroy(ctx);
  }
  CU_ASSERT_EQUAL(bytes[0], 2 * 5120 + 2 * 512 + 2 * 1024 + 2 * 512);
  CU_ASSERT_EQUAL(bytes[1], 2 * 20480 + 2 * 512);
  gt_ref_close(ref);
}

/* On the meta backend (`ganfw plan`) the optimizer's create and step ask the allocator for
 * exactly what they ask on the CPU: the same optim_state bytes, the same workspace peak, and
 * the same counts of allocations. */
static void test_meta_exact(void) {
  gt_ref *ref = gt_ref_open("adam8bit");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  ganfw_alloc_stats st[2];
  for (int meta = 0; meta < 2; meta++) {
    ganfw_ctx_options o = {.device_type = GANFW_DEVICE_CPU, .threads = 1, .seed = 1, .meta = meta};
    ganfw_ctx *ctx = NULL;
    CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&o, &ctx), GANFW_OK);
    const ganfw_optim_vt *vt = NULL;
    ganfw_plugin *plugin = load_optim("adam8bit", &vt);
    CU_ASSERT_PTR_NOT_NULL_FATAL(plugin);
    params2 ps;
    params_open(&ps, ctx, ref);
    ganfw_config *cfg = NULL;
    void *opt = NULL;
    CU_ASSERT_EQUAL_FATAL(make_opt(vt, ctx, cases[1].yaml, ps.p, 2, &cfg, &opt), GANFW_OK);
    params_grads(&ps, ref, 1);
    for (int s = 0; s < 2; s++) CU_ASSERT_EQUAL(vt->step(opt, 1e-3), GANFW_OK);
    ganfw_alloc_get_stats(ctx->alloc, &st[meta]);
    vt->destroy(opt);
    ganfw_config_destroy(cfg);
    params_close(&ps);
    ganfw_plugin_unload(plugin);
    ganfw_ctx_destroy(ctx);
  }
  for (int c = 0; c < GANFW_MEM_COUNT; c++) {
    CU_ASSERT_EQUAL(st[0].category[c].current, st[1].category[c].current);
    CU_ASSERT_EQUAL(st[0].category[c].peak, st[1].category[c].peak);
  }
  CU_ASSERT(st[0].category[GANFW_MEM_WORKSPACE].peak > 0);
  CU_ASSERT_EQUAL(st[0].num_allocs, st[1].num_allocs);
  gt_ref_close(ref);
}

/* --- (d) config errors ------------------------------------------------------------------- */

static void expect_config_error(const char *yaml, const char *want1, const char *want2) {
  gt_ref *ref = gt_ref_open("adam8bit");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  ganfw_ctx *ctx = make_ctx();
  const ganfw_optim_vt *vt = NULL;
  ganfw_plugin *plugin = load_optim("adam8bit", &vt);
  CU_ASSERT_PTR_NOT_NULL_FATAL(plugin);
  params2 ps;
  params_open(&ps, ctx, ref);
  ganfw_config *cfg = NULL;
  void *opt = NULL;
  ganfw_error_clear();
  ganfw_status st = make_opt(vt, ctx, yaml, ps.p, 2, &cfg, &opt);
  CU_ASSERT_EQUAL(st, GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NULL(opt);
  const char *msg = ganfw_error_message();
  int ok = strstr(msg, want1) && (!want2 || strstr(msg, want2));
  if (!ok) fprintf(stderr, "\n  expected '%s'/'%s' in: %s\n", want1, want2 ? want2 : "", msg);
  CU_ASSERT(ok);
  ganfw_config_destroy(cfg);
  params_close(&ps);
  ganfw_plugin_unload(plugin);
  ganfw_ctx_destroy(ctx);
  gt_ref_close(ref);
}

static void test_bad_config(void) {
  expect_config_error("optim:\n  amsgrad: true\n", "amsgrad", "plugin: adam");
  expect_config_error("optim:\n  block_size: 0\n", "block_size is 0", "power of two >= 64");
  expect_config_error("optim:\n  block_size: 1000\n", "block_size is 1000", "power of two");
  expect_config_error("optim:\n  block_size: 32\n", "block_size is 32", ">= 64");
  expect_config_error("optim:\n  block_size: -2048\n", "block_size", NULL);
  expect_config_error("optim:\n  min_8bit_size: -1\n", "min_8bit_size is -1", "0 or positive");
  expect_config_error("optim:\n  min_8bit_size: many\n", "min_8bit_size", "adam8bit_test.yaml:2:");
  expect_config_error("optim:\n  betas: [1.0, 0.999]\n", "betas[0]", "[0, 1)");
  expect_config_error("optim:\n  eps: 0\n", "eps", "positive");
}

static void test_report(void) {
  printf("\n  max rel err of the 8-bit parameter vs the reference: %.3e (tol %.0e)\n", worst_update,
         TOL);
  CU_ASSERT(worst_update <= TOL);
}

static CU_TestInfo tests[] = {
    {"dynamic_map", test_dynamic_map},
    {"quantize_round_trip", test_round_trip},
    {"quantize_search_sweep", test_search_sweep},
    {"quantize_op_errors", test_op_errors},
    {"update_default", test_update_default},
    {"update_gan_weight_decay", test_update_gan_wd},
    {"resume_through_checkpoint", test_resume_checkpoint},
    {"state_bytes", test_state_bytes},
    {"meta_backend_exact", test_meta_exact},
    {"bad_config", test_bad_config},
    {"max_error_report", test_report},
    CU_TEST_INFO_NULL,
};

GT_MAIN("adam8bit", tests)
