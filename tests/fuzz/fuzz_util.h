/* What the reader harnesses share: one scratch directory per process (removed at exit)
 * where an input becomes the files a reader opens by path, and the split of one input into
 * several files at FZ_SEP. Header-only, so each harness still links its reader alone; it
 * builds with clang's libFuzzer and, for the replay tests, with the project's gcc flags. */
#ifndef GANFW_FUZZ_UTIL_H
#define GANFW_FUZZ_UTIL_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Separates the files of one input (folder, idx, cifar harnesses): 8 bytes that no valid
 * file of these formats needs to contain at a chosen place. */
#define FZ_SEP     "GANFWSEP"
#define FZ_SEP_LEN 8

typedef struct fz_part {
  const uint8_t *data;
  size_t size;
} fz_part;

static char fz_root[256];

/* Removes every entry of `dir` and, one level down, of its subdirectories (the harnesses
 * make no deeper ones). */
static inline void fz_clear(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  const struct dirent *e;
  char path[512];
  while ((e = readdir(d)) != NULL) {
    if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
    if (snprintf(path, sizeof path, "%s/%s", dir, e->d_name) >= (int)sizeof path) continue;
    struct stat sb;
    if (lstat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
      fz_clear(path);
      rmdir(path);
    } else {
      unlink(path);
    }
  }
  closedir(d);
}

static inline void fz_remove_root(void) {
  if (!fz_root[0]) return;
  fz_clear(fz_root);
  rmdir(fz_root);
}

/* The process's scratch directory, created on first use under $TMPDIR (or /tmp) and
 * removed at exit; aborts when it cannot be made (the harness cannot run at all). */
static inline const char *fz_dir(void) {
  if (fz_root[0]) return fz_root;
  const char *tmp = getenv("TMPDIR");
  snprintf(fz_root, sizeof fz_root, "%s/ganfw_fuzz.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
  if (!mkdtemp(fz_root)) {
    perror("fuzz: mkdtemp");
    abort();
  }
  atexit(fz_remove_root);
  return fz_root;
}

/* A path `name` inside the scratch directory, into buf. */
static inline const char *fz_path(char *buf, size_t len, const char *name) {
  if (snprintf(buf, len, "%s/%s", fz_dir(), name) >= (int)len) {
    fprintf(stderr, "fuzz: scratch path too long for '%s'\n", name);
    abort();
  }
  return buf;
}

/* Writes data[0..size) to `path` (replacing it); aborts on a write error, which is the
 * machine's fault and not the input's. */
static inline void fz_write(const char *path, const uint8_t *data, size_t size) {
  FILE *f = fopen(path, "wb");
  if (!f || (size > 0 && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
    perror(path);
    abort();
  }
}

/* Splits data at every FZ_SEP into at most `max` parts (the last one keeps the rest,
 * separators included); returns the count (>= 1). */
static inline size_t fz_split(const uint8_t *data, size_t size, fz_part *parts, size_t max) {
  size_t n = 0, start = 0;
  for (size_t i = 0; n + 1 < max && i + FZ_SEP_LEN <= size; i++) {
    /* The first byte alone first: libFuzzer hooks every memcmp, and one a byte made the
     * splitting cost more than the readers on inputs of 15 KiB. */
    if (data[i] != FZ_SEP[0] || memcmp(data + i, FZ_SEP, FZ_SEP_LEN) != 0) continue;
    parts[n].data = data + start;
    parts[n].size = i - start;
    n++;
    start = i + FZ_SEP_LEN;
    i = start - 1;
  }
  parts[n].data = data + start;
  parts[n].size = size - start;
  return n + 1;
}

/* With FUZZ_VERBOSE=1 in the environment, says what the reader made of an input (stderr):
 * "accepted" or its message; for looking at a corpus with the replay driver. */
static inline void fz_report(const char *what, int status, const char *message) {
  static int verbose = -1;
  if (verbose < 0) verbose = getenv("FUZZ_VERBOSE") && getenv("FUZZ_VERBOSE")[0] == '1';
  if (verbose) fprintf(stderr, "fuzz: %s: %s\n", what, status == 0 ? "accepted" : message);
}

/* A harness's own consistency check: a reader that accepted an input broke its promise. */
#define FZ_CHECK(cond)                                                                             \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "fuzz: %s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);               \
      abort();                                                                                     \
    }                                                                                              \
  } while (0)

#endif
