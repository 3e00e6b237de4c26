/* The atomic file writer and the row appender (see file.h): temporary file, write(2),
 * fsync, rename, fsync of the folder; a row appended whole or cut back. */
#include "base/file.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"

/* What to do about errno `err` when writing. */
static const char *io_hint(int err) {
  switch (err) {
  case ENOSPC:
  case EDQUOT:
    return "the disk is full: free some space or point run.out_dir elsewhere";
  case EROFS:
  case EACCES:
  case EPERM:
    return "the folder is not writable: fix its permissions or point run.out_dir elsewhere";
  case EIO:
    return "the disk reported an I/O error: check it";
  case ENOENT:
  case ENOTDIR:
    return "check that the directory exists and is writable";
  default:
    return "check the disk and the folder";
  }
}

/* Records "<path>: <doing>: <strerror> (<hint>)" and returns GANFW_ERR_IO. */
static ganfw_status io_fail(const char *path, const char *doing, int err) {
  return ganfw_error_set(GANFW_ERR_IO, "%s: %s: %s (%s)", path, doing, strerror(err), io_hint(err));
}

/* Writes all of bytes[0..n) to fd; 0, or the errno of the failure (*done: bytes written). */
static int write_all(int fd, const char *bytes, size_t n, size_t *done) {
  *done = 0;
  while (*done < n) {
    ssize_t k = write(fd, bytes + *done, n - *done);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) return errno ? errno : EIO;
    if (k == 0) return EIO;
    *done += (size_t)k;
  }
  return 0;
}

/* The stream a writer fills: its bytes go to fd through write(2); the first failure's
 * errno is kept and every later write is refused (the stream then reports an error). */
typedef struct {
  int fd;
  int err;
} fd_sink;

static ssize_t sink_write(void *cookie, const char *buf, size_t n) {
  fd_sink *s = cookie;
  if (s->err) return 0;
  size_t done;
  s->err = write_all(s->fd, buf, n, &done);
  return s->err ? 0 : (ssize_t)n;
}

/* Creates `path`.tmp.XXXXXX (six letters or digits) with open(2) O_EXCL into tmp (n bytes);
 * the descriptor, or -1 with errno set. */
static int create_temporary(const char *path, char *tmp, size_t n) {
  static const char letters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
  static _Thread_local uint64_t state;
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  state ^= (uint64_t)t.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid() << 32 ^
           (uint64_t)(uintptr_t)tmp;
  if (!state) state = 1; /* xorshift stays at 0 */
  for (int attempt = 0; attempt < 100; attempt++) {
    char suffix[7];
    for (int i = 0; i < 6; i++) {
      state ^= state << 13, state ^= state >> 7, state ^= state << 17;
      suffix[i] = letters[state % (sizeof letters - 1)];
    }
    suffix[6] = '\0';
    snprintf(tmp, n, "%s.tmp.%s", path, suffix);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0 || errno != EEXIST) return fd;
  }
  errno = EEXIST;
  return -1;
}

/* fsyncs the folder that holds `path`, so that a rename into it is durable. A folder
 * that cannot be opened, or a file system that cannot fsync one, is not an error. */
static ganfw_status sync_parent(const char *path) {
  size_t n = strlen(path);
  char *dir = malloc(n + 2);
  if (!dir) return ganfw_error_set(GANFW_ERR_OOM, "%s: out of host memory", path);
  memcpy(dir, path, n + 1);
  char *slash = strrchr(dir, '/');
  if (!slash)
    strcpy(dir, ".");
  else
    *(slash == dir ? slash + 1 : slash) = '\0';
  ganfw_status st = GANFW_OK;
  int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    if (fsync(dfd) != 0 && errno != EINVAL && errno != ENOTSUP && errno != EBADF) {
      char doing[4200];
      snprintf(doing, sizeof doing, "written, but the fsync of its folder %s failed", dir);
      st = io_fail(path, doing, errno);
    }
    close(dfd);
  }
  free(dir);
  return st;
}

