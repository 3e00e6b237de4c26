/* The metadata a resume reads (core/src/io/checkpoint_meta.c): every field of a checkpoint
 * that is checked before a run continues from it (format, crc32s, step, epoch,
 * loader_position, seed, rng_offset, optim.<net>.step, the data shape, the memory
 * strategies' scalars) is refused when bad with a message naming the file and the field.
 * Files are small safetensors files made with the project's writer. With
 * GANFW_CKPT_SEED_DIR set, the files are also written there (the seeds of
 * tests/fuzz/corpus/checkpoint). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/checkpoint.h"
#include "io/checkpoint_meta.h"
#include "io/safetensors.h"
#include "testutil.h"

#define MAX_KV 32

/* Metadata under construction: the valid position of a small run, then edits. */
typedef struct {
  const char *keys[MAX_KV], *values[MAX_KV];
  int n;
} kv;

static void kv_set(kv *m, const char *key, const char *value) {
  for (int i = 0; i < m->n; i++) {
    if (strcmp(m->keys[i], key) != 0) continue;
    if (value) {
      m->values[i] = value;
    } else { /* NULL drops the key */
      m->keys[i] = m->keys[m->n - 1];
      m->values[i] = m->values[m->n - 1];
      m->n--;
    }
    return;
  }
  if (!value) return;
  CU_ASSERT_FATAL(m->n < MAX_KV);
  m->keys[m->n] = key;
  m->values[m->n] = value;
  m->n++;
}

static kv good_meta(void) {
  kv m = {.n = 0};
  kv_set(&m, "format", GANFW_CKPT_FORMAT);
  kv_set(&m, "step", "1200");
  kv_set(&m, "epoch", "3");
  kv_set(&m, "loader_position", "5952");
  kv_set(&m, "seed", "18446744073709551615");
  kv_set(&m, "rng_offset", "123456");
  kv_set(&m, "optim.generator.step", "1200");
  kv_set(&m, "optim.discriminator.step", "1200");
  kv_set(&m, "data.channels", "1");
  kv_set(&m, "data.height", "28");
  kv_set(&m, "data.width", "28");
  kv_set(&m, "data.num_classes", "10");
  kv_set(&m, "memory.amp.scale", "65536");
  kv_set(&m, "memory.amp.growth_tracker", "17");
  kv_set(&m, "memory.amp.skipped_steps", "2");
  return m;
}

static const ganfw_ckpt_resume_limits mnist = {
    .data_items = 60000, .channels = 1, .height = 28, .width = 28, .num_classes = 10};

static char dir[4096];

static int make_dir(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/ganfw_resume_meta_XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  return mkdtemp(dir) ? 0 : 1;
}

static int remove_dir(void) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  return system(cmd) == 0 ? 0 : 1;
}

/* Writes `name` in the test folder: one small tensor and the metadata m, with crc32s
 * computed as the checkpoint writer does unless m gives its own ("crc32" / "header_crc32").
 * Returns the path (static buffer). */
static const char *write_ckpt(const char *name, const kv *m) {
  static char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  ganfw_st_writer *w = ganfw_st_writer_create();
  CU_ASSERT_PTR_NOT_NULL_FATAL(w);
  static const float weight[6] = {0.5f, -1.0f, 2.0f, 0.25f, 3.0f, -0.125f};
  static const int64_t shape[2] = {2, 3};
  CU_ASSERT_EQUAL_FATAL(ganfw_st_writer_add(w, "generator.w", GANFW_DTYPE_F32, 2, shape, weight),
                        GANFW_OK);
  int has_crc = 0, has_hcrc = 0;
  for (int i = 0; i < m->n; i++) {
    CU_ASSERT_EQUAL_FATAL(ganfw_st_writer_metadata(w, m->keys[i], m->values[i]), GANFW_OK);
    has_crc |= strcmp(m->keys[i], "crc32") == 0;
    has_hcrc |= strcmp(m->keys[i], "header_crc32") == 0;
  }
  char hex[9];
  if (!has_crc) {
    ganfw_ckpt_crc_format(ganfw_ckpt_crc_bytes(0, weight, sizeof weight), hex);
    CU_ASSERT_EQUAL_FATAL(ganfw_st_writer_metadata(w, "crc32", hex), GANFW_OK);
  }
  if (!has_hcrc) {
    const ganfw_ckpt_desc d = {"generator.w", "F32", 2, shape};
    int64_t crc = ganfw_ckpt_header_crc(m->keys, m->values, m->n, &d, 1);
    CU_ASSERT_FATAL(crc >= 0);
    ganfw_ckpt_crc_format(crc, hex);
    CU_ASSERT_EQUAL_FATAL(ganfw_st_writer_metadata(w, "header_crc32", hex), GANFW_OK);
  }
  CU_ASSERT_EQUAL_FATAL(ganfw_st_writer_write(w, path), GANFW_OK);
  const char *seeds = getenv("GANFW_CKPT_SEED_DIR");
  if (seeds && seeds[0]) {
    char seed[4200];
    snprintf(seed, sizeof seed, "%s/%s", seeds, name);
    CU_ASSERT_EQUAL(ganfw_st_writer_write(w, seed), GANFW_OK);
  }
  ganfw_st_writer_destroy(w);
  return path;
}

