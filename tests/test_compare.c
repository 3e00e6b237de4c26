/* `ganfw compare`: configs trained side by side on real data; a config that runs out of
 * memory is a row saying so (the others still run); the table, CSV and JSON carry the same
 * fields, and the command line exits 0 with OOM rows, 1 when a config failed otherwise. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "tools/compare.h"
#include "base/error.h"
#include "base/log.h"
#include "testutil.h"

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

static int write_text(const char *rel, const char *text) {
  FILE *f = fopen(path_in(rel), "w");
  if (!f) return -1;
  fputs(text, f);
  return fclose(f);
}

static int suite_init(void) {
  const char *build = getenv("GANFW_TEST_BUILD_DIR");
  if (!build) return -1;
  snprintf(ganfw, sizeof ganfw, "%s/ganfw", build);
  snprintf(root, sizeof root, "/tmp/ganfw_compare_XXXXXX");
  if (!mkdtemp(root) || mkdir(path_in("mnist"), 0755) != 0) return -1;
  if (gt_write_mnist(path_in("mnist"), 200, 20, 7) != 0) return -1;
  ganfw_log_set_level(GANFW_LOG_WARN);
  char text[2048];
  snprintf(text, sizeof text,
           "seed: 3\n"
           "device: {type: cpu, threads: 2}\n"
           "data: {dataset: mnist, path: %s/mnist, resize: 32}\n"
           "model: {plugin: dcgan, image_size: 32, nz: 16, ngf: 8, ndf: 8}\n"
           "optim: {plugin: adam, lr: 2.0e-4}\n"
           "train: {batch_size: 16, max_steps: 2}\n"
           "run: {out_dir: %s/run}\n",
           root, root);
  if (write_text("small.yaml", text) != 0) return -1;
  return write_text("tight.yaml", "extends: small.yaml\n"
                                  "device: {memory_limit: 3MiB}\n"
                                  "train: {batch_size: 64}\n");
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

static char *read_all(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) return NULL;
  char *buf = calloc(1, 65536);
  if (buf) fread(buf, 1, 65535, f);
  fclose(f);
  return buf;
}

/* The CSV cells of `line` (no quoted commas in these tests) into cells; returns the count. */
static int split_csv(char *line, char **cells, int max) {
  int n = 0;
  char *save = NULL;
  for (char *c = strtok_r(line, ",\n", &save); c && n < max; c = strtok_r(NULL, ",\n", &save))
    cells[n++] = c;
  return n;
}

static int column(char **header, int n, const char *name) {
  for (int i = 0; i < n; i++)
    if (strcmp(header[i], name) == 0) return i;
  return -1;
}

/* Two configs, the second over its memory_limit: two rows, the first measured, the second
 * an OOM with its report; the table shows both. */