ganfw_status ganfw_file_write_atomic(const char *path, ganfw_file_writer write_fn, void *ud) {
  size_t n = strlen(path) + 16;
  char *tmp = malloc(n);
  if (!tmp) return ganfw_error_set(GANFW_ERR_OOM, "%s: out of host memory", path);
  int fd = create_temporary(path, tmp, n);
  if (fd < 0) {
    ganfw_status st = io_fail(path, "cannot create a temporary file beside it", errno);
    free(tmp);
    return st;
  }
  fd_sink sink = {fd, 0};
  FILE *f = fopencookie(&sink, "w", (cookie_io_functions_t){.write = sink_write});
  if (!f) {
    ganfw_status st = ganfw_error_set(GANFW_ERR_OOM, "%s: out of host memory", path);
    close(fd);
    unlink(tmp);
    free(tmp);
    return st;
  }
  setvbuf(f, NULL, _IOFBF, 1 << 16);
  ganfw_status st = write_fn(f, ud);
  int flushed = fflush(f) == 0 && !ferror(f);
  fclose(f); /* nothing left to write: the descriptor stays open */
  /* A failed write is the first failure, whatever the writer made of it (libpng's
   * "Write Error"). */
  if (sink.err)
    st = io_fail(path, "writing failed", sink.err);
  else if (st == GANFW_OK && !flushed)
    st = io_fail(path, "writing failed", EIO);
  if (st == GANFW_OK && fchmod(fd, 0644) != 0) st = io_fail(path, "cannot set its mode", errno);
  if (st == GANFW_OK && fsync(fd) != 0) st = io_fail(path, "writing failed (fsync)", errno);
  if (close(fd) != 0 && st == GANFW_OK) st = io_fail(path, "writing failed (close)", errno);
  if (st == GANFW_OK && rename(tmp, path) != 0)
    st = io_fail(path, "cannot rename the temporary file over it", errno);
  if (st != GANFW_OK)
    unlink(tmp);
  else
    st = sync_parent(path);
  free(tmp);
  return st;
}

/* `<name>.tmp.XXXXXX`: what create_temporary made of the writer's template. */
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

/* --- the appender ---------------------------------------------------------------------- */

struct ganfw_file_appender {
  int fd;
  off_t size; /* where the file ends after the last whole row */
  char path[];
};

ganfw_status ganfw_file_append_open(const char *path, ganfw_file_appender **out) {
  *out = NULL;
  size_t n = strlen(path);
  ganfw_file_appender *a = malloc(sizeof *a + n + 1);
  if (!a) return ganfw_error_set(GANFW_ERR_OOM, "%s: out of host memory", path);
  memcpy(a->path, path, n + 1);
  a->fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  struct stat sb;
  if (a->fd < 0 || fstat(a->fd, &sb) != 0) {
    ganfw_status st = io_fail(path, "cannot open it to add rows", errno);
    if (a->fd >= 0) close(a->fd);
    free(a);
    return st;
  }
  a->size = sb.st_size;
  *out = a;
  return GANFW_OK;
}

ganfw_status ganfw_file_append(ganfw_file_appender *a, const char *bytes, size_t n) {
  size_t done;
  int err = write_all(a->fd, bytes, n, &done);
  if (!err) {
    a->size += (off_t)n;
    return GANFW_OK;
  }
  ganfw_status st = io_fail(a->path, "cannot add a row", err);
  if (done > 0 && ftruncate(a->fd, a->size) != 0) {
    char msg[4096];
    snprintf(msg, sizeof msg, "%s", ganfw_error_message());
    st = ganfw_error_set(GANFW_ERR_IO, "%s; and the half row could not be cut off: %s", msg,
                         strerror(errno));
  }
  return st;
}

ganfw_status ganfw_file_appendf(ganfw_file_appender *a, const char *fmt, ...) {
  char row[16384];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(row, sizeof row, fmt, ap);
  va_end(ap);
  if (n < 0 || (size_t)n >= sizeof row)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG, "%s: a row longer than %zu bytes", a->path,
                           sizeof row - 1);
  return ganfw_file_append(a, row, (size_t)n);
}

const char *ganfw_file_append_path(const ganfw_file_appender *a) {
  return a->path;
}

void ganfw_file_append_close(ganfw_file_appender *a) {
  if (!a) return;
  close(a->fd);
  free(a);
}

int ganfw_file_read_line(const char *path, char *buf, size_t n) {
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  int ok = fgets(buf, (int)n, f) != NULL;
  fclose(f);
  return ok;
}