/* Reads and checks `path` as a resume of `lim` does: the metadata, the run's limits and
 * both optimizer steps. */
static ganfw_status resume_meta(const char *path, const ganfw_ckpt_resume_limits *lim,
                                ganfw_ckpt_meta **out) {
  *out = NULL;
  ganfw_st_file *f = NULL;
  ganfw_status st = ganfw_st_open(path, &f);
  if (st != GANFW_OK) return st;
  ganfw_ckpt_meta *m = NULL;
  st = ganfw_ckpt_meta_read(path, f, &m);
  if (st == GANFW_OK) st = ganfw_ckpt_meta_check_resume(path, m, lim);
  int64_t step;
  if (st == GANFW_OK) st = ganfw_ckpt_optim_step(path, f, "generator", &step);
  if (st == GANFW_OK) st = ganfw_ckpt_optim_step(path, f, "discriminator", &step);
  ganfw_st_close(f);
  if (st != GANFW_OK) {
    ganfw_ckpt_meta_free(m);
    return st;
  }
  *out = m;
  return GANFW_OK;
}

static int contains(const char *s, const char *part) {
  return strstr(s, part) != NULL;
}

/* Writes the good metadata with `key` set to `value` (NULL: dropped) and asserts that the
 * resume is refused with `code`, naming the file and holding `want`. */
static void refused(const char *key, const char *value, ganfw_status code, const char *want) {
  kv m = good_meta();
  kv_set(&m, key, value);
  const char *path = write_ckpt("bad.safetensors", &m);
  ganfw_ckpt_meta *meta = NULL;
  ganfw_status st = resume_meta(path, &mnist, &meta);
  const char *msg = ganfw_error_message();
  int ok = st == code && contains(msg, path) && contains(msg, want);
  if (!ok)
    printf("\n  %s = %s: status %d (want %d): \"%s\"\n  lacks \"%s\"\n", key,
           value ? value : "(dropped)", st, code, msg, want);
  CU_ASSERT(ok);
  CU_ASSERT_PTR_NULL(meta);
  /* The whole resume path refuses it too, before any tensor (no nets here). */
  CU_ASSERT_EQUAL(ganfw_checkpoint_resume(path, NULL, 0, &mnist, &meta), code);
  CU_ASSERT_PTR_NULL(meta);
}

