/* The safetensors reader and atomic writer (core/src/io/safetensors.c): round trips of every
 * dtype and shape, and corrupt files (truncated at every length, bad header lengths, bad
 * JSON, bad offsets, unknown dtypes, random mutations) each refused with a clear message. */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "io/safetensors.h"
#include "testutil.h"

/* --- helpers ------------------------------------------------------------------------------ */
static char tmpdir_buf[4096];

static void remove_tmpdir(void) {
  rmdir(tmpdir_buf); /* empty when every test cleaned up after itself */
}

/* A private temporary directory, created on first use and removed at exit. */
static const char *tmpdir(void) {
  if (!tmpdir_buf[0]) {
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir_buf, sizeof tmpdir_buf, "%s/ganfw_st_XXXXXX", base && base[0] ? base : "/tmp");
    if (!mkdtemp(tmpdir_buf)) {
      fprintf(stderr, "test_safetensors: cannot create %s: %s\n", tmpdir_buf, strerror(errno));
      abort();
    }
    atexit(remove_tmpdir);
  }
  return tmpdir_buf;
}

static void tmp_path(char *out, size_t n, const char *name) {
  snprintf(out, n, "%s/%s", tmpdir(), name);
}

/* Number of directory entries in tmpdir other than . and .. (temporary files left behind). */
static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)))
    if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
  closedir(d);
  return n;
}

static unsigned char *read_all(const char *path, size_t *n) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  unsigned char *p = malloc((size_t)len + 1);
  *n = fread(p, 1, (size_t)len, f);
  fclose(f);
  return p;
}

static int write_all(const char *path, const void *p, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) return -1;
  size_t w = fwrite(p, 1, n, f);
  return (fclose(f) == 0 && w == n) ? 0 : -1;
}

/* A file image: 8-byte length, `header` padded with spaces to 8, then `dlen` data bytes. */
static unsigned char *make_file(const char *header, const void *data, size_t dlen, size_t *n) {
  size_t hl = strlen(header);
  size_t padded = (hl + 7) / 8 * 8;
  *n = 8 + padded + dlen;
  unsigned char *p = malloc(*n);
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)((uint64_t)padded >> (8 * i));
  memcpy(p + 8, header, hl);
  memset(p + 8 + hl, ' ', padded - hl);
  if (dlen) memcpy(p + 8 + padded, data, dlen);
  return p;
}

/* Asserts that the image is refused as corrupt with a message containing `why`. */
static void expect_corrupt_image(const unsigned char *p, size_t n, const char *why) {
  ganfw_st_file *f = (ganfw_st_file *)&f; /* must be reset to NULL */
  ganfw_error_clear();
  ganfw_status st = ganfw_st_open_memory(p, (int64_t)n, "mem.safetensors", &f);
  const char *msg = ganfw_error_message();
  int ok = st == GANFW_ERR_IO && f == NULL &&
           strstr(msg, "mem.safetensors: corrupt safetensors file: ") == msg &&
           strstr(msg, why) != NULL;
  if (!ok) printf("\n  expected \"%s\", got status %d: %s\n", why, (int)st, msg);
  CU_ASSERT(ok);
  if (st == GANFW_OK) ganfw_st_close(f);
}

static void expect_corrupt(const char *header, const void *data, size_t dlen, const char *why) {
  size_t n;
  unsigned char *p = make_file(header, data, dlen, &n);
  expect_corrupt_image(p, n, why);
  free(p);
}

static ganfw_st_file *open_image(const char *header, const void *data, size_t dlen) {
  size_t n;
  unsigned char *p = make_file(header, data, dlen, &n);
  ganfw_st_file *f = NULL;
  ganfw_status st = ganfw_st_open_memory(p, (int64_t)n, "mem", &f);
  if (st != GANFW_OK) printf("\n  unexpected failure: %s\n", ganfw_error_message());
  free(p);
  return f;
}