static void test_compare_rows(void) {
  const char *configs[] = {path_in("small.yaml"), path_in("tight.yaml")};
  ganfw_compare_row rows[2];
  ganfw_compare_options opt = {.warmup = 1, .steps = 3};
  CU_ASSERT_EQUAL_FATAL(ganfw_compare_run(configs, 2, NULL, 0, &opt, rows, NULL), GANFW_OK);
  CU_ASSERT_EQUAL(rows[0].status, GANFW_OK);
  CU_ASSERT_EQUAL(rows[0].r.oom, 0);
  CU_ASSERT_EQUAL(rows[0].r.steps_done, 3);
  CU_ASSERT_EQUAL(rows[0].r.batch_size, 16);
  CU_ASSERT(rows[0].r.peak_allocated > rows[0].r.setup_allocated);
  CU_ASSERT(rows[0].r.peak_reserved >= rows[0].r.peak_allocated);
  CU_ASSERT(rows[0].r.peak_category[GANFW_MEM_ACTIVATION] > 0);
  CU_ASSERT(rows[0].r.step_seconds > 0);
  CU_ASSERT(rows[0].r.images_per_s > 0);
  CU_ASSERT(rows[0].r.loss_d > 0 && rows[0].r.loss_g > 0); /* real losses, not a plan's 0 */
  CU_ASSERT_EQUAL(rows[1].status, GANFW_OK);
  CU_ASSERT_EQUAL(rows[1].r.oom, 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(rows[1].r.oom_report, "out of memory: tried to allocate"));
  CU_ASSERT_EQUAL(rows[1].r.steps_done, 0);
  char *text = NULL;
  size_t len = 0;
  FILE *mem = open_memstream(&text, &len);
  ganfw_compare_print(rows, 2, mem);
  fclose(mem);
  printf("\n%s", text);
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "| config | layout | batch | peak allocated MiB"));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "small.yaml | planned | 16 |")); /* the default layout */
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "tight.yaml | caching | 64 |")); /* no room for it */
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "| no |"));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "| yes |"));
  CU_ASSERT_PTR_NOT_NULL(strstr(text, "tight.yaml: OOM in the"));
  free(text);

  /* CSV: a header and one line per row, the same fields */
  CU_ASSERT_EQUAL(ganfw_compare_write_csv(rows, 2, path_in("c.csv")), GANFW_OK);
  char *csv = read_all(path_in("c.csv"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(csv);
  char *lines[4] = {0};
  int nl = 0;
  char *save = NULL;
  for (char *l = strtok_r(csv, "\n", &save); l && nl < 4; l = strtok_r(NULL, "\n", &save))
    lines[nl++] = l;
  CU_ASSERT_EQUAL_FATAL(nl, 3);
  char *head[64], *r0[64], *r1[64];
  int nh = split_csv(lines[0], head, 64);
  /* the report cell may hold commas: compare up to it */
  int n0 = split_csv(lines[1], r0, 64), n1 = split_csv(lines[2], r1, 64);
  int report = column(head, nh, "report");
  CU_ASSERT(report == nh - 1);
  CU_ASSERT(n0 >= nh && n1 >= nh - 1);
  int oom = column(head, nh, "oom"), peak = column(head, nh, "peak_allocated");
  int act = column(head, nh, "peak_activation"), status = column(head, nh, "status");
  CU_ASSERT_FATAL(oom >= 0 && peak >= 0 && act >= 0 && status >= 0);
  CU_ASSERT_STRING_EQUAL(r0[oom], "0");
  CU_ASSERT_STRING_EQUAL(r1[oom], "1");
  CU_ASSERT_STRING_EQUAL(r0[status], "\"ok\"");
  CU_ASSERT_STRING_EQUAL(r1[status], "\"oom\"");
  CU_ASSERT_EQUAL(strtoll(r0[peak], NULL, 10), rows[0].r.peak_allocated);
  CU_ASSERT_EQUAL(strtoll(r0[act], NULL, 10), rows[0].r.peak_category[GANFW_MEM_ACTIVATION]);
  free(csv);

  /* JSON: an array of two objects with the same keys */
  CU_ASSERT_EQUAL(ganfw_compare_write_json(rows, 2, path_in("c.json")), GANFW_OK);
  char *json = read_all(path_in("c.json"));
  CU_ASSERT_PTR_NOT_NULL_FATAL(json);
  CU_ASSERT_EQUAL(json[0], '[');
  int objects = 0;
  for (const char *p = json; (p = strchr(p, '{')); p++) objects++;
  CU_ASSERT_EQUAL(objects, 2);
  CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"oom\": 1"));
  CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"oom\": 0"));
  char want[64];
  snprintf(want, sizeof want, "\"peak_allocated\": %lld", (long long)rows[0].r.peak_allocated);
  CU_ASSERT_PTR_NOT_NULL(strstr(json, want));
  CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"status\": \"oom\""));
  /* the JSON parses: Python's json module is the judge */
  char cmd[700];
  snprintf(cmd, sizeof cmd,
           "/usr/bin/python3 -c \"import json,sys; d=json.load(open('%s')); "
           "sys.exit(0 if len(d)==2 and d[1]['oom']==1 and d[0]['steps']==3 else 1)\"",
           path_in("c.json"));
  CU_ASSERT_EQUAL(system(cmd), 0);
  free(json);
  ganfw_compare_rows_free(rows, 2);
}