static void test_valid(void) {
  kv m = good_meta();
  const char *path = write_ckpt("mnist_gan_amp.safetensors", &m);
  ganfw_ckpt_meta *meta = NULL;
  CU_ASSERT_EQUAL_FATAL(resume_meta(path, &mnist, &meta), GANFW_OK);
  CU_ASSERT_EQUAL(meta->step, 1200);
  CU_ASSERT_EQUAL(meta->epoch, 3);
  CU_ASSERT_EQUAL(meta->loader_position, 5952);
  CU_ASSERT_EQUAL(meta->seed, UINT64_MAX);
  CU_ASSERT_EQUAL(meta->rng_offset, 123456u);
  CU_ASSERT_STRING_EQUAL(ganfw_ckpt_meta_extra(meta, "memory.amp.scale"), "65536");
  CU_ASSERT_PTR_NULL(ganfw_ckpt_meta_extra(meta, "optim.generator.step")); /* reserved */
  CU_ASSERT_EQUAL(meta->n_extra, 7);
  ganfw_ckpt_meta_free(meta);
  /* The edges: a loader at the end of the data set, counts at their bounds. */
  char max[32], rng[32];
  snprintf(max, sizeof max, "%lld", (long long)GANFW_CKPT_MAX_COUNT);
  snprintf(rng, sizeof rng, "%llu", (unsigned long long)GANFW_CKPT_MAX_RNG_OFFSET);
  kv_set(&m, "loader_position", "60000");
  kv_set(&m, "step", max);
  kv_set(&m, "epoch", "0");
  kv_set(&m, "rng_offset", rng);
  kv_set(&m, "optim.generator.step", max);
  kv_set(&m, "memory.amp.scale", "3.4e38");
  kv_set(&m, "memory.amp.growth_tracker", "0");
  path = write_ckpt("edges.safetensors", &m);
  CU_ASSERT_EQUAL(resume_meta(path, &mnist, &meta), GANFW_OK);
  CU_ASSERT_EQUAL(meta ? meta->step : -1, GANFW_CKPT_MAX_COUNT);
  ganfw_ckpt_meta_free(meta);
  /* Per-optimizer scalers, a classifier's extras, no data shape (an older writer). */
  m = good_meta();
  kv_set(&m, "memory.amp.scale", NULL);
  kv_set(&m, "memory.amp.scale_g", "1024");
  kv_set(&m, "memory.amp.scale_d", "0.5");
  kv_set(&m, "memory.amp.growth_tracker_g", "3");
  kv_set(&m, "classifier.best_test_acc", "0.987");
  kv_set(&m, "data.channels", NULL);
  kv_set(&m, "data.num_classes", NULL);
  path = write_ckpt("per_optimizer.safetensors", &m);
  CU_ASSERT_EQUAL(resume_meta(path, &mnist, &meta), GANFW_OK);
  ganfw_ckpt_meta_free(meta);
  /* A data shape the run does not check (0) is not compared. */
  ganfw_ckpt_resume_limits any = {.data_items = 60000};
  m = good_meta();
  kv_set(&m, "data.height", "64");
  path = write_ckpt("other_shape.safetensors", &m);
  CU_ASSERT_EQUAL(resume_meta(path, &any, &meta), GANFW_OK);
  ganfw_ckpt_meta_free(meta);
}

static void test_format_and_crcs(void) {
  refused("format", NULL, GANFW_ERR_CONFIG, "not a ganfw checkpoint (its metadata has no");
  refused("format", "pt", GANFW_ERR_CONFIG, "a PyTorch state_dict (format \"pt\")");
  refused("format", "ganfw-checkpoint-0", GANFW_ERR_CONFIG, "checkpoint format");
  refused("crc32", "deadbeef", GANFW_ERR_IO, "the data's crc32 is");
  refused("crc32", "DEADBEEF", GANFW_ERR_IO, "\"crc32\" is \"DEADBEEF\", not 8 hex digits");
  refused("header_crc32", "00000000", GANFW_ERR_IO, "the header's crc32 is");
  refused("header_crc32", "0x1", GANFW_ERR_IO, "\"header_crc32\" is \"0x1\", not 8 hex");
}

static void test_position_fields(void) {
  refused("step", NULL, GANFW_ERR_IO, "field step: missing");
  refused("step", "12a", GANFW_ERR_IO, "field step: \"12a\" is not an integer");
  refused("step", " 12", GANFW_ERR_IO, "field step: \" 12\" is not an integer");
  refused("step", "-1", GANFW_ERR_IO, "field step: \"-1\" is outside 0..4503599627370496");
  refused("step", "4503599627370497", GANFW_ERR_IO, "field step: \"4503599627370497\" is outside");
  refused("step", "99999999999999999999", GANFW_ERR_IO,
          "field step: \"99999999999999999999\" is "
          "not an integer");
  refused("epoch", "-3", GANFW_ERR_IO, "field epoch: \"-3\" is outside");
  refused("epoch", "", GANFW_ERR_IO, "field epoch: \"\" is not an integer");
  refused("loader_position", "1e3", GANFW_ERR_IO, "field loader_position: \"1e3\" is not an");
  refused("loader_position", "70000", GANFW_ERR_CONFIG,
          "field loader_position: 70000 is past the data set's 60000 items");
  refused("seed", "-5", GANFW_ERR_IO, "field seed: \"-5\" is not an integer");
  refused("seed", "18446744073709551616", GANFW_ERR_IO, "field seed: \"18446744073709551616\"");
  refused("rng_offset", "4611686018427387905", GANFW_ERR_IO,
          "field rng_offset: \"4611686018427387905\" is outside 0..4611686018427387904");
}

static void test_optimizer_steps(void) {
  refused("optim.generator.step", NULL, GANFW_ERR_CONFIG, "field optim.generator.step: missing");
  refused("optim.discriminator.step", "-2", GANFW_ERR_CONFIG,
          "field optim.discriminator.step: \"-2\" is not a step count");
  refused("optim.generator.step", "9007199254740993", GANFW_ERR_CONFIG,
          "field optim.generator.step: \"9007199254740993\" is not a step count");
}

