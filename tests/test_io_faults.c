/* I/O faults at every write site (tests/faults/inject.c): a tiny training run through
 * ganfw_faults is traced once to list its open/write/fsync/rename/mkdir calls, then run
 * again with one of them failing (ENOSPC on a disk that stays full, a one-off EIO, a
 * read-only folder). Each time: exit status 1, one message that names the file and the
 * cause, the first failure's (a later one only as "; later: ..."), no temporary left,
 * every file under its final name whole (checkpoints' crc32, PNGs, CSV rows, memory.json,
 * config.resolved.yaml), and every checkpoint renamed before the failure still there.
 * Sites: a fresh GAN run (folders, config, metrics.csv, samples, checkpoints,
 * memory.json), a resumed one (metrics.csv rewritten), a classifier run (eval.csv,
 * best.safetensors), `ganfw sample -o`, and compare's CSV and JSON (in-process). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <yaml.h>
#include <zlib.h>

#include "base/error.h"
#include "faults/inject.h"
#include "io/png_io.h"
#include "io/safetensors.h"
#include "testutil.h"
#include "tools/compare.h"

static char root[64];
static char ganfw[4096];
static char out[65536]; /* stdout and stderr of the last command */

static const char *path_in(const char *rel) {
  static char buf[8][1024];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
  return buf[k];
}

/* 0 when written (the suite's set-up: no CUnit assertion there). */
static int write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  fputs(text, f);
  return fclose(f);
}

/* Runs ganfw_faults with args (NULL-terminated) and the fault plan (spec NULL: none),
 * counting calls under `under` and tracing them into `trace`; captures the output into
 * `out`. Returns the exit status (128 + signal when killed). */
static int run_faults(const char *under, const char *spec, const char *trace,
                      const char *const *args) {
  char log[1100];
  snprintf(log, sizeof log, "%s/last_output.txt", root);
  pid_t pid = fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) _exit(126);
    dup2(fd, 1);
    dup2(fd, 2);
    setenv("GANFW_FAULT_UNDER", under, 1);
    if (spec) setenv("GANFW_FAULT", spec, 1);
    if (trace) setenv("GANFW_FAULT_TRACE", trace, 1);
    const char *argv[32] = {ganfw};
    for (int i = 0; args[i] && i < 30; i++) argv[i + 1] = args[i];
    execv(ganfw, (char *const *)argv);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  FILE *f = fopen(log, "r");
  size_t len = f ? fread(out, 1, sizeof out - 1, f) : 0;
  out[len] = '\0';
  if (f) fclose(f);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void shell(const char *fmt, const char *a, const char *b) {
  char cmd[3000];
  snprintf(cmd, sizeof cmd, fmt, a, b);
  CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
}

/* --- the trace --------------------------------------------------------------------------- */

typedef struct {
  long seq, k;
  char fn[8];
  char path[1024]; /* as traced: a temporary's own name, a folder for its fsync */
  int fail;
} call;

typedef struct {
  call *c;
  int n;
} trace;

static trace read_trace(const char *path) {
  trace t = {NULL, 0};
  FILE *f = fopen(path, "r");
  if (!f) return t;
  char line[1200];
  int cap = 0;
  while (fgets(line, sizeof line, f)) {
    if (t.n == cap) {
      cap = cap ? 2 * cap : 256;
      t.c = realloc(t.c, (size_t)cap * sizeof *t.c);
      if (!t.c) abort();
    }
    call *c = &t.c[t.n];
    memset(c, 0, sizeof *c);
    if (sscanf(line, "%ld %7s %ld %1023s", &c->seq, c->fn, &c->k, c->path) != 4) continue;
    c->fail = strstr(line, " FAIL") != NULL;
    t.n++;
  }
  fclose(f);
  return t;
}

/* The file a traced path stands for: a temporary's target (".tmp.XXXXXX" cut off). */
static void final_name(const char *path, char *buf, size_t n) {
  snprintf(buf, n, "%s", path);
  size_t len = strlen(buf);
  if (len > 11 && strncmp(buf + len - 11, ".tmp.", 5) == 0) buf[len - 11] = '\0';
}

