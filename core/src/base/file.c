/* The atomic file writer (see file.h): temporary file, flush, fsync, rename, fsync of the
 * directory. */
#include "base/file.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"

/* fsyncs the directory that holds `path`, so that a rename into it is durable. */
static void sync_parent(const char *path) {
  size_t n = strlen(path);
  char *dir = malloc(n + 2);
  if (!dir) return;
  memcpy(dir, path, n + 1);
  char *slash = strrchr(dir, '/');
  if (!slash)
    strcpy(dir, ".");
  else
    *(slash == dir ? slash + 1 : slash) = '\0';
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)fsync(dfd);
    close(dfd);
  }
  free(dir);
}

ganfw_status ganfw_file_write_atomic(const char *path, ganfw_file_writer write, void *ud) {
  size_t n = strlen(path);
  char *tmp = malloc(n + 16);
  if (!tmp) return ganfw_error_set(GANFW_ERR_OOM, "%s: out of host memory", path);
  snprintf(tmp, n + 16, "%s.tmp.XXXXXX", path);
  int fd = mkostemp(tmp, O_CLOEXEC);
  if (fd < 0) {
    ganfw_status st = ganfw_error_set(GANFW_ERR_IO,
                                      "%s: cannot create a temporary file in its directory: "
                                      "%s (check that the directory exists and is writable)",
                                      path, strerror(errno));
    free(tmp);
    return st;
  }
  FILE *f = fdopen(fd, "wb");
  if (!f) {
    ganfw_status st = ganfw_error_set(GANFW_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    close(fd);
    unlink(tmp);
    free(tmp);
    return st;
  }
  ganfw_status st = write(f, ud);
  int err = 0;
  if (fflush(f) != 0 || ferror(f)) err = errno ? errno : EIO;
  if (!err && (fchmod(fd, 0644) != 0 || fsync(fd) != 0)) err = errno;
  if (fclose(f) != 0 && !err) err = errno;
  if (st == GANFW_OK && err)
    st = ganfw_error_set(GANFW_ERR_IO, "%s: writing failed: %s (disk full, or not writable?)", path,
                         strerror(err));
  if (st == GANFW_OK && rename(tmp, path) != 0)
    st = ganfw_error_set(GANFW_ERR_IO, "%s: cannot rename the temporary file over it: %s", path,
                         strerror(errno));
  if (st != GANFW_OK)
    unlink(tmp);
  else
    sync_parent(path);
  free(tmp);
  return st;
}

/* `<name>.tmp.XXXXXX`: what mkostemp made of the writer's template. */
static int is_temporary_name(const char *name) {
  size_t n = strlen(name);
  if (n < 12 || strncmp(name + n - 11, ".tmp.", 5) != 0) return 0;
  for (size_t i = n - 6; i < n; i++)
    if (!isalnum((unsigned char)name[i])) return 0;
  return 1;
}

int64_t ganfw_file_remove_stale_temporaries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int64_t removed = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (!is_temporary_name(e->d_name)) continue;
    size_t n = strlen(dir) + strlen(e->d_name) + 2;
    char *path = malloc(n);
    if (!path) break;
    snprintf(path, n, "%s/%s", dir, e->d_name);
    struct stat sb;
    if (lstat(path, &sb) == 0 && S_ISREG(sb.st_mode) && unlink(path) == 0) removed++;
    free(path);
  }
  closedir(d);
  return removed;
}
