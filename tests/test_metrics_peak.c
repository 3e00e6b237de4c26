/* The steps' peak memory in a run's monitoring (issue 35, item 16): the allocator's window
 * peaks (ganfw_alloc_window_peak, apart from the peaks planners and the evaluation reset),
 * metrics.csv's peak_allocated and peak_reserved (the peaks since the row before, which a
 * between-steps reading of allocated never shows), the progress line's peaks, the run's
 * peaks at its end, and resume: rows of a run begun without the two columns get them empty. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "backend/backend.h"
#include "base/error.h"
#include "runtime/alloc.h"
#include "testutil.h"

#define MIB (1024 * 1024)

static char root[64];
static char ganfw[4096];
static char out[65536];

static const char *path_in(const char *rel) {
  static char buf[8][512];
  static int k;
  k = (k + 1) % 8;
  snprintf(buf[k], sizeof buf[k], "%s/%s", root, rel);
  return buf[k];
}

static int suite_init(void) {
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  if (!build) return -1;
  snprintf(ganfw, sizeof ganfw, "%s/ganfw", build);
  snprintf(root, sizeof root, "/tmp/ganfw_mpeak_XXXXXX");
  if (!mkdtemp(root) || mkdir(path_in("mnist"), 0755) != 0) return -1;
  if (gt_write_mnist(path_in("mnist"), 64, 10, 4) != 0) return -1;
  FILE *f = fopen(path_in("gan.yaml"), "w");
  if (!f) return -1;
  fprintf(f,
          "seed: 7\n"
          "device: {type: cpu, threads: 1}\n"
          "data: {dataset: mnist, path: %s/mnist, resize: 32}\n"
          "model: {plugin: dcgan, image_size: 32, nz: 16, ngf: 8, ndf: 8}\n"
          "optim: {plugin: adam, lr: 2.0e-4}\n"
          "train: {batch_size: 8, max_steps: 4, log_every: 1, sample_every: 0, "
          "checkpoint_every: 2}\n"
          "run: {samples: 4, sample_nrow: 2}\n",
          root);
  return fclose(f);
}

static int suite_clean(void) {
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", root);
  return system(cmd) == 0 ? 0 : -1;
}

static int run_ganfw(const char *const *args) {
  char cmd[8192];
  int n = snprintf(cmd, sizeof cmd, "'%s'", ganfw);
  for (const char *const *a = args; *a; a++) n += snprintf(cmd + n, sizeof cmd - n, " '%s'", *a);
  snprintf(cmd + n, sizeof cmd - n, " 2>&1");
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  size_t len = fread(out, 1, sizeof out - 1, p);
  out[len] = '\0';
  int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* --- the allocator's window -------------------------------------------------------------- */

static void window(const ganfw_alloc *a, int64_t *allocated, int64_t *reserved) {
  ganfw_alloc_window_peak(a, allocated, reserved);
}

/* The window keeps the highest allocated and reserved bytes since it began, through frees,
 * an emptied cache and ganfw_alloc_reset_peak; ganfw_alloc_reset_window_peak starts a new
 * one at the current bytes. */
static void test_alloc_window_peak(void) {
  ganfw_alloc *a = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_alloc_create(ganfw_cpu_backend(), NULL, &a), GANFW_OK);
  int64_t wa, wr;
  window(a, &wa, &wr);
  CU_ASSERT_EQUAL(wa, 0);
  CU_ASSERT_EQUAL(wr, 0);
  void *x = NULL, *y = NULL, *z = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_alloc_malloc(a, 3 * MIB, GANFW_MEM_PARAM, "x", &x), GANFW_OK);
  /* 24 MiB: a segment of its own (3 MiB takes a 20 MiB one), which empty_cache releases */
  CU_ASSERT_EQUAL_FATAL(ganfw_alloc_malloc(a, 24 * MIB, GANFW_MEM_ACTIVATION, "y", &y), GANFW_OK);
  ganfw_alloc_free(a, y); /* a step's activations come and go */
  ganfw_alloc_stats st;
  ganfw_alloc_get_stats(a, &st);
  window(a, &wa, &wr);
  CU_ASSERT_EQUAL(st.allocated.current, 3 * MIB);
  CU_ASSERT_EQUAL(wa, 27 * MIB);
  CU_ASSERT_EQUAL(wr, st.reserved.peak);
  CU_ASSERT_EQUAL(wr, 44 * MIB);
  /* planners and the evaluation reset the allocator's peaks: the window keeps its own */
  ganfw_alloc_reset_peak(a);
  ganfw_alloc_empty_cache(a);
  ganfw_alloc_get_stats(a, &st);
  CU_ASSERT_EQUAL(st.allocated.peak, 3 * MIB);
  window(a, &wa, &wr);
  CU_ASSERT_EQUAL(wa, 27 * MIB);
  CU_ASSERT_EQUAL(wr, 44 * MIB);
  CU_ASSERT_EQUAL(st.reserved.current, 20 * MIB);
  CU_ASSERT_EQUAL(ganfw_alloc_check_invariants(a), 0);
  /* a new window starts at what is held now */
  ganfw_alloc_reset_window_peak(a);
  window(a, &wa, &wr);
  CU_ASSERT_EQUAL(wa, 3 * MIB);
  CU_ASSERT_EQUAL(wr, st.reserved.current);
  CU_ASSERT_EQUAL_FATAL(ganfw_alloc_malloc(a, 1 * MIB, GANFW_MEM_GRAD, "z", &z), GANFW_OK);
  ganfw_alloc_free(a, z);
  window(a, &wa, &wr);
  CU_ASSERT_EQUAL(wa, 4 * MIB);
  ganfw_alloc_get_stats(a, &st);
  CU_ASSERT_EQUAL(wr, st.reserved.current);
  CU_ASSERT_EQUAL(ganfw_alloc_check_invariants(a), 0);
  ganfw_alloc_free(a, x);
  ganfw_alloc_destroy(a);
  window(NULL, &wa, &wr);
  CU_ASSERT_EQUAL(wa, 0);
  CU_ASSERT_EQUAL(wr, 0);
  ganfw_alloc_reset_window_peak(NULL);
}

