/* The fault injector (see inject.h): each wrapper asks decide() whether this call counts
 * and fails, then calls the C library's function found with dlsym(RTLD_NEXT). */
#undef _FORTIFY_SOURCE /* open() is defined here, not the fortified inline */
#include "faults/inject.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { FN_OPEN, FN_WRITE, FN_FSYNC, FN_RENAME, FN_MKDIR, FN_COUNT };
static const char *const fn_names[FN_COUNT] = {"open", "write", "fsync", "rename", "mkdir"};

#define MAX_FD 4096

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int configured;
static char under[4096];
static size_t under_len; /* 0: nothing counts */
static int trace_fd = -1;
static int fault_fn = -1, fault_errno, fault_sticky;
static long fault_k;
static long counts[FN_COUNT], seq;
static char *fd_path[MAX_FD]; /* descriptors opened under the folder */
static int fd_doomed[MAX_FD]; /* errno for the next write after a short one */

static int (*real_open)(const char *, int, ...);
static int (*real_close)(int);
static ssize_t (*real_write)(int, const void *, size_t);
static int (*real_fsync)(int);
static int (*real_rename)(const char *, const char *);
static int (*real_mkdir)(const char *, mode_t);

static void resolve(void) {
  if (real_mkdir) return;
  real_open = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
  real_close = (int (*)(int))dlsym(RTLD_NEXT, "close");
  real_write = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
  real_fsync = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
  real_rename = (int (*)(const char *, const char *))dlsym(RTLD_NEXT, "rename");
  real_mkdir = (int (*)(const char *, mode_t))dlsym(RTLD_NEXT, "mkdir");
  if (!real_open || !real_close || !real_write || !real_fsync || !real_rename || !real_mkdir)
    abort();
}

static int errno_of(const char *name) {
  static const struct {
    const char *name;
    int value;
  } table[] = {{"ENOSPC", ENOSPC}, {"EIO", EIO},       {"EROFS", EROFS},
               {"EACCES", EACCES}, {"EDQUOT", EDQUOT}, {"EPERM", EPERM}};
  for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
    if (strcmp(name, table[i].name) == 0) return table[i].value;
  return 0;
}

/* "FN:K:ERRNO[:sticky]"; an unreadable plan aborts (a test's mistake). */
static void parse_spec(const char *spec) {
  fault_fn = -1;
  if (!spec || !*spec) return;
  char buf[128], *save = NULL;
  snprintf(buf, sizeof buf, "%s", spec);
  char *fn = strtok_r(buf, ":", &save), *k = strtok_r(NULL, ":", &save);
  char *err = strtok_r(NULL, ":", &save), *mode = strtok_r(NULL, ":", &save);
  for (int i = 0; fn && i < FN_COUNT; i++)
    if (strcmp(fn, fn_names[i]) == 0) fault_fn = i;
  fault_k = k ? strtol(k, NULL, 10) : 0;
  fault_errno = err ? errno_of(err) : 0;
  fault_sticky = mode && strcmp(mode, "sticky") == 0;
  if (fault_fn < 0 || fault_k < 1 || !fault_errno || (mode && !fault_sticky)) {
    fprintf(stderr, "inject: bad GANFW_FAULT '%s' (want FN:K:ERRNO[:sticky])\n", spec);
    abort();
  }
}

