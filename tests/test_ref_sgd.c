/* The sgd optimizer plugin (plugins/optim/sgd) against PyTorch 1.13's SGD
 * (tests/ref/gen_sgd.py): four f32 parameters of different shapes, five steps with fixed
 * gradients, for plain SGD, momentum, dampening, Nesterov, weight decay and their mixes
 * (one with a learning rate that changes every step); then resume from saved state,
 * frozen parameters, config errors and the allocator's per-category bytes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/alloc.h"
#include "config/config.h"
#include "runtime/ctx.h"
#include "base/error.h"
#include "ganfw/ganfw.h"
#include "plugin/plugin_host.h"
#include "runtime/tensor.h"
#include "testutil.h"

#define NPARAM 4
#define NSTEP  5
#define TOL    1e-5

static const int64_t shapes[NPARAM][4] = {{4, 3, 3, 3}, {7}, {5, 6}, {2, 3, 4, 5}};
static const int32_t ndims[NPARAM] = {4, 1, 2, 4};
static const char *const param_names[NPARAM] = {"features.0.weight", "features.1.bias",
                                                "classifier.0.weight", "features.3.weight"};

/* The settings of gen_sgd.py's CASES, as YAML optim sections. */
typedef struct sgd_case {
  const char *name;
  const char *yaml;
  int has_buffer;
} sgd_case;

static const sgd_case cases[] = {
    {"plain", "optim:\n  plugin: sgd\n", 0},
    {"momentum", "optim:\n  plugin: sgd\n  momentum: 0.9\n", 1},
    {"dampening", "optim:\n  plugin: sgd\n  momentum: 0.9\n  dampening: 0.1\n", 1},
    {"nesterov", "optim:\n  plugin: sgd\n  momentum: 0.9\n  nesterov: true\n", 1},
    {"weight_decay", "optim:\n  plugin: sgd\n  weight_decay: 0.01\n", 0},
    {"momentum_wd", "optim:\n  plugin: sgd\n  momentum: 0.9\n  weight_decay: 5e-4\n", 1},
    {"nesterov_wd_lr",
     "optim:\n  plugin: sgd\n  momentum: 0.8\n  nesterov: yes\n  weight_decay: 0.01\n", 1},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static double worst_err[3]; /* params, buffers, resumed params: the max rel error reached */

/* --- fixture: a CPU context, the plugin, a config and parameters -------------------- */

typedef struct fixture {
  ganfw_ctx *ctx;
  ganfw_plugin *plugin;
  const ganfw_optim_vt *vt;
  ganfw_config *config;
  ganfw_tensor *value[NPARAM], *grad[NPARAM];
  ganfw_param params[NPARAM];
  void *opt;
} fixture;

static int fixture_open(fixture *f) {
  memset(f, 0, sizeof *f);
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 1, .seed = 1};
  if (ganfw_ctx_create(&opt, &f->ctx) != GANFW_OK) {
    fprintf(stderr, "\n  ctx: %s\n", ganfw_error_message());
    return 0;
  }
  static char dir[1024];
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  snprintf(dir, sizeof dir, "%s/plugins", build ? build : ".");
  const char *dirs[] = {dir};
  if (ganfw_plugin_load("sgd", GANFW_PLUGIN_OPTIM, "optim.plugin", dirs, 1, &f->plugin)) {
    fprintf(stderr, "\n  loading sgd: %s\n", ganfw_error_message());
    return 0;
  }
  f->vt = ganfw_plugin_vtable(f->plugin);
  return 1;
}

