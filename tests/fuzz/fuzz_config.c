/* Fuzz harness of the config reader: the path `ganfw` takes before any plugin loads (YAML
 * parse, `extends:` chains, --set overrides, the typed getters of the core keys, the
 * unread-key check, the resolved config written and read back).
 *
 * Input: a main YAML document, then parts that each start with a line of its own:
 *   "%%file"  the next extends target, written as b1.yaml, b2.yaml, ... beside main.yaml
 *             (at most 8; main.yaml names them in `extends:`, they may name each other);
 *   "%%set"   --set arguments, one a line, applied in order after loading.
 * Oracle: no crash, leak or sanitizer report, and the resolved config of a loaded config
 * always loads back (ganfw_config_write_resolved promises it). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/config.h"
#include "base/error.h"

#define MAX_FILES 8

static char dir[256]; /* the files of an input; made on the first one */

/* Removes the folder and what the inputs wrote into it, at exit. */
static void remove_dir(void) {
  char path[512];
  static const char *const names[] = {"main.yaml", "b1.yaml", "b2.yaml", "b3.yaml", "b4.yaml",
                                      "b5.yaml",   "b6.yaml", "b7.yaml", "b8.yaml"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    snprintf(path, sizeof path, "%s/%s", dir, names[i]);
    unlink(path);
  }
  rmdir(dir);
}

static void make_dir(void) {
  const char *tmp = getenv("TMPDIR");
  snprintf(dir, sizeof dir, "%s/ganfw_fuzz_config_XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    perror("fuzz_config: mkdtemp");
    abort();
  }
  atexit(remove_dir);
}

static void write_part(const char *name, const char *text, size_t len) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (len && fwrite(text, 1, len, f) != len) abort();
  fclose(f);
}

/* The line starting at p is exactly `mark`. */
static int is_mark(const char *p, const char *end, const char *mark) {
  size_t n = strlen(mark);
  return (size_t)(end - p) >= n && memcmp(p, mark, n) == 0 && (p + n == end || p[n] == '\n');
}

/* Reads what `ganfw` reads of the core sections before plugins load, as the run, context
 * and session do; failures are expected (bad values) and only end that read. */
static void read_core_keys(ganfw_config *c) {
  const ganfw_cfg *root = ganfw_config_root(c);
  const ganfw_cfg *dev = ganfw_cfg_section(root, "device");
  const ganfw_cfg *train = ganfw_cfg_section(root, "train");
  const char *s;
  int64_t i;
  int32_t b;
  double d, betas[2];
  static const double def_betas[2] = {0.5, 0.999};
  (void)(ganfw_cfg_string(dev, "type", "auto", &s) || ganfw_cfg_int(dev, "threads", 0, &i) ||
         ganfw_cfg_bytes(dev, "memory_limit", 0, &i) ||
         ganfw_cfg_bytes(dev, "max_split_size", 0, &i) ||
         ganfw_cfg_bool(dev, "cudnn_benchmark", 0, &b) || ganfw_cfg_int(root, "seed", 0, &i));
  (void)(ganfw_cfg_int_in(train, "batch_size", 64, 1, 1 << 20, &i) ||
         ganfw_cfg_int_in(train, "epochs", 0, 0, 1 << 20, &i) ||
         ganfw_cfg_int_in(train, "max_steps", 0, 0, (int64_t)1 << 52, &i) ||
         ganfw_cfg_float(train, "label_smoothing", 0.0, &d) ||
         ganfw_cfg_string(train, "resume", "", &s) ||
         ganfw_cfg_string(root, "run.out_dir", "runs/default", &s));
  (void)(ganfw_cfg_float_in(root, "optim.lr", 2e-4, 0, 10, GANFW_CFG_OPEN_LO, &d) ||
         ganfw_cfg_float_list(root, "optim.betas", 2, def_betas, betas) ||
         ganfw_cfg_string(root, "model.plugin", NULL, &s) ||
         ganfw_cfg_string(root, "data.path", NULL, &s));
  int64_t n = ganfw_cfg_list_len(root, "plugin_path");
  for (int64_t k = 0; k < n; k++)
    (void)ganfw_cfg_string(ganfw_cfg_list_at(root, "plugin_path", k), NULL, NULL, &s);
  n = ganfw_cfg_list_len(root, "memory");
  for (int64_t k = 0; k < n && k < 16; k++) {
    const ganfw_cfg *item = ganfw_cfg_list_at(root, "memory", k);
    (void)(ganfw_cfg_string(item, "plugin", NULL, &s) || ganfw_cfg_bool(item, "enabled", 1, &b));
  }
  static const char *const train_keys[] = {"batch_size", "epochs", "max_steps", "resume",
                                           "label_smoothing"};
  (void)ganfw_config_known_keys(c, "train", train_keys, 5);
  (void)ganfw_config_check_unused(c);
  ganfw_error_clear();
}