/* The command line: exit 0 with an OOM row, the files written; 1 with a failed config. */
static void test_compare_cli(void) {
  CU_ASSERT_EQUAL(
      run_ganfw((const char *[]){"compare", path_in("small.yaml"), path_in("tight.yaml"), "--steps",
                                 "1", "--warmup", "0", "--csv", path_in("cli.csv"), "--json",
                                 path_in("cli.json"), NULL}),
      0);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "| yes |"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "| no |"));
  struct stat sb;
  CU_ASSERT_EQUAL(stat(path_in("cli.csv"), &sb), 0);
  CU_ASSERT_EQUAL(stat(path_in("cli.json"), &sb), 0);
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"compare", path_in("small.yaml"),
                                             path_in("missing.yaml"), "--steps", "1", NULL}),
                  1);
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "missing.yaml: failed"));
  CU_ASSERT_PTR_NOT_NULL(strstr(out, "small.yaml | planned | 16 |")); /* the other row */
  CU_ASSERT_EQUAL(run_ganfw((const char *[]){"compare", NULL}), 2);
  CU_ASSERT_EQUAL(
      run_ganfw((const char *[]){"compare", path_in("small.yaml"), "--steps", "0", NULL}), 2);
}

/* --layouts caching,planned: each config twice, the rows side by side in that order; the
 * same losses to the bit (the layout moves blocks, not arithmetic), the planned run's
 * reserved bytes no more than the cache's; bad values are usage errors. */
static void test_compare_layouts(void) {
  const char *configs[] = {path_in("small.yaml")};
  ganfw_compare_row rows[2];
  ganfw_compare_options opt = {
      .warmup = 1, .steps = 2, .layouts = {"caching", "planned"}, .n_layouts = 2};
  CU_ASSERT_EQUAL_FATAL(ganfw_compare_run(configs, 1, NULL, 0, &opt, rows, NULL), GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(rows[0].status, GANFW_OK);
  CU_ASSERT_EQUAL_FATAL(rows[1].status, GANFW_OK);
  CU_ASSERT_STRING_EQUAL(ganfw_compare_row_layout(&rows[0]), "caching");
  CU_ASSERT_STRING_EQUAL(ganfw_compare_row_layout(&rows[1]), "planned");
  CU_ASSERT_PTR_NOT_NULL(strstr(rows[1].label, "small.yaml (planned)"));
  CU_ASSERT_EQUAL(rows[0].r.steps_done, 2);
  CU_ASSERT_EQUAL(rows[1].r.steps_done, 2);
  CU_ASSERT(rows[1].r.num_planned > 0);
  CU_ASSERT_EQUAL(rows[0].r.num_planned, 0);
  CU_ASSERT_EQUAL(memcmp(&rows[0].r.loss_d, &rows[1].r.loss_d, sizeof rows[0].r.loss_d), 0);
  CU_ASSERT_EQUAL(memcmp(&rows[0].r.loss_g, &rows[1].r.loss_g, sizeof rows[0].r.loss_g), 0);
  CU_ASSERT_EQUAL(rows[0].r.peak_allocated, rows[1].r.peak_allocated);
  CU_ASSERT(rows[1].r.peak_reserved <= rows[0].r.peak_reserved);
  ganfw_compare_rows_free(rows, 2);

  CU_ASSERT_EQUAL(
      run_ganfw((const char *[]){"compare", path_in("small.yaml"), "--steps", "1", "--warmup", "0",
                                 "--layouts", "caching,planned", NULL}),
      0);
  const char *c = strstr(out, "small.yaml | caching | 16 |");
  const char *p = strstr(out, "small.yaml | planned | 16 |");
  CU_ASSERT_PTR_NOT_NULL(c);
  CU_ASSERT(p != NULL && c != NULL && p > c);
  const char *bad[] = {"arena", "planned,planned", "", "caching,"};
  for (int i = 0; i < 4; i++) {
    CU_ASSERT_EQUAL(
        run_ganfw((const char *[]){"compare", path_in("small.yaml"), "--layouts", bad[i], NULL}),
        2);
    CU_ASSERT_PTR_NOT_NULL(strstr(out, "--layouts"));
  }
}

static CU_TestInfo tests[] = {
    {"two configs, one out of memory: rows, table, CSV, JSON", test_compare_rows},
    {"compare on the command line", test_compare_cli},
    {"compare --layouts caching,planned: rows side by side", test_compare_layouts},
    CU_TEST_INFO_NULL,
};

int main(void) {
  return gt_run_fixture("compare", tests, suite_init, suite_clean);
}