/* A small valid file with metadata and three dtypes, written by our writer. */
static unsigned char *small_valid_file(size_t *n) {
  char path[4200];
  tmp_path(path, sizeof path, "small.safetensors");
  ganfw_st_writer *w = ganfw_st_writer_create();
  float a[6] = {1, 2, 3, 4, 5, 6};
  uint16_t h[3] = {0x3c00, 0x4000, 0xc000};
  uint8_t b[5] = {1, 2, 3, 4, 5};
  int64_t sa[2] = {2, 3}, sh[1] = {3}, sb[1] = {5};
  ganfw_st_writer_add(w, "a", GANFW_DTYPE_F32, 2, sa, a);
  ganfw_st_writer_add(w, "h", GANFW_DTYPE_F16, 1, sh, h);
  ganfw_st_writer_add(w, "b", GANFW_DTYPE_U8, 1, sb, b);
  ganfw_st_writer_metadata(w, "k", "v");
  ganfw_status st = ganfw_st_writer_write(w, path);
  ganfw_st_writer_destroy(w);
  CU_ASSERT_EQUAL(st, GANFW_OK);
  unsigned char *p = read_all(path, n);
  remove(path);
  return p;
}

/* --- round trips ------------------------------------------------------------------------- */
static void test_roundtrip_all_dtypes(void) {
  char path[4200];
  tmp_path(path, sizeof path, "rt.safetensors");
  float f32[2 * 3 * 4];
  gt_fill_uniform(f32, 24, -2.0f, 2.0f, 7);
  uint16_t f16[5] = {0x0000, 0x3c00, 0x7bff, 0x8001, 0x7e00};
  uint16_t bf16[4] = {0x3f80, 0xbf80, 0x7f80, 0x0001};
  int32_t i32[3] = {INT32_MIN, 0, INT32_MAX};
  uint8_t u8[7] = {0, 1, 2, 127, 128, 254, 255};
  float scalar = 3.5f;
  int64_t s8[8] = {1, 2, 1, 1, 1, 1, 3, 1};
  float e8[6] = {1, 2, 3, 4, 5, 6};
  int64_t s_f32[3] = {2, 3, 4}, s_f16[1] = {5}, s_bf16[2] = {2, 2}, s_i32[1] = {3},
          s_u8[2] = {7, 1}, s_empty[2] = {0, 4};

  ganfw_st_writer *w = ganfw_st_writer_create();
  CU_ASSERT_PTR_NOT_NULL_FATAL(w);
  /* u8 first: the writer must still align the wider dtypes after it. */
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "u8", GANFW_DTYPE_U8, 2, s_u8, u8), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "layer.0.weight", GANFW_DTYPE_F32, 3, s_f32, f32),
                  GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "f16", GANFW_DTYPE_F16, 1, s_f16, f16), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_writer_add_borrowed(w, "bf16", GANFW_DTYPE_BF16, 2, s_bf16, bf16),
                  GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "i32", GANFW_DTYPE_I32, 1, s_i32, i32), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "scalar", GANFW_DTYPE_F32, 0, NULL, &scalar), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "empty", GANFW_DTYPE_F32, 2, s_empty, NULL), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "eight_dims", GANFW_DTYPE_F32, 8, s8, e8), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "odd \"name\"\\\n\xc3\xbc", GANFW_DTYPE_U8, 1, s_i32, u8),
                  GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_writer_metadata(w, "step", "1"), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_writer_metadata(w, "format", "pt"), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_writer_metadata(w, "step", "42"), GANFW_OK); /* replaces */
  CU_ASSERT_EQUAL(ganfw_st_writer_metadata(w, "quote\"\t", "\x01 tab\t"), GANFW_OK);
  /* The copy was taken at add time: changing the source must not change the file. */
  float keep0 = f32[0];
  f32[0] = 1e30f;
  CU_ASSERT_EQUAL(ganfw_st_writer_write(w, path), GANFW_OK);
  f32[0] = keep0;
  ganfw_st_writer_destroy(w);
  CU_ASSERT_EQUAL(count_entries(tmpdir()), 1); /* no temporary file left */

  size_t n = 0;
  unsigned char *raw = read_all(path, &n);
  CU_ASSERT_PTR_NOT_NULL_FATAL(raw);
  uint64_t hlen = 0;
  for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | raw[i];
  CU_ASSERT_EQUAL(hlen % 8, 0);
  CU_ASSERT_EQUAL(raw[8], '{');
  free(raw);

  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path, &f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_count(f), 9);
  struct {
    const char *name;
    int32_t dtype, ndim;
    const int64_t *shape;
    const void *data;
    int64_t nbytes;
  } want[] = {
      {"u8", GANFW_DTYPE_U8, 2, s_u8, u8, 7},
      {"layer.0.weight", GANFW_DTYPE_F32, 3, s_f32, f32, 96},
      {"f16", GANFW_DTYPE_F16, 1, s_f16, f16, 10},
      {"bf16", GANFW_DTYPE_BF16, 2, s_bf16, bf16, 8},
      {"i32", GANFW_DTYPE_I32, 1, s_i32, i32, 12},
      {"scalar", GANFW_DTYPE_F32, 0, NULL, &scalar, 4},
      {"empty", GANFW_DTYPE_F32, 2, s_empty, NULL, 0},
      {"eight_dims", GANFW_DTYPE_F32, 8, s8, e8, 24},
      {"odd \"name\"\\\n\xc3\xbc", GANFW_DTYPE_U8, 1, s_i32, u8, 3},
  };
  int64_t total = 0;
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
    const ganfw_st_tensor *t = ganfw_st_find(f, want[i].name);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_STRING_EQUAL(t->name, want[i].name);
    CU_ASSERT_EQUAL(t->dtype, want[i].dtype);
    CU_ASSERT_STRING_EQUAL(t->dtype_name, ganfw_st_dtype_name(want[i].dtype));
    CU_ASSERT_EQUAL(t->ndim, want[i].ndim);
    for (int d = 0; d < t->ndim; d++) CU_ASSERT_EQUAL(t->shape[d], want[i].shape[d]);
    CU_ASSERT_EQUAL(t->nbytes, want[i].nbytes);
    CU_ASSERT_EQUAL(t->numel * t->elem_size, t->nbytes);
    CU_ASSERT_EQUAL((uintptr_t)t->data % (uintptr_t)t->elem_size, 0);
    if (want[i].nbytes > 0)
      CU_ASSERT_EQUAL(memcmp(t->data, want[i].data, (size_t)want[i].nbytes), 0);
    total += t->nbytes;
  }
  /* ganfw_st_at walks the tensors in file order, by decreasing element size. */
  int64_t last_size = 8;
  for (int64_t i = 0; i < ganfw_st_count(f); i++) {
    const ganfw_st_tensor *t = ganfw_st_at(f, i);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT(t->elem_size <= last_size);
    last_size = t->elem_size;
    total -= t->nbytes;
  }
  CU_ASSERT_EQUAL(total, 0);
  CU_ASSERT_PTR_NULL(ganfw_st_at(f, -1));
  CU_ASSERT_PTR_NULL(ganfw_st_at(f, 9));
  CU_ASSERT_PTR_NULL(ganfw_st_find(f, "nope"));
  CU_ASSERT_EQUAL(ganfw_st_metadata_count(f), 3);
  CU_ASSERT_STRING_EQUAL(ganfw_st_metadata(f, "step"), "42");
  CU_ASSERT_STRING_EQUAL(ganfw_st_metadata(f, "format"), "pt");
  CU_ASSERT_STRING_EQUAL(ganfw_st_metadata(f, "quote\"\t"), "\x01 tab\t");
  CU_ASSERT_STRING_EQUAL(ganfw_st_metadata_key(f, 0), "step");
  CU_ASSERT_STRING_EQUAL(ganfw_st_metadata_value(f, 1), "pt");
  CU_ASSERT_PTR_NULL(ganfw_st_metadata_key(f, 3));
  CU_ASSERT_PTR_NULL(ganfw_st_metadata(f, "missing"));
  ganfw_st_close(f);
  ganfw_st_close(NULL);
  remove(path);
}

