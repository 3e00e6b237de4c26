/* The meta backend, for planning: the real step code runs on it and the caching allocator
 * does exactly what it would do on the real device, but no device memory is touched and
 * no kernel runs. raw_alloc hands out unique fake addresses (non-canonical, so a stray
 * dereference faults at once), copies to the host read zeros, every op succeeds without
 * running (the ops that answer a value answer 0), and what it supports, the workspace sizes
 * and the capacity are asked of the backend a real run would use (its "shadow"), so that the
 * allocator sees the same requests. */
#include <string.h>

#include "backend/backend.h"

/* Fake device addresses: 2 MiB aligned, a 2 MiB gap between segments, never reused. On
 * x86-64 and AArch64 addresses with the top bit set are not user addresses. */
#define META_BASE  ((uintptr_t)0xA000000000000000ull)
#define META_ALIGN ((uintptr_t)2 << 20)

static uintptr_t next_address = META_BASE;

static void *meta_raw_alloc(ganfw_backend *be, size_t bytes) {
  if (bytes == 0 || bytes > ((uintptr_t)1 << 56)) return NULL;
  uintptr_t p = next_address;
  uintptr_t span = ((uintptr_t)bytes + META_ALIGN - 1) & ~(META_ALIGN - 1);
  next_address += span + META_ALIGN;
  if (next_address < META_BASE) next_address = META_BASE; /* wrapped after 2^63 bytes */
  return (void *)p;
}

static void meta_raw_free(ganfw_backend *be, void *ptr, size_t bytes) {}

/* The real backend behind a meta one (be->impl), the CPU when none was given. */
static ganfw_backend *shadow_of(ganfw_backend *be) {
  return be->impl ? (ganfw_backend *)be->impl : ganfw_cpu_backend();
}

static ganfw_status meta_capacity(ganfw_backend *be, size_t *total, size_t *free_bytes) {
  ganfw_backend *sh = shadow_of(be);
  return sh->vt->capacity(sh, total, free_bytes);
}

/* Copies to the device and within it touch nothing. */
static ganfw_status meta_copy(ganfw_backend *be, void *dst, const void *src, size_t bytes) {
  return GANFW_OK;
}

/* The host side is real memory: it reads zeros (a loss of 0, no NaN found). */
static ganfw_status meta_copy_d2h(ganfw_backend *be, void *dst, const void *src, size_t bytes) {
  if (bytes) memset(dst, 0, bytes);
  return GANFW_OK;
}

static ganfw_status meta_synchronize(ganfw_backend *be) {
  return GANFW_OK;
}

static void meta_set_threads(ganfw_backend *be, int threads) {}

/* As the shadow answers, so that the layers pick the same dtypes and in-place gradients and
 * ask for the same workspaces as on the real device. */
static int32_t meta_supports(ganfw_backend *be, const ganfw_op *op) {
  return ganfw_backend_supports(shadow_of(be), op);
}

static size_t meta_workspace(ganfw_backend *be, const ganfw_op *op) {
  return ganfw_backend_workspace(shadow_of(be), op);
}

static const char *meta_algorithm(ganfw_backend *be, const ganfw_op *op, int32_t pass) {
  return ganfw_backend_algorithm(shadow_of(be), op, pass);
}

static ganfw_status meta_run(ganfw_backend *be, ganfw_op *op) {
  op->result = 0.0;
  return GANFW_OK;
}

static const ganfw_backend_vt meta_vt = {
    .name = "meta",
    .raw_alloc = meta_raw_alloc,
    .raw_free = meta_raw_free,
    .capacity = meta_capacity,
    .copy_h2d = meta_copy,
    .copy_d2h = meta_copy_d2h,
    .copy_d2d = meta_copy,
    .synchronize = meta_synchronize,
    .set_threads = meta_set_threads,
    .supports = meta_supports,
    .workspace = meta_workspace,
    .run = meta_run,
    .algorithm = meta_algorithm,
};

/* One meta backend per shadow (there are few real backends: cpu, cuda). */
#define MAX_SHADOWS 4
static ganfw_backend metas[MAX_SHADOWS];

ganfw_backend *ganfw_meta_backend(ganfw_backend *shadow) {
  if (!shadow) shadow = ganfw_cpu_backend();
  for (int i = 0; i < MAX_SHADOWS; i++) {
    if (!metas[i].vt) {
      metas[i] = (ganfw_backend){.vt = &meta_vt, .impl = shadow};
      return &metas[i];
    }
    if (metas[i].impl == shadow) return &metas[i];
  }
  return NULL;
}
