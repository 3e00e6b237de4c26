/* Compiles the file named by GANFW_ISA_BODY once per SIMD level of isa.h: GANFW_ISA(name)
 * expands to name_portable, name_avx2 and name_avx512 in turn, and every function of the
 * body (OpenMP's outlined loop bodies included) gets that level's instruction set through
 * `#pragma GCC target`. Helpers the body calls must be defined in it (static inline) to be
 * compiled for each level. Where GANFW_CPU_ISA_MULTI is 0 only the portable copy exists and
 * the other names are aliases of it. The including file then keeps a table
 * {name_portable, name_avx2, name_avx512} indexed by ganfw_cpu_isa_level(). Include it
 * more than once (one body each); it has no include guard on purpose. */
#include "backend/cpu/isa.h"

#define GANFW_ISA(name) name##_portable
#include GANFW_ISA_BODY
#undef GANFW_ISA

#if GANFW_CPU_ISA_MULTI
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v3")
#define GANFW_ISA(name) name##_avx2
#include GANFW_ISA_BODY
#undef GANFW_ISA
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("arch=x86-64-v4")
#define GANFW_ISA(name) name##_avx512
#include GANFW_ISA_BODY
#undef GANFW_ISA
#pragma GCC pop_options
#endif

/* GANFW_ISA_TABLE(name): {name_portable, name_avx2, name_avx512}. */
#undef GANFW_ISA_TABLE
#if GANFW_CPU_ISA_MULTI
#define GANFW_ISA_TABLE(name)                                                                      \
  { name##_portable, name##_avx2, name##_avx512 }
#else
#define GANFW_ISA_TABLE(name)                                                                      \
  { name##_portable, name##_portable, name##_portable }
#endif
