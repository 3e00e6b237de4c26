/* Checkpoints: save -> change -> load restores every parameter, buffer, optimizer state and
 * step bit-exactly with the metadata; PyTorch state_dict names and dtypes; every kind of
 * damage or mismatch is refused naming the file (and tensor) with the nets left unchanged;
 * weights-only loads; finding the latest checkpoint. Also writes a DC-GAN checkpoint for
 * tests/check_checkpoint_torch.py (the CTest test checkpoint_torch). */
#include <math.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/checkpoint.h"
#include "runtime/ctx.h"
#include "base/error.h"
#include "base/log.h"
#include "nn/net.h"
#include "io/safetensors.h"
#include "runtime/tensor.h"
#include "testutil.h"

/* --- a fake optimizer: two state tensors per parameter and a step ------------------------- */
typedef struct fake_opt {
  ganfw_tensor **state;
  char **name;
  int64_t n;
  int64_t step;
} fake_opt;

static ganfw_tensor *fake_state(void *self, int64_t i, const char **name) {
  fake_opt *o = self;
  if (i < 0 || i >= o->n) return NULL;
  *name = o->name[i];
  return o->state[i];
}
static int64_t fake_get_step(void *self) {
  return ((fake_opt *)self)->step;
}
static void fake_set_step(void *self, int64_t step) {
  ((fake_opt *)self)->step = step;
}
static const ganfw_optim_vt fake_vt = {.struct_size = sizeof(ganfw_optim_vt),
                                       .state_tensor = fake_state,
                                       .get_step = fake_get_step,
                                       .set_step = fake_set_step};

static fake_opt *fake_create(ganfw_ctx *ctx, ganfw_net *net) {
  static const char *const suffix[2] = {"exp_avg", "exp_avg_sq"};
  fake_opt *o = calloc(1, sizeof *o);
  int64_t np = ganfw_net_param_count(net);
  o->state = calloc((size_t)(2 * np + 1), sizeof *o->state);
  o->name = calloc((size_t)(2 * np + 1), sizeof *o->name);
  for (int64_t i = 0; i < np; i++) {
    ganfw_param_info info = {.struct_size = sizeof info};
    CU_ASSERT_EQUAL_FATAL(ganfw_net_param_info(net, i, &info), GANFW_OK);
    for (int k = 0; k < 2; k++) {
      char nm[256];
      snprintf(nm, sizeof nm, "%s.%s", info.name, suffix[k]);
      o->name[o->n] = strdup(nm);
      o->state[o->n] = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, info.value->ndim,
                                           info.value->shape, GANFW_MEM_OPTIM_STATE, nm);
      CU_ASSERT_PTR_NOT_NULL_FATAL(o->state[o->n]);
      o->n++;
    }
  }
  return o;
}

static void fake_destroy(fake_opt *o) {
  if (!o) return;
  for (int64_t i = 0; i < o->n; i++) {
    ganfw_tensor_destroy(o->state[i]);
    free(o->name[i]);
  }
  free(o->state);
  free(o->name);
  free(o);
}

/* --- fixtures ------------------------------------------------------------------------------ */
static ganfw_ctx *make_ctx(void) {
  ganfw_ctx_options opt = {.device_type = GANFW_DEVICE_CPU, .threads = 1, .seed = 7};
  ganfw_ctx *ctx = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_ctx_create(&opt, &ctx), GANFW_OK);
  return ctx;
}