static void test_data_shape(void) {
  refused("data.height", "32", GANFW_ERR_CONFIG,
          "field data.height: 32 in the checkpoint, 28 in this run's data");
  refused("data.channels", "3", GANFW_ERR_CONFIG, "field data.channels: 3 in the checkpoint, 1");
  refused("data.num_classes", "100", GANFW_ERR_CONFIG, "field data.num_classes: 100 in the");
  refused("data.width", "abc", GANFW_ERR_IO, "field data.width: \"abc\" is not an integer from 1");
  refused("data.width", "0", GANFW_ERR_IO, "field data.width: \"0\" is not an integer from 1");
}

static void test_strategy_scalars(void) {
  refused("memory.amp.scale", "0", GANFW_ERR_IO, "field memory.amp.scale: \"0\" is not a loss");
  refused("memory.amp.scale", "-4", GANFW_ERR_IO, "field memory.amp.scale: \"-4\" is not a loss");
  refused("memory.amp.scale", "inf", GANFW_ERR_IO,
          "field memory.amp.scale: \"inf\" is not a finite number");
  refused("memory.amp.scale", "nan", GANFW_ERR_IO, "field memory.amp.scale: \"nan\" is not a");
  refused("memory.amp.scale", "1e39", GANFW_ERR_IO,
          "field memory.amp.scale: \"1e39\" is not a "
          "loss scale");
  refused("memory.amp.scale", "1e999", GANFW_ERR_IO,
          "field memory.amp.scale: \"1e999\" is not a "
          "finite number");
  refused("memory.amp.scale", "64 ", GANFW_ERR_IO, "field memory.amp.scale: \"64 \" is not a");
  refused("memory.amp.growth_tracker", "1.5", GANFW_ERR_IO,
          "field memory.amp.growth_tracker: \"1.5\" is not a count (an integer >= 0)");
  refused("memory.amp.growth_tracker", "-1", GANFW_ERR_IO,
          "field memory.amp.growth_tracker: "
          "\"-1\" is not a count");
  refused("memory.amp.skipped_steps", "1e300", GANFW_ERR_IO, "field memory.amp.skipped_steps");
  refused("memory.amp", "1", GANFW_ERR_IO, "field memory.amp: \"1\" is under a key that is not");
}

/* A resume with nets fails on the metadata before it compares or copies a tensor. */
static void test_resume_refuses_first(void) {
  kv m = good_meta();
  kv_set(&m, "loader_position", "60001");
  const char *path = write_ckpt("first.safetensors", &m);
  ganfw_ckpt_meta *meta = (ganfw_ckpt_meta *)1;
  CU_ASSERT_EQUAL(ganfw_checkpoint_resume(path, NULL, 0, &mnist, &meta), GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NULL(meta);
  CU_ASSERT(contains(ganfw_error_message(), "field loader_position: 60001"));
  /* Without limits (ganfw_checkpoint_load) the position is not the loader's business. */
  CU_ASSERT_EQUAL(ganfw_checkpoint_load(path, NULL, 0, &meta), GANFW_ERR_CONFIG);
  CU_ASSERT(contains(ganfw_error_message(), "holds generator.w, which this model lacks"));
}

/* A folder where the checkpoint file is expected says so. */
static void test_directory(void) {
  ganfw_ckpt_meta *meta = NULL;
  CU_ASSERT_EQUAL(ganfw_checkpoint_resume(dir, NULL, 0, &mnist, &meta), GANFW_ERR_IO);
  CU_ASSERT(contains(ganfw_error_message(), dir));
  CU_ASSERT(contains(ganfw_error_message(), ": is a directory, not a checkpoint file"));
  CU_ASSERT_EQUAL(ganfw_checkpoint_load_weights(dir, NULL, 0, 0, NULL), GANFW_ERR_IO);
  CU_ASSERT(contains(ganfw_error_message(), ": is a directory, not a checkpoint file"));
}

static CU_TestInfo tests[] = {
    {"valid", test_valid},
    {"format_and_crcs", test_format_and_crcs},
    {"position_fields", test_position_fields},
    {"optimizer_steps", test_optimizer_steps},
    {"data_shape", test_data_shape},
    {"strategy_scalars", test_strategy_scalars},
    {"resume_refuses_first", test_resume_refuses_first},
    {"directory", test_directory},
    CU_TEST_INFO_NULL,
};

int main(void) {
  return gt_run_fixture("resume_meta", tests, make_dir, remove_dir);
}