/* Overwriting an existing file replaces it; an empty writer writes a valid empty file. */
static void test_overwrite_and_empty(void) {
  char path[4200];
  tmp_path(path, sizeof path, "ow.safetensors");
  ganfw_st_writer *w = ganfw_st_writer_create();
  int32_t v[2] = {1, 2};
  int64_t s[1] = {2};
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "v", GANFW_DTYPE_I32, 1, s, v), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_writer_write(w, path), GANFW_OK);
  ganfw_st_writer_destroy(w);
  w = ganfw_st_writer_create();
  CU_ASSERT_EQUAL(ganfw_st_writer_write(w, path), GANFW_OK);
  ganfw_st_writer_destroy(w);
  ganfw_st_writer_destroy(NULL);
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path, &f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_count(f), 0);
  CU_ASSERT_EQUAL(ganfw_st_metadata_count(f), 0);
  ganfw_st_close(f);
  size_t n = 0;
  unsigned char *raw = read_all(path, &n);
  CU_ASSERT_EQUAL(n, 16); /* length + "{}" padded to 8 */
  free(raw);
  CU_ASSERT_EQUAL(count_entries(tmpdir()), 1);
  remove(path);
}

static void test_writer_rejects_bad_arguments(void) {
  ganfw_st_writer *w = ganfw_st_writer_create();
  float x[4] = {0};
  int64_t s1[1] = {4}, neg[1] = {-1}, s9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 4};
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "x", GANFW_DTYPE_F32, 1, s1, x), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "x", GANFW_DTYPE_F32, 1, s1, x), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "\"x\" added twice"));
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "", GANFW_DTYPE_F32, 1, s1, x), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "__metadata__", GANFW_DTYPE_F32, 1, s1, x),
                  GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "d", GANFW_DTYPE_COUNT, 1, s1, x), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "unknown dtype"));
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "d", -1, 1, s1, x), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "n", GANFW_DTYPE_F32, 1, neg, x), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "n", GANFW_DTYPE_F32, 9, s9, x), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "n", GANFW_DTYPE_F32, 1, s1, NULL), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "bad\xff", GANFW_DTYPE_F32, 1, s1, x),
                  GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(ganfw_st_writer_metadata(w, "k", "\xc3"), GANFW_ERR_INVALID_ARG);
  CU_ASSERT_EQUAL(ganfw_st_writer_metadata(w, NULL, "v"), GANFW_ERR_INVALID_ARG);
  /* None of the refused calls changed what gets written. */
  char path[4200];
  tmp_path(path, sizeof path, "args.safetensors");
  CU_ASSERT_EQUAL(ganfw_st_writer_write(w, path), GANFW_OK);
  ganfw_st_writer_destroy(w);
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL_FATAL(ganfw_st_open(path, &f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_count(f), 1);
  CU_ASSERT_EQUAL(ganfw_st_metadata_count(f), 0);
  ganfw_st_close(f);
  remove(path);
}