/* A site's name in the report: the path below the run folder, digits as N. */
static void site_name(const char *path, const char *dir, char *buf, size_t n) {
  char fin[1024];
  final_name(path, fin, sizeof fin);
  const char *rel = strncmp(fin, dir, strlen(dir)) == 0 ? fin + strlen(dir) : fin;
  if (*rel == '/') rel++;
  if (!*rel) rel = "(run folder)";
  size_t j = 0;
  for (const char *p = rel; *p && j + 1 < n; p++)
    if (*p >= '0' && *p <= '9') {
      if (j == 0 || buf[j - 1] != 'N') buf[j++] = 'N';
    } else
      buf[j++] = *p;
  buf[j] = '\0';
}

/* --- what a folder must look like after a failure ---------------------------------------- */

/* A strict JSON value at *p (whitespace around), advancing past it. */
static int json_value(const char **p, int depth);
static void json_ws(const char **p) {
  while (**p == ' ' || **p == '\n' || **p == '\t' || **p == '\r') (*p)++;
}
static int json_string(const char **p) {
  if (**p != '"') return 0;
  for ((*p)++; **p && **p != '"'; (*p)++)
    if (**p == '\\' && !*++*p) return 0;
  return **p == '"' ? ((*p)++, 1) : 0;
}
static int json_value(const char **p, int depth) {
  json_ws(p);
  if (depth > 64) return 0;
  int ok = 1;
  if (**p == '{' || **p == '[') {
    char close = **p == '{' ? '}' : ']';
    int object = close == '}';
    (*p)++;
    json_ws(p);
    if (**p == close) return (*p)++, 1;
    for (;;) {
      if (object) {
        json_ws(p);
        if (!json_string(p)) return 0;
        json_ws(p);
        if (*(*p)++ != ':') return 0;
      }
      if (!json_value(p, depth + 1)) return 0;
      json_ws(p);
      if (**p == ',') {
        (*p)++;
        continue;
      }
      return *(*p)++ == close;
    }
  } else if (**p == '"') {
    ok = json_string(p);
  } else if (strncmp(*p, "true", 4) == 0 || strncmp(*p, "null", 4) == 0) {
    *p += 4;
  } else if (strncmp(*p, "false", 5) == 0) {
    *p += 5;
  } else {
    char *end;
    strtod(*p, &end);
    ok = end != *p;
    *p = end;
  }
  return ok;
}

static char *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc((size_t)n + 1);
  size_t got = b ? fread(b, 1, (size_t)n, f) : 0;
  fclose(f);
  if (!b) return NULL;
  b[got] = '\0';
  if (len) *len = got;
  return b;
}

static int json_file_ok(const char *path) {
  char *text = slurp(path, NULL);
  const char *p = text;
  int ok = text && json_value(&p, 0);
  if (ok) json_ws(&p);
  ok = ok && *p == '\0';
  free(text);
  return ok;
}

static int yaml_file_ok(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return 0;
  yaml_parser_t parser;
  yaml_parser_initialize(&parser);
  yaml_parser_set_input_file(&parser, f);
  int ok = 1, done = 0, events = 0;
  while (ok && !done) {
    yaml_event_t e;
    if (!yaml_parser_parse(&parser, &e)) {
      ok = 0;
      break;
    }
    done = e.type == YAML_STREAM_END_EVENT;
    events++;
    yaml_event_delete(&e);
  }
  yaml_parser_delete(&parser);
  fclose(f);
  return ok && events > 4; /* more than an empty document */
}

/* A header line, then rows of as many fields (a quoted field may hold commas, quotes
 * doubled, and newlines), each ending in a newline. */
static int csv_file_ok(const char *path) {
  size_t len;
  char *text = slurp(path, &len);
  if (!text) return 0;
  int ok = len > 0 && text[len - 1] == '\n', fields = -1, n = 1, quoted = 0, empty = 1;
  for (const char *c = text; ok && *c; c++) {
    if (*c == '"')
      quoted = !quoted;
    else if (*c == ',' && !quoted)
      n++;
    else if (*c == '\n' && !quoted) {
      if (fields < 0) fields = n;
      ok = n == fields && !empty;
      n = 1;
      empty = 1;
      continue;
    }
    empty = 0;
  }
  free(text);
  return ok && !quoted;
}

