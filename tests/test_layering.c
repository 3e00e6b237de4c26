/* The core's folders are the layers of the system (README "Layout"): every quoted include
 * in core/src/ names its folder ("nn/net.h") and points at the same folder or one below it
 * in this order, never up:
 *
 *   cli > tools > plan > train > data > io > plugin > nn > dist > runtime > config > backend
 *       > base
 *
 * (backend/cpu/ and backend/cuda/ are backend/). plan/ (the probe, the layout, the arena)
 * drives the trainer and is what the tools print; it includes nothing from tools/. The order
 * is total and an include between folders must go strictly down it, so no circle of includes
 * can pass through two folders. The checker walks the source tree; a second test runs it on a
 * small tree with upward includes, so that it can be seen to fail. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"

static const char *const rooms[] = {"base", "backend", "config", "runtime", "dist",  "nn", "plugin",
                                    "io",   "data",    "train",  "plan",    "tools", "cli"};
enum { ROOM_COUNT = sizeof rooms / sizeof rooms[0] };

/* The rank of the folder a path starts with ("nn/net.h" -> 5), -1 when unknown. */
static int room_rank(const char *path) {
  for (int i = 0; i < ROOM_COUNT; i++) {
    size_t n = strlen(rooms[i]);
    if (strncmp(path, rooms[i], n) == 0 && path[n] == '/') return i;
  }
  return -1;
}

typedef struct {
  int files, includes, violations;
  char first[4096];
} layer_report;

static void violation(layer_report *r, const char *fmt, const char *a, const char *b) {
  if (r->violations++ == 0) snprintf(r->first, sizeof r->first, fmt, a, b);
}

/* Checks one file. `rel` is its path below the tree's root ("nn/net.c"), `rank` the rank of
 * its folder. */
static void check_file(const char *full, const char *rel, int rank, layer_report *r) {
  FILE *f = fopen(full, "r");
  if (!f) {
    violation(r, "%s: cannot open%s", full, "");
    return;
  }
  r->files++;
  char line[1024];
  while (fgets(line, sizeof line, f)) {
    const char *p = line;
    while (*p == ' ') p++;
    if (strncmp(p, "#include \"", 10) != 0) continue;
    char inc[512];
    const char *q = p + 10, *end = strchr(q, '"');
    if (!end || (size_t)(end - q) >= sizeof inc) continue;
    memcpy(inc, q, (size_t)(end - q));
    inc[end - q] = '\0';
    r->includes++;
    if (strncmp(inc, "ganfw/", 6) == 0) continue; /* the public headers, below everything */
    int to = room_rank(inc);
    if (to < 0) {
      violation(r, "%s: include \"%s\" names no folder of the core", rel, inc);
    } else if (to > rank) {
      violation(r, "%s: include \"%s\" points up", rel, inc);
    }
  }
  fclose(f);
}

static int is_source(const char *name) {
  const char *dot = strrchr(name, '.');
  return dot &&
         (!strcmp(dot, ".c") || !strcmp(dot, ".h") || !strcmp(dot, ".cu") || !strcmp(dot, ".cuh"));
}

/* Walks `dir` (path `rel` below the root), checking every source file. A file's rank is
 * that of its top folder below the root. */
static void walk(const char *dir, const char *rel, layer_report *r) {
  DIR *d = opendir(dir);
  if (!d) {
    violation(r, "%s: cannot open the folder%s", dir, "");
    return;
  }
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char full[1024], sub[1024];
    snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
    snprintf(sub, sizeof sub, "%s%s%s", rel, rel[0] ? "/" : "", e->d_name);
    struct stat sb;
    if (stat(full, &sb) != 0) continue;
    if (S_ISDIR(sb.st_mode)) {
      walk(full, sub, r);
    } else if (is_source(e->d_name)) {
      int rank = room_rank(sub);
      if (rank < 0)
        violation(r, "%s: a source file outside the folders of the core%s", sub, "");
      else
        check_file(full, sub, rank, r);
    }
  }
  closedir(d);
}