/* --- atomic writing -------------------------------------------------------------------- */
static void test_write_failures_leave_target_untouched(void) {
  float x[4] = {1, 2, 3, 4};
  int64_t s[1] = {4};
  ganfw_st_writer *w = ganfw_st_writer_create();
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "x", GANFW_DTYPE_F32, 1, s, x), GANFW_OK);

  /* A missing directory: an I/O error naming the path, nothing created. */
  char path[4200];
  tmp_path(path, sizeof path, "no/such/dir/ckpt.safetensors");
  CU_ASSERT_EQUAL(ganfw_st_writer_write(w, path), GANFW_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), path));
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "directory"));
  CU_ASSERT_EQUAL(count_entries(tmpdir()), 0);

  /* The target is a directory: rename fails, the directory stays, no temporary is left. */
  tmp_path(path, sizeof path, "isdir.safetensors");
  CU_ASSERT_EQUAL_FATAL(mkdir(path, 0755), 0);
  CU_ASSERT_EQUAL(ganfw_st_writer_write(w, path), GANFW_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "rename"));
  struct stat st;
  CU_ASSERT(stat(path, &st) == 0 && S_ISDIR(st.st_mode));
  CU_ASSERT_EQUAL(count_entries(tmpdir()), 1);
  rmdir(path);

  /* A write that fails half-way (file size limit, as on a full disk): the old file stays. */
  tmp_path(path, sizeof path, "keep.safetensors");
  const char old[] = "previous checkpoint";
  CU_ASSERT_EQUAL_FATAL(write_all(path, old, sizeof old), 0);
  enum { BIG = 1 << 16 };
  float *big = gt_alloc(BIG * sizeof(float));
  int64_t sb[1] = {BIG};
  CU_ASSERT_EQUAL(ganfw_st_writer_add(w, "big", GANFW_DTYPE_F32, 1, sb, big), GANFW_OK);
  struct rlimit saved, lim;
  CU_ASSERT_EQUAL_FATAL(getrlimit(RLIMIT_FSIZE, &saved), 0);
  void (*prev)(int) = signal(SIGXFSZ, SIG_IGN);
  lim = saved;
  lim.rlim_cur = 4096;
  CU_ASSERT_EQUAL_FATAL(setrlimit(RLIMIT_FSIZE, &lim), 0);
  ganfw_status rc = ganfw_st_writer_write(w, path);
  setrlimit(RLIMIT_FSIZE, &saved);
  signal(SIGXFSZ, prev);
  CU_ASSERT_EQUAL(rc, GANFW_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "writing failed"));
  size_t n = 0;
  unsigned char *now = read_all(path, &n);
  CU_ASSERT(now && n == sizeof old && memcmp(now, old, n) == 0);
  free(now);
  CU_ASSERT_EQUAL(count_entries(tmpdir()), 1);
  /* Without the limit the same writer succeeds and replaces the file. */
  CU_ASSERT_EQUAL(ganfw_st_writer_write(w, path), GANFW_OK);
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL(ganfw_st_open(path, &f), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_st_count(f), 2);
  ganfw_st_close(f);
  CU_ASSERT_EQUAL(count_entries(tmpdir()), 1);
  remove(path);
  gt_free(big);
  ganfw_st_writer_destroy(w);
}

