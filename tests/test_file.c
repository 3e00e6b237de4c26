/* The atomic file writer (core/src/base/file.c): a file is either wholly written or left
 * as it was, with no temporary left behind, and a failure names the path. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "base/file.h"
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

static CU_TestInfo tests[] = {
    {"writes_and_replaces", test_writes_and_replaces},
    {"failed_writer_keeps_old_file", test_failed_writer_keeps_old_file},
    {"missing_folder_names_path", test_missing_folder_names_path},
    {"rename_over_folder_fails_cleanly", test_rename_over_folder_fails_cleanly},
    {"remove_stale_temporaries", test_remove_stale_temporaries},
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