static void test_core_imports_run_down(void) {
  const char *src = getenv("GANFW_SOURCE_DIR");
  CU_ASSERT_PTR_NOT_NULL_FATAL(src);
  char core[1024];
  snprintf(core, sizeof core, "%s/core/src", src);
  layer_report r = {0};
  walk(core, "", &r);
  if (r.violations)
    fprintf(stderr, "\n  %d layering violations; first: %s\n", r.violations, r.first);
  CU_ASSERT_EQUAL(r.violations, 0);
  CU_ASSERT(r.files > 100); /* the walk really saw the core */
  CU_ASSERT(r.includes > 200);
}

static void write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  fputs(text, f);
  fclose(f);
}

/* The checker itself: a tree with one downward, one same-folder and one upward include
 * reports exactly the upward one; an unqualified include is reported too, and so is plan/
 * including tools/. */
static void test_checker_finds_upward_include(void) {
  char root[] = "/tmp/ganfw_layering_XXXXXX";
  CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(root));
  char p[1024];
  const char *dirs[] = {"nn", "runtime", "train", "plan", "tools"};
  for (int i = 0; i < 5; i++) {
    snprintf(p, sizeof p, "%s/%s", root, dirs[i]);
    CU_ASSERT_EQUAL_FATAL(mkdir(p, 0700), 0);
  }
  snprintf(p, sizeof p, "%s/nn/net.c", root);
  write_file(p, "#include \"nn/net.h\"\n#include \"runtime/ctx.h\"\n#include <stdio.h>\n");
  snprintf(p, sizeof p, "%s/runtime/ctx.c", root);
  write_file(p, "#include \"ganfw/host.h\"\n  #include \"nn/net.h\"\n");
  layer_report r = {0};
  walk(root, "", &r);
  CU_ASSERT_EQUAL(r.files, 2);
  CU_ASSERT_EQUAL(r.violations, 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(r.first, "runtime/ctx.c: include \"nn/net.h\" points up"));

  snprintf(p, sizeof p, "%s/train/run.c", root);
  write_file(p, "#include \"net.h\"\n");
  layer_report r2 = {0};
  walk(root, "", &r2);
  CU_ASSERT_EQUAL(r2.violations, 2);

  /* The circle plan/ was cut out of: the tools may include the planner, never the reverse. */
  snprintf(p, sizeof p, "%s/train/run.c", root);
  write_file(p, "#include \"train/run.h\"\n");
  snprintf(p, sizeof p, "%s/tools/report.c", root);
  write_file(p, "#include \"plan/probe.h\"\n#include \"train/run.h\"\n");
  snprintf(p, sizeof p, "%s/plan/arena.c", root);
  write_file(p, "#include \"train/run.h\"\n#include \"tools/report.h\"\n");
  layer_report r3 = {0};
  walk(root, "", &r3);
  CU_ASSERT_EQUAL(r3.files, 5);
  CU_ASSERT_EQUAL(r3.violations, 2); /* runtime/ctx.c's and plan/arena.c's */
  snprintf(p, sizeof p, "%s/plan", root);
  layer_report r4 = {0};
  walk(p, "plan", &r4);
  CU_ASSERT_EQUAL(r4.violations, 1);
  CU_ASSERT_PTR_NOT_NULL(strstr(r4.first, "plan/arena.c: include \"tools/report.h\" points up"));

  const char *files[] = {"nn/net.c", "runtime/ctx.c", "train/run.c", "tools/report.c",
                         "plan/arena.c"};
  for (int i = 0; i < 5; i++) {
    snprintf(p, sizeof p, "%s/%s", root, files[i]);
    unlink(p);
  }
  for (int i = 0; i < 5; i++) {
    snprintf(p, sizeof p, "%s/%s", root, dirs[i]);
    rmdir(p);
  }
  rmdir(root);
}

static CU_TestInfo tests[] = {
    {"core_imports_run_down", test_core_imports_run_down},
    {"checker_finds_upward_include", test_checker_finds_upward_include},
    CU_TEST_INFO_NULL,
};
GT_MAIN("layering", tests)