/* --- corrupt files ----------------------------------------------------------------------- */
static void test_open_errors(void) {
  char path[4200];
  tmp_path(path, sizeof path, "missing.safetensors");
  ganfw_st_file *f = (ganfw_st_file *)&f;
  CU_ASSERT_EQUAL(ganfw_st_open(path, &f), GANFW_ERR_IO);
  CU_ASSERT_PTR_NULL(f);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), path));
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "cannot open"));
  CU_ASSERT_EQUAL(ganfw_st_open(tmpdir(), &f), GANFW_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), tmpdir()));
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "is a directory, not a safetensors file"));
}

/* Every proper prefix of a valid file is refused, from memory and from disk. */
static void test_every_truncation_refused(void) {
  size_t n = 0;
  unsigned char *p = small_valid_file(&n);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  CU_ASSERT(n > 64);
  ganfw_st_file *f = NULL;
  CU_ASSERT_EQUAL(ganfw_st_open_memory(p, (int64_t)n, "mem", &f), GANFW_OK);
  ganfw_st_close(f);
  char path[4200];
  tmp_path(path, sizeof path, "trunc.safetensors");
  int refused = 0;
  for (size_t len = 0; len < n; len++) {
    expect_corrupt_image(p, len, "");
    CU_ASSERT_EQUAL_FATAL(write_all(path, p, len), 0);
    f = NULL;
    ganfw_status st = ganfw_st_open(path, &f);
    refused += st == GANFW_ERR_IO && f == NULL &&
               strstr(ganfw_error_message(), "corrupt safetensors file") != NULL;
    if (f) ganfw_st_close(f);
  }
  CU_ASSERT_EQUAL(refused, (int)n);
  /* One byte too many is refused as well. */
  unsigned char *q = malloc(n + 1);
  memcpy(q, p, n);
  q[n] = 0;
  expect_corrupt_image(q, n + 1, "1 bytes after the last tensor");
  free(q);
  remove(path);
  free(p);
}

