/* Shared steps of the out-of-tree example suites (tests/test_example_*.c): see
 * example_util.h. Every failure is a CUnit failure that prints at once; a step that fails
 * prints its command and output, and the temporary folder is kept for a look. */
#include "example_util.h"

#include <ftw.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

ex_state ex;

void ex_init(const char *program, const char *tmp_prefix) {
  ex.program = program;
  ex.tmp_prefix = tmp_prefix;
}

static const char *env_or(const char *name, const char *def) {
  const char *v = getenv(name);
  return v && *v ? v : def;
}

const char *ex_source_dir(void) {
  return env_or("GANFW_SOURCE_DIR", EX_SOURCE_DIR);
}

void ex_fail_at(const char *file, int line, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  printf("\n  FAILED: %s\n", msg);
  fflush(stdout);
  ex.failures++;
  CU_assertImplementation(CU_FALSE, (unsigned)line, msg, file, "", CU_FALSE);
}

int ex_file_exists(const char *path) {
  struct stat sb;
  return stat(path, &sb) == 0 && S_ISREG(sb.st_mode);
}

char *ex_read_text(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
  if (s) {
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
  }
  fclose(f);
  return s;
}

void ex_print_file_tail(const char *heading, const char *path, long tail) {
  FILE *f = fopen(path, "rb");
  printf("  --- %s (%s) ---\n", heading, path);
  if (!f) {
    printf("  (cannot open)\n");
    return;
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  if (size > tail) {
    fseek(f, size - tail, SEEK_SET);
    printf("  [... %ld bytes before this left out]\n", size - tail);
  } else {
    fseek(f, 0, SEEK_SET);
  }
  char chunk[4096];
  size_t got;
  while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) fwrite(chunk, 1, got, stdout);
  fclose(f);
  printf("\n  --- end of %s ---\n", heading);
  fflush(stdout);
}

int ex_log_has(const char *what, const char *log, ...) {
  char *text = ex_read_text(log);
  const char *missing = text ? NULL : "(no log)";
  va_list ap;
  va_start(ap, log);
  for (const char *s; !missing && (s = va_arg(ap, const char *)) != NULL;)
    if (!strstr(text, s)) missing = s;
  va_end(ap);
  free(text);
  if (!missing) return 1;
  ex_fail("%s: the output lacks '%s'", what, missing);
  ex_print_file_tail("output", log, 12000);
  return 0;
}

/* --- commands ----------------------------------------------------------------------------- */

void ex_shell_append(char *buf, size_t len, const char *s) {
  size_t n = strlen(buf);
  if (n + 1 < len) buf[n++] = '\'';
  for (; *s && n + 5 < len; s++) {
    if (*s == '\'') {
      memcpy(buf + n, "'\\''", 4);
      n += 4;
    } else {
      buf[n++] = *s;
    }
  }
  if (n + 2 < len) buf[n++] = '\'';
  if (n + 1 < len) buf[n++] = ' ';
  buf[n < len ? n : len - 1] = '\0';
}

void ex_shell_command(char *buf, size_t len, ...) {
  buf[0] = '\0';
  va_list ap;
  va_start(ap, len);
  for (const char *w; (w = va_arg(ap, const char *)) != NULL;) {
    if (w[0] == '@') {
      strncat(buf, w + 1, len - strlen(buf) - 1);
      strncat(buf, " ", len - strlen(buf) - 1);
    } else {
      ex_shell_append(buf, len, w);
    }
  }
  va_end(ap);
}

int ex_run_logged(const char *name, const char *cmd, int want, char *log, size_t log_len) {
  snprintf(log, log_len, "%s/%s.log", ex.root, name);
  char *full = NULL;
  if (asprintf(&full, "%s >'%s' 2>&1", cmd, log) < 0) {
    ex_fail("%s: out of memory", name);
    return -1;
  }
  int raw = system(full);
  free(full);
  int rc = raw != -1 && WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  if (rc != want) {
    ex_fail("step '%s' exited with %d, expected %d", name, rc, want);
    printf("  command: %s\n", cmd);
    ex_print_file_tail("output", log, 12000);
  }
  return rc;
}

