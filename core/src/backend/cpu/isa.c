/* Detection of the CPU's SIMD level and the GANFW_CPU_ISA override (isa.h). */
#include "backend/cpu/isa.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <strings.h>

#include "backend/cpu/cpu_ops.h"
#include "base/log.h"

static const char *const isa_names[GANFW_CPU_ISA_COUNT] = {"portable", "avx2", "avx512"};
_Static_assert(sizeof isa_names / sizeof isa_names[0] == GANFW_CPU_ISA_COUNT,
               "a name for every ganfw_cpu_isa");

const char *ganfw_cpu_isa_name(ganfw_cpu_isa level) {
  return level >= 0 && level < GANFW_CPU_ISA_COUNT ? isa_names[level] : "?";
}

int ganfw_cpu_isa_parse(const char *name, ganfw_cpu_isa *level) {
  for (int i = 0; i < GANFW_CPU_ISA_COUNT; i++) {
    if (name && strcasecmp(name, isa_names[i]) == 0) {
      *level = (ganfw_cpu_isa)i;
      return 0;
    }
  }
  return -1;
}

ganfw_cpu_isa ganfw_cpu_isa_supported(void) {
#if GANFW_CPU_ISA_MULTI
  /* GCC's x86-64-vN checks include the OS's XSAVE support of the vector registers. */
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) return GANFW_CPU_ISA_AVX512;
  if (__builtin_cpu_supports("x86-64-v3")) return GANFW_CPU_ISA_AVX2;
#endif
  return GANFW_CPU_ISA_PORTABLE;
}

static pthread_once_t isa_once = PTHREAD_ONCE_INIT;
static atomic_int isa_level;

static void isa_read_env(void) {
  const ganfw_cpu_isa have = ganfw_cpu_isa_supported();
  ganfw_cpu_isa want = have;
  const char *v = getenv("GANFW_CPU_ISA");
  if (v && *v && strcasecmp(v, "auto") != 0) {
    if (ganfw_cpu_isa_parse(v, &want) != 0) {
      ganfw_log(GANFW_LOG_ERROR,
                "GANFW_CPU_ISA=%s is not a SIMD level: use portable, avx2, avx512 or auto; "
                "running at %s, the highest this CPU supports",
                v, ganfw_cpu_isa_name(have));
      want = have;
    } else if (want > have) {
      ganfw_log(GANFW_LOG_WARN, "GANFW_CPU_ISA=%s: this CPU runs at most %s; using %s", v,
                ganfw_cpu_isa_name(have), ganfw_cpu_isa_name(have));
      want = have;
    }
  }
  atomic_store(&isa_level, (int)want);
}

ganfw_cpu_isa ganfw_cpu_isa_level(void) {
  pthread_once(&isa_once, isa_read_env);
  return (ganfw_cpu_isa)atomic_load_explicit(&isa_level, memory_order_relaxed);
}

ganfw_cpu_isa ganfw_cpu_isa_force(ganfw_cpu_isa level) {
  pthread_once(&isa_once, isa_read_env);
  const ganfw_cpu_isa have = ganfw_cpu_isa_supported();
  if (level < GANFW_CPU_ISA_PORTABLE) level = GANFW_CPU_ISA_PORTABLE;
  if (level > have) level = have;
  atomic_store(&isa_level, (int)level);
  return level;
}