static void test_bad_header_length(void) {
  size_t n = 0;
  unsigned char *p = small_valid_file(&n);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  expect_corrupt_image(p, 7, "shorter than the 8-byte header length");
  unsigned char *q = malloc(n);
  uint64_t lens[] = {n - 7, n, (uint64_t)1 << 40, UINT64_MAX, 0, 1, (uint64_t)200 << 20};
  for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
    memcpy(q, p, n);
    for (int b = 0; b < 8; b++) q[b] = (unsigned char)(lens[i] >> (8 * b));
    expect_corrupt_image(q, n, "header length");
  }
  /* A header length shorter than the JSON: the header ends inside it. */
  memcpy(q, p, n);
  q[0] = 16;
  for (int b = 1; b < 8; b++) q[b] = 0;
  expect_corrupt_image(q, n, "header byte");
  free(q);
  free(p);
}

static void test_bad_json_refused(void) {
  const unsigned char d4[4] = {0, 0, 128, 63};
  static const struct {
    const char *header, *why;
  } cases[] = {
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", "expected ',' or '}'"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},}", "expected a string"},
      {"{'a':{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", "expected a string"},
      {"{\"a\" {\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", "expected ':'"},
      {"[\"a\"]", "expected '{'"},
      {"  ", "header byte 8: expected '{'"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", "fraction"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1e0],\"data_offsets\":[0,4]}}", "exponent"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}", "leading zero"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", "negative dimension"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[+1],\"data_offsets\":[0,4]}}", "expected an integer"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[99999999999999999999],\"data_offsets\":[0,4]}}",
       "out of range"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,],\"data_offsets\":[0,4]}}", "expected an integer"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}",
       "too many elements"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,4]}}", "too many elements"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4]}}", "[begin, end]"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"x\":1}}",
       "unknown field \"x\""},
      {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
       "duplicate field \"dtype\""},
      {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", "missing \"shape\""},
      {"{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", "missing \"dtype\""},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", "missing \"data_offsets\""},
      {"{\"a\":{\"dtype\":F32,\"shape\":[1],\"data_offsets\":[0,4]}}", "expected a string"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} x", "trailing bytes"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}{}", "trailing bytes"},
      {"{\"a\":true}", "expected '{'"},
      {"{\"a\":null}", "expected '{'"},
      {"{\"__metadata__\":{\"k\":1},\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,"
       "4]}}",
       "values must be strings"},
      {"{\"__metadata__\":{\"k\":\"v\",\"k\":\"w\"},\"a\":{\"dtype\":\"F32\",\"shape\":[1],"
       "\"data_offsets\":[0,4]}}",
       "duplicate key"},
      {"{\"__metadata__\":{},\"__metadata__\":{},\"a\":{\"dtype\":\"F32\",\"shape\":[1],"
       "\"data_offsets\":[0,4]}}",
       "duplicate \"__metadata__\""},
      {"{\"a\\x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", "unknown escape"},
      {"{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", "invalid UTF-8"},
      {"{\"a\xc0\xaf\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", "invalid UTF-8"},
      {"{\"a\xed\xa0\x80\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
       "invalid UTF-8"},
      {"{\"a\tb\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", "control character"},
      {"{\"a\\ud800\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", "high surrogate"},
      {"{\"a\\udc00\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
       "lone low surrogate"},
      {"{\"a\\u00g0\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", "bad hex digit"},
      {"{\"a\\u0000\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", "NUL"},
      {"{\"\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", "empty tensor name"},
      {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},\"a\":{\"dtype\":\"U8\","
       "\"shape\":[0],\"data_offsets\":[4,4]}}",
       "duplicate tensor \"a\""},
      {"{\"a", "unterminated string"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    expect_corrupt(cases[i].header, d4, 4, cases[i].why);
}

static void test_bad_offsets_refused(void) {
  unsigned char d[12] = {0};
  expect_corrupt("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", d, 0,
                 "ends at byte 4 of a 0-byte data section");
  expect_corrupt("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", d, 12,
                 "gap in the data before tensor \"a\"");
  expect_corrupt("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                 "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                 d, 8, "overlaps");
  expect_corrupt("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", d, 4,
                 "span 4 bytes but F32 of its shape needs 8");
  expect_corrupt("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", d, 4,
                 "bad data_offsets [4, 0]");
  expect_corrupt("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[-4,0]}}", d, 4,
                 "bad data_offsets");
  expect_corrupt("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", d, 12,
                 "8 bytes after the last tensor");
  expect_corrupt("{}", d, 4, "4 bytes after the last tensor");
  expect_corrupt("{\"a\":{\"dtype\":\"F64\",\"shape\":[4611686018427387904,4],"
                 "\"data_offsets\":[0,8]}}",
                 d, 8, "shape too large");
}

