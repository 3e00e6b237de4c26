/* The SIMD level the CPU kernels run at, chosen at run time, never from the build flags:
 * the highest the CPU supports, or a lower one forced with GANFW_CPU_ISA in the
 * environment (read once, at the first kernel that asks). Every SIMD dispatch in
 * backend/cpu reads ganfw_cpu_isa_level(); a kernel file compiles its vector code once per
 * level through isa_each.h and picks the copy of the level in use on each call.
 *   GANFW_CPU_ISA=portable  the compiler's baseline (x86-64: SSE2), scalar F16 casts
 *   GANFW_CPU_ISA=avx2      x86-64-v3: AVX2, FMA, F16C, BMI1/2
 *   GANFW_CPU_ISA=avx512    x86-64-v4: AVX-512 F, CD, BW, DQ, VL
 *   unset, empty or auto    the highest of these the CPU runs
 * A level above what the CPU runs is clamped down to it with a warning in the log, an
 * unknown value is reported (naming the variable and the valid values) and ignored.
 * OpenBLAS has its own dispatch (OPENBLAS_CORETYPE), which this does not change. */
#ifndef GANFW_CPU_ISA_H
#define GANFW_CPU_ISA_H

typedef enum ganfw_cpu_isa {
  GANFW_CPU_ISA_PORTABLE,
  GANFW_CPU_ISA_AVX2,
  GANFW_CPU_ISA_AVX512,
  GANFW_CPU_ISA_COUNT
} ganfw_cpu_isa;

/* 1 where the kernels are compiled once per level (GCC on x86-64); elsewhere every level
 * runs the portable code. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define GANFW_CPU_ISA_MULTI 1
#else
#define GANFW_CPU_ISA_MULTI 0
#endif

/* "portable", "avx2", "avx512" (static strings); "?" out of range. */
const char *ganfw_cpu_isa_name(ganfw_cpu_isa level);
/* Parses a level name (case-insensitive); returns 0 and sets *level, or -1 when unknown. */
int ganfw_cpu_isa_parse(const char *name, ganfw_cpu_isa *level);
/* The highest level this CPU and OS run (with GANFW_CPU_ISA_MULTI 0: portable). */
ganfw_cpu_isa ganfw_cpu_isa_supported(void);
/* The level in use: GANFW_CPU_ISA (read once) clamped to ganfw_cpu_isa_supported(). */
ganfw_cpu_isa ganfw_cpu_isa_level(void);
/* For tests and benchmarks: use `level` from now on (clamped to the supported one, without a
 * warning) and return the level now in use. Not for use while kernels run on other threads. */
ganfw_cpu_isa ganfw_cpu_isa_force(ganfw_cpu_isa level);

#endif