/* A DC-GAN generator for 32x32 images, named like pytorch/examples' nn.Sequential. */
static ganfw_net *dcgan_g(ganfw_ctx *ctx, int64_t nz, int64_t ngf, int64_t nc) {
  ganfw_net *g = ganfw_net_create(ctx, "generator");
  CU_ASSERT_EQUAL(ganfw_net_conv_transpose2d(g, "main.0", nz, ngf * 4, 4, 1, 0, 0, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_batchnorm2d(g, "main.1", ngf * 4, 1e-5f, 0.1f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(g, "main.2", GANFW_ACT_RELU, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_conv_transpose2d(g, "main.3", ngf * 4, ngf * 2, 4, 2, 1, 0, 0),
                  GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_batchnorm2d(g, "main.4", ngf * 2, 1e-5f, 0.1f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(g, "main.5", GANFW_ACT_RELU, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_conv_transpose2d(g, "main.6", ngf * 2, ngf, 4, 2, 1, 0, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_batchnorm2d(g, "main.7", ngf, 1e-5f, 0.1f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(g, "main.8", GANFW_ACT_RELU, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_conv_transpose2d(g, "main.9", ngf, nc, 4, 2, 1, 0, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(g, "main.10", GANFW_ACT_TANH, 0), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_build(g, nz, 1, 1), GANFW_OK);
  return g;
}

/* The matching discriminator (no Sigmoid: the loss takes logits). */
static ganfw_net *dcgan_d(ganfw_ctx *ctx, int64_t ndf, int64_t nc) {
  ganfw_net *d = ganfw_net_create(ctx, "discriminator");
  CU_ASSERT_EQUAL(ganfw_net_conv2d(d, "main.0", nc, ndf, 4, 2, 1, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(d, "main.1", GANFW_ACT_LEAKY_RELU, 0.2f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_conv2d(d, "main.2", ndf, ndf * 2, 4, 2, 1, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_batchnorm2d(d, "main.3", ndf * 2, 1e-5f, 0.1f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(d, "main.4", GANFW_ACT_LEAKY_RELU, 0.2f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_conv2d(d, "main.5", ndf * 2, ndf * 4, 4, 2, 1, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_batchnorm2d(d, "main.6", ndf * 4, 1e-5f, 0.1f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(d, "main.7", GANFW_ACT_LEAKY_RELU, 0.2f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_conv2d(d, "main.8", ndf * 4, 1, 4, 1, 0, 0), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_build(d, nc, 32, 32), GANFW_OK);
  return d;
}

/* A small classifier-like net: conv(+bias) bn lrelu pool flatten linear(bias?) */
static ganfw_net *small_d(ganfw_ctx *ctx, int64_t ch, int32_t fc_bias, int32_t extra_fc) {
  ganfw_net *d = ganfw_net_create(ctx, "disc");
  CU_ASSERT_EQUAL(ganfw_net_conv2d(d, "c", 2, ch, 3, 1, 1, 1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_batchnorm2d(d, "bn", ch, 1e-5f, 0.1f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_activation(d, "act", GANFW_ACT_LEAKY_RELU, 0.2f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_pool2d(d, "pool", GANFW_POOL_AVG, 2, 2, 0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_flatten(d, "flat"), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_net_linear(d, "fc", ch * 4, 3, fc_bias), GANFW_OK);
  if (extra_fc) CU_ASSERT_EQUAL(ganfw_net_linear(d, "fc2", 3, 2, 1), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_build(d, 2, 4, 4), GANFW_OK);
  return d;
}

/* Two nets with optimizers: the usual subject. */
typedef struct rig {
  ganfw_ctx *ctx;
  ganfw_net *g, *d;
  fake_opt *og, *od;
  ganfw_ckpt_net nets[2];
} rig;

static void rig_init(rig *r) {
  memset(r, 0, sizeof *r);
  r->ctx = make_ctx();
  r->g = dcgan_g(r->ctx, 8, 4, 1);
  r->d = small_d(r->ctx, 3, 1, 0);
  r->og = fake_create(r->ctx, r->g);
  r->od = fake_create(r->ctx, r->d);
  r->nets[0] =
      (ganfw_ckpt_net){.net = r->g, .prefix = NULL, .optim_vt = &fake_vt, .optim_self = r->og};
  r->nets[1] =
      (ganfw_ckpt_net){.net = r->d, .prefix = NULL, .optim_vt = &fake_vt, .optim_self = r->od};
}

static void rig_free(rig *r) {
  fake_destroy(r->og);
  fake_destroy(r->od);
  ganfw_net_destroy(r->g);
  ganfw_net_destroy(r->d);
  ganfw_ctx_destroy(r->ctx);
}

/* Sets every parameter, buffer, counter, state and step from `seed`. */
static void randomize_net(ganfw_net *net, fake_opt *o, uint64_t seed) {
  for (int64_t i = 0; i < ganfw_net_param_count(net); i++) {
    ganfw_param_info info = {.struct_size = sizeof info};
    CU_ASSERT_EQUAL_FATAL(ganfw_net_param_info(net, i, &info), GANFW_OK);
    gt_fill_uniform(info.value->data, info.value->numel, -1, 1, seed * 1000 + (uint64_t)i);
  }
  ganfw_net_buffer b;
  for (int64_t i = 0; ganfw_net_buffer_at(net, i, &b); i++) {
    if (b.counter)
      *b.counter = (int64_t)(seed * 7 + (uint64_t)i + 3);
    else
      gt_fill_uniform(b.tensor->data, b.tensor->numel, 0.5f, 2.0f, seed * 2000 + (uint64_t)i);
  }
  for (int64_t i = 0; o && i < o->n; i++)
    gt_fill_uniform(o->state[i]->data, o->state[i]->numel, -3, 3, seed * 3000 + (uint64_t)i);
  if (o) o->step = (int64_t)seed * 11 + 1;
}

static void rig_randomize(rig *r, uint64_t seed) {
  randomize_net(r->g, r->og, seed);
  randomize_net(r->d, r->od, seed + 100);
}

/* Every byte a checkpoint covers, concatenated. */
typedef struct snap {
  unsigned char *p;
  size_t n;
} snap;

static void snap_put(snap *s, const void *src, size_t n) {
  s->p = realloc(s->p, s->n + n);
  memcpy(s->p + s->n, src, n);
  s->n += n;
}

static snap take_net(ganfw_net *net, fake_opt *o, snap s) {
  for (int64_t i = 0; i < ganfw_net_param_count(net); i++) {
    ganfw_param_info info = {.struct_size = sizeof info};
    ganfw_net_param_info(net, i, &info);
    snap_put(&s, info.value->data, (size_t)info.value->nbytes);
  }
  ganfw_net_buffer b;
  for (int64_t i = 0; ganfw_net_buffer_at(net, i, &b); i++) {
    if (b.counter)
      snap_put(&s, b.counter, 8);
    else
      snap_put(&s, b.tensor->data, (size_t)b.tensor->nbytes);
  }
  for (int64_t i = 0; o && i < o->n; i++)
    snap_put(&s, o->state[i]->data, (size_t)o->state[i]->nbytes);
  if (o) snap_put(&s, &o->step, sizeof o->step);
  return s;
}

static snap rig_take(rig *r) {
  snap s = {NULL, 0};
  s = take_net(r->g, r->og, s);
  return take_net(r->d, r->od, s);
}

static int snap_equal(snap a, snap b) {
  return a.n == b.n && memcmp(a.p, b.p, a.n) == 0;
}

/* --- files ------------------------------------------------------------------------------- */
static char tmpdir[256];

static const char *tmp_path(const char *name) {
  static char buf[4][512];
  static int k;
  k = (k + 1) % 4;
  if (!tmpdir[0]) {
    snprintf(tmpdir, sizeof tmpdir, "/tmp/ganfw_test_ckpt_XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(tmpdir));
  }
  snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
  return buf[k];
}

static void rm_tree(const char *path) {
  struct stat sb;
  if (lstat(path, &sb) != 0) return;
  if (S_ISDIR(sb.st_mode)) {
    DIR *d = opendir(path);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
      if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
      char sub[1024];
      snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
      rm_tree(sub);
    }
    if (d) closedir(d);
    rmdir(path);
  } else {
    unlink(path);
  }
}

static unsigned char *read_file(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *p = malloc((size_t)len + 1);
  CU_ASSERT_EQUAL_FATAL(fread(p, 1, (size_t)len, f), (size_t)len);
  fclose(f);
  *n = (size_t)len;
  return p;
}

static void write_file(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_EQUAL(fwrite(p, 1, n, f), n);
  fclose(f);
}

static int contains(const char *s, const char *sub) {
  if (!strstr(s, sub)) {
    printf("\n  message \"%s\" lacks \"%s\"\n", s, sub);
    return 0;
  }
  return 1;
}

static const char *const extra_keys[2] = {"scaler.scale", "scaler.growth_tracker"};
static const char *const extra_values[2] = {"65536.0", "17"};

static ganfw_ckpt_meta test_meta(void) {
  ganfw_ckpt_meta m = {.step = 1234,
                       .epoch = 5,
                       .loader_position = 640,
                       .seed = 18446744073709551615ull,
                       .rng_offset = 987654321012ull,
                       .n_extra = 2,
                       .extra_keys = extra_keys,
                       .extra_values = extra_values};
  return m;
}

/* --- tests ---------------------------------------------------------------------------------- */
static void test_roundtrip(void) {
  rig r;
  rig_init(&r);
  rig_randomize(&r, 1);
  snap saved = rig_take(&r);
  ganfw_ckpt_meta m = test_meta();
  const char *path = tmp_path("roundtrip.safetensors");
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_save(path, r.nets, 2, &m), GANFW_OK);
  int64_t step_g = r.og->step, step_d = r.od->step;

  rig_randomize(&r, 2);
  snap changed = rig_take(&r);
  CU_ASSERT_FALSE(snap_equal(saved, changed));
  ganfw_ckpt_meta *got = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_load(path, r.nets, 2, &got), GANFW_OK);
  snap loaded = rig_take(&r);
  CU_ASSERT(snap_equal(saved, loaded)); /* bit-exact, steps included */
  CU_ASSERT_EQUAL(r.og->step, step_g);
  CU_ASSERT_EQUAL(r.od->step, step_d);
  CU_ASSERT_PTR_NOT_NULL_FATAL(got);
  CU_ASSERT_EQUAL(got->step, 1234);
  CU_ASSERT_EQUAL(got->epoch, 5);
  CU_ASSERT_EQUAL(got->loader_position, 640);
  CU_ASSERT_EQUAL(got->seed, 18446744073709551615ull);
  CU_ASSERT_EQUAL(got->rng_offset, 987654321012ull);
  CU_ASSERT_EQUAL(got->n_extra, 2);
  CU_ASSERT_STRING_EQUAL(ganfw_ckpt_meta_extra(got, "scaler.scale"), "65536.0");
  CU_ASSERT_STRING_EQUAL(ganfw_ckpt_meta_extra(got, "scaler.growth_tracker"), "17");
  CU_ASSERT_PTR_NULL(ganfw_ckpt_meta_extra(got, "step")); /* reserved keys are fields */
  ganfw_ckpt_meta_free(got);

  /* Loading without asking for the metadata, and saving over an existing file. */
  rig_randomize(&r, 3);
  CU_ASSERT_EQUAL(ganfw_checkpoint_load(path, r.nets, 2, NULL), GANFW_OK);
  snap again = rig_take(&r);
  CU_ASSERT(snap_equal(saved, again));
  m.step = 99;
  m.n_extra = 0;
  CU_ASSERT_EQUAL(ganfw_checkpoint_save(path, r.nets, 2, &m), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_load(path, r.nets, 2, &got), GANFW_OK);
  CU_ASSERT_EQUAL(got->step, 99);
  CU_ASSERT_EQUAL(got->n_extra, 0);
  ganfw_ckpt_meta_free(got);
  ganfw_ckpt_meta_free(NULL);
  free(saved.p);
  free(changed.p);
  free(loaded.p);
  free(again.p);
  rig_free(&r);
}

/* Names, dtypes and shapes follow PyTorch's state_dict; the crc32 is zlib's over the data. */
static void test_pytorch_names(void) {
  rig r;
  rig_init(&r);
  rig_randomize(&r, 4);
  ganfw_ckpt_meta m = test_meta();
  const char *path = tmp_path("names.safetensors");
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_save(path, r.nets, 2, &m), GANFW_OK);
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path, &f), GANFW_OK);

  const ganfw_st_tensor *t = ganfw_st_find(f, "generator.main.0.weight");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_STRING_EQUAL(t->dtype_name, "F32");
  CU_ASSERT_EQUAL(t->ndim, 4); /* ConvTranspose2d: [in, out, kH, kW] */
  CU_ASSERT(t->shape[0] == 8 && t->shape[1] == 16 && t->shape[2] == 4 && t->shape[3] == 4);
  CU_ASSERT_PTR_NULL(ganfw_st_find(f, "generator.main.0.bias")); /* bias=False */
  t = ganfw_st_find(f, "generator.main.1.running_var");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT(t->ndim == 1 && t->shape[0] == 16);
  t = ganfw_st_find(f, "generator.main.1.num_batches_tracked");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_STRING_EQUAL(t->dtype_name, "I64");
  CU_ASSERT_EQUAL(t->ndim, 0);
  CU_ASSERT_EQUAL(t->numel, 1);
  ganfw_net_buffer b;
  CU_ASSERT_FATAL(ganfw_net_buffer_at(r.g, 2, &b) && b.counter);
  int64_t v;
  memcpy(&v, t->data, 8);
  CU_ASSERT_EQUAL(v, *b.counter);
  t = ganfw_st_find(f, "disc.fc.weight"); /* Linear: [out, in] */
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT(t->ndim == 2 && t->shape[0] == 3 && t->shape[1] == 12);
  t = ganfw_st_find(f, "optim.generator.main.0.weight.exp_avg_sq");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT(t->ndim == 4 && t->shape[0] == 8);
  CU_ASSERT_EQUAL(memcmp(t->data, r.og->state[1]->data, (size_t)t->nbytes), 0);

  /* One tensor per parameter, buffer and state: nothing else. */
  int64_t want = 0;
  ganfw_net *nets[2] = {r.g, r.d};
  fake_opt *opts[2] = {r.og, r.od};
  for (int k = 0; k < 2; k++) {
    want += ganfw_net_param_count(nets[k]) + opts[k]->n;
    for (int64_t i = 0; ganfw_net_buffer_at(nets[k], i, &b); i++) want++;
  }
  CU_ASSERT_EQUAL(ganfw_st_count(f), want);

  CU_ASSERT_STRING_EQUAL(ganfw_st_metadata(f, "format"), GANFW_CKPT_FORMAT);
  CU_ASSERT_STRING_EQUAL(ganfw_st_metadata(f, "step"), "1234");
  CU_ASSERT_STRING_EQUAL(ganfw_st_metadata(f, "seed"), "18446744073709551615");
  CU_ASSERT_STRING_EQUAL(ganfw_st_metadata(f, "scaler.scale"), "65536.0");
  char step[32];
  snprintf(step, sizeof step, "%lld", (long long)r.og->step);
  CU_ASSERT_STRING_EQUAL(ganfw_st_metadata(f, "optim.generator.step"), step);

  /* crc32 of the data section, recomputed with zlib's definition (bitwise, poly 0xEDB88320). */
  size_t n;
  unsigned char *bytes = read_file(path, &n);
  uint64_t hl = 0;
  for (int i = 7; i >= 0; i--) hl = (hl << 8) | bytes[i];
  uint32_t crc = 0xffffffffu;
  for (size_t i = 8 + hl; i < n; i++) {
    crc ^= bytes[i];
    for (int k = 0; k < 8; k++) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  crc ^= 0xffffffffu;
  char hex[16];
  snprintf(hex, sizeof hex, "%08x", crc);
  CU_ASSERT_STRING_EQUAL(ganfw_st_metadata(f, "crc32"), hex);
  free(bytes);
  ganfw_st_close(f);
  rig_free(&r);
}

/* Writes a damaged copy and checks that load (and load_weights) refuse it with `code` (-1:
 * GANFW_ERR_IO or _CONFIG) and a message naming the file and containing `want`, leaving the
 * nets as they were. */
static int refused_how(rig *r, const char *path, const void *bytes, size_t n, ganfw_status code,
                       const char *want, int also_weights) {
  write_file(path, bytes, n);
  snap before = rig_take(r);
  ganfw_status st = ganfw_checkpoint_load(path, r->nets, 2, NULL);
  int ok = (code < 0 ? (st == GANFW_ERR_IO || st == GANFW_ERR_CONFIG) : st == code) &&
           contains(ganfw_error_message(), path) &&
           (!want || contains(ganfw_error_message(), want));
  ganfw_status st2 = also_weights ? ganfw_checkpoint_load_weights(path, r->nets, 2, 0, NULL) : st;
  ok = ok && (code < 0 ? (st2 == GANFW_ERR_IO || st2 == GANFW_ERR_CONFIG) : st2 == code);
  snap after = rig_take(r);
  ok = ok && snap_equal(before, after);
  if (!ok)
    printf("\n  %s (%zu bytes): status %d/%d, want %d: %s\n", path, n, st, st2, code,
           ganfw_error_message());
  free(before.p);
  free(after.p);
  return ok;
}

static int refused(rig *r, const char *path, const void *bytes, size_t n, ganfw_status code,
                   const char *want) {
  return refused_how(r, path, bytes, n, code, want, 1);
}

static void test_truncated(void) {
  rig r;
  rig_init(&r);
  rig_randomize(&r, 5);
  ganfw_ckpt_meta m = test_meta();
  const char *good = tmp_path("good.safetensors");
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_save(good, r.nets, 2, &m), GANFW_OK);
  size_t n;
  unsigned char *bytes = read_file(good, &n);
  uint64_t hl = 0;
  for (int i = 7; i >= 0; i--) hl = (hl << 8) | bytes[i];
  rig_randomize(&r, 6);
  const char *bad = tmp_path("truncated.safetensors");
  size_t cuts[] = {0, 4, 7, 8, 9, 100, 8 + hl - 1, 8 + hl, 8 + hl + 1, 8 + hl + 8, n / 2, n - 1};
  for (size_t i = 0; i < sizeof cuts / sizeof cuts[0]; i++)
    CU_ASSERT(refused(&r, bad, bytes, cuts[i], GANFW_ERR_IO, "corrupt or truncated checkpoint"));
  /* A missing file: also an I/O error naming it. */
  snap before = rig_take(&r);
  CU_ASSERT_EQUAL(ganfw_checkpoint_load(tmp_path("nope.safetensors"), r.nets, 2, NULL),
                  GANFW_ERR_IO);
  CU_ASSERT(contains(ganfw_error_message(), "nope.safetensors"));
  snap after = rig_take(&r);
  CU_ASSERT(snap_equal(before, after));
  free(before.p);
  free(after.p);
  free(bytes);
  rig_free(&r);
}

static void test_flipped_data(void) {
  rig r;
  rig_init(&r);
  rig_randomize(&r, 7);
  ganfw_ckpt_meta m = test_meta();
  const char *good = tmp_path("good.safetensors");
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_save(good, r.nets, 2, &m), GANFW_OK);
  size_t n;
  unsigned char *bytes = read_file(good, &n);
  uint64_t hl = 0;
  for (int i = 7; i >= 0; i--) hl = (hl << 8) | bytes[i];
  rig_randomize(&r, 8);
  const char *bad = tmp_path("flipped.safetensors");
  size_t data = 8 + hl;
  /* in the first and the fourth I64 counter, the middle, the last byte */
  size_t at[] = {data, data + 3, data + 8 * 3 + 1, data + (n - data) / 2, n - 1};
  for (size_t i = 0; i < sizeof at / sizeof at[0]; i++) {
    for (int bit = 0; bit < 8; bit += 7) {
      bytes[at[i]] ^= (unsigned char)(1u << bit);
      CU_ASSERT(refused(&r, bad, bytes, n, GANFW_ERR_IO, "data's crc32"));
      bytes[at[i]] ^= (unsigned char)(1u << bit);
    }
  }
  /* A crc that is not 8 hex digits (the header crc leaves the crcs out). */
  char *c = strstr((char *)bytes + 8, "\"crc32\":\"");
  CU_ASSERT_PTR_NOT_NULL_FATAL(c);
  c[9] = 'z';
  CU_ASSERT(refused(&r, bad, bytes, n, GANFW_ERR_IO, "not 8 hex digits"));
  free(bytes);
  rig_free(&r);
}

/* A checkpoint whose crc32s are right but whose weights (or optimizer state) hold a NaN or
 * an inf: refused by load and load_weights naming the file, the tensor and the element,
 * nothing changed (a resume would only fail later, blaming the learning rate). */
static void test_nonfinite_weights(void) {
  rig r;
  rig_init(&r);
  rig_randomize(&r, 7);
  ganfw_param_info info = {.struct_size = sizeof info};
  for (int64_t i = ganfw_net_param_count(r.d) - 1; i >= 0; i--) { /* the first big one */
    ganfw_param_info p = {.struct_size = sizeof p};
    CU_ASSERT_EQUAL_FATAL(ganfw_net_param_info(r.d, i, &p), GANFW_OK);
    if (p.value->numel > 5) info = p;
  }
  CU_ASSERT_FATAL(info.value && info.value->numel > 5);
  ((float *)info.value->data)[5] = NAN;
  ganfw_ckpt_meta m = test_meta();
  const char *nan_path = tmp_path("nan.safetensors");
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_save(nan_path, r.nets, 2, &m), GANFW_OK);
  size_t n;
  unsigned char *bytes = read_file(nan_path, &n);
  rig_randomize(&r, 8); /* the nets must stay as they are now */
  char want[600];
  snprintf(want, sizeof want, "%s' holds a NaN (element 5)", info.name); /* prefixed */
  CU_ASSERT(refused(&r, tmp_path("nan_copy.safetensors"), bytes, n, GANFW_ERR_NUMERIC, want));
  free(bytes);
  /* an inf in the optimizer state: load (resume) refuses it too */
  rig_randomize(&r, 7);
  ((float *)r.og->state[0]->data)[0] = -INFINITY;
  const char *inf_path = tmp_path("inf.safetensors");
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_save(inf_path, r.nets, 2, &m), GANFW_OK);
  bytes = read_file(inf_path, &n);
  rig_randomize(&r, 8);
  CU_ASSERT(refused_how(&r, tmp_path("inf_copy.safetensors"), bytes, n, GANFW_ERR_NUMERIC,
                        "holds an inf (element 0)", 0));
  free(bytes);
  rig_free(&r);
}

/* Every byte of the length and the header, one bit each: always refused, nothing changed. */
static void test_flipped_header(void) {
  rig r;
  rig_init(&r);
  rig_randomize(&r, 9);
  ganfw_ckpt_meta m = test_meta();
  const char *good = tmp_path("good.safetensors");
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_save(good, r.nets, 2, &m), GANFW_OK);
  size_t n;
  unsigned char *bytes = read_file(good, &n);
  uint64_t hl = 0;
  for (int i = 7; i >= 0; i--) hl = (hl << 8) | bytes[i];
  rig_randomize(&r, 10);
  const char *bad = tmp_path("header.safetensors");
  int64_t tried = 0, refused_count = 0;
  ganfw_log_set_level(GANFW_LOG_ERROR);
  for (size_t i = 0; i < 8 + hl; i++) {
    bytes[i] ^= (unsigned char)(1u << (i % 8));
    tried++;
    refused_count += refused_how(&r, bad, bytes, n, -1, NULL, i % 8 == 0);
    bytes[i] ^= (unsigned char)(1u << (i % 8));
  }
  ganfw_log_set_level(GANFW_LOG_INFO);
  printf("\n  %lld single-bit header flips, %lld refused\n", (long long)tried,
         (long long)refused_count);
  CU_ASSERT_EQUAL(refused_count, tried);
  /* A value-only change of the metadata (a digit of "step") is caught by header_crc32. */
  char *p = strstr((char *)bytes + 8, "\"step\":\"1234\"");
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  p[9] = '5';
  CU_ASSERT(refused(&r, bad, bytes, n, GANFW_ERR_IO, "header's crc32"));
  free(bytes);
  rig_free(&r);
}

/* A file from another model: missing, unexpected and reshaped tensors. */
static void test_mismatch(void) {
  rig r;
  rig_init(&r);
  rig_randomize(&r, 11);
  ganfw_ckpt_meta m = test_meta();

  /* disc without fc.bias -> the file lacks it */
  ganfw_net *nobias = small_d(r.ctx, 3, 0, 0);
  fake_opt *onb = fake_create(r.ctx, nobias);
  ganfw_ckpt_net other[2] = {
      r.nets[0], {.net = nobias, .prefix = NULL, .optim_vt = &fake_vt, .optim_self = onb}};
  const char *path = tmp_path("other.safetensors");
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_save(path, other, 2, &m), GANFW_OK);
  snap before = rig_take(&r);
  CU_ASSERT_EQUAL(ganfw_checkpoint_load(path, r.nets, 2, NULL), GANFW_ERR_CONFIG);
  const char *msg = ganfw_error_message();
  CU_ASSERT(contains(msg, path) && contains(msg, "disc.fc.bias") &&
            contains(msg, "missing from the file"));
  snap after = rig_take(&r);
  CU_ASSERT(snap_equal(before, after));
  free(after.p);

  /* ...and loading our file into that net: fc.bias is unexpected */
  const char *ours = tmp_path("ours.safetensors");
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_save(ours, r.nets, 2, &m), GANFW_OK);
  snap nb_before = {NULL, 0};
  nb_before = take_net(nobias, onb, nb_before);
  CU_ASSERT_EQUAL(ganfw_checkpoint_load(ours, other, 2, NULL), GANFW_ERR_CONFIG);
  msg = ganfw_error_message();
  CU_ASSERT(contains(msg, ours) && contains(msg, "disc.fc.bias") &&
            contains(msg, "which this model lacks"));
  snap nb_after = {NULL, 0};
  nb_after = take_net(nobias, onb, nb_after);
  CU_ASSERT(snap_equal(nb_before, nb_after));
  free(nb_before.p);
  free(nb_after.p);
  fake_destroy(onb);
  ganfw_net_destroy(nobias);

  /* disc with 4 channels instead of 3: shapes differ, the first one named */
  ganfw_net *wide = small_d(r.ctx, 4, 1, 0);
  fake_opt *ow = fake_create(r.ctx, wide);
  ganfw_ckpt_net wider[2] = {r.nets[0],
                             {.net = wide, .prefix = NULL, .optim_vt = &fake_vt, .optim_self = ow}};
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_save(path, wider, 2, &m), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_checkpoint_load(path, r.nets, 2, NULL), GANFW_ERR_CONFIG);
  msg = ganfw_error_message();
  CU_ASSERT(contains(msg, path) && contains(msg, "checkpoint does not match this model") &&
            contains(msg, "disc.c.weight is F32 [4,2,3,3] in the file, F32 [3,2,3,3] here"));
  after = rig_take(&r);
  CU_ASSERT(snap_equal(before, after));
  free(after.p);
  fake_destroy(ow);
  ganfw_net_destroy(wide);

  /* An extra layer in the file */
  ganfw_net *deeper = small_d(r.ctx, 3, 1, 1);
  ganfw_ckpt_net deep[2] = {r.nets[0],
                            {.net = deeper, .prefix = NULL, .optim_vt = NULL, .optim_self = NULL}};
  ganfw_ckpt_net ours_noopt[2] = {
      r.nets[0], {.net = r.d, .prefix = NULL, .optim_vt = NULL, .optim_self = NULL}};
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_save(path, deep, 2, &m), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_checkpoint_load(path, ours_noopt, 2, NULL), GANFW_ERR_CONFIG);
  msg = ganfw_error_message();
  CU_ASSERT(contains(msg, "disc.fc2.bias") && contains(msg, "disc.fc2.weight") &&
            contains(msg, "which this model lacks"));
  after = rig_take(&r);
  CU_ASSERT(snap_equal(before, after));
  free(after.p);
  ganfw_net_destroy(deeper);

  /* A file without optimizer state for a run with an optimizer, and a file with another
   * net besides ours. */
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_save(path, ours_noopt, 2, &m), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_checkpoint_load(path, r.nets, 2, NULL), GANFW_ERR_CONFIG);
  CU_ASSERT(contains(ganfw_error_message(), "optim.disc.") &&
            contains(ganfw_error_message(), "missing"));
  CU_ASSERT_EQUAL(ganfw_checkpoint_load(ours, &r.nets[0], 1, NULL), GANFW_ERR_CONFIG);
  CU_ASSERT(contains(ganfw_error_message(), "disc.bn.num_batches_tracked"));
  after = rig_take(&r);
  CU_ASSERT(snap_equal(before, after));
  free(after.p);

  /* A safetensors file that is not a checkpoint. */
  ganfw_st_writer *w = ganfw_st_writer_create();
  float x = 1;
  int64_t one = 1;
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "x", GANFW_DTYPE_F32, 1, &one, &x), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_writer_write(w, path), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_checkpoint_load(path, r.nets, 2, NULL), GANFW_ERR_CONFIG);
  CU_ASSERT(contains(ganfw_error_message(), "not a ganfw checkpoint"));
  CU_ASSERT_EQUAL(ganfw_st_writer_metadata(w, "format", "ganfw-checkpoint-9"), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_writer_write(w, path), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_checkpoint_load(path, r.nets, 2, NULL), GANFW_ERR_CONFIG);
  CU_ASSERT(contains(ganfw_error_message(), "ganfw-checkpoint-9"));
  ganfw_st_writer_destroy(w);
  after = rig_take(&r);
  CU_ASSERT(snap_equal(before, after));
  free(after.p);
  free(before.p);
  rig_free(&r);
}

static void test_save_errors(void) {
  rig r;
  rig_init(&r);
  ganfw_ckpt_meta m = test_meta();
  char path[600];
  snprintf(path, sizeof path, "%s/missing_dir/step_00000001.safetensors", tmp_path(""));
  CU_ASSERT_EQUAL(ganfw_checkpoint_save(path, r.nets, 2, &m), GANFW_ERR_IO);
  CU_ASSERT(contains(ganfw_error_message(), path) &&
            contains(ganfw_error_message(), "directory exists"));
  struct stat sb;
  CU_ASSERT_NOT_EQUAL(stat(tmp_path("missing_dir"), &sb), 0);

  const char *keys[2] = {"step", "x"};
  const char *vals[2] = {"1", "2"};
  m.extra_keys = keys;
  m.extra_values = vals;
  m.n_extra = 1;
  const char *p = tmp_path("bad_extra.safetensors");
  CU_ASSERT_EQUAL(ganfw_checkpoint_save(p, r.nets, 2, &m), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(contains(ganfw_error_message(), "\"step\" is reserved"));
  keys[0] = "optim.generator.step";
  CU_ASSERT_EQUAL(ganfw_checkpoint_save(p, r.nets, 2, &m), GANFW_ERR_INVALID_ARG);
  keys[0] = "x";
  m.n_extra = 2;
  CU_ASSERT_EQUAL(ganfw_checkpoint_save(p, r.nets, 2, &m), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(contains(ganfw_error_message(), "twice"));
  CU_ASSERT_NOT_EQUAL(stat(p, &sb), 0);

  /* Two nets with the same name collide. */
  m.n_extra = 0;
  ganfw_ckpt_net twice[2] = {r.nets[1], r.nets[1]};
  CU_ASSERT_EQUAL(ganfw_checkpoint_save(p, twice, 2, &m), GANFW_ERR_INVALID_ARG);
  CU_ASSERT(contains(ganfw_error_message(), "two tensors are named \"disc."));
  twice[1].prefix = "disc2"; /* a prefix tells them apart */
  CU_ASSERT_EQUAL(ganfw_checkpoint_save(p, twice, 2, &m), GANFW_OK);
  rig_free(&r);
}

static void test_load_weights(void) {
  rig r;
  rig_init(&r);
  rig_randomize(&r, 12);
  snap saved_g = {NULL, 0};
  saved_g = take_net(r.g, NULL, saved_g);
  ganfw_ckpt_meta m = test_meta();
  const char *path = tmp_path("full.safetensors");
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_save(path, r.nets, 2, &m), GANFW_OK);
  rig_randomize(&r, 13);
  snap d_before = {NULL, 0}, d_after = {NULL, 0}, g_now = {NULL, 0};
  d_before = take_net(r.d, r.od, d_before);
  int64_t og_step = r.og->step;

  /* The generator alone, as `ganfw sample` does: D, optimizer state and steps untouched. */
  ganfw_ckpt_net g_only = {.net = r.g, .prefix = NULL, .optim_vt = NULL, .optim_self = NULL};
  ganfw_ckpt_report rep;
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_load_weights(path, &g_only, 1, 0, &rep), GANFW_OK);
  g_now = take_net(r.g, NULL, g_now);
  CU_ASSERT(snap_equal(saved_g, g_now));
  d_after = take_net(r.d, r.od, d_after);
  CU_ASSERT(snap_equal(d_before, d_after));
  CU_ASSERT_EQUAL(r.og->step, og_step);
  CU_ASSERT_EQUAL(rep.missing, 0);
  CU_ASSERT_EQUAL(rep.unexpected, 0);
  ganfw_net_buffer b;
  int64_t nbuf = 0;
  while (ganfw_net_buffer_at(r.g, nbuf, &b)) nbuf++;
  CU_ASSERT_EQUAL(rep.loaded, ganfw_net_param_count(r.g) + nbuf);

  /* A plain state_dict file (safetensors.torch.save_file(G.state_dict())): prefix "". */
  ganfw_st_writer *w = ganfw_st_writer_create();
  for (int64_t i = 0; i < ganfw_net_param_count(r.g); i++) {
    ganfw_param_info info = {.struct_size = sizeof info};
    ganfw_net_param_info(r.g, i, &info);
    CU_ASSERT_EQUAL(ganfw_st_writer_add(w, info.name, GANFW_DTYPE_F32, info.value->ndim,
                                        info.value->shape, info.value->data),
                    GANFW_OK);
  }
  for (int64_t i = 0; ganfw_net_buffer_at(r.g, i, &b); i++) {
    ganfw_status st = b.counter ? ganfw_st_writer_add_raw(w, b.name, "I64", 0, NULL, b.counter)
                                : ganfw_st_writer_add(w, b.name, GANFW_DTYPE_F32, 1,
                                                      b.tensor->shape, b.tensor->data);
    CU_ASSERT_EQUAL(st, GANFW_OK);
  }
  const char *plain = tmp_path("plain.safetensors");
  CU_ASSERT_EQUAL_FATAL(ganfw_st_writer_write(w, plain), GANFW_OK);
  ganfw_st_writer_destroy(w);
  randomize_net(r.g, NULL, 14);
  ganfw_ckpt_net g_plain = {.net = r.g, .prefix = "", .optim_vt = NULL, .optim_self = NULL};
  CU_ASSERT_EQUAL(ganfw_checkpoint_load_weights(plain, &g_plain, 1, 0, &rep), GANFW_OK);
  free(g_now.p);
  g_now = (snap){NULL, 0};
  g_now = take_net(r.g, NULL, g_now);
  CU_ASSERT(snap_equal(saved_g, g_now));
  /* With the default prefix nothing matches: a clear error, not a silent no-op. */
  CU_ASSERT_EQUAL(ganfw_checkpoint_load_weights(plain, &g_only, 1, GANFW_CKPT_ALLOW_MISSING, NULL),
                  GANFW_ERR_CONFIG);
  CU_ASSERT(contains(ganfw_error_message(), "no tensor of the file matches") &&
            contains(ganfw_error_message(), "generator.main.0.weight"));

  /* Missing and unexpected tensors are allowed by flags only. */
  ganfw_net *nobias = small_d(r.ctx, 3, 0, 0);
  ganfw_ckpt_net nb = {.net = nobias, .prefix = NULL, .optim_vt = NULL, .optim_self = NULL};
  ganfw_log_set_level(GANFW_LOG_ERROR);
  CU_ASSERT_EQUAL(ganfw_checkpoint_load_weights(path, &nb, 1, 0, NULL), GANFW_ERR_CONFIG);
  CU_ASSERT(contains(ganfw_error_message(), "disc.fc.bias"));
  CU_ASSERT_EQUAL(ganfw_checkpoint_load_weights(path, &nb, 1, GANFW_CKPT_ALLOW_UNEXPECTED, &rep),
                  GANFW_OK);
  CU_ASSERT_EQUAL(rep.unexpected, 1);
  /* disc.c.weight came from the file */
  ganfw_param_info info2 = {.struct_size = sizeof info2};
  ganfw_net_param_info(nobias, 0, &info2);
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path, &f), GANFW_OK);
  const ganfw_st_tensor *t = ganfw_st_find(f, "disc.c.weight");
  CU_ASSERT_EQUAL(memcmp(t->data, info2.value->data, (size_t)t->nbytes), 0);
  ganfw_st_close(f);
  const char *nbpath = tmp_path("nobias.safetensors");
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_save(nbpath, &nb, 1, &m), GANFW_OK);
  ganfw_ckpt_net d_plain = {.net = r.d, .prefix = NULL, .optim_vt = NULL, .optim_self = NULL};
  CU_ASSERT_EQUAL(ganfw_checkpoint_load_weights(nbpath, &d_plain, 1, 0, NULL), GANFW_ERR_CONFIG);
  CU_ASSERT(contains(ganfw_error_message(), "disc.fc.bias is missing"));
  CU_ASSERT_EQUAL(
      ganfw_checkpoint_load_weights(nbpath, &d_plain, 1, GANFW_CKPT_ALLOW_MISSING, &rep), GANFW_OK);
  CU_ASSERT_EQUAL(rep.missing, 1);
  ganfw_log_set_level(GANFW_LOG_INFO);
  ganfw_net_destroy(nobias);
  free(saved_g.p);
  free(g_now.p);
  free(d_before.p);
  free(d_after.p);
  rig_free(&r);
}

/* A state_dict file as safetensors.torch.save_file (and Hugging Face) writes it: metadata
 * {"format": "pt"}, no crc32s. load_weights takes it like a plain one; a resume refuses it
 * pointing to model.init_from, and another framework's format ("flax": HWIO kernels) is
 * refused by name. */
static void write_state_dict(ganfw_net *net, const char *format, const char *path) {
  ganfw_st_writer *w = ganfw_st_writer_create();
  CU_ASSERT_PTR_NOT_NULL_FATAL(w);
  if (format) CU_ASSERT_EQUAL(ganfw_st_writer_metadata(w, "format", format), GANFW_OK);
  for (int64_t i = 0; i < ganfw_net_param_count(net); i++) {
    ganfw_param_info info = {.struct_size = sizeof info};
    ganfw_net_param_info(net, i, &info);
    CU_ASSERT_EQUAL(ganfw_st_writer_add(w, info.name, GANFW_DTYPE_F32, info.value->ndim,
                                        info.value->shape, info.value->data),
                    GANFW_OK);
  }
  ganfw_net_buffer b;
  for (int64_t i = 0; ganfw_net_buffer_at(net, i, &b); i++) {
    ganfw_status st = b.counter ? ganfw_st_writer_add_raw(w, b.name, "I64", 0, NULL, b.counter)
                                : ganfw_st_writer_add(w, b.name, GANFW_DTYPE_F32, 1,
                                                      b.tensor->shape, b.tensor->data);
    CU_ASSERT_EQUAL(st, GANFW_OK);
  }
  CU_ASSERT_EQUAL_FATAL(ganfw_st_writer_write(w, path), GANFW_OK);
  ganfw_st_writer_destroy(w);
}

static void test_load_weights_pt_format(void) {
  rig r;
  rig_init(&r);
  rig_randomize(&r, 21);
  snap saved = {NULL, 0}, now = {NULL, 0};
  saved = take_net(r.g, NULL, saved);
  const char *pt = tmp_path("pt.safetensors");
  write_state_dict(r.g, "pt", pt);
  randomize_net(r.g, NULL, 22);
  ganfw_ckpt_net g_plain = {.net = r.g, .prefix = "", .optim_vt = NULL, .optim_self = NULL};
  ganfw_ckpt_report rep;
  ganfw_status st = ganfw_checkpoint_load_weights(pt, &g_plain, 1, 0, &rep);
  if (st != GANFW_OK) printf("\n  %s ", ganfw_error_message());
  CU_ASSERT_EQUAL(st, GANFW_OK);
  now = take_net(r.g, NULL, now);
  CU_ASSERT(snap_equal(saved, now));
  CU_ASSERT_EQUAL(rep.missing + rep.unexpected, 0);
  CU_ASSERT(rep.loaded > 0);

  /* A resume needs a ganfw checkpoint: the message points to model.init_from. */
  CU_ASSERT_EQUAL(ganfw_checkpoint_load(pt, &g_plain, 1, NULL), GANFW_ERR_CONFIG);
  CU_ASSERT(contains(ganfw_error_message(), "\"pt\"") &&
            contains(ganfw_error_message(), "model.init_from"));

  /* Another framework's layout is refused, naming both formats this ganfw reads. */
  const char *flax = tmp_path("flax.safetensors");
  write_state_dict(r.g, "flax", flax);
  CU_ASSERT_EQUAL(ganfw_checkpoint_load_weights(flax, &g_plain, 1, 0, NULL), GANFW_ERR_CONFIG);
  CU_ASSERT(contains(ganfw_error_message(), "\"flax\"") &&
            contains(ganfw_error_message(), "\"pt\"") &&
            contains(ganfw_error_message(), GANFW_CKPT_FORMAT));
  free(saved.p);
  free(now.p);
  rig_free(&r);
}

static void touch(const char *name, const void *bytes, size_t n) {
  write_file(tmp_path(name), bytes, n);
}

static void test_latest(void) {
  char dir[600], buf[1024];
  int64_t step = 0;
  snprintf(dir, sizeof dir, "%s", tmp_path("ckpts"));
  /* A missing directory: none, not an error (the first run). */
  CU_ASSERT_EQUAL(ganfw_checkpoint_latest(dir, buf, sizeof buf, &step), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(buf, "");
  CU_ASSERT_EQUAL(step, -1);
  CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0755), 0);
  CU_ASSERT_EQUAL(ganfw_checkpoint_latest(dir, buf, sizeof buf, &step), GANFW_OK);
  CU_ASSERT_EQUAL(step, -1);

  rig r;
  rig_init(&r);
  ganfw_ckpt_meta m = test_meta();
  char path[1024];
  int64_t steps[] = {10, 200, 30};
  for (int i = 0; i < 3; i++) {
    CU_ASSERT_EQUAL(ganfw_checkpoint_path(dir, steps[i], path, sizeof path), GANFW_OK);
    CU_ASSERT_EQUAL(ganfw_checkpoint_save(path, r.nets, 2, &m), GANFW_OK);
  }
  CU_ASSERT(contains(path, "/ckpts/step_00000030.safetensors"));
  size_t n;
  unsigned char *good = read_file(path, &n);
  /* decoys: temp files, other names, an empty file and a directory with higher steps */
  touch("ckpts/step_00000900.safetensors.tmp.AbC123", good, n);
  touch("ckpts/step_00000901.safetensors.tmp", good, n);
  touch("ckpts/step_x.safetensors", good, n);
  touch("ckpts/step_.safetensors", good, n);
  touch("ckpts/step_00000902.txt", good, n);
  touch("ckpts/step_-0000903.safetensors", good, n);
  touch("ckpts/other_00000904.safetensors", good, n);
  touch("ckpts/step_00000905.safetensors", good, 0);
  touch("ckpts/step_00000906.safetensors", good, 7);
  CU_ASSERT_EQUAL(mkdir(tmp_path("ckpts/step_00000907.safetensors"), 0755), 0);
  CU_ASSERT_EQUAL(ganfw_checkpoint_latest(dir, buf, sizeof buf, &step), GANFW_OK);
  CU_ASSERT_EQUAL(step, 200);
  char want[1024];
  snprintf(want, sizeof want, "%s/step_00000200.safetensors", dir);
  CU_ASSERT_STRING_EQUAL(buf, want);
  CU_ASSERT_EQUAL(ganfw_checkpoint_load(buf, r.nets, 2, NULL), GANFW_OK);
  /* Steps compare as numbers: 9 digits beat 8. */
  touch("ckpts/step_100000000.safetensors", good, n);
  CU_ASSERT_EQUAL(ganfw_checkpoint_latest(dir, buf, sizeof buf, &step), GANFW_OK);
  CU_ASSERT_EQUAL(step, 100000000);
  CU_ASSERT(contains(buf, "step_100000000.safetensors"));
  /* Errors: a buffer too small, a file instead of a directory. */
  CU_ASSERT_EQUAL(ganfw_checkpoint_latest(dir, buf, 10, &step), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(ganfw_checkpoint_latest(want, buf, sizeof buf, &step), GANFW_ERR_IO);
  CU_ASSERT(contains(ganfw_error_message(), want));
  CU_ASSERT_EQUAL(ganfw_checkpoint_path(dir, 1, buf, 8), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(ganfw_checkpoint_path(dir, -1, buf, sizeof buf), GANFW_ERR_INVALID_ARG);
  free(good);
  rig_free(&r);
}

/* A DC-GAN (32x32, nc=1) checkpoint with eval-mode outputs for fixed inputs, for
 * tests/check_checkpoint_torch.py; written to $GANFW_TEST_BUILD_DIR/tests/. */
static void test_dcgan_export(void) {
  ganfw_ctx *ctx = make_ctx();
  ganfw_net *g = dcgan_g(ctx, 8, 4, 1), *d = dcgan_d(ctx, 4, 1);
  fake_opt *og = fake_create(ctx, g), *od = fake_create(ctx, d);
  randomize_net(g, og, 21);
  randomize_net(d, od, 22);
  /* Weights at DC-GAN's init scale, so activations stay in range. */
  ganfw_net *nets[2] = {g, d};
  for (int k = 0; k < 2; k++)
    for (int64_t i = 0; i < ganfw_net_param_count(nets[k]); i++) {
      ganfw_param_info info = {.struct_size = sizeof info};
      ganfw_net_param_info(nets[k], i, &info);
      float *v = info.value->data;
      int bn = strcmp(info.layer_type, "batchnorm2d") == 0;
      for (int64_t j = 0; j < info.value->numel; j++) v[j] = bn ? 1 + 0.2f * v[j] : 0.1f * v[j];
    }
  ganfw_ckpt_net cn[2] = {{.net = g, .prefix = NULL, .optim_vt = &fake_vt, .optim_self = og},
                          {.net = d, .prefix = NULL, .optim_vt = &fake_vt, .optim_self = od}};
  ganfw_ckpt_meta m = test_meta();

  const char *bdir = getenv("GANFW_TEST_BUILD_DIR");
  char path[1024], io[1024];
  if (bdir) {
    snprintf(path, sizeof path, "%s/tests/checkpoint_dcgan.safetensors", bdir);
    snprintf(io, sizeof io, "%s/tests/checkpoint_dcgan_io.safetensors", bdir);
  } else {
    snprintf(path, sizeof path, "%s", tmp_path("checkpoint_dcgan.safetensors"));
    snprintf(io, sizeof io, "%s", tmp_path("checkpoint_dcgan_io.safetensors"));
  }
  CU_ASSERT_EQUAL_FATAL(ganfw_checkpoint_save(path, cn, 2, &m), GANFW_OK);

  ganfw_net_set_train(g, 0, 0);
  ganfw_net_set_train(d, 0, 0);
  int64_t zs[4] = {2, 8, 1, 1}, xs[4] = {2, 1, 32, 32};
  ganfw_tensor *z = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 4, zs, GANFW_MEM_DATA, "z");
  ganfw_tensor *x = ganfw_tensor_create(ctx, GANFW_DTYPE_F32, 4, xs, GANFW_MEM_DATA, "x");
  gt_fill_uniform(z->data, z->numel, -1, 1, 31);
  gt_fill_uniform(x->data, x->numel, -1, 1, 32);
  ganfw_tensor *gz = NULL, *dx = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(g, z, NULL, &gz), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_net_forward(d, x, NULL, &dx), GANFW_OK);
  CU_ASSERT(gz->ndim == 4 && gz->shape[1] == 1 && gz->shape[2] == 32 && gz->shape[3] == 32);
  ganfw_st_writer *w = ganfw_st_writer_create();
  ganfw_tensor *ts[4] = {z, gz, x, dx};
  const char *names[4] = {"z", "g_z", "x", "d_x"};
  for (int i = 0; i < 4; i++)
    CU_ASSERT_EQUAL(
        ganfw_st_writer_add(w, names[i], GANFW_DTYPE_F32, ts[i]->ndim, ts[i]->shape, ts[i]->data),
        GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_writer_write(w, io), GANFW_OK);
  ganfw_st_writer_destroy(w);

  /* The file loads back bit-exactly into fresh nets of the same shape. */
  ganfw_net *g2 = dcgan_g(ctx, 8, 4, 1), *d2 = dcgan_d(ctx, 4, 1);
  ganfw_ckpt_net cn2[2] = {{.net = g2, .prefix = NULL, .optim_vt = NULL, .optim_self = NULL},
                           {.net = d2, .prefix = NULL, .optim_vt = NULL, .optim_self = NULL}};
  CU_ASSERT_EQUAL(ganfw_checkpoint_load_weights(path, cn2, 2, 0, NULL), GANFW_OK);
  snap a = {NULL, 0}, b = {NULL, 0};
  a = take_net(d, NULL, take_net(g, NULL, a));
  b = take_net(d2, NULL, take_net(g2, NULL, b));
  CU_ASSERT(snap_equal(a, b));
  /* A model with ngf 8 instead of 4 is refused with the first shape named. */
  ganfw_net *g3 = dcgan_g(ctx, 8, 8, 1);
  ganfw_ckpt_net cn3 = {.net = g3, .prefix = NULL, .optim_vt = NULL, .optim_self = NULL};
  CU_ASSERT_EQUAL(ganfw_checkpoint_load_weights(path, &cn3, 1, 0, NULL), GANFW_ERR_CONFIG);
  CU_ASSERT(contains(ganfw_error_message(),
                     "generator.main.0.weight is F32 [8,16,4,4] in the file, F32 [8,32,4,4] here"));
  free(a.p);
  free(b.p);
  ganfw_net_destroy(g3);
  ganfw_net_destroy(g2);
  ganfw_net_destroy(d2);
  ganfw_tensor_destroy(z);
  ganfw_tensor_destroy(x);
  ganfw_tensor_destroy(gz);
  ganfw_tensor_destroy(dx);
  fake_destroy(og);
  fake_destroy(od);
  ganfw_net_destroy(g);
  ganfw_net_destroy(d);
  ganfw_ctx_destroy(ctx);
}

static void test_cleanup(void) {
  CU_ASSERT(tmpdir[0] != '\0');
  rm_tree(tmpdir);
  struct stat sb;
  CU_ASSERT_NOT_EQUAL(stat(tmpdir, &sb), 0);
}

static CU_TestInfo tests[] = {{"roundtrip", test_roundtrip},
                              {"pytorch_names", test_pytorch_names},
                              {"truncated", test_truncated},
                              {"flipped_data", test_flipped_data},
                              {"flipped_header", test_flipped_header},
                              {"nonfinite_weights", test_nonfinite_weights},
                              {"mismatch", test_mismatch},
                              {"save_errors", test_save_errors},
                              {"load_weights", test_load_weights},
                              {"load_weights_pt_format", test_load_weights_pt_format},
                              {"latest", test_latest},
                              {"dcgan_export", test_dcgan_export},
                              {"cleanup", test_cleanup},
                              CU_TEST_INFO_NULL};
GT_MAIN("checkpoint", tests)