/* --- metrics.csv ------------------------------------------------------------------------ */

#define MAX_ROWS 16
#define MAX_COLS 40

typedef struct csv {
  char header[4096];
  int n_cols; /* of the header */
  int n_rows;
  int fields[MAX_ROWS];         /* per row */
  double v[MAX_ROWS][MAX_COLS]; /* NAN for an empty field */
} csv;

static int read_csv(const char *path, csv *c) {
  memset(c, 0, sizeof *c);
  FILE *f = fopen(path, "r");
  if (!f) return -1;
  char line[8192];
  if (!fgets(c->header, sizeof c->header, f)) {
    fclose(f);
    return -1;
  }
  c->header[strcspn(c->header, "\n")] = '\0';
  c->n_cols = 1;
  for (const char *p = c->header; *p; p++) c->n_cols += *p == ',';
  while (c->n_rows < MAX_ROWS && fgets(line, sizeof line, f)) {
    line[strcspn(line, "\n")] = '\0';
    int k = 0;
    for (char *p = line;; k++) {
      char *end = strchr(p, ',');
      if (k < MAX_COLS) c->v[c->n_rows][k] = *p && *p != ',' ? strtod(p, NULL) : NAN;
      if (!end) break;
      p = end + 1;
    }
    c->fields[c->n_rows++] = k + 1;
  }
  fclose(f);
  return 0;
}

static int column(const csv *c, const char *name) {
  char h[4096];
  snprintf(h, sizeof h, "%s", c->header);
  int i = 0;
  for (char *t = strtok(h, ","); t; t = strtok(NULL, ","), i++)
    if (strcmp(t, name) == 0) return i;
  return -1;
}

/* A GAN run: every row's peaks are those of its step, well above the between-steps
 * `allocated`; the progress line and the end of the run say them. */
static void test_metrics_peak_columns(void) {
  char outdir[600];
  snprintf(outdir, sizeof outdir, "run.out_dir=%s", path_in("a"));
  CU_ASSERT_EQUAL_FATAL(run_ganfw((const char *[]){path_in("gan.yaml"), "--set", outdir, NULL}), 0);
  csv c;
  CU_ASSERT_EQUAL_FATAL(read_csv(path_in("a/metrics.csv"), &c), 0);
  printf("\n  %s", c.header);
  const size_t hl = strlen(c.header), tl = strlen(",peak_allocated,peak_reserved");
  CU_ASSERT(hl > tl && strcmp(c.header + hl - tl, ",peak_allocated,peak_reserved") == 0);
  CU_ASSERT_PTR_NOT_NULL(strstr(c.header, "allocated,reserved,step_seconds"));
  const int al = column(&c, "allocated"), re = column(&c, "reserved");
  const int pa = column(&c, "peak_allocated"), pr = column(&c, "peak_reserved");
  CU_ASSERT_FATAL(al > 0 && re > 0 && pa > 0 && pr > 0);
  CU_ASSERT_EQUAL(c.n_rows, 4);
  double run_pa = 0, run_pr = 0;
  for (int i = 0; i < c.n_rows; i++) {
    CU_ASSERT_EQUAL(c.fields[i], c.n_cols);
    CU_ASSERT(c.v[i][pa] > 1.5 * c.v[i][al]); /* a step's activations and workspaces */
    CU_ASSERT(c.v[i][pr] >= c.v[i][re]);
    CU_ASSERT(c.v[i][pr] >= c.v[i][pa]);
    if (c.v[i][pa] > run_pa) run_pa = c.v[i][pa];
    if (c.v[i][pr] > run_pr) run_pr = c.v[i][pr];
  }
  printf("\n  step 1: allocated %.2f MiB, peak %.2f MiB", c.v[0][al] / MIB, c.v[0][pa] / MIB);
  char want[160];
  snprintf(want, sizeof want, "alloc %.1f MiB (peak %.1f)", c.v[3][al] / MIB, c.v[3][pa] / MIB);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, want));
  /* the run's peaks: at least every row's (its last sample grid and checkpoint count too) */
  const char *line = strstr(out, "peak memory of the run: ");
  CU_ASSERT_PTR_NOT_NULL_FATAL(line);
  double ra = 0, rr = 0;
  CU_ASSERT_EQUAL(
      sscanf(line, "peak memory of the run: %lf MiB allocated, %lf MiB reserved", &ra, &rr), 2);
  CU_ASSERT(ra >= run_pa / MIB - 0.05);
  CU_ASSERT(rr >= run_pr / MIB - 0.05);
  CU_ASSERT(strstr(out, "done in ") < line);
}