/* The reader accepts it and its data matches the "crc32" the writer recorded. */
static int checkpoint_ok(const char *path) {
  ganfw_st_file *f = NULL;
  if (ganfw_st_open(path, &f) != GANFW_OK) return 0;
  uLong crc = crc32(0L, Z_NULL, 0);
  for (int64_t i = 0; i < ganfw_st_count(f); i++) {
    const ganfw_st_tensor *t = ganfw_st_at(f, i);
    for (int64_t off = 0; off < t->nbytes; off += 1 << 30) {
      int64_t chunk = t->nbytes - off < (1 << 30) ? t->nbytes - off : (1 << 30);
      crc = crc32(crc, (const Bytef *)t->data + off, (uInt)chunk);
    }
  }
  const char *want = ganfw_st_metadata(f, "crc32");
  char got[16];
  snprintf(got, sizeof got, "%08lx", (unsigned long)(crc & 0xffffffffUL));
  int ok = want && strcmp(want, got) == 0;
  ganfw_st_close(f);
  return ok;
}

static int png_ok(const char *path) {
  float *px = NULL;
  int32_t c, h, w;
  ganfw_status st = ganfw_png_read(path, &px, &c, &h, &w);
  free(px);
  return st == GANFW_OK;
}

static int ends_with(const char *s, const char *suffix) {
  size_t n = strlen(s), k = strlen(suffix);
  return n >= k && strcmp(s + n - k, suffix) == 0;
}

/* Checks every file below dir (recursively): no temporary, each one whole. Returns how
 * many files were bad, naming them. */
static int check_tree(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int bad = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (lstat(p, &sb) != 0) continue;
    if (S_ISDIR(sb.st_mode)) {
      bad += check_tree(p);
      continue;
    }
    int ok = 1;
    if (strstr(e->d_name, ".tmp."))
      ok = 0;
    else if (ends_with(p, ".safetensors"))
      ok = checkpoint_ok(p);
    else if (ends_with(p, ".png"))
      ok = png_ok(p);
    else if (ends_with(p, ".csv"))
      ok = csv_file_ok(p);
    else if (ends_with(p, ".json"))
      ok = json_file_ok(p);
    else if (ends_with(p, ".yaml"))
      ok = yaml_file_ok(p);
    if (!ok) {
      fprintf(stderr, "\n  not whole or a temporary: %s\n", p);
      bad++;
    }
  }
  closedir(d);
  return bad;
}

/* --- one fault case ------------------------------------------------------------------- */

typedef struct {
  int cases;    /* fault runs made */
  int failures; /* of which some check failed */
} tally;

static tally total;

/* The output's "ganfw: I/O error: " lines: how many, and the first one's message. */
static int error_lines(const char **msg, size_t *len) {
  const char *tag = "ganfw: I/O error: ";
  int n = 0;
  *msg = NULL;
  for (const char *p = out; (p = strstr(p, tag)) != NULL; p++) {
    if (p != out && p[-1] != '\n') continue;
    if (!n++) {
      *msg = p + strlen(tag);
      const char *nl = strchr(*msg, '\n');
      *len = nl ? (size_t)(nl - *msg) : strlen(*msg);
    }
  }
  return n;
}

static const char *strerror_of(const char *spec) {
  if (strstr(spec, "ENOSPC")) return strerror(ENOSPC);
  if (strstr(spec, "EIO")) return strerror(EIO);
  if (strstr(spec, "EROFS")) return strerror(EROFS);
  if (strstr(spec, "EACCES")) return strerror(EACCES);
  return "?";
}

/* Runs args in `dir` (already prepared: empty, or a copy of an earlier run) failing
 * `spec`, and checks the outcome. `keep`: checkpoints (names under dir) that must
 * survive whatever happens. Returns 1 when every check held. */