/* Every getter on every node of the tree (a copy that has been checked already). */
static void read_everything(const ganfw_cfg *n, int depth) {
  if (!n || depth > GANFW_CFG_MAX_DEPTH + 1) return;
  int64_t i;
  int32_t b;
  double d;
  const char *s;
  (void)ganfw_cfg_path(n);
  (void)ganfw_cfg_where(n);
  if (ganfw_cfg_kind_of(n) == GANFW_CFG_KIND_SCALAR) {
    (void)ganfw_cfg_int(n, NULL, 0, &i);
    (void)ganfw_cfg_int_in(n, NULL, 0, -5, 5, &i);
    (void)ganfw_cfg_float(n, NULL, 0, &d);
    (void)ganfw_cfg_float_in(n, NULL, 0.5, 0, 1, GANFW_CFG_OPEN_HI, &d);
    (void)ganfw_cfg_bool(n, NULL, 0, &b);
    (void)ganfw_cfg_bytes(n, NULL, 0, &i);
    (void)ganfw_cfg_string(n, NULL, NULL, &s);
  } else if (ganfw_cfg_kind_of(n) == GANFW_CFG_KIND_LIST) {
    double two[2];
    (void)ganfw_cfg_float_list(n, NULL, 2, NULL, two);
    for (int64_t k = 0; k < ganfw_cfg_list_len(n, NULL); k++)
      read_everything(ganfw_cfg_list_at(n, NULL, k), depth + 1);
  } else {
    (void)ganfw_cfg_section(n, "x.y");
    (void)ganfw_cfg_has(n, "a.b");
  }
  ganfw_error_clear();
}

/* Writes the resolved config into a heap string (NULL when writing failed). */
static char *resolved(const ganfw_config *c) {
  char *buf = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&buf, &len);
  if (!f) abort();
  ganfw_status st = ganfw_config_write_resolved(c, f);
  fclose(f);
  if (st != GANFW_OK) {
    free(buf);
    return NULL;
  }
  return buf;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!dir[0]) make_dir();
  char *text = malloc(size + 1);
  if (!text) return 0;
  memcpy(text, data, size);
  text[size] = '\0';
  const char *end = text + size;
  /* Split the input at its marker lines. */
  const char *part = text, *sets = NULL;
  size_t main_len = size;
  int nfiles = 0;
  const char *file_start[MAX_FILES];
  size_t file_len[MAX_FILES];
  int in = 0; /* 0 main, 1 a file, 2 the --set lines */
  for (const char *p = text; p < end;) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    const char *next = nl ? nl + 1 : end;
    int file = is_mark(p, end, "%%file"), set = is_mark(p, end, "%%set");
    if ((file && nfiles < MAX_FILES) || (set && !sets)) {
      size_t len = (size_t)(p - part);
      if (in == 0) main_len = len;
      if (in == 1) file_len[nfiles - 1] = len;
      if (file) {
        file_start[nfiles] = next;
        file_len[nfiles] = (size_t)(end - next);
        nfiles++;
        in = 1;
      } else {
        sets = next;
        in = 2;
      }
      part = next;
      if (set) break; /* the rest is --set lines */
    }
    p = next;
  }
  write_part("main.yaml", text, main_len);
  static int written; /* b*.yaml files the previous input left */
  for (int k = 0; k < MAX_FILES && (k < nfiles || k < written); k++) {
    char name[32];
    snprintf(name, sizeof name, "b%d.yaml", k + 1);
    if (k < nfiles) {
      write_part(name, file_start[k], file_len[k]);
    } else {
      char path[512];
      snprintf(path, sizeof path, "%s/%s", dir, name);
      unlink(path);
    }
  }
  written = nfiles;

  char main_path[512];
  snprintf(main_path, sizeof main_path, "%s/main.yaml", dir);
  ganfw_config *c = NULL;
  ganfw_status st = ganfw_config_load(main_path, &c);
  if (st != GANFW_OK && c) abort(); /* a failed load hands out nothing */
  /* --set arguments: each line; stop at the first refused one as the CLI does. */
  for (const char *p = sets; st == GANFW_OK && p && p < end;) {
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    size_t len = nl ? (size_t)(nl - p) : (size_t)(end - p);
    char *arg = strndup(p, len);
    if (!arg) break;
    st = ganfw_config_set(c, arg);
    free(arg);
    p = nl ? nl + 1 : end;
  }
  if (st == GANFW_OK) {
    read_core_keys(c);
    char *out = resolved(c);
    if (!out) abort();
    ganfw_config *back = NULL;
    if (ganfw_config_load_string(out, main_path, &back) != GANFW_OK) {
      fprintf(stderr, "fuzz_config: the resolved config does not load back: %s\n--- resolved:\n%s",
              ganfw_error_message(), out);
      abort();
    }
    read_everything(ganfw_config_root(back), 0);
    (void)ganfw_config_check_unused(back);
    free(resolved(back));
    ganfw_config_destroy(back);
    free(out);
  }
  (void)ganfw_error_message();
  ganfw_error_clear();
  ganfw_config_destroy(c);
  free(text);
  return 0;
}
