/* OpenBLAS's per-thread buffers (see blas_buffers.h). */
#include "backend/cpu/blas_buffers.h"

#include <errno.h>
#include <omp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/error.h"

/* OpenBLAS's buffer allocator (GotoBLAS's, exported by every OpenBLAS build): the buffer a
 * thread's products pack their panels into. */
void *blas_memory_alloc(int procpos);
void blas_memory_free(void *buffer);

/* VmSize and VmData of /proc/self/status in bytes (async-signal-safe enough for a forked
 * child: open, read, close). */
static void vm_now(int64_t *size, int64_t *data) {
  char buf[4096];
  *size = *data = 0;
  FILE *f = fopen("/proc/self/status", "r");
  if (!f) return;
  long long kib;
  while (fgets(buf, sizeof buf, f)) {
    if (sscanf(buf, "VmSize: %lld kB", &kib) == 1) *size = (int64_t)kib * 1024;
    if (sscanf(buf, "VmData: %lld kB", &kib) == 1) *data = (int64_t)kib * 1024;
  }
  fclose(f);
}

typedef struct child_state {
  pthread_barrier_t held; /* every thread holds its buffer */
  int fd;                 /* progress: one byte per buffer, then the result line */
} child_state;

static void take_buffer(child_state *c) {
  (void)!blas_memory_alloc(0); /* kept until the child ends */
  (void)!write(c->fd, ".", 1);
  pthread_barrier_wait(&c->held);
}

static void *child_thread(void *arg) {
  child_state *c = arg;
  take_buffer(c);
  pause(); /* hold it while the main thread measures; _exit ends it */
  return NULL;
}

/* The child: threads - 1 new threads and this one each take a buffer; then "ok SIZE DATA"
 * or "no WHAT" on fd. Never returns. */
static void child_main(int32_t threads, int fd) {
  child_state c = {.fd = fd};
  int64_t size0, data0, size1, data1;
  vm_now(&size0, &data0);
  char line[256];
  if (pthread_barrier_init(&c.held, NULL, (unsigned)threads) != 0) _exit(2);
  for (int32_t i = 1; i < threads; i++) {
    pthread_t t;
    const int rc = pthread_create(&t, NULL, child_thread, &c);
    if (rc != 0) {
      int n = snprintf(line, sizeof line, "\nno thread %d of %d could be started: %s\n", (int)i + 1,
                       (int)threads, strerror(rc));
      (void)!write(fd, line, (size_t)n);
      _exit(3);
    }
  }
  take_buffer(&c);
  vm_now(&size1, &data1);
  int n = snprintf(line, sizeof line, "\nok %lld %lld\n", (long long)(size1 - size0),
                   (long long)(data1 - data0));
  (void)!write(fd, line, (size_t)n);
  _exit(0);
}

ganfw_status ganfw_cpu_blas_buffers_measure(int32_t threads, double stall_s,
                                            ganfw_blas_buffers *out) {
  memset(out, 0, sizeof *out);
  out->threads = threads < 1 ? 1 : threads;
  int fds[2];
  if (pipe(fds) != 0)
    return ganfw_error_set(GANFW_ERR_BACKEND, "OpenBLAS's buffers: no pipe to measure them: %s",
                           strerror(errno));
  fflush(NULL); /* nothing buffered is written twice */
  const pid_t pid = fork();
  if (pid < 0) {
    const int e = errno;
    close(fds[0]);
    close(fds[1]);
    return ganfw_error_set(GANFW_ERR_BACKEND,
                           "OpenBLAS's buffers: no child process to measure them in: %s",
                           strerror(e));
  }
  if (pid == 0) {
    close(fds[0]);
    child_main(out->threads, fds[1]);
  }
  close(fds[1]);
  char buf[512];
  size_t len = 0;
  int stuck = 0;
  for (;;) {
    struct pollfd p = {.fd = fds[0], .events = POLLIN};
    const int r = poll(&p, 1, (int)(stall_s * 1000.0));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      stuck = 1;
      break;
    }
    ssize_t k = read(fds[0], buf + len, sizeof buf - 1 - len);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break; /* the child ended */
    len += (size_t)k;
    if (len == sizeof buf - 1) break;
  }
  buf[len] = '\0';
  close(fds[0]);
  if (stuck) kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  int32_t held = 0;
  for (size_t i = 0; i < len && buf[i] != '\n'; i++) held += buf[i] == '.';
  out->held = held;
  const char *result = strchr(buf, '\n');
  long long size = 0, data = 0;
  if (result && sscanf(result + 1, "ok %lld %lld", &size, &data) == 2) {
    out->done = 1;
    out->mapped = size > 0 ? (int64_t)size : 0;
    out->data = data > 0 ? (int64_t)data : 0;
  } else if (result && strncmp(result + 1, "no ", 3) == 0) {
    snprintf(out->why, sizeof out->why, "%.*s", (int)strcspn(result + 4, "\n"), result + 4);
  } else if (stuck) {
    snprintf(out->why, sizeof out->why,
             "OpenBLAS could not map the buffer of thread %d of %d: it retries for ever, so the "
             "child measuring them was stopped after %.1f s without progress",
             (int)held + 1, (int)out->threads, stall_s);
  } else {
    snprintf(out->why, sizeof out->why, "the measuring child ended %s %d after %d buffers",
             WIFSIGNALED(status) ? "by signal" : "with status",
             WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status), (int)held);
  }
  return GANFW_OK;
}

void ganfw_cpu_blas_buffers_map(int32_t threads) {
  if (threads < 1) threads = 1;
#pragma omp parallel num_threads(threads)
  {
    void *buffer = blas_memory_alloc(0);
#pragma omp barrier
    blas_memory_free(buffer);
  }
}