static int fault_case(const char *dir, const char *spec, const char *const *args,
                      const char *const *keep) {
  char tr[1200];
  snprintf(tr, sizeof tr, "%s.trace", dir);
  unlink(tr);
  int rc = run_faults(dir, spec, tr, args);
  trace t = read_trace(tr);
  const call *failed = NULL;
  for (int i = 0; i < t.n && !failed; i++)
    if (t.c[i].fail) failed = &t.c[i];
  int ok = 1;
  char why[4096] = "";
  size_t wn = 0;
#define WHY(...) (ok = 0, wn += (size_t)snprintf(why + wn, sizeof why - wn, __VA_ARGS__))
  if (!failed) WHY(" the fault never happened;");
  if (rc != 1) WHY(" exit %d, not 1;", rc);
  const char *msg = NULL;
  size_t len = 0;
  int lines = error_lines(&msg, &len);
  if (lines != 1) WHY(" %d 'ganfw: I/O error' lines, not 1;", lines);
  if (failed && msg) {
    char fin[1024], first[4096];
    final_name(failed->path, fin, sizeof fin);
    snprintf(first, sizeof first, "%.*s", (int)len, msg);
    char *later = strstr(first, "; later: ");
    if (later) *later = '\0'; /* the first failure's own message */
    if (!strstr(first, fin)) WHY(" the message does not name %s first;", fin);
    if (!strstr(first, strerror_of(spec))) WHY(" the message lacks '%s';", strerror_of(spec));
  }
  /* every checkpoint renamed into place before the failure is still there */
  for (int i = 0; failed && i < t.n && t.c[i].seq < failed->seq; i++)
    if (strcmp(t.c[i].fn, "rename") == 0 && ends_with(t.c[i].path, ".safetensors") &&
        access(t.c[i].path, F_OK) != 0)
      WHY(" %s was lost;", t.c[i].path);
  for (int i = 0; keep && keep[i]; i++) {
    char p[2048];
    snprintf(p, sizeof p, "%s/%s", dir, keep[i]);
    if (!checkpoint_ok(p)) WHY(" the earlier checkpoint %s does not load;", p);
  }
  int bad = check_tree(dir);
  if (bad) WHY(" %d files not whole or temporaries left;", bad);
  if (!ok)
    fprintf(stderr, "\n  %s in %s at %s %s:%s\n  output: %.*s\n", spec, dir,
            failed ? failed->fn : "?", failed ? failed->path : "?", why,
            (int)strlen(out) > 1500 ? 1500 : (int)strlen(out), out);
#undef WHY
  total.cases++;
  total.failures += !ok;
  free(t.c);
  return ok;
}

/* The calls of a traced run to fail: every open, fsync, rename and mkdir, and of the
 * writes to each file the first and the last (`all_writes`: every one). */
static int pick(const trace *t, int i, int all_writes) {
  const call *c = &t->c[i];
  if (strcmp(c->fn, "write") != 0 || all_writes) return 1;
  int first = 1, last = 1;
  for (int j = 0; j < t->n; j++) {
    if (j == i || strcmp(t->c[j].fn, "write") != 0 || strcmp(t->c[j].path, c->path) != 0) continue;
    if (j < i) first = 0;
    if (j > i) last = 0;
  }
  return first || last;
}

/* The fault modes every picked call is tried with. Under AddressSanitizer each run is
 * about five times slower: there each call is tried with one of them, in turn (about
 * 2 minutes instead of 4; the release build tries both, in 45 s). */
static const char *const modes[] = {"ENOSPC:sticky", "EIO"};
static int mode_runs(int nth, size_t mode) {
#if defined(__SANITIZE_ADDRESS__)
  return (size_t)nth % 2 == mode;
#else
  (void)nth, (void)mode;
  return 1;
#endif
}

/* Traces `args` (with "--set run.out_dir=DIR" appended by the caller through `outset`)
 * once in <base>/count, then fails each picked call in <base>/cN, prepared by `prepare`
 * (NULL: an empty folder). Prints the sites covered. */
