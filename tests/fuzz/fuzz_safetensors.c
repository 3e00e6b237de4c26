/* Fuzz harness of the safetensors reader (io/safetensors.c): the input is a whole file.
 * It is opened from a path and from memory (the two must agree); when accepted, every
 * tensor's bytes are read, every tensor is found again by name and every metadata entry
 * by key, so a pointer the reader hands out that is out of bounds shows under ASan. */
#include <stdint.h>
#include <string.h>

#include "base/error.h"
#include "fuzz_util.h"
#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t read_tensors(const ganfw_st_file *f) {
  uint64_t sum = 0;
  const int64_t n = ganfw_st_count(f);
  for (int64_t i = 0; i < n; i++) {
    const ganfw_st_tensor *t = ganfw_st_at(f, i);
    FZ_CHECK(t && t->name && t->dtype_name);
    FZ_CHECK(t->ndim >= 0 && t->ndim <= GANFW_ST_MAX_DIMS);
    FZ_CHECK(t->nbytes == t->numel * t->elem_size);
    FZ_CHECK(t->nbytes == 0 || ((uintptr_t)t->data % (uintptr_t)t->elem_size) == 0);
    const unsigned char *p = t->data;
    for (int64_t b = 0; b < t->nbytes; b++) sum += p[b];
    FZ_CHECK(ganfw_st_find(f, t->name) == t);
  }
  FZ_CHECK(ganfw_st_at(f, n) == NULL && ganfw_st_at(f, -1) == NULL);
  const int64_t m = ganfw_st_metadata_count(f);
  for (int64_t i = 0; i < m; i++) {
    const char *k = ganfw_st_metadata_key(f, i), *v = ganfw_st_metadata_value(f, i);
    FZ_CHECK(k && v && ganfw_st_metadata(f, k) == v);
    sum += strlen(v);
  }
  return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char path[512];
  fz_path(path, sizeof path, "input.safetensors");
  fz_write(path, data, size);
  ganfw_st_file *f = NULL, *g = NULL;
  const ganfw_status st = ganfw_st_open(path, &f);
  FZ_CHECK((st == GANFW_OK) == (f != NULL));
  fz_report(path, st, ganfw_error_message());
  if (st != GANFW_OK) FZ_CHECK(strstr(ganfw_error_message(), path) != NULL);
  const ganfw_status sm = ganfw_st_open_memory(data, (int64_t)size, "input", &g);
  FZ_CHECK(st == sm);
  if (f) {
    FZ_CHECK(ganfw_st_count(f) == ganfw_st_count(g));
    FZ_CHECK(read_tensors(f) == read_tensors(g));
  }
  ganfw_st_close(f);
  ganfw_st_close(g);
  ganfw_error_clear();
  return 0;
}
