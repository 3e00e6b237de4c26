/* The CPU backend's raw memory for the caching allocator: 64-byte aligned host memory,
 * capacity from the machine's physical memory, copies as memcpy. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/cpu_ops.h"

void *ganfw_cpu_raw_alloc(ganfw_backend *be, size_t bytes) {
  void *p = NULL;
  if (bytes == 0 || posix_memalign(&p, 64, bytes) != 0) return NULL;
  return p;
}

void ganfw_cpu_raw_free(ganfw_backend *be, void *ptr, size_t bytes) {
  free(ptr);
}

ganfw_status ganfw_cpu_capacity(ganfw_backend *be, size_t *total, size_t *free_bytes) {
  long page = sysconf(_SC_PAGESIZE);
  long pages = sysconf(_SC_PHYS_PAGES);
  long avail = sysconf(_SC_AVPHYS_PAGES);
  if (page <= 0 || pages <= 0) return GANFW_ERR_BACKEND;
  if (total) *total = (size_t)page * (size_t)pages;
  if (free_bytes) *free_bytes = avail > 0 ? (size_t)page * (size_t)avail : 0;
  return GANFW_OK;
}

ganfw_status ganfw_cpu_copy_h2d(ganfw_backend *be, void *dst, const void *src, size_t bytes) {
  if (bytes) memcpy(dst, src, bytes);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_copy_d2h(ganfw_backend *be, void *dst, const void *src, size_t bytes) {
  if (bytes) memcpy(dst, src, bytes);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_copy_d2d(ganfw_backend *be, void *dst, const void *src, size_t bytes) {
  if (bytes && dst != src) memmove(dst, src, bytes);
  return GANFW_OK;
}

ganfw_status ganfw_cpu_synchronize(ganfw_backend *be) {
  return GANFW_OK;
}
