/* The atomic file writer (core/src/base/file.c): a file is either wholly written or left
 * as it was, with no temporary left behind, and a failure names the path; the appender
 * adds whole rows or none (faults injected with tests/faults/inject.c). */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "base/file.h"
#include "faults/inject.h"
#include "testutil.h"

static char dir[64];

static int setup(void) {
  snprintf(dir, sizeof dir, "/tmp/ganfw_test_file.XXXXXX");
  return mkdtemp(dir) ? 0 : 1;
}

static ganfw_status write_text(FILE *f, void *ud) {
  fputs((const char *)ud, f);
  return GANFW_OK;
}

static ganfw_status write_half_then_fail(FILE *f, void *ud) {
  fputs("partial", f);
  return ganfw_error_set(GANFW_ERR_IO, "the writer's own failure");
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  static char buf[256];
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = '\0';
  fclose(f);
  return buf;
}

/* Entries in dir other than `keep` and out.txt. */
static int others_in_dir(const char *keep) {
  DIR *d = opendir(dir);
  int n = 0;
  struct dirent *e;
  while (d && (e = readdir(d)) != NULL)
    if (e->d_name[0] != '.' && strcmp(e->d_name, keep) != 0 && strcmp(e->d_name, "out.txt") != 0)
      n++;
  if (d) closedir(d);
  return n;
}

static void test_writes_and_replaces(void) {
  char path[128];
  snprintf(path, sizeof path, "%s/out.txt", dir);
  CU_ASSERT_EQUAL_FATAL(ganfw_file_write_atomic(path, write_text, "first\n"), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(slurp(path), "first\n");
  CU_ASSERT_EQUAL_FATAL(ganfw_file_write_atomic(path, write_text, "second\n"), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(slurp(path), "second\n");
  struct stat sb;
  CU_ASSERT_EQUAL(stat(path, &sb), 0);
  CU_ASSERT_EQUAL(sb.st_mode & 0777, 0644);
  CU_ASSERT_EQUAL(others_in_dir("out.txt"), 0);
}

static void test_failed_writer_keeps_old_file(void) {
  char path[128];
  snprintf(path, sizeof path, "%s/out.txt", dir);
  CU_ASSERT_EQUAL_FATAL(ganfw_file_write_atomic(path, write_text, "good\n"), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_file_write_atomic(path, write_half_then_fail, NULL), GANFW_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "the writer's own failure"));
  CU_ASSERT_STRING_EQUAL(slurp(path), "good\n");
  CU_ASSERT_EQUAL(others_in_dir("out.txt"), 0); /* the temporary is gone */
}

static void test_missing_folder_names_path(void) {
  char path[128];
  snprintf(path, sizeof path, "%s/no/such/folder/out.txt", dir);
  CU_ASSERT_EQUAL(ganfw_file_write_atomic(path, write_text, "x"), GANFW_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), path));
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "writable"));
}

static void test_rename_over_folder_fails_cleanly(void) {
  char path[128];
  snprintf(path, sizeof path, "%s/sub", dir);
  CU_ASSERT_EQUAL_FATAL(mkdir(path, 0700), 0);
  char inner[160];
  snprintf(inner, sizeof inner, "%s/keep", path); /* a non-empty folder cannot be replaced */
  CU_ASSERT_EQUAL_FATAL(ganfw_file_write_atomic(inner, write_text, "k"), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_file_write_atomic(path, write_text, "x"), GANFW_ERR_IO);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), "rename"));
  CU_ASSERT_EQUAL(others_in_dir("sub"), 0); /* no temporary left beside it */
  unlink(inner);
  rmdir(path);
}