void ex_ganfw_command(char *cmd, size_t len, const char *const *args, int n) {
  char env[4600], quoted[4500] = "";
  ex_shell_append(quoted, sizeof quoted, ex.plugin_dir);
  snprintf(env, sizeof env, "GANFW_PLUGIN_PATH=%s", quoted);
  snprintf(cmd, len, "%s", env);
  ex_shell_append(cmd, len, ex.ganfw);
  for (int i = 0; i < n; i++) ex_shell_append(cmd, len, args[i]);
}

void ex_yaml_quoted(FILE *f, const char *s) {
  fputc('\'', f);
  for (; *s; s++) {
    if (*s == '\'') fputc('\'', f);
    fputc(*s, f);
  }
  fputc('\'', f);
}

/* --- the run's outputs -------------------------------------------------------------------- */

/* Parses "step,epoch,v0,...,v(n-1)[,...]": 1 when every field is there and numeric. */
static int parse_metrics_row(const char *line, int n, double *v) {
  const char *p = line;
  for (int skip = 0; skip < 2; skip++) {
    const char *comma = strchr(p, ',');
    if (!comma || comma == p) return 0;
    p = comma + 1;
  }
  for (int i = 0; i < n; i++) {
    char *end = NULL;
    v[i] = strtod(p, &end);
    if (end == p || (i + 1 < n && *end != ',')) return 0;
    p = end + 1;
  }
  return 1;
}

void ex_check_metrics(const char *header, int n, int (*bad_values)(const double *v),
                      const char *rule, int want_steps) {
  char path[4400];
  snprintf(path, sizeof path, "%s/metrics.csv", ex.out_dir);
  char *text = ex_read_text(path);
  if (!text) {
    ex_fail("no %s after training", path);
    return;
  }
  double *v = malloc((size_t)n * sizeof *v);
  int rows = 0, bad = 0;
  long last_step = -1;
  char *save = NULL;
  char *line = strtok_r(text, "\n", &save);
  if (!line || strncmp(line, header, strlen(header)) != 0)
    ex_fail("%s: the header is '%s', not %s...", path, line ? line : "", header);
  while (v && (line = strtok_r(NULL, "\n", &save)) != NULL) {
    rows++;
    last_step = strtol(line, NULL, 10);
    if (!parse_metrics_row(line, n, v))
      bad++;
    else
      bad += bad_values(v);
  }
  free(v);
  free(text);
  if (rows != want_steps || last_step != want_steps || bad)
    ex_fail("%s: %d rows (want %d), last step %ld, %d malformed rows or values not %s", path, rows,
            want_steps, last_step, bad, rule);
}

char *ex_list_plugins(char *log, size_t log_len) {
  char cmd[16384];
  const char *args[] = {"plugins", "--plugin-path", ex.build};
  ex_ganfw_command(cmd, sizeof cmd, args, 3);
  if (ex_run_logged("plugins", cmd, 0, log, log_len) != 0) return NULL;
  char *text = ex_read_text(log);
  if (!text) ex_fail("cannot read %s", log);
  return text;
}

int ex_listing_has(const char *text, const char *kind, const char *name, const char *version,
                   const char *path, int unshadowed) {
  for (const char *line = text; line && *line;) {
    const char *eol = strchr(line, '\n');
    size_t len = eol ? (size_t)(eol - line) : strlen(line);
    char row[8800], k[32], nm[64], ver[32], abi[16], p[4400];
    snprintf(row, sizeof row, "%.*s", (int)len, line);
    line = eol ? eol + 1 : NULL;
    if (sscanf(row, "%31s %63s %31s %15s %4399s", k, nm, ver, abi, p) != 5) continue;
    if (strcmp(k, kind) == 0 && strcmp(nm, name) == 0 && (!version || strcmp(ver, version) == 0) &&
        strcmp(p, path) == 0 && !(unshadowed && strstr(row, "shadowed")))
      return 1;
  }
  return 0;
}