static void test_dtypes_known_and_unknown(void) {
  const unsigned char d[8] = {1, 0, 2, 0, 3, 0, 4, 0};
  expect_corrupt("{\"a\":{\"dtype\":\"Q7\",\"shape\":[8],\"data_offsets\":[0,8]}}", d, 8,
                 "tensor \"a\": unknown dtype \"Q7\"");
  expect_corrupt("{\"a\":{\"dtype\":\"f32\",\"shape\":[2],\"data_offsets\":[0,8]}}", d, 8,
                 "unknown dtype \"f32\"");
  /* Valid safetensors dtypes that ganfw has no GANFW_DTYPE_* for are readable as bytes. */
  ganfw_st_file *f =
      open_image("{\"a\":{\"dtype\":\"I16\",\"shape\":[2,2],\"data_offsets\":[0,8]}}", d, 8);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  const ganfw_st_tensor *t = ganfw_st_find(f, "a");
  CU_ASSERT_PTR_NOT_NULL_FATAL(t);
  CU_ASSERT_EQUAL(t->dtype, GANFW_ST_DTYPE_OTHER);
  CU_ASSERT_STRING_EQUAL(t->dtype_name, "I16");
  CU_ASSERT_EQUAL(t->elem_size, 2);
  CU_ASSERT_EQUAL(t->numel, 4);
  CU_ASSERT_EQUAL(((const int16_t *)t->data)[3], 4);
  ganfw_st_close(f);
  const char *names[] = {"F32", "F16", "BF16", "I32", "U8"};
  for (int i = 0; i < GANFW_DTYPE_COUNT; i++)
    CU_ASSERT_STRING_EQUAL(ganfw_st_dtype_name(i), names[i]);
  CU_ASSERT_PTR_NULL(ganfw_st_dtype_name(GANFW_DTYPE_COUNT));
  CU_ASSERT_PTR_NULL(ganfw_st_dtype_name(-1));
}

/* Hand-written headers that are valid: escapes, whitespace, misaligned data. */
static void test_valid_handwritten_headers(void) {
  unsigned char d[9] = {7, 0, 0, 128, 63, 0, 0, 0, 64}; /* u8 7, then f32 1.0, 2.0 misaligned */
  ganfw_st_file *f = open_image(
      " \n{ \"\\u00fc\\ud83d\\ude00\\/\\b\" : {\"shape\": [ 1 ] ,\"dtype\":\"U8\", "
      "\"data_offsets\":[0,1]},\t\"w\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[1,9]}"
      ",\"__metadata__\":{\"\\\"\":\"\\n\"}}\r\n",
      d, 9);
  CU_ASSERT_PTR_NOT_NULL_FATAL(f);
  const ganfw_st_tensor *t = ganfw_st_find(f, "\xc3\xbc\xf0\x9f\x98\x80/\b");
  CU_ASSERT_PTR_NOT_NULL(t);
  if (t) CU_ASSERT_EQUAL(((const uint8_t *)t->data)[0], 7);
  const ganfw_st_tensor *w = ganfw_st_find(f, "w");
  CU_ASSERT_PTR_NOT_NULL_FATAL(w);
  CU_ASSERT_EQUAL((uintptr_t)w->data % 4, 0); /* copied to an aligned buffer */
  CU_ASSERT_EQUAL(((const float *)w->data)[0], 1.0f);
  CU_ASSERT_EQUAL(((const float *)w->data)[1], 2.0f);
  CU_ASSERT_STRING_EQUAL(ganfw_st_metadata(f, "\""), "\n");
  ganfw_st_close(f);
}

/* Random byte flips in a valid file: each result is either refused with a message, or a
 * file whose tensors tile the data section exactly. ASan/UBSan catch any overrun. */
