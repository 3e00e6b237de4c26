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
 * OpenBLAS has its own dispatch (OPENBLAS_CORETYPE), which this does not change.
 * AMX (Intel's tile matrix unit, Sapphire Rapids and later) is not a level but an extra the
 * bf16 GEMM (gemm_bf16.c) uses from the avx512 level up, where the CPU has AMX-TILE and
 * AMX-BF16 and the OS grants the process its tile data (arch_prctl, asked once):
 *   GANFW_CPU_AMX=off (or 0)  never use AMX: the bf16 GEMM runs on AVX-512 BF16 dot products
 *   unset, empty, auto, on, 1 use AMX where it is there
 * read once, like GANFW_CPU_ISA; an unknown value is reported and taken as auto. */
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

/* 1 when the CPU has AMX-TILE and AMX-BF16 and the OS lets this process use the tile data
 * (the permission is asked for once, at the first call, for the whole process); 0 otherwise
 * and with GANFW_CPU_ISA_MULTI 0. */
int ganfw_cpu_amx_supported(void);
/* 1 when kernels use AMX now: ganfw_cpu_amx_supported(), the level in use is avx512 and
 * GANFW_CPU_AMX (read once) or ganfw_cpu_amx_force did not turn it off. Cheap. */
int ganfw_cpu_use_amx(void);
/* For tests and benchmarks: allow AMX (on != 0) or not from now on and return
 * ganfw_cpu_use_amx(). Not for use while kernels run on other threads. */
int ganfw_cpu_amx_force(int on);

#endif
