/* The YAML config (core/src/config/config.c, config_yaml.c): every value type and byte unit, exact
 * file:line:col in errors, `extends:` chains (merge, replace, positions, cycles, missing
 * bases), --set, the unread-key check with suggestions, and the resolved config written
 * with its defaults and read back. Fixtures: tests/data/config/. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "config/config.h"
#include "base/error.h"
#include "testutil.h"

/* --- helpers ------------------------------------------------------------------------------ */

/* tests/data/config/<name>, from $GANFW_SOURCE_DIR (set by CTest) or this file's folder. */
static const char *fixture(const char *name) {
  static char path[4096];
  const char *src = getenv("GANFW_SOURCE_DIR");
  if (src && src[0]) {
    snprintf(path, sizeof path, "%s/tests/data/config/%s", src, name);
  } else {
    const char *slash = strrchr(__FILE__, '/');
    int dir = slash ? (int)(slash - __FILE__) : 1;
    snprintf(path, sizeof path, "%.*s/data/config/%s", dir, slash ? __FILE__ : ".", name);
  }
  return path;
}

static ganfw_config *load_text(const char *text) {
  ganfw_config *c = NULL;
  ganfw_status st = ganfw_config_load_string(text, "t.yaml", &c);
  if (st != GANFW_OK) printf("\n  load_string failed: %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL(st, GANFW_OK);
  return c;
}

/* Asserts that the last error message contains `want`, printing it when not. */
#define ASSERT_MSG_HAS(want)                                                                       \
  do {                                                                                             \
    const char *msg_ = ganfw_error_message();                                                      \
    if (!strstr(msg_, (want))) printf("\n  message \"%s\"\n  lacks \"%s\"\n", msg_, (want));       \
    CU_ASSERT_PTR_NOT_NULL(strstr(msg_, (want)));                                                  \
  } while (0)

/* Writes the resolved config into a heap string (free it). */
static char *resolved_text(const ganfw_config *c) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  CU_ASSERT_EQUAL(ganfw_config_write_resolved(c, f), GANFW_OK);
  fclose(f);
  return buf;
}

/* Removes every "  # default" mark in place. */
static void strip_default_marks(char *text) {
  static const char mark[] = "  # default";
  size_t w = 0;
  for (size_t r = 0; text[r];) {
    if (strncmp(text + r, mark, sizeof mark - 1) == 0) {
      r += sizeof mark - 1;
      continue;
    }
    text[w++] = text[r++];
  }
  text[w] = '\0';
}

/* --- types ---------------------------------------------------------------------------------- */

static void test_ints(void) {
  ganfw_config *c = load_text("a: 42\nb: -7\nc: +3\nd: 9223372036854775807\n"
                              "e: 9223372036854775808\nf: 1e3\ng: 1.0\nh: abc\n");
  const ganfw_cfg *r = ganfw_config_root(c);
  int64_t v;
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "a", 0, &v), GANFW_OK);
  CU_ASSERT_EQUAL(v, 42);
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "b", 0, &v), GANFW_OK);
  CU_ASSERT_EQUAL(v, -7);
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "c", 0, &v), GANFW_OK);
  CU_ASSERT_EQUAL(v, 3);
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "d", 0, &v), GANFW_OK);
  CU_ASSERT_EQUAL(v, INT64_MAX);
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "e", 0, &v), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("t.yaml:5:4: e: '9223372036854775808' is out of range");
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "f", 5, &v), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("t.yaml:6:4: f: expected an integer, got '1e3'");
  CU_ASSERT_EQUAL(v, 5); /* the default on error */
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "g", 0, &v), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("t.yaml:7:4: g: expected an integer, got '1.0'");
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "h", 0, &v), GANFW_ERR_CONFIG);
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "absent", 17, &v), GANFW_OK);
  CU_ASSERT_EQUAL(v, 17);
  CU_ASSERT_EQUAL(ganfw_cfg_int(NULL, "x", 9, &v), GANFW_OK); /* absent section */
  CU_ASSERT_EQUAL(v, 9);
  ganfw_config_destroy(c);
}