/* --- the steps ---------------------------------------------------------------------------- */

static int remove_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw) {
  (void)sb, (void)flag, (void)ftw;
  return remove(path);
}

static void cleanup(void) {
  if (!ex.tmp) return;
  if (ex.failures == 0 && !getenv("GANFW_TEST_KEEP"))
    nftw(ex.root, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  else
    printf("%s: the temporary folder %s is kept for a look\n", ex.program, ex.root);
}

int ex_ensure_tmp(void) {
  if (ex.tmp) return ex.tmp == EX_STEP_OK;
  snprintf(ex.root, sizeof ex.root, "%s/%s_XXXXXX", env_or("TMPDIR", "/tmp"), ex.tmp_prefix);
  if (!mkdtemp(ex.root)) {
    ex.tmp = EX_STEP_FAILED;
    ex_fail("mkdtemp(%s) failed", ex.root);
    return 0;
  }
  ex.tmp = EX_STEP_OK;
  atexit(cleanup);
  snprintf(ex.prefix, sizeof ex.prefix, "%s/prefix", ex.root);
  snprintf(ex.build, sizeof ex.build, "%s/build", ex.root);
  snprintf(ex.config, sizeof ex.config, "%s/run.yaml", ex.root);
  snprintf(ex.out_dir, sizeof ex.out_dir, "%s/out", ex.root);
  snprintf(ex.plugin_dir, sizeof ex.plugin_dir, "%s/" EX_INSTALL_LIBDIR "/ganfw/plugins",
           ex.prefix);
  snprintf(ex.ganfw, sizeof ex.ganfw, "%s/" EX_INSTALL_BINDIR "/ganfw", ex.prefix);
  printf("\n  working in %s\n", ex.root);
  return 1;
}

int ex_ensure_installed(const char *const *expected, size_t n, int (*check)(void)) {
  if (ex.installed) return ex.installed == EX_STEP_OK;
  ex.installed = EX_STEP_FAILED;
  if (!ex_ensure_tmp()) return 0;
  char cmd[16384], log[4400];
  ex_shell_command(cmd, sizeof cmd, EX_CMAKE_COMMAND, "--install",
                   env_or("GANFW_TEST_BUILD_DIR", EX_BUILD_DIR), "--prefix", ex.prefix, NULL);
  if (ex_run_logged("install", cmd, 0, log, sizeof log) != 0) return 0;
  int ok = access(ex.ganfw, X_OK) == 0;
  if (!ok) ex_fail("the installed %s is not executable", ex.ganfw);
  for (size_t i = 0; i < n; i++) {
    char path[8800];
    snprintf(path, sizeof path, "%s%s", ex.prefix, expected[i]);
    if (!ex_file_exists(path)) {
      ex_fail("cmake --install did not put %s in the prefix", path);
      ok = 0;
    }
  }
  if (check && !check()) ok = 0;
  if (!ok) ex_print_file_tail("install output", log, 12000);
  if (ok) ex.installed = EX_STEP_OK;
  return ok;
}

int ex_ensure_built(const char *example, const char *const *made, size_t n) {
  if (ex.built) return ex.built == EX_STEP_OK;
  if (ex.installed != EX_STEP_OK) {
    ex_fail("examples/%s: built before a successful install", example);
    return 0;
  }
  ex.built = EX_STEP_FAILED;
  char src[4400], prefix_def[4400], cc_def[4400], flags_def[4400], link_def[4400];
  snprintf(src, sizeof src, "%s/examples/%s", ex_source_dir(), example);
  snprintf(prefix_def, sizeof prefix_def, "-DCMAKE_PREFIX_PATH=%s", ex.prefix);
  snprintf(cc_def, sizeof cc_def, "-DCMAKE_C_COMPILER=%s", EX_C_COMPILER);
  snprintf(flags_def, sizeof flags_def, "-DCMAKE_C_FLAGS=%s", EX_C_FLAGS);
  snprintf(link_def, sizeof link_def, "-DCMAKE_MODULE_LINKER_FLAGS=%s", EX_LINK_FLAGS);
  char cmd[16384], log[4400];
  /* No user or system package registry: the package must come from the prefix. */
  ex_shell_command(cmd, sizeof cmd, "@env -u ganfw_DIR -u CMAKE_PREFIX_PATH", EX_CMAKE_COMMAND,
                   "-S", src, "-B", ex.build, "-DCMAKE_BUILD_TYPE=Release", prefix_def, cc_def,
                   flags_def, link_def, "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF",
                   "-DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF", NULL);
  if (ex_run_logged("configure_example", cmd, 0, log, sizeof log) != 0) return 0;

  char cache_path[4400], want[4400];
  snprintf(cache_path, sizeof cache_path, "%s/CMakeCache.txt", ex.build);
  snprintf(want, sizeof want, "ganfw_DIR:PATH=%s/" EX_INSTALL_LIBDIR "/cmake/ganfw\n", ex.prefix);
  char *cache = ex_read_text(cache_path);
  int from_prefix = cache && strstr(cache, want);
  free(cache);
  if (!from_prefix) {
    ex_fail("find_package(ganfw) did not use the installed package: %s lacks '%.*s'", cache_path,
            (int)strlen(want) - 1, want);
    ex_print_file_tail("configure output", log, 12000);
    return 0;
  }

  ex_shell_command(cmd, sizeof cmd, EX_CMAKE_COMMAND, "--build", ex.build, NULL);
  if (ex_run_logged("build_example", cmd, 0, log, sizeof log) != 0) return 0;
  for (size_t i = 0; i < n; i++) {
    char so[4500];
    snprintf(so, sizeof so, "%s/%s", ex.build, made[i]);
    if (!ex_file_exists(so)) {
      ex_fail("the example's build did not make %s", so);
      ex_print_file_tail("build output", log, 12000);
      return 0;
    }
  }
  ex.built = EX_STEP_OK;
  return 1;
}

static int write_be32(FILE *f, uint32_t v) {
  const unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16),
                              (unsigned char)(v >> 8), (unsigned char)v};
  return fwrite(b, 1, 4, f) == 4;
}