/* Only the writer's own temporaries, `<name>.tmp.XXXXXX` regular files, are removed. */
static void test_remove_stale_temporaries(void) {
  char sub[128], p[256];
  snprintf(sub, sizeof sub, "%s/stale", dir);
  CU_ASSERT_EQUAL_FATAL(mkdir(sub, 0700), 0);
  const char *files[] = {"step_00000004.safetensors.tmp.AbC123", "keep.tmp.txt", "x.tmp.12345",
                         "y.tmp.12345-", "step_00000004.safetensors"};
  for (int i = 0; i < 5; i++) {
    snprintf(p, sizeof p, "%s/%s", sub, files[i]);
    FILE *f = fopen(p, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fclose(f);
  }
  snprintf(p, sizeof p, "%s/d.tmp.ABCDEF", sub); /* a folder of that name stays */
  CU_ASSERT_EQUAL_FATAL(mkdir(p, 0700), 0);
  CU_ASSERT_EQUAL(ganfw_file_remove_stale_temporaries(sub), 1);
  snprintf(p, sizeof p, "%s/%s", sub, files[0]);
  CU_ASSERT_NOT_EQUAL(access(p, F_OK), 0);
  for (int i = 1; i < 5; i++) {
    snprintf(p, sizeof p, "%s/%s", sub, files[i]);
    CU_ASSERT_EQUAL(access(p, F_OK), 0);
    unlink(p);
  }
  snprintf(p, sizeof p, "%s/d.tmp.ABCDEF", sub);
  CU_ASSERT_EQUAL(rmdir(p), 0);
  CU_ASSERT_EQUAL(rmdir(sub), 0);
  CU_ASSERT_EQUAL(ganfw_file_remove_stale_temporaries("/nonexistent/folder"), 0);
}

/* Rows are added whole; a write that fails half-way (the injector writes half, then the
 * rest fails) is cut back, the message names the file and errno, and the next row goes
 * on after the last whole one. */
static void test_appender_whole_rows(void) {
  char path[128];
  snprintf(path, sizeof path, "%s/rows.csv", dir);
  ganfw_file_appender *a = NULL;
  gt_fault_configure(dir, NULL, NULL); /* its descriptor is watched from the open on */
  CU_ASSERT_EQUAL_FATAL(ganfw_file_append_open(path, &a), GANFW_OK);
  CU_ASSERT_STRING_EQUAL(ganfw_file_append_path(a), path);
  CU_ASSERT_EQUAL(ganfw_file_appendf(a, "%d,%s\n", 1, "one"), GANFW_OK);
  gt_fault_configure(dir, "write:1:ENOSPC", NULL);
  CU_ASSERT_EQUAL(ganfw_file_append(a, "2,two\n", 6), GANFW_ERR_IO);
  gt_fault_configure(NULL, NULL, NULL);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), path));
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), strerror(ENOSPC)));
  CU_ASSERT_STRING_EQUAL(slurp(path), "1,one\n");
  CU_ASSERT_EQUAL(ganfw_file_append(a, "3,three\n", 8), GANFW_OK);
  ganfw_file_append_close(a);
  ganfw_file_append_close(NULL);
  CU_ASSERT_STRING_EQUAL(slurp(path), "1,one\n3,three\n");
  /* reopened, rows go on at the end */
  CU_ASSERT_EQUAL_FATAL(ganfw_file_append_open(path, &a), GANFW_OK);
  CU_ASSERT_EQUAL(ganfw_file_appendf(a, "4,four\n"), GANFW_OK);
  ganfw_file_append_close(a);
  CU_ASSERT_STRING_EQUAL(slurp(path), "1,one\n3,three\n4,four\n");
  unlink(path);
  snprintf(path, sizeof path, "%s/no/such/rows.csv", dir);
  CU_ASSERT_EQUAL(ganfw_file_append_open(path, &a), GANFW_ERR_IO);
  CU_ASSERT_PTR_NULL(a);
  CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), path));
}

/* Each system call of the atomic writer failing in turn: the old file stays, no
 * temporary is left, and the message names the file and errno, not libpng-style
 * consequences of it. A failed fsync of the folder comes after the rename: the new
 * content is there, whole, and the failure still reported. */
static ganfw_status write_big(FILE *f, void *ud) {
  for (int i = 0; i < 20000; i++) fprintf(f, "line %d of the new file\n", i);
  return GANFW_OK;
}

static void test_atomic_writer_faults(void) {
  char path[128];
  snprintf(path, sizeof path, "%s/out.txt", dir);
  const char *plans[] = {"open:1:ENOSPC", "write:1:ENOSPC", "write:3:EIO:sticky",
                         "fsync:1:EIO",   "rename:1:EROFS", "fsync:2:EIO"};
  const char *errs[] = {"No space left",      "No space left", "Input/output error",
                        "Input/output error", "Read-only",     "Input/output error"};
  for (int i = 0; i < 6; i++) {
    CU_ASSERT_EQUAL_FATAL(ganfw_file_write_atomic(path, write_text, "old\n"), GANFW_OK);
    gt_fault_configure(dir, plans[i], NULL);
    ganfw_status st = ganfw_file_write_atomic(path, write_big, NULL);
    gt_fault_configure(NULL, NULL, NULL);
    CU_ASSERT_EQUAL(st, GANFW_ERR_IO);
    CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), path));
    CU_ASSERT_PTR_NOT_NULL(strstr(ganfw_error_message(), errs[i]));
    const char *now = slurp(path);
    if (i < 5) {
      CU_ASSERT_STRING_EQUAL(now, "old\n");
    } else { /* the folder's fsync: after the rename */
      CU_ASSERT_EQUAL(strncmp(now, "line 0 of the new file\n", 23), 0);
    }
    CU_ASSERT_EQUAL(others_in_dir("out.txt"), 0);
  }
}

static CU_TestInfo tests[] = {
    {"writes_and_replaces", test_writes_and_replaces},
    {"failed_writer_keeps_old_file", test_failed_writer_keeps_old_file},
    {"missing_folder_names_path", test_missing_folder_names_path},
    {"rename_over_folder_fails_cleanly", test_rename_over_folder_fails_cleanly},
    {"remove_stale_temporaries", test_remove_stale_temporaries},
    {"appender_whole_rows", test_appender_whole_rows},
    {"atomic_writer_faults", test_atomic_writer_faults},
    CU_TEST_INFO_NULL,
};

int main(void) {
  int rc = gt_run_fixture("file", tests, setup, NULL);
  char path[128];
  snprintf(path, sizeof path, "%s/out.txt", dir);
  unlink(path);
  rmdir(dir);
  return rc;
}
