/* Detection of the CPU's SIMD level and AMX, and the GANFW_CPU_ISA and GANFW_CPU_AMX overrides
 * (isa.h). */
#include "backend/cpu/isa.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#if GANFW_CPU_ISA_MULTI
#include <cpuid.h>
#endif

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

/* --- AMX ------------------------------------------------------------------------------- */

/* Linux's arch_prctl request for an extended state component (asm/prctl.h), and the one
 * that holds the eight tile registers (XFEATURE_XTILEDATA). */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA  18

static pthread_once_t amx_once = PTHREAD_ONCE_INIT;
static int amx_have;       /* CPU and OS, set once */
static atomic_int amx_off; /* GANFW_CPU_AMX=off, or ganfw_cpu_amx_force(0) */

/* CPUID leaf 7 lists AMX-TILE and AMX-BF16; Linux (5.16 on) hands out the tile data only to
 * processes that ask for it, so ask: the first tile instruction of a process that has not
 * would be killed with SIGILL. The grant is for every thread of the process. */
static int amx_probe(void) {
#if GANFW_CPU_ISA_MULTI && defined(SYS_arch_prctl)
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
  if (!(d & bit_AMX_TILE) || !(d & bit_AMX_BF16)) return 0;
  return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
#else
  return 0;
#endif
}

static void amx_init(void) {
  amx_have = amx_probe();
  const char *v = getenv("GANFW_CPU_AMX");
  int off = 0;
  if (v && *v && strcasecmp(v, "auto") != 0) {
    if (strcasecmp(v, "off") == 0 || strcmp(v, "0") == 0) {
      off = 1;
    } else if (strcasecmp(v, "on") != 0 && strcmp(v, "1") != 0) {
      ganfw_log(GANFW_LOG_ERROR,
                "GANFW_CPU_AMX=%s is not a switch: use off, 0, on, 1 or auto; using AMX where "
                "the CPU has it",
                v);
    }
  }
  atomic_store(&amx_off, off);
}

int ganfw_cpu_amx_supported(void) {
  pthread_once(&amx_once, amx_init);
  return amx_have;
}

int ganfw_cpu_use_amx(void) {
  pthread_once(&amx_once, amx_init);
  return amx_have && !atomic_load_explicit(&amx_off, memory_order_relaxed) &&
         ganfw_cpu_isa_level() >= GANFW_CPU_ISA_AVX512;
}

int ganfw_cpu_amx_force(int on) {
  pthread_once(&amx_once, amx_init);
  atomic_store(&amx_off, !on);
  return ganfw_cpu_use_amx();
}