static void test_floats(void) {
  ganfw_config *c = load_text("a: 2e-4\nb: 1.5E+3\nc: .5\nd: -0.25\ne: 3\nf: 1e999\n"
                              "g: .inf\nh: nan\ni: 1e-3x\nj: 5.\n");
  const ganfw_cfg *r = ganfw_config_root(c);
  double v;
  CU_ASSERT_EQUAL(ganfw_cfg_float(r, "a", 0, &v), GANFW_OK);
  CU_ASSERT_EQUAL(v, 2e-4);
  CU_ASSERT_EQUAL(ganfw_cfg_float(r, "b", 0, &v), GANFW_OK);
  CU_ASSERT_EQUAL(v, 1500.0);
  CU_ASSERT_EQUAL(ganfw_cfg_float(r, "c", 0, &v), GANFW_OK);
  CU_ASSERT_EQUAL(v, 0.5);
  CU_ASSERT_EQUAL(ganfw_cfg_float(r, "d", 0, &v), GANFW_OK);
  CU_ASSERT_EQUAL(v, -0.25);
  CU_ASSERT_EQUAL(ganfw_cfg_float(r, "e", 0, &v), GANFW_OK);
  CU_ASSERT_EQUAL(v, 3.0);
  CU_ASSERT_EQUAL(ganfw_cfg_float(r, "j", 0, &v), GANFW_OK);
  CU_ASSERT_EQUAL(v, 5.0);
  CU_ASSERT_EQUAL(ganfw_cfg_float(r, "f", 0, &v), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("t.yaml:6:4: f: '1e999' is out of range");
  CU_ASSERT_EQUAL(ganfw_cfg_float(r, "g", 0, &v), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("t.yaml:7:4: g: expected a finite number, got '.inf'");
  CU_ASSERT_EQUAL(ganfw_cfg_float(r, "h", 0, &v), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("expected a finite number, got 'nan'");
  CU_ASSERT_EQUAL(ganfw_cfg_float(r, "i", 0, &v), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("t.yaml:9:4: i: expected a number, got '1e-3x'");
  ganfw_config_destroy(c);
}

static void test_bools_and_strings(void) {
  ganfw_config *c = load_text("a: true\nb: False\nc: YES\nd: no\ne: On\nf: OFF\ng: 1\n"
                              "s: hello world\nq: \"yes\"\nn:\nt: ~\nu: ''\n");
  const ganfw_cfg *r = ganfw_config_root(c);
  int32_t b;
  const int32_t want[] = {1, 0, 1, 0, 1, 0};
  const char *keys[] = {"a", "b", "c", "d", "e", "f"};
  for (int i = 0; i < 6; i++) {
    CU_ASSERT_EQUAL(ganfw_cfg_bool(r, keys[i], 7, &b), GANFW_OK);
    CU_ASSERT_EQUAL(b, want[i]);
  }
  CU_ASSERT_EQUAL(ganfw_cfg_bool(r, "g", 0, &b), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("t.yaml:7:4: g: expected a boolean (true/false, yes/no, on/off), got '1'");
  const char *s;
  CU_ASSERT_EQUAL(ganfw_cfg_string(r, "s", NULL, &s), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(s, "hello world");
  CU_ASSERT_EQUAL(ganfw_cfg_string(r, "q", NULL, &s), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(s, "yes");
  CU_ASSERT_EQUAL(ganfw_cfg_string(r, "n", "dflt", &s), GANFW_OK);
  CU_ASSERT_PTR_NULL(s); /* an explicit null is "none" */
  CU_ASSERT_EQUAL(ganfw_cfg_string(r, "t", "dflt", &s), GANFW_OK);
  CU_ASSERT_PTR_NULL(s);
  CU_ASSERT_EQUAL(ganfw_cfg_string(r, "u", "dflt", &s), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(s, ""); /* a quoted empty string is a string */
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "n", 0, &(int64_t){0}), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("t.yaml:10:3: n: expected an integer, got an empty value (null)");
  CU_ASSERT_EQUAL(ganfw_cfg_string(r, "absent", "dflt", &s), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(s, "dflt");
  ganfw_config_destroy(c);
}

static void test_bytes(void) {
  static const struct {
    const char *text;
    int64_t want;
  } ok[] = {
      {"512MiB", 536870912},   {"8GiB", 8589934592}, {"1.5GB", 1500000000},
      {"1.5 GiB", 1610612736}, {"1048576", 1048576}, {"100B", 100},
      {"1KB", 1000},           {"1kib", 1024},       {"4k", 4096},
      {"2M", 2097152},         {"3g", 3221225472},   {"1 TB", 1000000000000},
      {"1TiB", 1099511627776}, {"2Mi", 2097152},     {"0.5KiB", 512},
      {"512 mib", 536870912},  {"-1", -1},
  };
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
    char text[128];
    snprintf(text, sizeof text, "limit: \"%s\"\nplain: %s\n", ok[i].text, ok[i].text);
    ganfw_config *c = load_text(text);
    int64_t v = 0, w = 0;
    CU_ASSERT_EQUAL(ganfw_cfg_bytes(ganfw_config_root(c), "limit", 0, &v), GANFW_OK);
    CU_ASSERT_EQUAL(ganfw_cfg_bytes(ganfw_config_root(c), "plain", 0, &w), GANFW_OK);
    if (v != ok[i].want || w != ok[i].want)
      printf("\n  '%s' -> %lld / %lld, want %lld\n", ok[i].text, (long long)v, (long long)w,
             (long long)ok[i].want);
    CU_ASSERT_EQUAL(v, ok[i].want);
    CU_ASSERT_EQUAL(w, ok[i].want);
    ganfw_config_destroy(c);
  }
  ganfw_config *c =
      load_text("a: 12 parsecs\nb: GiB\nc: 1e3MB\nd: 9000000000GiB\ne: [1]\nf: 1.5.2KB\n");
  const ganfw_cfg *r = ganfw_config_root(c);
  int64_t v;
  CU_ASSERT_EQUAL(ganfw_cfg_bytes(r, "a", 0, &v), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("t.yaml:1:4: a: expected a byte size such as 512MiB");
  ASSERT_MSG_HAS("got '12 parsecs'");
  CU_ASSERT_EQUAL(ganfw_cfg_bytes(r, "b", 0, &v), GANFW_ERR_CONFIG);
  CU_ASSERT_EQUAL(ganfw_cfg_bytes(r, "c", 0, &v), GANFW_ERR_CONFIG);
  CU_ASSERT_EQUAL(ganfw_cfg_bytes(r, "d", 0, &v), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("t.yaml:4:4: d: '9000000000GiB' is more bytes than a 64-bit integer holds");
  CU_ASSERT_EQUAL(ganfw_cfg_bytes(r, "e", 0, &v), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS(
      "t.yaml:5:4: e: expected a byte size such as 512MiB, 1.5GB or 1048576, got a list");
  CU_ASSERT_EQUAL(ganfw_cfg_bytes(r, "f", 0, &v), GANFW_ERR_CONFIG);
  ganfw_config_destroy(c);
}

static void test_lists_and_paths(void) {
  ganfw_config *c = load_text("device:\n  threads: 4\n  gpu: {id: 1}\n"
                              "optim:\n  betas: [0.5, 0.999]\n  three: [1, 2, 3]\n"
                              "layers:\n  - kind: conv\n    out: 64\n  - kind: relu\n"
                              "names: [a, b]\nscalar: 5\n");
  const ganfw_cfg *r = ganfw_config_root(c);
  int64_t v;
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "device.threads", 0, &v), GANFW_OK);
  CU_ASSERT_EQUAL(v, 4);
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "device.gpu.id", 0, &v), GANFW_OK);
  CU_ASSERT_EQUAL(v, 1);
  const ganfw_cfg *dev = ganfw_cfg_child(r, "device");
  CU_ASSERT_STRING_EQUAL(ganfw_cfg_where(dev), "t.yaml:2:3");
  CU_ASSERT_PTR_NULL(ganfw_cfg_child(r, "nope"));
  CU_ASSERT_EQUAL(ganfw_cfg_kind_of(dev), GANFW_CFG_KIND_MAP);
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "scalar.x", 0, &v), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("t.yaml:12:9: scalar: expected a section (a map) holding 'x', got a scalar");

  double betas[2];
  CU_ASSERT_EQUAL(ganfw_cfg_float_list(r, "optim.betas", 2, NULL, betas), GANFW_OK);
  CU_ASSERT_EQUAL(betas[0], 0.5);
  CU_ASSERT_EQUAL(betas[1], 0.999);
  CU_ASSERT_EQUAL(ganfw_cfg_float_list(r, "optim.three", 2, NULL, betas), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("t.yaml:6:10: optim.three: expected a list of 2 numbers, got 3 items");
  CU_ASSERT_EQUAL(ganfw_cfg_float_list(r, "names", 2, NULL, betas), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("t.yaml:11:9: names[0]: expected a number, got 'a'");
  CU_ASSERT_EQUAL(ganfw_cfg_float_list(r, "optim.missing", 2, NULL, betas), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("optim.missing: required key missing");

  CU_ASSERT_EQUAL(ganfw_cfg_list_len(r, "layers"), 2);
  CU_ASSERT_EQUAL(ganfw_cfg_list_len(r, "absent"), 0);
  CU_ASSERT_EQUAL(ganfw_cfg_list_len(r, "scalar"), -1);
  ASSERT_MSG_HAS("t.yaml:12:9: scalar: expected a list, got '5'");
  const ganfw_cfg *l1 = ganfw_cfg_list_at(r, "layers", 1);
  const char *s;
  CU_ASSERT_EQUAL(ganfw_cfg_string(l1, "kind", NULL, &s), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(s, "relu");
  CU_ASSERT_STRING_EQUAL(ganfw_cfg_path(l1), "layers[1]");
  CU_ASSERT_PTR_NULL(ganfw_cfg_list_at(r, "layers", 2));
  const ganfw_cfg *l0 = ganfw_cfg_list_at(r, "layers", 0);
  CU_ASSERT_EQUAL(ganfw_cfg_int(l0, "out", 0, &v), GANFW_OK);
  CU_ASSERT_EQUAL(v, 64);
  CU_ASSERT_EQUAL(ganfw_cfg_string(l0, "kind", NULL, &s), GANFW_OK);
  /* A scalar item is read with key NULL. */
  const ganfw_cfg *n1 = ganfw_cfg_list_at(r, "names", 1);
  CU_ASSERT_EQUAL(ganfw_cfg_string(n1, NULL, NULL, &s), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(s, "b");
  CU_ASSERT_STRING_EQUAL(ganfw_cfg_where(n1), "t.yaml:11:12");
  CU_ASSERT_EQUAL(ganfw_cfg_int(n1, NULL, 0, &v), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("t.yaml:11:12: names[1]: expected an integer, got 'b'");
  ganfw_config_destroy(c);
}

/* The wrong-type messages name the exact place in a file. */
static void test_wrong_types_in_file(void) {
  ganfw_config *c = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_config_load(fixture("bad_types.yaml"), &c), GANFW_OK);
  const ganfw_cfg *train = ganfw_cfg_child(ganfw_config_root(c), "train");
  int64_t i;
  double f;
  int32_t b;
  CU_ASSERT_EQUAL(ganfw_cfg_int(train, "batch_size", 64, &i), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("bad_types.yaml:2:15: train.batch_size: expected an integer, got 'abc'");
  CU_ASSERT_STRING_EQUAL(ganfw_error_message(), fixture("bad_types.yaml:2:15: train.batch_size: "
                                                        "expected an integer, got 'abc'"));
  CU_ASSERT_EQUAL(ganfw_cfg_float(train, "lr", 0, &f), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("bad_types.yaml:3:7: train.lr: expected a number, got '1e-3x'");
  CU_ASSERT_EQUAL(ganfw_cfg_bool(train, "amp", 0, &b), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("bad_types.yaml:4:8: train.amp: expected a boolean");
  CU_ASSERT_EQUAL(ganfw_cfg_bytes(ganfw_config_root(c), "train.limit", 0, &i), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("bad_types.yaml:5:10: train.limit: expected a byte size");
  CU_ASSERT_EQUAL(ganfw_cfg_int(train, "ratio", 0, &i), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("bad_types.yaml:6:10: train.ratio: expected an integer, got '64.0'");
  CU_ASSERT_EQUAL(ganfw_cfg_float(train, "empty", 0, &f), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("bad_types.yaml:7:9: train.empty: expected a number, got an empty value");
  ganfw_config_destroy(c);
}

/* --- load errors ----------------------------------------------------------------------------- */

static void test_load_errors(void) {
  ganfw_config *c = (ganfw_config *)1;
  CU_ASSERT_EQUAL(ganfw_config_load(fixture("no_such_file.yaml"), &c), GANFW_ERR_IO);
  CU_ASSERT_PTR_NULL(c);
  ASSERT_MSG_HAS("no_such_file.yaml");
  ASSERT_MSG_HAS("No such file");

  CU_ASSERT_EQUAL(ganfw_config_load(fixture("syntax_error.yaml"), &c), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("syntax_error.yaml:3:7: YAML syntax error: found character that cannot start "
                 "any token");

  CU_ASSERT_EQUAL(ganfw_config_load(fixture("duplicate.yaml"), &c), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("duplicate.yaml:4:3: duplicate key 'lr' in section 'optim' (first at ");
  ASSERT_MSG_HAS("duplicate.yaml:2:3)");

  CU_ASSERT_EQUAL(ganfw_config_load_string("- a\n- b\n", "l.yaml", &c), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("l.yaml:1:1: the top level of a config must be a map");
  CU_ASSERT_EQUAL(ganfw_config_load_string("a: &x 1\nb: *x\n", "l.yaml", &c), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("l.yaml:1:4: YAML anchors and aliases (&x, *x) are not supported");
  CU_ASSERT_EQUAL(ganfw_config_load_string("a: 1\n---\nb: 2\n", "l.yaml", &c), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("l.yaml:2:1: a second YAML document");
  CU_ASSERT_EQUAL(ganfw_config_load_string("a.b: 1\n", "l.yaml", &c), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("l.yaml:1:1: key 'a.b' contains a '.'");
  CU_ASSERT_EQUAL(ganfw_config_load_string("a: [1, 2\n", "l.yaml", &c), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("l.yaml:2:1: YAML syntax error");

  CU_ASSERT_EQUAL(ganfw_config_load_string("a: \xff\xfe\n", "u.yaml", &c), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("u.yaml:1:4: YAML read error at byte 3");
  CU_ASSERT_EQUAL(ganfw_config_load_string("a: 1\nb: [2,\n  \xc3x]\n", "u.yaml", &c),
                  GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("u.yaml:3:4: YAML read error at byte 15");

  /* An empty document (comments only) is an empty map. */
  CU_ASSERT_EQUAL(ganfw_config_load_string("# nothing\n", "e.yaml", &c), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cfg_kind_of(ganfw_config_root(c)), GANFW_CFG_KIND_MAP);
  CU_ASSERT_EQUAL(ganfw_config_check_unused(c), GANFW_OK);
  ganfw_config_destroy(c);
}

/* --- extends ---------------------------------------------------------------------------------- */

static void test_extends_chain(void) {
  ganfw_config *c = NULL;
  ganfw_status st = ganfw_config_load(fixture("sub/top.yaml"), &c);
  if (st) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  const ganfw_cfg *r = ganfw_config_root(c);
  CU_ASSERT_EQUAL(ganfw_cfg_has(r, "extends"), 0); /* consumed */
  const char *s;
  int64_t i;
  double f, betas[2];
  /* From base.yaml, untouched by mid and top. */
  CU_ASSERT_EQUAL(ganfw_cfg_string(r, "model.plugin", NULL, &s), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(s, "dcgan");
  CU_ASSERT_PTR_NOT_NULL(
      strstr(ganfw_cfg_where(ganfw_cfg_child(r, "model.plugin")), "config/sub/../base.yaml:3:11"));
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "model.ndf", 0, &i), GANFW_OK);
  CU_ASSERT_EQUAL(i, 64);
  /* Overridden by top.yaml (maps merge key by key). */
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "model.ngf", 0, &i), GANFW_OK);
  CU_ASSERT_EQUAL(i, 128);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(ganfw_cfg_where(ganfw_cfg_child(r, "model.ngf")), "config/sub/top.yaml:3:8"));
  /* Overridden by mid.yaml. */
  CU_ASSERT_EQUAL(ganfw_cfg_float(r, "optim.lr", 0, &f), GANFW_OK);
  CU_ASSERT_EQUAL(f, 1e-4);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(ganfw_cfg_where(ganfw_cfg_child(r, "optim.lr")), "config/sub/../mid.yaml:3:7"));
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "train.steps", 0, &i), GANFW_OK);
  CU_ASSERT_EQUAL(i, 2000);
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "train.batch_size", 0, &i), GANFW_OK);
  CU_ASSERT_EQUAL(i, 64);
  CU_ASSERT_EQUAL(ganfw_cfg_string(r, "optim.plugin", NULL, &s), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(s, "adam");
  /* Lists replace. */
  CU_ASSERT_EQUAL(ganfw_cfg_float_list(r, "optim.betas", 2, NULL, betas), GANFW_OK);
  CU_ASSERT_EQUAL(betas[0], 0.0);
  CU_ASSERT_EQUAL(betas[1], 0.99);
  CU_ASSERT_EQUAL(ganfw_cfg_list_len(r, "memory"), 1);
  CU_ASSERT_EQUAL(ganfw_cfg_string(ganfw_cfg_list_at(r, "memory", 0), NULL, NULL, &s), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(s, "checkpoint");
  CU_ASSERT_PTR_NOT_NULL(
      strstr(ganfw_cfg_where(ganfw_cfg_list_at(r, "memory", 0)), "config/sub/top.yaml:6:10"));
  /* Every key was read (extends is not one). */
  st = ganfw_config_check_unused(c);
  if (st) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL(st, GANFW_OK);
  ganfw_config_destroy(c);

  /* A list of bases merges in order; relative to the file that names them. */
  const char *text = "extends: [base.yaml, mid.yaml]\ntrain: {steps: 3}\n";
  CU_ASSERT_EQUAL_FATAL(ganfw_config_load_string(text, fixture("inline.yaml"), &c), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cfg_float(ganfw_config_root(c), "optim.lr", 0, &f), GANFW_OK);
  CU_ASSERT_EQUAL(f, 1e-4);
  CU_ASSERT_EQUAL(ganfw_cfg_int(ganfw_config_root(c), "train.steps", 0, &i), GANFW_OK);
  CU_ASSERT_EQUAL(i, 3);
  ganfw_config_destroy(c);
}

static void test_extends_errors(void) {
  ganfw_config *c = (ganfw_config *)1;
  CU_ASSERT_EQUAL(ganfw_config_load(fixture("cycle_a.yaml"), &c), GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NULL(c);
  ASSERT_MSG_HAS("cycle_b.yaml:1:10: extends: cycle: ");
  ASSERT_MSG_HAS("cycle_a.yaml -> ");
  ASSERT_MSG_HAS("cycle_b.yaml -> ");

  CU_ASSERT_EQUAL(ganfw_config_load(fixture("missing_base.yaml"), &c), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("missing_base.yaml:2:10: extends: cannot open base config '");
  ASSERT_MSG_HAS("config/no_such_base.yaml': No such file or directory");

  CU_ASSERT_EQUAL(ganfw_config_load_string("extends: {a: 1}\n", "x.yaml", &c), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("x.yaml:1:10: extends: expected a file name or a list of file names");
}

/* `~key:` drops an inherited key, `_replace_: true` makes a map replace the base's section
 * instead of merging into it; lists replace. Markers never reach the tree. */
static void test_extends_drop_and_replace(void) {
  ganfw_config *c = NULL;
  const ganfw_cfg *r;
  const char *s;
  double f;
  int64_t i;
  /* ~betas: the base's betas are gone, its lr stays */
  const char *drop = "extends: base.yaml\noptim: {plugin: sgd, ~betas: }\n";
  CU_ASSERT_EQUAL_FATAL(ganfw_config_load_string(drop, fixture("drop.yaml"), &c), GANFW_OK);
  r = ganfw_config_root(c);
  CU_ASSERT_EQUAL(ganfw_cfg_has(r, "optim.betas"), 0);
  CU_ASSERT_EQUAL(ganfw_cfg_has(r, "optim.~betas"), 0);
  CU_ASSERT_EQUAL(ganfw_cfg_string(r, "optim.plugin", NULL, &s), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(s, "sgd");
  CU_ASSERT_EQUAL(ganfw_cfg_float(r, "optim.lr", 0, &f), GANFW_OK);
  CU_ASSERT_EQUAL(f, 2e-4);
  CU_ASSERT_EQUAL(ganfw_cfg_child(r, "model") != NULL, 1);
  CU_ASSERT_EQUAL(ganfw_cfg_child(r, "train") != NULL, 1);
  CU_ASSERT_EQUAL(ganfw_cfg_list_len(r, "memory"), 1);
  ganfw_config_destroy(c);

  /* a whole top-level section dropped, and one in a block map */
  const char *drop2 = "extends: base.yaml\n~memory:\ntrain:\n  ~steps:\n";
  CU_ASSERT_EQUAL_FATAL(ganfw_config_load_string(drop2, fixture("drop2.yaml"), &c), GANFW_OK);
  r = ganfw_config_root(c);
  CU_ASSERT_EQUAL(ganfw_cfg_has(r, "memory"), 0);
  CU_ASSERT_EQUAL(ganfw_cfg_has(r, "train.steps"), 0);
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "train.batch_size", 0, &i), GANFW_OK);
  CU_ASSERT_EQUAL(i, 64);
  ganfw_config_destroy(c);

  /* _replace_: the section is exactly what this file says */
  const char *repl = "extends: base.yaml\noptim: {_replace_: true, plugin: sgd, lr: 0.1}\n";
  CU_ASSERT_EQUAL_FATAL(ganfw_config_load_string(repl, fixture("repl.yaml"), &c), GANFW_OK);
  r = ganfw_config_root(c);
  CU_ASSERT_EQUAL(ganfw_cfg_has(r, "optim.betas"), 0);
  CU_ASSERT_EQUAL(ganfw_cfg_has(r, "optim._replace_"), 0);
  CU_ASSERT_EQUAL(ganfw_cfg_float(r, "optim.lr", 0, &f), GANFW_OK);
  CU_ASSERT_EQUAL(f, 0.1);
  CU_ASSERT_EQUAL(ganfw_cfg_string(r, "optim.plugin", NULL, &s), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(s, "sgd");
  /* the resolved config has no markers and reads back the same */
  char *text = resolved_text(c);
  CU_ASSERT_PTR_NULL(strstr(text, "_replace_"));
  CU_ASSERT_PTR_NULL(strstr(text, "betas"));
  free(text);
  ganfw_config_destroy(c);

  /* a marker with nothing to act on is a mistake worth naming (a typo, a wrong base) */
  c = (ganfw_config *)1;
  CU_ASSERT_EQUAL(ganfw_config_load_string("extends: base.yaml\noptim: {~beta: }\n",
                                           fixture("typo_drop.yaml"), &c),
                  GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NULL(c);
  ASSERT_MSG_HAS("typo_drop.yaml:2:9: optim.~beta: nothing to drop");
  CU_ASSERT_EQUAL(ganfw_config_load_string("~seed:\n", "nobase.yaml", &c), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("nobase.yaml:1:1: ~seed: nothing to drop");
  CU_ASSERT_EQUAL(
      ganfw_config_load_string("extends: base.yaml\noptim: {~lr: 0.1}\n", fixture("val.yaml"), &c),
      GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("`~lr:` takes no value");
  CU_ASSERT_EQUAL(ganfw_config_load_string("extends: base.yaml\noptim: {_replace_: maybe}\n",
                                           fixture("val2.yaml"), &c),
                  GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("_replace_: expected true or false");
  CU_ASSERT_EQUAL(ganfw_config_load_string("extends: base.yaml\noptim: {~lr: , lr: 1}\n",
                                           fixture("both.yaml"), &c),
                  GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("both drops and sets 'lr'");
}

/* --set ~key drops a key (Hydra's override syntax); dropping nothing is an error. */
static void test_set_drop(void) {
  ganfw_config *c = load_text("optim:\n  lr: 0.1\n  betas: [0.5, 0.999]\n");
  CU_ASSERT_EQUAL(ganfw_config_set(c, "~optim.betas"), GANFW_OK);
  const ganfw_cfg *r = ganfw_config_root(c);
  CU_ASSERT_EQUAL(ganfw_cfg_has(r, "optim.betas"), 0);
  CU_ASSERT_EQUAL(ganfw_cfg_has(r, "optim.lr"), 1);
  CU_ASSERT_EQUAL(ganfw_config_set(c, "~optim.betas"), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("--set '~optim.betas': nothing to drop: 'optim.betas' is not in the config");
  CU_ASSERT_EQUAL(ganfw_config_set(c, "~optim.lr=3"), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("takes no value");
  CU_ASSERT_EQUAL(ganfw_config_set(c, "~optim"), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cfg_has(r, "optim"), 0);
  ganfw_config_destroy(c);
}

/* Ranged reads: the range (open or closed ends) in the message, at the value's position;
 * a default is not checked. */
static void test_ranges(void) {
  ganfw_config *c = load_text("lr: 20\nlo: 0\nhi: 10\nok: 1e-3\nn: 0\nm: 1048576\n");
  const ganfw_cfg *r = ganfw_config_root(c);
  double f;
  int64_t i;
  const int32_t open = GANFW_CFG_OPEN_LO | GANFW_CFG_OPEN_HI;
  CU_ASSERT_EQUAL(ganfw_cfg_float_in(r, "lr", 1e-3, 0, 10, open, &f), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("t.yaml:1:5: lr: 20 is out of range: expected a number in (0, 10)");
  CU_ASSERT_EQUAL(f, 1e-3);
  CU_ASSERT_EQUAL(ganfw_cfg_float_in(r, "lo", 1, 0, 10, open, &f), GANFW_ERR_CONFIG);
  CU_ASSERT_EQUAL(ganfw_cfg_float_in(r, "lo", 1, 0, 10, GANFW_CFG_OPEN_HI, &f), GANFW_OK);
  CU_ASSERT_EQUAL(f, 0);
  CU_ASSERT_EQUAL(ganfw_cfg_float_in(r, "hi", 1, 0, 10, GANFW_CFG_OPEN_LO, &f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cfg_float_in(r, "hi", 1, 0, 10, open, &f), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("hi: 10 is out of range: expected a number in (0, 10)");
  CU_ASSERT_EQUAL(ganfw_cfg_float_in(r, "hi", 1, 0, 1, 0, &f), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("expected a number in [0, 1]");
  CU_ASSERT_EQUAL(ganfw_cfg_float_in(r, "ok", 1, 0, 10, open, &f), GANFW_OK);
  CU_ASSERT_EQUAL(f, 1e-3);
  CU_ASSERT_EQUAL(ganfw_cfg_float_in(r, "absent", 99, 0, 10, open, &f), GANFW_OK);
  CU_ASSERT_EQUAL(f, 99);
  CU_ASSERT_EQUAL(ganfw_cfg_int_in(r, "n", 64, 1, 1 << 20, &i), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("t.yaml:5:4: n: 0 is out of range: expected an integer from 1 to 1048576");
  CU_ASSERT_EQUAL(i, 64);
  CU_ASSERT_EQUAL(ganfw_cfg_int_in(r, "m", 64, 1, 1 << 20, &i), GANFW_OK);
  CU_ASSERT_EQUAL(i, 1048576);
  ganfw_config_destroy(c);
}

/* --- --set ------------------------------------------------------------------------------------ */

static void test_set(void) {
  ganfw_config *c = load_text("optim:\n  lr: 0.1\n  betas: [0.5, 0.999]\n  momentum: 0.9\n"
                              "train:\n  steps: 10\n");
  CU_ASSERT_EQUAL(ganfw_config_set(c, "optim.lr=0.01"), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_config_set(c, "device.threads=4"), GANFW_OK); /* a new section */
  CU_ASSERT_EQUAL(ganfw_config_set(c, "optim.betas=[0.9, 0.99]"), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_config_set(c, "train={steps: 20, amp: on}"), GANFW_OK); /* merges */
  CU_ASSERT_EQUAL(ganfw_config_set(c, "name=\"a b\""), GANFW_OK);
  const ganfw_cfg *r = ganfw_config_root(c);
  double f, betas[2];
  int64_t i;
  int32_t b;
  const char *s;
  CU_ASSERT_EQUAL(ganfw_cfg_float(r, "optim.lr", 0, &f), GANFW_OK);
  CU_ASSERT_EQUAL(f, 0.01);
  CU_ASSERT_STRING_EQUAL(ganfw_cfg_where(ganfw_cfg_child(r, "optim.lr")), "--set optim.lr=0.01");
  CU_ASSERT_EQUAL(ganfw_cfg_float(r, "optim.momentum", 0, &f), GANFW_OK);
  CU_ASSERT_EQUAL(f, 0.9);
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "device.threads", 0, &i), GANFW_OK);
  CU_ASSERT_EQUAL(i, 4);
  CU_ASSERT_EQUAL(ganfw_cfg_float_list(r, "optim.betas", 2, NULL, betas), GANFW_OK);
  CU_ASSERT_EQUAL(betas[0], 0.9);
  CU_ASSERT_EQUAL(betas[1], 0.99);
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "train.steps", 0, &i), GANFW_OK);
  CU_ASSERT_EQUAL(i, 20);
  CU_ASSERT_EQUAL(ganfw_cfg_bool(r, "train.amp", 0, &b), GANFW_OK);
  CU_ASSERT_EQUAL(b, 1);
  CU_ASSERT_EQUAL(ganfw_cfg_string(r, "name", NULL, &s), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(s, "a b");
  CU_ASSERT_EQUAL(ganfw_config_check_unused(c), GANFW_OK);

  /* A wrong value from --set names the assignment. */
  CU_ASSERT_EQUAL(ganfw_config_set(c, "train.steps=many"), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "train.steps", 0, &i), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("--set train.steps=many: train.steps: expected an integer, got 'many'");

  /* Malformed assignments. */
  CU_ASSERT_EQUAL(ganfw_config_set(c, "novalue"), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("--set 'novalue': expected section.key=value");
  CU_ASSERT_EQUAL(ganfw_config_set(c, "=5"), GANFW_ERR_CONFIG);
  CU_ASSERT_EQUAL(ganfw_config_set(c, "a..b=5"), GANFW_ERR_CONFIG);
  CU_ASSERT_EQUAL(ganfw_config_set(c, "a.b.=5"), GANFW_ERR_CONFIG);
  CU_ASSERT_EQUAL(ganfw_config_set(c, "optim.lr.x=1"), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("'optim.lr' is a scalar at --set optim.lr=0.01, not a section");
  CU_ASSERT_EQUAL(ganfw_config_set(c, "extends=base.yaml"), GANFW_ERR_CONFIG);
  CU_ASSERT_EQUAL(ganfw_config_set(c, "optim.betas=[1,"), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("--set optim.betas=[1,: YAML syntax error");
  /* An empty value is a null. */
  CU_ASSERT_EQUAL(ganfw_config_set(c, "name="), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cfg_string(r, "name", "x", &s), GANFW_OK);
  CU_ASSERT_PTR_NULL(s);
  ganfw_config_destroy(c);
}

/* A copy is the config its file and assignments make (positions, --set places, resolved
 * text), reads of its own, and lives without the original; more assignments apply to the
 * copy alone. */
static void test_copy(void) {
  const char *path = fixture("sub/top.yaml");
  const char *set1[] = {"optim.lr=0.01"}, *both[] = {"optim.lr=0.01", "train.batch_size=8"};
  ganfw_config *orig = NULL, *fresh = NULL, *copy = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_config_load(path, &orig), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_config_set(orig, set1[0]), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_config_load(path, &fresh), GANFW_OK);
  for (int i = 0; i < 2; i++) CU_ASSERT_EQUAL_FATAL(ganfw_config_set(fresh, both[i]), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(ganfw_config_copy(orig, both + 1, 1, &copy), GANFW_OK);
  char *want = resolved_text(fresh), *got = resolved_text(copy), *before = resolved_text(orig);
  CU_ASSERT_STRING_EQUAL(got, want);
  CU_ASSERT_PTR_NULL(strstr(before, "batch_size: 8"));
  CU_ASSERT_STRING_EQUAL(ganfw_config_file(copy), ganfw_config_file(orig));

  /* reading the copy records defaults and marks keys in the copy only */
  const ganfw_cfg *r = ganfw_config_root(copy);
  int64_t i;
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "train.never_written", 7, &i), GANFW_OK);
  char *after = resolved_text(orig);
  CU_ASSERT_STRING_EQUAL(after, before);
  CU_ASSERT_EQUAL(ganfw_config_check_unused(orig), GANFW_ERR_CONFIG);

  /* the copy's places need nothing of the original */
  ganfw_config_destroy(orig);
  CU_ASSERT_PTR_NOT_NULL(
      strstr(ganfw_cfg_where(ganfw_cfg_child(r, "model.ngf")), "config/sub/top.yaml:3:8"));
  CU_ASSERT_PTR_NOT_NULL(
      strstr(ganfw_cfg_where(ganfw_cfg_child(r, "model.plugin")), "config/sub/../base.yaml:3:11"));
  CU_ASSERT_STRING_EQUAL(ganfw_cfg_where(ganfw_cfg_child(r, "optim.lr")), "--set optim.lr=0.01");
  CU_ASSERT_STRING_EQUAL(ganfw_cfg_where(ganfw_cfg_child(r, "train.batch_size")),
                         "--set train.batch_size=8");

  /* a bad assignment is ganfw_config_set's error, and no copy */
  ganfw_config *bad = (ganfw_config *)&bad;
  const char *novalue[] = {"novalue"};
  CU_ASSERT_EQUAL(ganfw_config_copy(copy, novalue, 1, &bad), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("--set 'novalue': expected section.key=value");
  CU_ASSERT_PTR_NULL(bad);
  free(want);
  free(got);
  free(before);
  free(after);
  ganfw_config_destroy(copy);
  ganfw_config_destroy(fresh);
}

/* --- unread keys ------------------------------------------------------------------------------ */

static void test_unread_keys(void) {
  ganfw_config *c = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_config_load(fixture("typo.yaml"), &c), GANFW_OK);
  const ganfw_cfg *r = ganfw_config_root(c);
  int64_t i;
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "train.batch_size", 0, &i), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "train.steps", 0, &i), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "seed", 0, &i), GANFW_OK); /* absent: defaulted */
  CU_ASSERT_EQUAL(ganfw_config_check_unused(c), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("typo.yaml:3:3: unknown key 'bach_size' in section 'train' (did you mean "
                 "'batch_size'?)");
  ASSERT_MSG_HAS("; 1 more unread key: sed (");
  ASSERT_MSG_HAS("typo.yaml:5:1)");
  /* Reading the typo'd keys clears the error. */
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "train.bach_size", 0, &i), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_config_check_unused(c), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("typo.yaml:5:1: unknown key 'sed' at the top level (did you mean 'seed'?)");
  CU_ASSERT_PTR_NULL(strstr(ganfw_error_message(), "more unread"));
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "sed", 0, &i), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_config_check_unused(c), GANFW_OK);
  ganfw_config_destroy(c);

  /* Sections: an untouched section is one unread key; a handed-out one needs its keys read;
   * list items that are maps need their keys read too. Far names are not suggested. */
  c = load_text("model:\n  ngf: 64\n  xyzzy: 1\nunused: {a: 1}\n"
                "layers:\n  - kind: conv\n    strid: 2\n");
  r = ganfw_config_root(c);
  const ganfw_cfg *model = ganfw_cfg_child(r, "model");
  CU_ASSERT_EQUAL(ganfw_cfg_int(model, "ngf", 0, &i), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_config_check_unused(c), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("t.yaml:3:3: unknown key 'xyzzy' in section 'model'; 2 more unread keys: "
                 "unused (t.yaml:4:1), layers (t.yaml:5:1)");
  CU_ASSERT_PTR_NULL(strstr(ganfw_error_message(), "did you mean"));
  CU_ASSERT_EQUAL(ganfw_cfg_int(model, "xyzzy", 0, &i), GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL(ganfw_cfg_child(r, "unused"));
  const ganfw_cfg *l0 = ganfw_cfg_list_at(r, "layers", 0);
  const char *s;
  CU_ASSERT_EQUAL(ganfw_cfg_string(l0, "kind", NULL, &s), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cfg_int(l0, "stride", 1, &i), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_config_check_unused(c), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("t.yaml:4:10: unknown key 'a' in section 'unused'");
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "unused.a", 0, &i), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_config_check_unused(c), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("t.yaml:7:5: unknown key 'strid' in section 'layers[0]' (did you mean 'stride'?)");
  ganfw_config_destroy(c);

  /* Many unread keys: the first four after the first are listed, then "...". */
  c = load_text("k1: 1\nk2: 2\nk3: 3\nk4: 4\nk5: 5\nk6: 6\n");
  CU_ASSERT_EQUAL(ganfw_config_check_unused(c), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS(
      "t.yaml:1:1: unknown key 'k1' at the top level; 5 more unread keys: k2 (t.yaml:2:1), "
      "k3 (t.yaml:3:1), k4 (t.yaml:4:1), k5 (t.yaml:5:1), ...");
  ganfw_config_destroy(c);

  /* Declared keys: suggestions without reading, and "not used" for a declared key. */
  c = load_text("optim:\n  momentun: 0.9\n  nesterov: true\n");
  static const char *const sgd_keys[] = {"lr", "momentum", "nesterov", "weight_decay"};
  CU_ASSERT_EQUAL(ganfw_config_known_keys(c, "optim", sgd_keys, 4), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_config_known_keys(c, "absent.section", sgd_keys, 4), GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL(ganfw_cfg_child(ganfw_config_root(c), "optim"));
  CU_ASSERT_EQUAL(ganfw_config_check_unused(c), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("t.yaml:2:3: unknown key 'momentun' in section 'optim' (did you mean "
                 "'momentum'?); 1 more unread key: optim.nesterov (t.yaml:3:3)");
  CU_ASSERT_EQUAL(ganfw_cfg_float(ganfw_config_root(c), "optim.momentun", 0, &(double){0}),
                  GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_config_check_unused(c), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("t.yaml:3:3: key 'nesterov' in section 'optim' is not used by this "
                 "configuration");
  ganfw_config_destroy(c);
}

/* --- the resolved config ------------------------------------------------------------------------
 */

static void test_resolved_roundtrip(void) {
  ganfw_config *c = load_text("train:\n  batch_size: 32\n  lr: 2e-4\n"
                              "model: {plugin: dcgan, tricky: \"a: b #c\", yes_str: \"yes\"}\n"
                              "layers:\n  - {kind: conv, out: 64}\n  - kind: relu\n"
                              "empty_str: ''\ntilde_str: '~'\nnone: ~\n");
  const ganfw_cfg *r = ganfw_config_root(c);
  int64_t i;
  double f, betas[2];
  int32_t b;
  const char *s;
  /* Values present. */
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "train.batch_size", 0, &i), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cfg_float(r, "train.lr", 0, &f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cfg_string(r, "model.plugin", NULL, &s), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cfg_string(r, "model.tricky", NULL, &s), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cfg_string(r, "model.yes_str", NULL, &s), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cfg_string(r, "empty_str", NULL, &s), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cfg_string(r, "tilde_str", NULL, &s), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(s, "~");
  CU_ASSERT_EQUAL(ganfw_cfg_string(r, "none", "x", &s), GANFW_OK);
  for (int64_t k = 0; k < ganfw_cfg_list_len(r, "layers"); k++) {
    const ganfw_cfg *l = ganfw_cfg_list_at(r, "layers", k);
    CU_ASSERT_EQUAL(ganfw_cfg_string(l, "kind", NULL, &s), GANFW_OK);
    CU_ASSERT_EQUAL(ganfw_cfg_int(l, "out", 0, &i), GANFW_OK); /* defaulted in item 1 */
  }
  /* Defaults for absent keys, sections and lists. */
  static const double def_betas[2] = {0.5, 0.999};
  CU_ASSERT_EQUAL(ganfw_cfg_int(r, "train.steps", 1000, &i), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cfg_float(r, "train.eps", 1e-8, &f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cfg_float(r, "train.third", 0.1 + 0.2, &f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cfg_bool(r, "amp.enabled", 1, &b), GANFW_OK); /* absent section */
  CU_ASSERT_EQUAL(ganfw_cfg_bytes(r, "device.memory_limit", 536870912, &i), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cfg_bytes(r, "device.odd_bytes", 1000001, &i), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cfg_string(r, "optim.plugin", "adam", &s), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(s, "adam");
  CU_ASSERT_EQUAL(ganfw_cfg_string(r, "optim.resume", NULL, &s), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cfg_string(r, "optim.odd", "null", &s), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cfg_float_list(r, "optim.betas", 2, def_betas, betas), GANFW_OK);
  CU_ASSERT_EQUAL(betas[1], 0.999);
  const ganfw_cfg *sec = ganfw_cfg_section(r, "sched");
  CU_ASSERT_PTR_NOT_NULL(sec);
  CU_ASSERT_EQUAL(ganfw_cfg_int(sec, "warmup", 5, &i), GANFW_OK);
  CU_ASSERT_PTR_NOT_NULL(ganfw_cfg_section(r, "nothing_read"));
  CU_ASSERT_EQUAL(ganfw_cfg_has(r, "train.steps"), 0); /* a default, not in the document */
  CU_ASSERT_EQUAL(ganfw_cfg_has(r, "train.lr"), 1);
  CU_ASSERT_STRING_EQUAL(ganfw_cfg_where(ganfw_cfg_child(r, "train.steps")), "(default)");
  /* Recorded defaults are not unread keys. */
  CU_ASSERT_EQUAL(ganfw_config_check_unused(c), GANFW_OK);

  char *text = resolved_text(c);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "  steps: 1000  # default\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "  memory_limit: 512MiB  # default\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "  betas: [0.5, 0.999]  # default\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "amp:\n  enabled: true  # default\n"));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "  lr: 2e-4\n")); /* the user's spelling is kept */
  CU_ASSERT_PTR_NULL(strstr(text, "nothing_read"));     /* an empty implicit section */

  /* Read back with other defaults: every value comes from the file. */
  ganfw_config *c2 = NULL;
  ganfw_status st = ganfw_config_load_string(text, "resolved.yaml", &c2);
  if (st) printf("\n  %s\nin:\n%s\n", ganfw_error_message(), text);
  CU_ASSERT_EQUAL_FATAL(st, GANFW_OK);
  const ganfw_cfg *r2 = ganfw_config_root(c2);
  CU_ASSERT_EQUAL(ganfw_cfg_int(r2, "train.batch_size", 0, &i), GANFW_OK);
  CU_ASSERT_EQUAL(i, 32);
  CU_ASSERT_EQUAL(ganfw_cfg_float(r2, "train.lr", 0, &f), GANFW_OK);
  CU_ASSERT_EQUAL(f, 2e-4);
  CU_ASSERT_EQUAL(ganfw_cfg_int(r2, "train.steps", 0, &i), GANFW_OK);
  CU_ASSERT_EQUAL(i, 1000);
  CU_ASSERT_EQUAL(ganfw_cfg_float(r2, "train.eps", 0, &f), GANFW_OK);
  CU_ASSERT_EQUAL(f, 1e-8);
  CU_ASSERT_EQUAL(ganfw_cfg_float(r2, "train.third", 0, &f), GANFW_OK);
  CU_ASSERT_EQUAL(f, 0.1 + 0.2); /* bit-exact */
  CU_ASSERT_EQUAL(ganfw_cfg_bool(r2, "amp.enabled", 0, &b), GANFW_OK);
  CU_ASSERT_EQUAL(b, 1);
  CU_ASSERT_EQUAL(ganfw_cfg_bytes(r2, "device.memory_limit", 0, &i), GANFW_OK);
  CU_ASSERT_EQUAL(i, 536870912);
  CU_ASSERT_EQUAL(ganfw_cfg_bytes(r2, "device.odd_bytes", 0, &i), GANFW_OK);
  CU_ASSERT_EQUAL(i, 1000001);
  CU_ASSERT_EQUAL(ganfw_cfg_string(r2, "optim.plugin", NULL, &s), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(s, "adam");
  CU_ASSERT_EQUAL(ganfw_cfg_string(r2, "optim.resume", "x", &s), GANFW_OK);
  CU_ASSERT_PTR_NULL(s);
  CU_ASSERT_EQUAL(ganfw_cfg_string(r2, "optim.odd", NULL, &s), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(s, "null"); /* a string, not a null */
  betas[0] = betas[1] = 0;
  CU_ASSERT_EQUAL(ganfw_cfg_float_list(r2, "optim.betas", 2, NULL, betas), GANFW_OK);
  CU_ASSERT_EQUAL(betas[0], 0.5);
  CU_ASSERT_EQUAL(betas[1], 0.999);
  CU_ASSERT_EQUAL(ganfw_cfg_int(r2, "sched.warmup", 0, &i), GANFW_OK);
  CU_ASSERT_EQUAL(i, 5);
  CU_ASSERT_EQUAL(ganfw_cfg_string(r2, "model.plugin", NULL, &s), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(s, "dcgan");
  CU_ASSERT_EQUAL(ganfw_cfg_string(r2, "model.tricky", NULL, &s), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(s, "a: b #c");
  CU_ASSERT_EQUAL(ganfw_cfg_string(r2, "model.yes_str", NULL, &s), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(s, "yes");
  CU_ASSERT_EQUAL(ganfw_cfg_string(r2, "empty_str", NULL, &s), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(s, "");
  CU_ASSERT_EQUAL(ganfw_cfg_string(r2, "tilde_str", NULL, &s), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(s, "~");
  CU_ASSERT_EQUAL(ganfw_cfg_string(r2, "none", "x", &s), GANFW_OK);
  CU_ASSERT_PTR_NULL(s);
  CU_ASSERT_EQUAL(ganfw_cfg_list_len(r2, "layers"), 2);
  const ganfw_cfg *l0 = ganfw_cfg_list_at(r2, "layers", 0),
                  *l1 = ganfw_cfg_list_at(r2, "layers", 1);
  CU_ASSERT_EQUAL(ganfw_cfg_int(l0, "out", 0, &i), GANFW_OK);
  CU_ASSERT_EQUAL(i, 64);
  CU_ASSERT_EQUAL(ganfw_cfg_string(l1, "kind", NULL, &s), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(s, "relu");
  CU_ASSERT_EQUAL(ganfw_cfg_string(l0, "kind", NULL, &s), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cfg_int(l1, "out", 7, &i), GANFW_OK);
  CU_ASSERT_EQUAL(i, 0); /* the default recorded in the first run */
  /* Everything written was read back: the resolved config holds no stray keys. */
  st = ganfw_config_check_unused(c2);
  if (st) printf("\n  %s\n", ganfw_error_message());
  CU_ASSERT_EQUAL(st, GANFW_OK);
  /* Writing the re-loaded config gives the same text, apart from the header line and the
   * "# default" marks (in the second file those values were written by a user). */
  char *text2 = resolved_text(c2);
  strip_default_marks(text);
  CU_ASSERT_PTR_NULL(strstr(text, "# default"));
  CU_ASSERT_STRING_EQUAL(strchr(text2, '\n'), strchr(text, '\n'));
  free(text2);
  free(text);
  ganfw_config_destroy(c2);
  ganfw_config_destroy(c);
}

/* The resolved config of an extends chain with --set loads back from a file. */
static void test_resolved_file(void) {
  ganfw_config *c = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_config_load(fixture("sub/top.yaml"), &c), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_config_set(c, "train.batch_size=128"), GANFW_OK);
  char path[] = "/tmp/ganfw_test_config_XXXXXX";
  int fd = mkstemp(path);
  CU_ASSERT_FATAL(fd >= 0);
  FILE *f = fdopen(fd, "w");
  CU_ASSERT_EQUAL(ganfw_config_write_resolved(c, f), GANFW_OK);
  fclose(f);
  ganfw_config *c2 = NULL;
  CU_ASSERT_EQUAL(ganfw_config_load(path, &c2), GANFW_OK);
  int64_t i;
  double f1, f2;
  CU_ASSERT_EQUAL(ganfw_cfg_int(ganfw_config_root(c2), "train.batch_size", 0, &i), GANFW_OK);
  CU_ASSERT_EQUAL(i, 128);
  CU_ASSERT_EQUAL(ganfw_cfg_int(ganfw_config_root(c2), "model.ngf", 0, &i), GANFW_OK);
  CU_ASSERT_EQUAL(i, 128);
  CU_ASSERT_EQUAL(ganfw_cfg_float(ganfw_config_root(c), "optim.lr", 0, &f1), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cfg_float(ganfw_config_root(c2), "optim.lr", 0, &f2), GANFW_OK);
  CU_ASSERT_EQUAL(f1, f2);
  CU_ASSERT_EQUAL(ganfw_cfg_has(ganfw_config_root(c2), "extends"), 0);
  remove(path);
  ganfw_config_destroy(c2);
  ganfw_config_destroy(c);
}

/* --- bounds: no input makes loading loop, recurse or allocate without end ------------------ */

/* A growing heap string for generated configs. */
typedef struct {
  char *s;
  size_t len, cap;
} gen_text;

static void gen_add(gen_text *g, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void gen_add(gen_text *g, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0) abort();
  if (g->len + (size_t)n + 1 > g->cap) {
    g->cap = (g->len + (size_t)n + 1) * 2;
    g->s = realloc(g->s, g->cap);
    if (!g->s) abort(); /* a test helper, not the core */
  }
  va_start(ap, fmt);
  vsnprintf(g->s + g->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  g->len += (size_t)n;
}

/* Asserts that loading `text` as t.yaml is refused with a message holding `want`. */
static void assert_refused(const char *text, const char *want) {
  ganfw_config *c = (ganfw_config *)1;
  CU_ASSERT_EQUAL(ganfw_config_load_string(text, "t.yaml", &c), GANFW_ERR_CONFIG);
  CU_ASSERT_PTR_NULL(c);
  ASSERT_MSG_HAS(want);
}

static void test_bounds_counts(void) {
  char want[160];
  /* Keys of one map: the top level, a section; items of one list. */
  gen_text g = {0};
  for (int i = 0; i <= GANFW_CFG_MAX_ENTRIES; i++) gen_add(&g, "k%d: 1\n", i);
  snprintf(want, sizeof want, "t.yaml:%d:1: the top level holds more than %d keys",
           GANFW_CFG_MAX_ENTRIES + 1, GANFW_CFG_MAX_ENTRIES);
  assert_refused(g.s, want);
  g.len = 0;
  gen_add(&g, "train:\n");
  for (int i = 0; i <= GANFW_CFG_MAX_ENTRIES; i++) gen_add(&g, "  k%d: 1\n", i);
  snprintf(want, sizeof want, "t.yaml:%d:3: train: more than %d keys, the most a config map",
           GANFW_CFG_MAX_ENTRIES + 2, GANFW_CFG_MAX_ENTRIES);
  assert_refused(g.s, want);
  g.len = 0;
  gen_add(&g, "a: [");
  for (int i = 0; i <= GANFW_CFG_MAX_ENTRIES; i++) gen_add(&g, "%s1", i ? "," : "");
  gen_add(&g, "]\n");
  snprintf(want, sizeof want, "t.yaml:1:%d: a: more than %d items, the most a config list",
           5 + 2 * GANFW_CFG_MAX_ENTRIES, GANFW_CFG_MAX_ENTRIES);
  assert_refused(g.s, want);
  /* Values in all: sections of 4000 keys, each key on its own line, so that the line of
   * the refused key is its number among the values. */
  g.len = 0;
  for (int s = 0; s * 4001 <= GANFW_CFG_MAX_NODES; s++) {
    gen_add(&g, "s%d:\n", s);
    for (int i = 0; i < 4000; i++) gen_add(&g, "  k%d: 1\n", i);
  }
  snprintf(want, sizeof want, "t.yaml:%d:3: more than %d values in this config",
           GANFW_CFG_MAX_NODES + 1, GANFW_CFG_MAX_NODES);
  assert_refused(g.s, want);
  /* Just inside the bounds loads. */
  g.len = 0;
  for (int i = 0; i < GANFW_CFG_MAX_ENTRIES; i++) gen_add(&g, "k%d: 1\n", i);
  ganfw_config *c = load_text(g.s);
  snprintf(want, sizeof want, "k%d", GANFW_CFG_MAX_ENTRIES - 1);
  int64_t v = 0;
  CU_ASSERT_EQUAL(ganfw_cfg_int(ganfw_config_root(c), want, 0, &v), GANFW_OK);
  CU_ASSERT_EQUAL(v, 1);
  ganfw_config_destroy(c);
  free(g.s);
}

static void test_bounds_nesting_and_scalars(void) {
  char want[200];
  gen_text g = {0};
  /* Flow and block nesting past the depth. */
  gen_add(&g, "a: ");
  for (int i = 0; i < GANFW_CFG_MAX_DEPTH + 10; i++) gen_add(&g, "[");
  for (int i = 0; i < GANFW_CFG_MAX_DEPTH + 10; i++) gen_add(&g, "]");
  gen_add(&g, "\n");
  snprintf(want, sizeof want, "t.yaml:1:%d: a", 3 + GANFW_CFG_MAX_DEPTH);
  assert_refused(g.s, want);
  snprintf(want, sizeof want, "nested deeper than %d levels", GANFW_CFG_MAX_DEPTH);
  ASSERT_MSG_HAS(want);
  g.len = 0;
  for (int i = 0; i < GANFW_CFG_MAX_DEPTH + 10; i++) gen_add(&g, "%*sk:\n", i, "");
  assert_refused(g.s, want);
  /* Depth that fits loads. */
  g.len = 0;
  gen_add(&g, "a: ");
  for (int i = 1; i < GANFW_CFG_MAX_DEPTH; i++) gen_add(&g, "[");
  for (int i = 1; i < GANFW_CFG_MAX_DEPTH; i++) gen_add(&g, "]");
  ganfw_config *c = load_text(g.s);
  ganfw_config_destroy(c);
  /* A long value, a long key. */
  g.len = 0;
  gen_add(&g, "run:\n  out_dir: ");
  for (int i = 0; i <= GANFW_CFG_MAX_SCALAR_BYTES; i++) gen_add(&g, "x");
  snprintf(want, sizeof want,
           "t.yaml:2:12: run.out_dir: a value of %d bytes is longer than the %d bytes",
           GANFW_CFG_MAX_SCALAR_BYTES + 1, GANFW_CFG_MAX_SCALAR_BYTES);
  assert_refused(g.s, want);
  g.len = 0;
  gen_add(&g, "run:\n  ? "); /* a plain key past 1024 bytes is YAML's explicit key */
  for (int i = 0; i <= GANFW_CFG_MAX_SCALAR_BYTES; i++) gen_add(&g, "y");
  gen_add(&g, "\n  : 1\n");
  snprintf(want, sizeof want, "t.yaml:2:5: run: a key of %d bytes is longer",
           GANFW_CFG_MAX_SCALAR_BYTES + 1);
  assert_refused(g.s, want);
  /* "Billion laughs": the first anchor is refused, so nothing is ever expanded. */
  g.len = 0;
  gen_add(&g, "a: &a [x, x, x, x, x, x, x, x, x, x]\n");
  for (int i = 1; i < 10; i++)
    gen_add(&g, "%c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c]\n", 'a' + i, 'a' + i,
            'a' + i - 1, 'a' + i - 1, 'a' + i - 1, 'a' + i - 1, 'a' + i - 1, 'a' + i - 1,
            'a' + i - 1, 'a' + i - 1, 'a' + i - 1, 'a' + i - 1);
  assert_refused(g.s, "t.yaml:1:4: YAML anchors and aliases (&a, *a) are not supported");
  assert_refused("a: [1, *x]\n", "t.yaml:1:8: YAML anchors and aliases (&x, *x)");
  /* An integer past 64 bits where an integer is read. */
  c = load_text("train:\n  max_steps: 123456789012345678901234567890\n");
  int64_t v = 7;
  CU_ASSERT_EQUAL(ganfw_cfg_int(ganfw_config_root(c), "train.max_steps", 1, &v), GANFW_ERR_CONFIG);
  CU_ASSERT_EQUAL(v, 1);
  ASSERT_MSG_HAS("t.yaml:2:14: train.max_steps: '123456789012345678901234567890' is out of range "
                 "for a 64-bit integer");
  ganfw_config_destroy(c);
  free(g.s);
}

/* A fresh folder under $TMPDIR (or /tmp) in `dir`. */
static void temp_dir(char *dir, size_t n) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, n, "%s/ganfw_cfg_XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(dir));
}

static void write_file(const char *dir, const char *name, const char *text) {
  char path[4200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(text, f);
  fclose(f);
}

static void remove_tree(const char *dir) {
  char cmd[4300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  CU_ASSERT_EQUAL(system(cmd), 0);
}

static void test_bounds_extends(void) {
  char dir[4096], path[4200], text[4400], want[300];
  temp_dir(dir, sizeof dir);
  /* A chain longer than the bound: c0 extends c1 extends ... */
  for (int i = 0; i < GANFW_CFG_MAX_EXTENDS_DEPTH + 5; i++) {
    char name[32];
    snprintf(name, sizeof name, "c%d.yaml", i);
    snprintf(text, sizeof text, "extends: c%d.yaml\nk%d: 1\n", i + 1, i);
    write_file(dir, name, text);
  }
  write_file(dir, "c37.yaml", "end: 1\n");
  ganfw_config *c = (ganfw_config *)1;
  snprintf(path, sizeof path, "%s/c0.yaml", dir);
  CU_ASSERT_EQUAL(ganfw_config_load(path, &c), GANFW_ERR_CONFIG);
  snprintf(want, sizeof want, "c%d.yaml:1:10: extends: a chain of more than %d files",
           GANFW_CFG_MAX_EXTENDS_DEPTH - 1, GANFW_CFG_MAX_EXTENDS_DEPTH);
  ASSERT_MSG_HAS(want);
  /* A chain that fits loads, every file's key merged. */
  snprintf(path, sizeof path, "%s/c%d.yaml", dir, 6);
  CU_ASSERT_EQUAL(ganfw_config_load(path, &c), GANFW_OK);
  int64_t v = 0;
  CU_ASSERT_EQUAL(ganfw_cfg_int(ganfw_config_root(c), "k36", 0, &v), GANFW_OK);
  CU_ASSERT_EQUAL(v, 1);
  ganfw_config_destroy(c);
  /* Bases named over and over: 10 x 10 x 10 loads of one leaf. */
  write_file(dir, "leaf.yaml", "x: 1\n");
  const char *ten = "[%s, %s, %s, %s, %s, %s, %s, %s, %s, %s]";
  char list[400];
  snprintf(list, sizeof list, ten, "leaf.yaml", "leaf.yaml", "leaf.yaml", "leaf.yaml", "leaf.yaml",
           "leaf.yaml", "leaf.yaml", "leaf.yaml", "leaf.yaml", "leaf.yaml");
  snprintf(text, sizeof text, "extends: %s\n", list);
  write_file(dir, "d2.yaml", text);
  snprintf(list, sizeof list, ten, "d2.yaml", "d2.yaml", "d2.yaml", "d2.yaml", "d2.yaml", "d2.yaml",
           "d2.yaml", "d2.yaml", "d2.yaml", "d2.yaml");
  snprintf(text, sizeof text, "extends: %s\n", list);
  write_file(dir, "d1.yaml", text);
  snprintf(list, sizeof list, ten, "d1.yaml", "d1.yaml", "d1.yaml", "d1.yaml", "d1.yaml", "d1.yaml",
           "d1.yaml", "d1.yaml", "d1.yaml", "d1.yaml");
  snprintf(text, sizeof text, "extends: %s\n", list);
  write_file(dir, "d0.yaml", text);
  snprintf(path, sizeof path, "%s/d0.yaml", dir);
  CU_ASSERT_EQUAL(ganfw_config_load(path, &c), GANFW_ERR_CONFIG);
  snprintf(want, sizeof want, "extends: more than %d files read for one config",
           GANFW_CFG_MAX_FILES);
  ASSERT_MSG_HAS(want);
  ASSERT_MSG_HAS("d2.yaml:1:");
  /* Cycles are refused as before, with the chain. */
  write_file(dir, "self.yaml", "extends: self.yaml\n");
  snprintf(path, sizeof path, "%s/self.yaml", dir);
  CU_ASSERT_EQUAL(ganfw_config_load(path, &c), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("self.yaml:1:10: extends: cycle: ");
  remove_tree(dir);
}

static void test_directory_and_devices(void) {
  char dir[4096], path[4200], want[4400];
  temp_dir(dir, sizeof dir);
  ganfw_config *c = (ganfw_config *)1;
  /* The config path is a folder. */
  CU_ASSERT_EQUAL(ganfw_config_load(dir, &c), GANFW_ERR_IO);
  CU_ASSERT_PTR_NULL(c);
  snprintf(want, sizeof want, "config '%s' is a directory, not a config file", dir);
  ASSERT_MSG_HAS(want);
  /* An extends target that is a folder. */
  snprintf(path, sizeof path, "%s/sub", dir);
  CU_ASSERT_EQUAL(mkdir(path, 0755), 0);
  write_file(dir, "top.yaml", "a: 1\nextends: sub\n");
  snprintf(path, sizeof path, "%s/top.yaml", dir);
  CU_ASSERT_EQUAL(ganfw_config_load(path, &c), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("top.yaml:2:10: extends: config '");
  ASSERT_MSG_HAS("/sub' is a directory");
  /* A device that never ends is read only up to the bound. */
  CU_ASSERT_EQUAL(ganfw_config_load("/dev/zero", &c), GANFW_ERR_IO);
  ASSERT_MSG_HAS("config '/dev/zero' is longer than 16 MiB");
  /* As an extends base it is refused at once: a base must be a file. */
  write_file(dir, "dev.yaml", "a: 1\nextends: [/dev/zero]\n");
  snprintf(path, sizeof path, "%s/dev.yaml", dir);
  CU_ASSERT_EQUAL(ganfw_config_load(path, &c), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("dev.yaml:2:11: extends: config '/dev/zero' is not a regular file");
  remove_tree(dir);
}

static void test_set_bounds(void) {
  ganfw_config *c = load_text("a: 1\n");
  char want[200];
  gen_text g = {0};
  for (int i = 0; i <= GANFW_CFG_MAX_DEPTH; i++) gen_add(&g, "%sa", i ? "." : "");
  gen_add(&g, "=1");
  CU_ASSERT_EQUAL(ganfw_config_set(c, g.s), GANFW_ERR_CONFIG);
  snprintf(want, sizeof want, "...': %d nested names, more than the %d a config may nest",
           GANFW_CFG_MAX_DEPTH + 1, GANFW_CFG_MAX_DEPTH);
  ASSERT_MSG_HAS(want);
  ASSERT_MSG_HAS("--set 'a.a.a.a");
  g.len = 0;
  gen_add(&g, "~");
  for (int i = 0; i <= GANFW_CFG_MAX_DEPTH; i++) gen_add(&g, "%sa", i ? "." : "");
  CU_ASSERT_EQUAL(ganfw_config_set(c, g.s), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS(want);
  /* A long value: the argument is named by its start. */
  g.len = 0;
  gen_add(&g, "run.out_dir=");
  for (int i = 0; i <= GANFW_CFG_MAX_SCALAR_BYTES; i++) gen_add(&g, "z");
  CU_ASSERT_EQUAL(ganfw_config_set(c, g.s), GANFW_ERR_CONFIG);
  snprintf(want, sizeof want, "zzz...: a value of %d bytes is longer than the %d bytes",
           GANFW_CFG_MAX_SCALAR_BYTES + 1, GANFW_CFG_MAX_SCALAR_BYTES);
  ASSERT_MSG_HAS("--set run.out_dir=zzz");
  ASSERT_MSG_HAS(want);
  CU_ASSERT(strlen(ganfw_error_message()) < 400);
  for (int i = 0; i <= GANFW_CFG_MAX_SCALAR_BYTES; i++) gen_add(&g, "z");
  CU_ASSERT_EQUAL(ganfw_config_set(c, g.s), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("bytes, longer than the 131072 a key and its value may take");
  /* Nested flow values in --set are bounded like a file's. */
  g.len = 0;
  gen_add(&g, "a=");
  for (int i = 0; i < GANFW_CFG_MAX_DEPTH + 1; i++) gen_add(&g, "[");
  CU_ASSERT_EQUAL(ganfw_config_set(c, g.s), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("--set a=[[[[");
  snprintf(want, sizeof want, "nested deeper than %d levels", GANFW_CFG_MAX_DEPTH);
  ASSERT_MSG_HAS(want);
  /* The config is unchanged by refused overrides. */
  int64_t v = 0;
  CU_ASSERT_EQUAL(ganfw_cfg_int(ganfw_config_root(c), "a", 0, &v), GANFW_OK);
  CU_ASSERT_EQUAL(v, 1);
  ganfw_config_destroy(c);
  free(g.s);
}

/* Found by fuzzing: a --set key that is no UTF-8 text went into the resolved config as it
 * was, and that file did not load back; values YAML writes only escaped (U+0080..U+009F,
 * U+FFFE) came out raw. */
static void test_resolved_escapes(void) {
  ganfw_config *c =
      load_text("a: \"x\\x85\\x91\\u0080\\ufffe\\x01\\x7f\\U0001F600\\u2028\\ufeffy\"\n");
  CU_ASSERT_EQUAL(ganfw_config_set(c, "device.m\x91mory_limit=1GiB"), GANFW_ERR_CONFIG);
  ASSERT_MSG_HAS("expected section.key=value");
  CU_ASSERT_EQUAL(ganfw_config_set(c, "\xc3\xa9t\xc3\xa9=1"), GANFW_OK); /* UTF-8 is fine */
  char *text = resolved_text(c);
  ganfw_config *back = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_config_load_string(text, "r.yaml", &back), GANFW_OK);
  const char *a0 = NULL, *a1 = NULL;
  CU_ASSERT_EQUAL(ganfw_cfg_string(ganfw_config_root(c), "a", NULL, &a0), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_cfg_string(ganfw_config_root(back), "a", NULL, &a1), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(a0, a1);
  int64_t v = 0;
  CU_ASSERT_EQUAL(ganfw_cfg_int(ganfw_config_root(back), "\xc3\xa9t\xc3\xa9", 0, &v), GANFW_OK);
  CU_ASSERT_EQUAL(v, 1);
  free(text);
  ganfw_config_destroy(back);
  ganfw_config_destroy(c);
  /* A key longer than YAML's 1024 characters for a plain key, at the top and nested. */
  char key[1500], set[1600];
  memset(key, 'k', sizeof key - 1);
  key[sizeof key - 1] = '\0';
  c = load_text("a: 1\n");
  snprintf(set, sizeof set, "%s=1", key);
  CU_ASSERT_EQUAL(ganfw_config_set(c, set), GANFW_OK);
  snprintf(set, sizeof set, "s.%s={x: [1, 2]}", key);
  CU_ASSERT_EQUAL(ganfw_config_set(c, set), GANFW_OK);
  text = resolved_text(c);
  CU_ASSERT_EQUAL_FATAL(ganfw_config_load_string(text, "r.yaml", &back), GANFW_OK);
  snprintf(set, sizeof set, "s.%s.x", key);
  CU_ASSERT_EQUAL(ganfw_cfg_list_len(ganfw_config_root(back), set), 2);
  free(text);
  ganfw_config_destroy(back);
  ganfw_config_destroy(c);
}

static CU_TestInfo tests[] = {
    {"ints", test_ints},
    {"floats", test_floats},
    {"bools_and_strings", test_bools_and_strings},
    {"bytes", test_bytes},
    {"lists_and_paths", test_lists_and_paths},
    {"wrong_types_in_file", test_wrong_types_in_file},
    {"load_errors", test_load_errors},
    {"extends_chain", test_extends_chain},
    {"extends_errors", test_extends_errors},
    {"set", test_set},
    {"copy", test_copy},
    {"extends_drop_and_replace", test_extends_drop_and_replace},
    {"set_drop", test_set_drop},
    {"ranges", test_ranges},
    {"unread_keys", test_unread_keys},
    {"resolved_roundtrip", test_resolved_roundtrip},
    {"resolved_file", test_resolved_file},
    {"bounds_counts", test_bounds_counts},
    {"bounds_nesting_and_scalars", test_bounds_nesting_and_scalars},
    {"bounds_extends", test_bounds_extends},
    {"directory_and_devices", test_directory_and_devices},
    {"set_bounds", test_set_bounds},
    {"resolved_escapes", test_resolved_escapes},
    CU_TEST_INFO_NULL,
};

GT_MAIN("config", tests)