/* Parameters with their initial values from the reference; grads[j] is NULL for frozen. */
static int fixture_params(fixture *f, gt_ref *ref, int frozen_index) {
  for (int j = 0; j < NPARAM; j++) {
    char key[64];
    snprintf(key, sizeof key, "p%d.init", j);
    int64_t numel = 0;
    const float *init = gt_ref_f32(ref, key, &numel, NULL, NULL);
    if (!init) return 0;
    f->value[j] = ganfw_tensor_create(f->ctx, GANFW_DTYPE_F32, ndims[j], shapes[j], GANFW_MEM_PARAM,
                                      param_names[j]);
    if (!f->value[j] || f->value[j]->numel != numel) return 0;
    ganfw_tensor_from_host(f->value[j], init, numel * 4);
    if (j != frozen_index) {
      f->grad[j] = ganfw_tensor_create(f->ctx, GANFW_DTYPE_F32, ndims[j], shapes[j], GANFW_MEM_GRAD,
                                       param_names[j]);
      if (!f->grad[j]) return 0;
    }
    f->params[j] = (ganfw_param){param_names[j], f->value[j], f->grad[j]};
  }
  return 1;
}

static ganfw_status fixture_create_opt(fixture *f, const char *yaml) {
  ganfw_config_destroy(f->config);
  f->config = NULL;
  ganfw_status st = ganfw_config_load_string(yaml, "sgd_test.yaml", &f->config);
  if (st != GANFW_OK) return st;
  const ganfw_cfg *optim = ganfw_cfg_child(ganfw_config_root(f->config), "optim");
  const char *plugin = NULL;
  ganfw_cfg_string(optim, "plugin", "sgd", &plugin); /* the core reads this key */
  return f->vt->create(ganfw_host_table(), f->ctx, optim, f->params, NPARAM, &f->opt);
}

static void fixture_close(fixture *f) {
  if (f->vt && f->opt) f->vt->destroy(f->opt);
  for (int j = 0; j < NPARAM; j++) {
    ganfw_tensor_destroy(f->value[j]);
    ganfw_tensor_destroy(f->grad[j]);
  }
  ganfw_config_destroy(f->config);
  ganfw_plugin_unload(f->plugin);
  ganfw_ctx_destroy(f->ctx);
}

/* Loads the reference gradients of step s (1-based) into the grad tensors. */
static void set_grads(fixture *f, gt_ref *ref, int s) {
  for (int j = 0; j < NPARAM; j++) {
    if (!f->grad[j]) continue;
    char key[64];
    snprintf(key, sizeof key, "p%d.grad%d", j, s);
    int64_t numel = 0;
    const float *g = gt_ref_f32(ref, key, &numel, NULL, NULL);
    if (g) ganfw_tensor_from_host(f->grad[j], g, numel * 4);
  }
}

/* The learning rate of step s (1-based) of a case. */
static double case_lr(gt_ref *ref, const char *name, int s) {
  char key[96];
  snprintf(key, sizeof key, "%s.lr", name);
  int64_t n = 0;
  const float *lr = gt_ref_f32(ref, key, &n, NULL, NULL);
  return lr && n == NSTEP ? lr[s - 1] : NAN;
}

static float max_abs(const float *x, int64_t n) {
  float m = 0;
  for (int64_t i = 0; i < n; i++) m = fmaxf(m, fabsf(x[i]));
  return m;
}

/* Compares tensor t with reference `key` (relative, floored at 1e-3 of its largest value). */
static double compare(gt_ref *ref, const char *key, const ganfw_tensor *t) {
  int64_t numel = 0;
  const float *want = gt_ref_f32(ref, key, &numel, NULL, NULL);
  CU_ASSERT_PTR_NOT_NULL_FATAL(want);
  CU_ASSERT_EQUAL_FATAL(numel, t->numel);
  float *got = malloc((size_t)numel * sizeof *got);
  ganfw_tensor_to_host(t, got, numel * 4);
  double err = gt_check_close(key, got, want, numel, TOL, 1e-3 * max_abs(want, numel));
  free(got);
  return err;
}

static void note(int which, double err) {
  if (err > worst_err[which]) worst_err[which] = err;
}

/* --- the reference cases ----------------------------------------------------------- */

