/* The replay driver of the normal build (tests/fuzz.cmake): feeds every file of the
 * directories (or the files) named on the command line to the harness's
 * LLVMFuzzerTestOneInput, in name order, once each, so that the seed corpus and every
 * regression input run under the release and sanitizer suites without libFuzzer. A crash,
 * leak or failed check of the harness fails the test; so does an empty corpus. A harness's
 * LLVMFuzzerInitialize, when it has one, runs first, as under libFuzzer. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
/* Optional in a harness, as in libFuzzer: called once before the first input. */
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

/* Reads the whole file into a new buffer (*size bytes; free()); NULL on failure. */
static uint8_t *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  size_t cap = 4096, n = 0;
  uint8_t *buf = malloc(cap);
  while (buf) {
    n += fread(buf + n, 1, cap - n, f);
    if (n < cap) break;
    uint8_t *grown = realloc(buf, cap * 2);
    if (!grown) {
      free(buf);
      buf = NULL;
      break;
    }
    buf = grown;
    cap *= 2;
  }
  const int bad = ferror(f);
  fclose(f);
  if (bad) {
    free(buf);
    return NULL;
  }
  *size = n;
  return buf;
}

static int by_name(const void *a, const void *b) {
  return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs one input; returns 0 on success (the harness aborts on a failure). */
static int replay(const char *path, double *slowest, const char **slowest_path) {
  size_t size = 0;
  uint8_t *data = read_file(path, &size);
  if (!data) {
    fprintf(stderr, "replay: cannot read '%s'\n", path);
    return 1;
  }
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  LLVMFuzzerTestOneInput(data, size);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  free(data);
  const double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  if (s > *slowest) {
    *slowest = s;
    *slowest_path = path;
  }
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s CORPUS_DIR_OR_FILE...\n", argv[0]);
    return 2;
  }
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  long count = 0;
  int bad = 0;
  double slowest = 0.0;
  const char *slowest_path = "";
  char **names = NULL;
  size_t n_names = 0;
  for (int a = 1; a < argc; a++) {
    struct stat sb;
    if (stat(argv[a], &sb) != 0) {
      fprintf(stderr, "replay: '%s' does not exist\n", argv[a]);
      bad = 1;
      continue;
    }
    if (!S_ISDIR(sb.st_mode)) {
      bad |= replay(argv[a], &slowest, &slowest_path);
      count++;
      continue;
    }
    DIR *d = opendir(argv[a]);
    if (!d) {
      fprintf(stderr, "replay: cannot open directory '%s'\n", argv[a]);
      bad = 1;
      continue;
    }
    const struct dirent *e;
    while ((e = readdir(d)) != NULL) {
      if (e->d_name[0] == '.') continue;
      const size_t len = strlen(argv[a]) + strlen(e->d_name) + 2;
      char *p = malloc(len);
      char **grown = realloc(names, sizeof(char *) * (n_names + 1));
      if (!p || !grown) {
        fprintf(stderr, "replay: out of memory\n");
        free(p);
        free(grown ? grown : names);
        closedir(d);
        return 1;
      }
      names = grown;
      snprintf(p, len, "%s/%s", argv[a], e->d_name);
      names[n_names++] = p;
    }
    closedir(d);
  }
  if (n_names > 0) qsort(names, n_names, sizeof(char *), by_name);
  for (size_t i = 0; i < n_names; i++) {
    struct stat sb;
    if (stat(names[i], &sb) == 0 && S_ISREG(sb.st_mode)) {
      bad |= replay(names[i], &slowest, &slowest_path);
      count++;
    }
  }
  printf("replay: %ld inputs, slowest %.3f s (%s)\n", count, slowest, slowest_path);
  for (size_t i = 0; i < n_names; i++) free(names[i]);
  free(names);
  if (count == 0) {
    fprintf(stderr, "replay: no inputs found: the corpus is empty\n");
    return 1;
  }
  return bad;
}