typedef void (*prepare_fn)(const char *dir);
static void sweep(const char *name, const char *base_in, const char *const *args_in, int nargs,
                  prepare_fn prepare, const char *const *keep, int all_writes) {
  char dir[1100], count[1100], tr[1200], outset[1200];
  char base[1000], arg_copy[8][1100]; /* path_in's buffers are reused */
  snprintf(base, sizeof base, "%s", base_in);
  const char *args[32];
  for (int i = 0; i < nargs && i < 8; i++) {
    snprintf(arg_copy[i], sizeof arg_copy[i], "%s", args_in[i]);
    args[i] = arg_copy[i];
  }
  args[nargs] = "--set";
  args[nargs + 1] = outset;
  args[nargs + 2] = NULL;
  snprintf(dir, sizeof dir, "%s/count", base);
  snprintf(count, sizeof count, "%s", dir);
  snprintf(outset, sizeof outset, "run.out_dir=%s", dir);
  snprintf(tr, sizeof tr, "%s.trace", dir);
  if (prepare) prepare(dir);
  CU_ASSERT_EQUAL_FATAL(run_faults(dir, NULL, tr, args), 0);
  trace t = read_trace(tr);
  CU_ASSERT_FATAL(t.n > 0);
  int per_fn[5] = {0};
  const char *fns[] = {"open", "write", "fsync", "rename", "mkdir"};
  for (int i = 0; i < t.n; i++)
    for (int f = 0; f < 5; f++) per_fn[f] += strcmp(t.c[i].fn, fns[f]) == 0;
  fprintf(stderr, "\n  %s: %d calls (open %d, write %d, fsync %d, rename %d, mkdir %d)\n", name,
          t.n, per_fn[0], per_fn[1], per_fn[2], per_fn[3], per_fn[4]);
  int cases = 0, good = 0;
  char sites[64][200];
  int nsites = 0, site_cases[64] = {0}, picked = 0;
  for (int i = 0; i < t.n; i++) {
    if (!pick(&t, i, all_writes)) continue;
    picked++;
    char site[128];
    site_name(t.c[i].path, count, site, sizeof site);
    char label[200];
    snprintf(label, sizeof label, "%s %s", t.c[i].fn, site);
    int s = 0;
    while (s < nsites && strcmp(sites[s], label) != 0) s++;
    if (s == nsites && nsites < 64) snprintf(sites[nsites++], sizeof sites[0], "%s", label);
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
      if (!mode_runs(picked, m)) continue;
      char spec[128];
      snprintf(spec, sizeof spec, "%s:%ld:%s", t.c[i].fn, t.c[i].k, modes[m]);
      snprintf(dir, sizeof dir, "%s/c%d", base, cases);
      snprintf(outset, sizeof outset, "run.out_dir=%s", dir);
      if (prepare) prepare(dir);
      good += fault_case(dir, spec, args, keep);
      cases++;
      if (s < 64) site_cases[s]++;
    }
  }
  fprintf(stderr, "  %s: %d of %d fault cases as they should be; sites:", name, good, cases);
  for (int s = 0; s < nsites; s++)
    fprintf(stderr, "%s %s (%d)", s ? "," : "", sites[s], site_cases[s]);
  fprintf(stderr, "\n");
  CU_ASSERT_EQUAL(good, cases);
  free(t.c);
}

/* --- the runs ------------------------------------------------------------------------- */