/* Resume: metrics.csv keeps its header and the rows before the checkpoint, every row with
 * all its fields. */
static void test_metrics_peak_resume(void) {
  char outdir[600];
  snprintf(outdir, sizeof outdir, "run.out_dir=%s", path_in("b"));
  CU_ASSERT_EQUAL_FATAL(run_ganfw((const char *[]){path_in("gan.yaml"), "--set", outdir, "--set",
                                                   "train.max_steps=2", NULL}),
                        0);
  CU_ASSERT_EQUAL_FATAL(run_ganfw((const char *[]){path_in("gan.yaml"), "--set", outdir, "--set",
                                                   "train.resume=latest", NULL}),
                        0);
  csv c;
  CU_ASSERT_EQUAL_FATAL(read_csv(path_in("b/metrics.csv"), &c), 0);
  CU_ASSERT_EQUAL(c.n_rows, 4);
  const int pa = column(&c, "peak_allocated");
  CU_ASSERT_FATAL(pa > 0);
  for (int i = 0; i < c.n_rows; i++) {
    CU_ASSERT_EQUAL(c.v[i][0], i + 1);
    CU_ASSERT_EQUAL(c.fields[i], c.n_cols);
    CU_ASSERT(c.v[i][pa] > 0);
  }
}

/* A run begun by a ganfw without the peak columns, resumed by this one: the header gains
 * them and the rows kept get them empty, so every row has the header's fields (as pandas
 * and csv readers need). */
static void test_metrics_peak_resume_older_file(void) {
  char outdir[600];
  snprintf(outdir, sizeof outdir, "run.out_dir=%s", path_in("c"));
  CU_ASSERT_EQUAL_FATAL(run_ganfw((const char *[]){path_in("gan.yaml"), "--set", outdir, "--set",
                                                   "train.max_steps=2", NULL}),
                        0);
  /* what an older ganfw wrote: the same without the last two columns */
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "cut -d, -f1-$(($(head -1 '%s' | tr , '\\n' | wc -l) - 2)) '%s' > '%s.old' && "
           "mv '%s.old' '%s'",
           path_in("c/metrics.csv"), path_in("c/metrics.csv"), path_in("c/metrics.csv"),
           path_in("c/metrics.csv"), path_in("c/metrics.csv"));
  CU_ASSERT_EQUAL_FATAL(system(cmd), 0);
  csv old;
  CU_ASSERT_EQUAL_FATAL(read_csv(path_in("c/metrics.csv"), &old), 0);
  CU_ASSERT_PTR_NULL_FATAL(strstr(old.header, "peak_allocated"));
  CU_ASSERT_EQUAL_FATAL(run_ganfw((const char *[]){path_in("gan.yaml"), "--set", outdir, "--set",
                                                   "train.resume=latest", NULL}),
                        0);
  csv c;
  CU_ASSERT_EQUAL_FATAL(read_csv(path_in("c/metrics.csv"), &c), 0);
  CU_ASSERT_EQUAL(c.n_cols, old.n_cols + 2);
  CU_ASSERT_EQUAL(strncmp(c.header, old.header, strlen(old.header)), 0);
  CU_ASSERT_EQUAL(c.n_rows, 4);
  const int pa = column(&c, "peak_allocated"), pr = column(&c, "peak_reserved");
  CU_ASSERT_FATAL(pa > 0 && pr > 0);
  for (int i = 0; i < c.n_rows; i++) {
    CU_ASSERT_EQUAL(c.v[i][0], i + 1);
    CU_ASSERT_EQUAL(c.fields[i], c.n_cols);
    for (int k = 0; k < old.n_cols; k++) /* the rows kept are unchanged */
      if (i < 2) CU_ASSERT_EQUAL(c.v[i][k], old.v[i][k]);
    CU_ASSERT_EQUAL(isnan(c.v[i][pa]), i < 2);
    CU_ASSERT_EQUAL(isnan(c.v[i][pr]), i < 2);
  }
}

static CU_TestInfo tests[] = {
    {"allocator: window peaks apart from reset_peak", test_alloc_window_peak},
    {"metrics.csv: peak columns, progress line, run's peak", test_metrics_peak_columns},
    {"metrics.csv: resume keeps every field", test_metrics_peak_resume},
    {"metrics.csv: resuming a file without the peak columns", test_metrics_peak_resume_older_file},
    CU_TEST_INFO_NULL,
};

int main(void) {
  return gt_run_fixture("metrics peak", tests, suite_init, suite_clean);
}
