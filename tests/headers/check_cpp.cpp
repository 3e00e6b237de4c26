// Built as C++11 with -pedantic -Werror by tests/headers.cmake: the public headers compile
// as C++ (extern "C", no C-only constructs), and C and C++ agree on every size and offset of
// the ABI structs. The CTest test `headers` runs this program.
#include "layout.h"

#include <cstdio>
#include <cstring>

extern "C" {
size_t ganfw_headers_layout_c(const size_t **values, const char *const **names);
int ganfw_headers_check_c(void);
int ganfw_headers_host_offsets_pinned(void);
}

static_assert(offsetof(ganfw_plugin_desc, struct_size) == 8, "struct_size third");
static_assert(sizeof(ganfw_status) == 4, "ganfw_status is int32_t");

#define LAYOUT_VALUE(e) (e),
static const size_t layout_cpp[] = {GANFW_LAYOUT(LAYOUT_VALUE)};

// A plugin written in C++: the entry has C linkage and the descriptor is a plain aggregate.
static ganfw_status cpp_step(void *, double) {
  return GANFW_OK;
}
static const ganfw_optim_vt cpp_vt = {
    sizeof(ganfw_optim_vt), GANFW_VT_TAG_OPTIM, nullptr, nullptr, cpp_step, nullptr, nullptr,
    nullptr, nullptr, nullptr, nullptr, nullptr};
extern "C" GANFW_PLUGIN_EXPORT const ganfw_plugin_desc *ganfw_plugin_entry(void) {
  static const ganfw_plugin_desc desc = {
      GANFW_ABI_MAJOR, GANFW_ABI_MINOR, sizeof(ganfw_plugin_desc), GANFW_PLUGIN_OPTIM,
      "cpp",           "1.0.0",         "C++ header check",        &cpp_vt};
  return &desc;
}

int main() {
  int failures = ganfw_headers_check_c();
  const size_t *c = nullptr;
  const char *const *names = nullptr;
  size_t n = ganfw_headers_layout_c(&c, &names);
  if (n != sizeof layout_cpp / sizeof layout_cpp[0]) {
    std::fprintf(stderr, "layout lists differ in length: C %zu, C++ %zu\n", n,
                 sizeof layout_cpp / sizeof layout_cpp[0]);
    return 1;
  }
  for (size_t i = 0; i < n; i++) {
    if (c[i] != layout_cpp[i]) {
      std::fprintf(stderr, "%s: C says %zu, C++ says %zu\n", names[i], c[i], layout_cpp[i]);
      failures++;
    }
  }
  ganfw_plugin_entry_fn entry = ganfw_plugin_entry;
  const ganfw_plugin_desc *d = entry();
  const ganfw_optim_vt *vt = static_cast<const ganfw_optim_vt *>(d->vtable);
  if (std::strcmp(d->name, "cpp") != 0 || vt->step(nullptr, 0.1) != GANFW_OK) failures++;
  if (failures) {
    std::fprintf(stderr, "header checks: %d failed\n", failures);
    return 1;
  }
  std::printf("public headers: C11 and C++11 agree on %zu layout facts; macros work; host "
              "table offsets %s\n",
              n, ganfw_headers_host_offsets_pinned() ? "pinned" : "not pinned (not LP64)");
  return 0;
}