static int suite_init(void) {
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  if (!build) return -1;
  snprintf(ganfw, sizeof ganfw, "%s/ganfw_faults", build);
  snprintf(root, sizeof root, "/tmp/ganfw_io_faults_XXXXXX");
  if (!mkdtemp(root) || mkdir(path_in("mnist"), 0755) != 0) return -1;
  if (gt_write_mnist(path_in("mnist"), 40, 20, 5) != 0) return -1;
  const char *dirs[] = {"gan", "resume", "cls", "sample", "compare", "ro"};
  for (int i = 0; i < 6; i++)
    if (mkdir(path_in(dirs[i]), 0755) != 0) return -1;
  char text[2048];
  snprintf(text, sizeof text,
           "seed: 1\n"
           "device: {type: cpu, threads: 1}\n"
           "data: {dataset: mnist, path: %s/mnist, resize: 32}\n"
           "model: {plugin: dcgan, image_size: 32, nz: 16, ngf: 8, ndf: 8}\n"
           "optim: {plugin: adam, lr: 2.0e-4}\n"
           "train: {batch_size: 8, max_steps: 3, log_every: 1, sample_every: 1, "
           "checkpoint_every: 1}\n"
           "run: {samples: 4, sample_nrow: 2}\n",
           root);
  if (write_text(path_in("gan.yaml"), text) != 0) return -1;
  snprintf(text, sizeof text,
           "seed: 3\n"
           "device: {type: cpu, threads: 1}\n"
           "data: {dataset: mnist, path: %s/mnist}\n"
           "model: {plugin: cnn, blocks: [{channels: 4, pool: max}], linear: [8]}\n"
           "optim: {plugin: sgd, lr: 0.05}\n"
           "train: {batch_size: 20, epochs: 1, log_every: 1, checkpoint_every: 1}\n",
           root);
  return write_text(path_in("cls.yaml"), text);
}

static int suite_clean(void) {
  char cmd[256];
  snprintf(cmd, sizeof cmd, "chmod -R u+w '%s'; rm -rf '%s'", root, root);
  int rc = system(cmd);
  fprintf(stderr, "\nio_faults: %d fault cases in all, %d with a failed check\n", total.cases,
          total.failures);
  return rc == 0 ? 0 : -1;
}

/* A fresh GAN run: folders, config.resolved.yaml, metrics.csv (header, rows), the sample
 * PNGs, the checkpoints and memory.json. */
static void test_gan_run(void) {
  const char *args[] = {path_in("gan.yaml")};
  sweep("GAN run", path_in("gan"), args, 1, NULL, NULL, 0);
}

/* A resumed GAN run: metrics.csv rewritten without the rows after the checkpoint, the
 * config rewritten, a new checkpoint; the two before it stay. */
static void copy_base(const char *dir) {
  char cmd[3000];
  snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -a '%s' '%s'", dir, path_in("resume/base"), dir);
  CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
}

static void test_resumed_run(void) {
  char outset[1100];
  snprintf(outset, sizeof outset, "run.out_dir=%s", path_in("resume/base"));
  CU_ASSERT_EQUAL_FATAL(run_faults(path_in("resume/base"), NULL, NULL,
                                   (const char *[]){path_in("gan.yaml"), "--set",
                                                    "train.max_steps=2", "--set", outset, NULL}),
                        0);
  const char *args[] = {path_in("gan.yaml"), "--set", "train.resume=latest"};
  const char *keep[] = {"checkpoints/step_00000001.safetensors",
                        "checkpoints/step_00000002.safetensors", NULL};
  sweep("resumed GAN run", path_in("resume"), args, 3, copy_base, keep, 0);
}

/* A classifier run: eval.csv (header, a row), checkpoints, best.safetensors, memory.json
 * before the last evaluation. */
static void test_classifier_run(void) {
  const char *args[] = {path_in("cls.yaml")};
  sweep("classifier run", path_in("cls"), args, 1, NULL, NULL, 0);
}

/* `ganfw sample RUN -o FILE`: the grid is written whole or not at all. */
static void sample_dir(const char *dir) {
  shell("rm -rf '%s' && mkdir -p '%s'", dir, dir);
}