static void run_case(const sgd_case *c) {
  gt_ref *ref = gt_ref_open("sgd");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  fixture f;
  CU_ASSERT_FATAL(fixture_open(&f));
  CU_ASSERT_FATAL(fixture_params(&f, ref, -1));
  ganfw_status st = fixture_create_opt(&f, c->yaml);
  if (st != GANFW_OK) fprintf(stderr, "\n  create: %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_config_check_unused(f.config), GANFW_OK);
  char key[96];
  for (int s = 1; s <= NSTEP; s++) {
    set_grads(&f, ref, s);
    CU_ASSERT_EQUAL_FATAL(f.vt->step(f.opt, case_lr(ref, c->name, s)), GANFW_OK);
    for (int j = 0; j < NPARAM; j++) {
      snprintf(key, sizeof key, "%s.p%d.step%d", c->name, j, s);
      note(0, compare(ref, key, f.value[j]));
    }
  }
  CU_ASSERT_EQUAL(f.vt->get_step(f.opt), NSTEP);
  /* The gradients are left as the core wrote them (weight decay and Nesterov work on a
   * copy). */
  for (int j = 0; j < NPARAM; j++) {
    snprintf(key, sizeof key, "p%d.grad%d", j, NSTEP);
    CU_ASSERT(compare(ref, key, f.grad[j]) == 0.0);
  }
  /* The momentum buffers, by the names a checkpoint uses, in parameter order. */
  int64_t i = 0;
  const char *name = NULL;
  ganfw_tensor *t;
  while ((t = f.vt->state_tensor(f.opt, i, &name)) != NULL) {
    CU_ASSERT_FATAL(i < NPARAM);
    char want[96];
    snprintf(want, sizeof want, "%s.momentum_buffer", param_names[i]);
    CU_ASSERT_STRING_EQUAL(name, want);
    CU_ASSERT_EQUAL(t->category, GANFW_MEM_OPTIM_STATE);
    snprintf(key, sizeof key, "%s.p%d.momentum_buffer", c->name, (int)i);
    note(1, compare(ref, key, t));
    i++;
  }
  CU_ASSERT_EQUAL(i, c->has_buffer ? NPARAM : 0);
  fixture_close(&f);
  gt_ref_close(ref);
}

static void test_plain(void) {
  run_case(&cases[0]);
}
static void test_momentum(void) {
  run_case(&cases[1]);
}
static void test_dampening(void) {
  run_case(&cases[2]);
}
static void test_nesterov(void) {
  run_case(&cases[3]);
}
static void test_weight_decay(void) {
  run_case(&cases[4]);
}
static void test_momentum_wd(void) {
  run_case(&cases[5]);
}
static void test_nesterov_wd_lr(void) {
  run_case(&cases[6]);
}

/* Three steps, the buffers copied out as a checkpoint would, a new optimizer given them and
 * the step count back, two more steps: the same parameters as five steps in one go (the
 * restored buffer is used, not re-initialised from the gradient as on a first step). */
static void test_resume(void) {
  const sgd_case *c = &cases[2]; /* dampening: the first step differs from the others */
  gt_ref *ref = gt_ref_open("sgd");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  fixture f;
  CU_ASSERT_FATAL(fixture_open(&f));
  CU_ASSERT_FATAL(fixture_params(&f, ref, -1));
  CU_ASSERT_EQUAL_FATAL(fixture_create_opt(&f, c->yaml), GANFW_OK);
  for (int s = 1; s <= 3; s++) {
    set_grads(&f, ref, s);
    CU_ASSERT_EQUAL_FATAL(f.vt->step(f.opt, case_lr(ref, c->name, s)), GANFW_OK);
  }
  float *saved[NPARAM];
  for (int64_t i = 0; i < NPARAM; i++) {
    ganfw_tensor *t = f.vt->state_tensor(f.opt, i, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    saved[i] = malloc((size_t)t->nbytes);
    ganfw_tensor_to_host(t, saved[i], t->nbytes);
  }
  int64_t step = f.vt->get_step(f.opt);
  CU_ASSERT_EQUAL(step, 3);
  f.vt->destroy(f.opt);
  f.opt = NULL;
  CU_ASSERT_EQUAL_FATAL(fixture_create_opt(&f, c->yaml), GANFW_OK);
  CU_ASSERT_EQUAL(f.vt->get_step(f.opt), 0);
  for (int64_t i = 0; i < NPARAM; i++) {
    ganfw_tensor *t = f.vt->state_tensor(f.opt, i, NULL);
    ganfw_tensor_from_host(t, saved[i], t->nbytes);
    free(saved[i]);
  }
  f.vt->set_step(f.opt, step);
  for (int s = 4; s <= NSTEP; s++) {
    set_grads(&f, ref, s);
    CU_ASSERT_EQUAL_FATAL(f.vt->step(f.opt, case_lr(ref, c->name, s)), GANFW_OK);
  }
  char key[96];
  for (int j = 0; j < NPARAM; j++) {
    snprintf(key, sizeof key, "%s.p%d.step%d", c->name, j, NSTEP);
    note(2, compare(ref, key, f.value[j]));
  }
  fixture_close(&f);
  gt_ref_close(ref);
}

/* A parameter without a gradient is frozen: no buffer, never moved; the others still
 * match PyTorch. */
static void test_frozen(void) {
  gt_ref *ref = gt_ref_open("sgd");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  fixture f;
  CU_ASSERT_FATAL(fixture_open(&f));
  CU_ASSERT_FATAL(fixture_params(&f, ref, 1));
  CU_ASSERT_EQUAL_FATAL(fixture_create_opt(&f, cases[1].yaml), GANFW_OK);
  for (int s = 1; s <= NSTEP; s++) {
    set_grads(&f, ref, s);
    CU_ASSERT_EQUAL_FATAL(f.vt->step(f.opt, case_lr(ref, "momentum", s)), GANFW_OK);
  }
  CU_ASSERT(compare(ref, "p1.init", f.value[1]) == 0.0);
  CU_ASSERT(compare(ref, "momentum.p0.step5", f.value[0]) <= TOL);
  CU_ASSERT(compare(ref, "momentum.p3.step5", f.value[3]) <= TOL);
  int64_t n = 0;
  const char *name = NULL;
  while (f.vt->state_tensor(f.opt, n, &name)) {
    CU_ASSERT(strncmp(name, param_names[1], strlen(param_names[1])) != 0);
    n++;
  }
  CU_ASSERT_EQUAL(n, NPARAM - 1);
  fixture_close(&f);
  gt_ref_close(ref);
}

/* --- memory: the buffers exist from create (so a plan sees them), one per parameter ---- */

static void check_state_bytes(const char *yaml, int64_t factor) {
  gt_ref *ref = gt_ref_open("sgd");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  fixture f;
  CU_ASSERT_FATAL(fixture_open(&f));
  CU_ASSERT_FATAL(fixture_params(&f, ref, -1));
  ganfw_alloc_stats after, stepped;
  CU_ASSERT_EQUAL_FATAL(fixture_create_opt(&f, yaml), GANFW_OK);
  ganfw_alloc_get_stats(f.ctx->alloc, &after);
  int64_t param = after.category[GANFW_MEM_PARAM].current;
  CU_ASSERT(param > 0);
  CU_ASSERT_EQUAL(after.category[GANFW_MEM_OPTIM_STATE].current, factor * param);
  ganfw_alloc_reset_peak(f.ctx->alloc);
  set_grads(&f, ref, 1);
  CU_ASSERT_EQUAL(f.vt->step(f.opt, 1e-2), GANFW_OK);
  ganfw_alloc_get_stats(f.ctx->alloc, &stepped);
  CU_ASSERT_EQUAL(stepped.category[GANFW_MEM_WORKSPACE].current, 0);
  CU_ASSERT_EQUAL(stepped.category[GANFW_MEM_OPTIM_STATE].peak, factor * param);
  f.vt->destroy(f.opt);
  f.opt = NULL;
  ganfw_alloc_get_stats(f.ctx->alloc, &after);
  CU_ASSERT_EQUAL(after.category[GANFW_MEM_OPTIM_STATE].current, 0);
  fixture_close(&f);
  gt_ref_close(ref);
}

static void test_state_bytes(void) {
  check_state_bytes(cases[0].yaml, 0); /* plain: no state at all */
  check_state_bytes(cases[3].yaml, 1); /* one buffer per parameter */
}

/* --- config errors --------------------------------------------------------------------- */

static void expect_config_error(const char *yaml, const char *want1, const char *want2) {
  gt_ref *ref = gt_ref_open("sgd");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  fixture f;
  CU_ASSERT_FATAL(fixture_open(&f));
  CU_ASSERT_FATAL(fixture_params(&f, ref, -1));
  ganfw_error_clear();
  ganfw_status st = fixture_create_opt(&f, yaml);
  CU_ASSERT_EQUAL(st, GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NULL(f.opt);
  const char *msg = ganfw_error_message();
  int ok = strstr(msg, want1) && (!want2 || strstr(msg, want2));
  if (!ok) fprintf(stderr, "\n  expected '%s'/'%s' in: %s\n", want1, want2 ? want2 : "", msg);
  CU_ASSERT(ok);
  fixture_close(&f);
  gt_ref_close(ref);
}

static void test_bad_config(void) {
  expect_config_error("optim:\n  nesterov: true\n", "nesterov", "momentum > 0");
  expect_config_error("optim:\n  momentum: 0.9\n  dampening: 0.1\n  nesterov: true\n", "nesterov",
                      "dampening 0");
  expect_config_error("optim:\n  momentum: -0.5\n", "momentum", NULL);
  expect_config_error("optim:\n  weight_decay: -1e-4\n", "weight_decay", NULL);
  expect_config_error("optim:\n  momentum: fast\n", "sgd_test.yaml:2:", "fast");
  expect_config_error("optim:\n  nesterov: 2\n", "sgd_test.yaml:2:", "nesterov");
}

/* A bad learning rate passed to step is refused without touching anything. */
static void test_bad_lr(void) {
  gt_ref *ref = gt_ref_open("sgd");
  CU_ASSERT_PTR_NOT_NULL_FATAL(ref);
  fixture f;
  CU_ASSERT_FATAL(fixture_open(&f));
  CU_ASSERT_FATAL(fixture_params(&f, ref, -1));
  CU_ASSERT_EQUAL_FATAL(fixture_create_opt(&f, cases[1].yaml), GANFW_OK);
  set_grads(&f, ref, 1);
  CU_ASSERT_EQUAL(f.vt->step(f.opt, NAN), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(f.vt->step(f.opt, -1e-3), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(f.vt->get_step(f.opt), 0);
  CU_ASSERT(compare(ref, "p0.init", f.value[0]) == 0.0);
  fixture_close(&f);
  gt_ref_close(ref);
}

static void test_report(void) {
  printf("\n  max rel err vs PyTorch: params %.3e, momentum buffers %.3e, resumed %.3e (tol "
         "%.0e)\n",
         worst_err[0], worst_err[1], worst_err[2], TOL);
  CU_ASSERT(worst_err[0] <= TOL && worst_err[1] <= TOL && worst_err[2] <= TOL);
}

static CU_TestInfo tests[] = {
    {"sgd_plain", test_plain},
    {"sgd_momentum", test_momentum},
    {"sgd_dampening", test_dampening},
    {"sgd_nesterov", test_nesterov},
    {"sgd_weight_decay", test_weight_decay},
    {"sgd_momentum_weight_decay", test_momentum_wd},
    {"sgd_nesterov_weight_decay_varying_lr", test_nesterov_wd_lr},
    {"resume_from_saved_state", test_resume},
    {"frozen_parameter", test_frozen},
    {"state_bytes", test_state_bytes},
    {"config_errors", test_bad_config},
    {"bad_learning_rate", test_bad_lr},
    {"report", test_report},
    CU_TEST_INFO_NULL,
};

GT_MAIN("sgd vs PyTorch", tests)