static void test_random_mutations(void) {
  size_t n = 0;
  unsigned char *p = small_valid_file(&n);
  CU_ASSERT_PTR_NOT_NULL_FATAL(p);
  unsigned char *q = malloc(n);
  uint64_t s = 12345;
  int refused = 0, accepted = 0, consistent = 0;
  for (int iter = 0; iter < 5000; iter++) {
    memcpy(q, p, n);
    int flips = 1 + iter % 3;
    for (int k = 0; k < flips; k++) {
      s ^= s << 13;
      s ^= s >> 7;
      s ^= s << 17;
      size_t at = (size_t)(s % n);
      q[at] = (unsigned char)(s >> 32);
    }
    ganfw_st_file *f = NULL;
    ganfw_status st = ganfw_st_open_memory(q, (int64_t)n, "m", &f);
    if (st != GANFW_OK) {
      refused += strstr(ganfw_error_message(), "corrupt safetensors file") != NULL;
      continue;
    }
    accepted++;
    uint64_t hlen = 0;
    for (int b = 7; b >= 0; b--) hlen = (hlen << 8) | q[b];
    int64_t total = 0;
    int ok = 1;
    for (int64_t i = 0; i < ganfw_st_count(f); i++) {
      const ganfw_st_tensor *t = ganfw_st_at(f, i);
      total += t->nbytes;
      ok &= t->ndim >= 0 && t->ndim <= GANFW_ST_MAX_DIMS && t->numel * t->elem_size == t->nbytes;
    }
    consistent += ok && total == (int64_t)(n - 8 - hlen);
    ganfw_st_close(f);
  }
  CU_ASSERT_EQUAL(refused + accepted, 5000);
  CU_ASSERT_EQUAL(consistent, accepted);
  CU_ASSERT(refused > 1000); /* most mutations break something */
  free(q);
  free(p);
}

/* A header of many metadata keys costs n log n to check for duplicates, not n^2: 300000
 * keys (a 5 MB header; 4.5e10 comparisons the quadratic way) open in well under the
 * 10 s allowed, and a key repeated at the end is refused naming it. */
static void test_many_metadata_keys(void) {
  enum { KEYS = 300000 };
  const size_t cap = (size_t)KEYS * 20 + 64;
  char *h = malloc(cap);
  CU_ASSERT_FATAL(h != NULL);
  for (int dup = 0; dup < 2; dup++) {
    size_t n = (size_t)snprintf(h, cap, "{\"__metadata__\":{");
    for (int i = 0; i < KEYS; i++)
      n += (size_t)snprintf(h + n, cap - n, "%s\"k%d\":\"\"", i ? "," : "",
                            dup && i == KEYS - 1 ? 7 : i);
    snprintf(h + n, cap - n, "}}");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (!dup) {
      ganfw_st_file *f = open_image(h, NULL, 0);
      CU_ASSERT_EQUAL(ganfw_st_metadata_count(f), KEYS);
      CU_ASSERT_STRING_EQUAL(ganfw_st_metadata_key(f, KEYS - 1), "k299999");
      ganfw_st_close(f);
    } else {
      expect_corrupt(h, NULL, 0, "duplicate key \"k7\" in \"__metadata__\"");
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CU_ASSERT((double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec) < 10.0);
  }
  free(h);
}

static CU_TestInfo tests[] = {
    {"roundtrip_all_dtypes", test_roundtrip_all_dtypes},
    {"overwrite_and_empty", test_overwrite_and_empty},
    {"writer_rejects_bad_arguments", test_writer_rejects_bad_arguments},
    {"write_failures_leave_target_untouched", test_write_failures_leave_target_untouched},
    {"open_errors", test_open_errors},
    {"every_truncation_refused", test_every_truncation_refused},
    {"bad_header_length", test_bad_header_length},
    {"bad_json_refused", test_bad_json_refused},
    {"bad_offsets_refused", test_bad_offsets_refused},
    {"dtypes_known_and_unknown", test_dtypes_known_and_unknown},
    {"valid_handwritten_headers", test_valid_handwritten_headers},
    {"random_mutations", test_random_mutations},
    {"many_metadata_keys", test_many_metadata_keys},
    CU_TEST_INFO_NULL,
};

GT_MAIN("safetensors", tests)