static void test_sample_tool(void) {
  char run[1100];
  snprintf(run, sizeof run, "%s/count", path_in("gan"));
  char out_png[1200];
  snprintf(out_png, sizeof out_png, "%s/grid.png", path_in("sample/count"));
  sample_dir(path_in("sample/count"));
  char tr[1200];
  snprintf(tr, sizeof tr, "%s.trace", path_in("sample/count"));
  const char *args[] = {"sample", run, "-n", "4", "-o", out_png, NULL};
  CU_ASSERT_EQUAL_FATAL(run_faults(path_in("sample/count"), NULL, tr, args), 0);
  CU_ASSERT(png_ok(out_png));
  trace t = read_trace(tr);
  CU_ASSERT(t.n >= 5); /* open, write, fsync, rename, fsync of the folder */
  int cases = 0, good = 0;
  for (int i = 0; i < t.n; i++)
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
      if (!mode_runs(i, m)) continue;
      char dir[1100], spec[64];
      snprintf(dir, sizeof dir, "%s/c%d", path_in("sample"), cases++);
      sample_dir(dir);
      snprintf(out_png, sizeof out_png, "%s/grid.png", dir);
      /* an earlier grid stays as it was */
      shell("cp '%s/count/grid.png' '%s'", path_in("sample"), out_png);
      snprintf(spec, sizeof spec, "%s:%ld:%s", t.c[i].fn, t.c[i].k, modes[m]);
      const char *a[] = {"sample", run, "-n", "4", "-o", out_png, NULL};
      good += fault_case(dir, spec, a, NULL);
      CU_ASSERT(png_ok(out_png));
    }
  fprintf(stderr, "\n  ganfw sample -o: %d of %d fault cases as they should be\n", good, cases);
  CU_ASSERT_EQUAL(good, cases);
  free(t.c);
}

/* compare's --csv and --json reports, in-process: a failed write leaves the earlier
 * report as it was and names the file. */
typedef ganfw_status (*report_fn)(const ganfw_compare_row *rows, int n, const char *path);

static void compare_report(const char *name, report_fn write_report, int (*parses)(const char *)) {
  ganfw_compare_row rows[2];
  memset(rows, 0, sizeof rows);
  rows[0].config = "a.yaml";
  rows[1].config = "b, \"quoted\".yaml";
  rows[1].status = GANFW_ERR_IO;
  snprintf(rows[1].error, sizeof rows[1].error, "it failed");
  const char *dir = path_in("compare");
  char path[1100], tr[1200];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  snprintf(tr, sizeof tr, "%s/../compare_%s.trace", dir, name);
  gt_fault_configure(dir, NULL, tr);
  CU_ASSERT_EQUAL_FATAL(write_report(rows, 2, path), GANFW_OK);
  gt_fault_configure(NULL, NULL, NULL);
  CU_ASSERT_FATAL(parses(path));
  char *before = slurp(path, NULL);
  trace t = read_trace(tr);
  CU_ASSERT(t.n >= 5); /* open, write, fsync, rename, fsync of the folder */
  int cases = 0, good = 0;
  for (int i = 0; i < t.n; i++)
    for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
      char spec[128];
      snprintf(spec, sizeof spec, "%s:%ld:%s", t.c[i].fn, t.c[i].k, modes[m]);
      gt_fault_configure(dir, spec, NULL);
      ganfw_status st = write_report(rows, 2, path);
      gt_fault_configure(NULL, NULL, NULL);
      const char *msg = ganfw_error_message();
      char fin[1024];
      final_name(t.c[i].path, fin, sizeof fin);
      char *now = slurp(path, NULL);
      /* a failed fsync of the folder comes after the rename: the new report is whole */
      int renamed = strcmp(t.c[i].fn, "fsync") == 0 && strcmp(t.c[i].path, dir) == 0;
      int ok = st == GANFW_ERR_IO && strstr(msg, fin) && strstr(msg, strerror_of(spec)) &&
               check_tree(dir) == 0 && now && (renamed || strcmp(now, before) == 0);
      if (!ok) fprintf(stderr, "\n  compare %s %s at %s: %s\n", name, spec, t.c[i].path, msg);
      free(now);
      good += ok;
      cases++;
    }
  total.cases += cases;
  total.failures += cases - good;
  fprintf(stderr, "\n  compare %s: %d of %d fault cases as they should be\n", name, good, cases);
  CU_ASSERT_EQUAL(good, cases);
  free(before);
  free(t.c);
}

static void test_compare_reports(void) {
  compare_report("report.csv", ganfw_compare_write_csv, csv_file_ok);
  compare_report("report.json", ganfw_compare_write_json, json_file_ok);
}