int ex_write_idx(const char *name, const unsigned char *pixels, const unsigned char *labels,
                 int images, int side) {
  if (!ex_ensure_tmp()) return 0;
  char dir[4400], path[4500];
  snprintf(dir, sizeof dir, "%s/%s", ex.root, name);
  if (mkdir(dir, 0755) != 0) {
    ex_fail("cannot create %s", dir);
    return 0;
  }
  const size_t n_pixels = (size_t)images * (size_t)side * (size_t)side;
  snprintf(path, sizeof path, "%s/train-images-idx3-ubyte", dir);
  FILE *f = fopen(path, "wb");
  int ok = f && write_be32(f, 0x00000803u) && write_be32(f, (uint32_t)images) &&
           write_be32(f, (uint32_t)side) && write_be32(f, (uint32_t)side) &&
           fwrite(pixels, 1, n_pixels, f) == n_pixels;
  if (f && fclose(f) != 0) ok = 0;
  snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte", dir);
  f = ok ? fopen(path, "wb") : NULL;
  ok = ok && f && write_be32(f, 0x00000801u) && write_be32(f, (uint32_t)images) &&
       fwrite(labels, 1, (size_t)images, f) == (size_t)images;
  if (f && fclose(f) != 0) ok = 0;
  if (!ok) ex_fail("cannot write the IDX data set in %s", dir);
  return ok;
}