static void configure_locked(const char *u, const char *spec, const char *trace) {
  resolve();
  configured = 1;
  under_len = 0;
  if (u && *u) {
    snprintf(under, sizeof under, "%s", u);
    under_len = strlen(under);
    while (under_len > 1 && under[under_len - 1] == '/') under[--under_len] = '\0';
  }
  parse_spec(spec);
  if (trace_fd >= 0) real_close(trace_fd);
  trace_fd =
      trace && *trace ? real_open(trace, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
  memset(counts, 0, sizeof counts);
  seq = 0;
}

void gt_fault_configure(const char *u, const char *spec, const char *trace) {
  pthread_mutex_lock(&lock);
  configure_locked(u, spec, trace);
  pthread_mutex_unlock(&lock);
}

static void configure_once_locked(void) {
  if (!configured)
    configure_locked(getenv("GANFW_FAULT_UNDER"), getenv("GANFW_FAULT"),
                     getenv("GANFW_FAULT_TRACE"));
}

static int is_under(const char *path) {
  return under_len && path && strncmp(path, under, under_len) == 0 &&
         (path[under_len] == '/' || path[under_len] == '\0');
}

/* Whether this call of fn on `path` fails, and with which errno (*err); counts and traces
 * the calls under the folder. */
static int decide_locked(int fn, const char *path, int *err) {
  configure_once_locked();
  if (!is_under(path)) return 0;
  long k = ++counts[fn];
  ++seq;
  int fail = fn == fault_fn && (k == fault_k || (fault_sticky && k > fault_k));
  if (trace_fd >= 0) {
    char line[4400];
    int n = snprintf(line, sizeof line, "%ld %s %ld %s%s\n", seq, fn_names[fn], k, path,
                     fail ? " FAIL" : "");
    if (n > 0) (void)!real_write(trace_fd, line, (size_t)n < sizeof line ? (size_t)n : sizeof line);
  }
  if (fail) *err = fault_errno;
  return fail;
}

static int decide(int fn, const char *path, int *err) {
  pthread_mutex_lock(&lock);
  int fail = decide_locked(fn, path, err);
  pthread_mutex_unlock(&lock);
  return fail;
}

static void track(int fd, const char *path) {
  if (fd < 0 || fd >= MAX_FD) return;
  pthread_mutex_lock(&lock);
  configure_once_locked();
  free(fd_path[fd]);
  fd_path[fd] = is_under(path) ? strdup(path) : NULL;
  fd_doomed[fd] = 0;
  pthread_mutex_unlock(&lock);
}

static int open_impl(const char *path, int flags, mode_t mode) {
  resolve();
  int err = 0;
  if ((flags & (O_WRONLY | O_RDWR | O_CREAT)) && decide(FN_OPEN, path, &err)) {
    errno = err;
    return -1;
  }
  int fd = real_open(path, flags, mode);
  int saved = errno;
  track(fd, path);
  errno = saved;
  return fd;
}

int open(const char *path, int flags, ...) {
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list ap;
    va_start(ap, flags);
    mode = (mode_t)va_arg(ap, int);
    va_end(ap);
  }
  return open_impl(path, flags, mode);
}

int open64(const char *path, int flags, ...) {
  mode_t mode = 0;
  if (flags & (O_CREAT | O_TMPFILE)) {
    va_list ap;
    va_start(ap, flags);
    mode = (mode_t)va_arg(ap, int);
    va_end(ap);
  }
  return open_impl(path, flags, mode);
}

int close(int fd) {
  resolve();
  if (fd >= 0 && fd < MAX_FD) {
    pthread_mutex_lock(&lock);
    free(fd_path[fd]);
    fd_path[fd] = NULL;
    fd_doomed[fd] = 0;
    pthread_mutex_unlock(&lock);
  }
  return real_close(fd);
}

ssize_t write(int fd, const void *buf, size_t n) {
  resolve();
  int err = 0, fail = 0, doomed = 0, partial = 0;
  if (fd >= 0 && fd < MAX_FD) {
    pthread_mutex_lock(&lock);
    if (fd_path[fd]) {
      fail = decide_locked(FN_WRITE, fd_path[fd], &err);
      if (!fail && fd_doomed[fd]) {
        err = fd_doomed[fd];
        doomed = 1;
      }
      fd_doomed[fd] = 0;
      /* the first failing call writes half, and the next write to the file fails */
      partial = fail && counts[FN_WRITE] == fault_k && n > 1;
      if (partial) fd_doomed[fd] = err;
    }
    pthread_mutex_unlock(&lock);
  }
  if (partial) return real_write(fd, buf, n / 2);
  if (fail || doomed) {
    errno = err;
    return -1;
  }
  return real_write(fd, buf, n);
}

int fsync(int fd) {
  resolve();
  int err = 0, fail = 0;
  if (fd >= 0 && fd < MAX_FD) {
    pthread_mutex_lock(&lock);
    if (fd_path[fd]) fail = decide_locked(FN_FSYNC, fd_path[fd], &err);
    pthread_mutex_unlock(&lock);
  }
  if (fail) {
    errno = err;
    return -1;
  }
  return real_fsync(fd);
}

int rename(const char *from, const char *to) {
  resolve();
  int err = 0;
  if (decide(FN_RENAME, to, &err)) {
    errno = err;
    return -1;
  }
  return real_rename(from, to);
}

int mkdir(const char *path, mode_t mode) {
  resolve();
  int err = 0;
  if (decide(FN_MKDIR, path, &err)) {
    errno = err;
    return -1;
  }
  return real_mkdir(path, mode);
}