/* A read-only output folder: the mkdir (or the open) that failed first is the message,
 * memory.json's failure after it only as context. As root chmod does not stop writes, so
 * a read-only file system (EROFS on every mkdir and open) is injected instead. */
static void test_read_only_folder(void) {
  const char *ro = path_in("ro");
  char dir[1100], outset[1200];
  const char *args[] = {path_in("gan.yaml"), "--set", outset, NULL};
  if (geteuid() != 0) {
    /* the run folder exists but cannot be written: mkdir of samples/ fails first */
    snprintf(dir, sizeof dir, "%s/chmod_run", ro);
    snprintf(outset, sizeof outset, "run.out_dir=%s", dir);
    CU_ASSERT_EQUAL_FATAL(mkdir(dir, 0555), 0);
    CU_ASSERT_EQUAL(run_faults(dir, NULL, NULL, args), 1);
    const char *msg;
    size_t len;
    CU_ASSERT_EQUAL(error_lines(&msg, &len), 1);
    char samples[1200];
    snprintf(samples, sizeof samples, "%s/samples: cannot create the folder: %s", dir,
             strerror(EACCES));
    CU_ASSERT_PTR_NOT_NULL(msg && strstr(msg, samples) == msg ? msg : NULL);
    /* a finished run whose checkpoints/ became read-only: the checkpoint's temporary */
    snprintf(dir, sizeof dir, "%s/chmod_ckpt", ro);
    snprintf(outset, sizeof outset, "run.out_dir=%s", dir);
    CU_ASSERT_EQUAL_FATAL(run_faults(dir, NULL, NULL, args), 0);
    char ck[1200];
    snprintf(ck, sizeof ck, "%s/checkpoints", dir);
    CU_ASSERT_EQUAL_FATAL(chmod(ck, 0555), 0);
    const char *again[] = {
        path_in("gan.yaml"),   "--set", outset, "--set", "train.max_steps=4", "--set",
        "train.resume=latest", NULL};
    CU_ASSERT_EQUAL(run_faults(dir, NULL, NULL, again), 1);
    snprintf(ck, sizeof ck, "%s/checkpoints/step_00000004.safetensors: cannot create", dir);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, ck));
    CU_ASSERT(checkpoint_ok(path_in("ro/chmod_ckpt/checkpoints/step_00000003.safetensors")));
    chmod(path_in("ro/chmod_ckpt/checkpoints"), 0755);
  } else {
    fprintf(stderr, "\n  read-only folder: running as root, where chmod 0555 does not stop "
                    "writes: injecting EROFS/EACCES instead\n");
  }
  /* a read-only file system: every mkdir fails; the run folder's is named */
  snprintf(dir, sizeof dir, "%s/erofs_mkdir", ro);
  snprintf(outset, sizeof outset, "run.out_dir=%s", dir);
  CU_ASSERT(fault_case(dir, "mkdir:1:EROFS:sticky", args, NULL));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "cannot create the folder"));
  /* folders there, files refused: config.resolved.yaml's temporary first, memory.json
   * only as a later failure */
  snprintf(dir, sizeof dir, "%s/eacces_open", ro);
  snprintf(outset, sizeof outset, "run.out_dir=%s", dir);
  CU_ASSERT(fault_case(dir, "open:1:EACCES:sticky", args, NULL));
  const char *cfg = strstr(out, "config.resolved.yaml"), *mem = strstr(out, "memory.json");
  CU_ASSERT_PTR_NOT_NULL(cfg);
  CU_ASSERT(!mem || (cfg && mem > cfg && strstr(out, "; later: ")));
}

static CU_TestInfo tests[] = {
    {"a fresh GAN run, every write site failing", test_gan_run},
    {"a resumed GAN run, every write site failing", test_resumed_run},
    {"a classifier run, every write site failing", test_classifier_run},
    {"ganfw sample -o, every write failing", test_sample_tool},
    {"compare's reports, every write failing", test_compare_reports},
    {"a read-only output folder", test_read_only_folder},
    CU_TEST_INFO_NULL,
};

int main(void) {
  return gt_run_fixture("io_faults", tests, suite_init, suite_clean);
}
