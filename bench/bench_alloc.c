/* Microbenchmark of the caching allocator's hot path: the cost of one cached alloc/free
 * pair (same size, block already cached) for 512 B, 64 KiB and 4 MiB, on an otherwise
 * empty allocator, on a busy one (thousands of live blocks and cached holes), and with
 * tracing on, next to glibc malloc/free. Median of several repetitions, in ns per pair.
 * Usage: bench_alloc [pairs_per_rep] */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/alloc.h"
#include "base/error.h"

#define REPS 9

/* A host-memory backend: the benchmark measures the allocator, not the device. */
static void *host_raw_alloc(ganfw_backend *be, size_t bytes) {
  (void)be;
  return aligned_alloc(4096, bytes);
}
static void host_raw_free(ganfw_backend *be, void *ptr, size_t bytes) {
  (void)be;
  (void)bytes;
  free(ptr);
}
static const ganfw_backend_vt host_vt = {
    .name = "host", .raw_alloc = host_raw_alloc, .raw_free = host_raw_free};
static ganfw_backend host_be = {&host_vt, NULL};

static void *volatile sink; /* keeps the compiler from removing malloc/free pairs */

/* Thread CPU time: on a shared machine, time spent descheduled does not count. */
static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *x, const void *y) {
  double a = *(const double *)x, b = *(const double *)y;
  return a < b ? -1 : a > b;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return v[n / 2];
}

/* ns per cached alloc/free pair of `bytes` on `a`. */
static double time_ganfw(ganfw_alloc *a, size_t bytes, long pairs) {
  double r[REPS];
  void *p = NULL;
  ganfw_alloc_malloc(a, bytes, GANFW_MEM_ACTIVATION, "bench", &p); /* warm: cache it */
  ganfw_alloc_free(a, p);
  for (int k = 0; k < REPS; k++) {
    double t = now_s();
    for (long i = 0; i < pairs; i++) {
      ganfw_alloc_malloc(a, bytes, GANFW_MEM_ACTIVATION, "bench", &p);
      sink = p;
      ganfw_alloc_free(a, p);
    }
    r[k] = (now_s() - t) * 1e9 / (double)pairs;
  }
  return median(r, REPS);
}

static double time_malloc(size_t bytes, long pairs) {
  double r[REPS];
  free(malloc(bytes));
  for (int k = 0; k < REPS; k++) {
    double t = now_s();
    for (long i = 0; i < pairs; i++) {
      void *p = malloc(bytes);
      sink = p;
      free(p);
    }
    r[k] = (now_s() - t) * 1e9 / (double)pairs;
  }
  return median(r, REPS);
}

/* Fills `a` like a training step would: 4000 live blocks of mixed sizes, every third one
 * freed again so both pools hold many cached holes. */
static void **make_busy(ganfw_alloc *a, int *n_live) {
  enum { N = 4000 };
  void **live = calloc(N, sizeof *live);
  unsigned s = 12345;
  for (int i = 0; i < N; i++) {
    s = s * 1103515245u + 12345u;
    size_t b = (s >> 8) % 4 == 0 ? (size_t)(s >> 4) % (4u << 20) : (size_t)(s >> 4) % (256u << 10);
    if (ganfw_alloc_malloc(a, b, GANFW_MEM_ACTIVATION, "busy", &live[i]) != GANFW_OK) {
      fprintf(stderr, "bench_alloc: %s\n", ganfw_error_message());
      exit(1);
    }
  }
  int n = 0;
  for (int i = 0; i < N; i++) {
    if (i % 3 == 0)
      ganfw_alloc_free(a, live[i]);
    else
      live[n++] = live[i];
  }
  *n_live = n;
  return live;
}

int main(int argc, char **argv) {
  long pairs = argc > 1 ? atol(argv[1]) : 2000000;
  if (pairs <= 0) pairs = 2000000;
  const size_t sizes[] = {512, 64 << 10, 4 << 20};
  const char *names[] = {"512 B", "64 KiB", "4 MiB"};

  ganfw_alloc *empty = NULL, *busy = NULL, *traced = NULL;
  ganfw_alloc_options topt = {.trace = 1, .trace_capacity = 1 << 16};
  if (ganfw_alloc_create(&host_be, NULL, &empty) != GANFW_OK ||
      ganfw_alloc_create(&host_be, NULL, &busy) != GANFW_OK ||
      ganfw_alloc_create(&host_be, &topt, &traced) != GANFW_OK) {
    fprintf(stderr, "bench_alloc: %s\n", ganfw_error_message());
    return 1;
  }
  int n_live = 0;
  void **live = make_busy(busy, &n_live);
  ganfw_alloc_stats st;
  ganfw_alloc_get_stats(busy, &st);

  printf("cached alloc/free pair, ns of thread CPU time (median of %d x %ld pairs)\n", REPS, pairs);
  printf("busy allocator: %" PRId64 " live blocks, %" PRId64 " segments, %.1f MiB reserved\n\n",
         st.allocations.current, st.segments.current, (double)st.reserved.current / 1048576.0);
  printf("%-8s | %12s | %12s | %12s | %12s\n", "size", "ganfw empty", "ganfw busy", "ganfw traced",
         "malloc/free");
  printf("---------+--------------+--------------+--------------+-------------\n");
  for (int i = 0; i < 3; i++) {
    double e = time_ganfw(empty, sizes[i], pairs);
    double b = time_ganfw(busy, sizes[i], pairs);
    double t = time_ganfw(traced, sizes[i], pairs / 4);
    double m = time_malloc(sizes[i], pairs);
    printf("%-8s | %12.1f | %12.1f | %12.1f | %12.1f\n", names[i], e, b, t, m);
  }
  for (int i = 0; i < n_live; i++) ganfw_alloc_free(busy, live[i]);
  free(live);
  if (ganfw_alloc_check_invariants(busy) != 0) {
    fprintf(stderr, "bench_alloc: %s\n", ganfw_error_message());
    return 1;
  }
  ganfw_alloc_destroy(empty);
  ganfw_alloc_destroy(busy);
  ganfw_alloc_destroy(traced);
  return 0;
}
