/* Row-major GEMM on bf16 products with f32 accumulation, for the CPU backend's bf16 mixed
 * precision: C[M,N] = op(A)[M,K] op(B)[K,N] + beta C, on AMX tiles (TDPBF16PS) where the CPU
 * has AMX-BF16, else on AVX-512 BF16 dot products (vdpbf16ps). Chosen at run time (never by
 * build flags): only call it where ganfw_cpu_have_bf16_dot() is 1. */
#ifndef GANFW_CPU_GEMM_BF16_H
#define GANFW_CPU_GEMM_BF16_H

#include <stdint.h>

/* 1 when ganfw_cpu_gemm_bf16 runs on bf16 dot products here: the CPU has AVX-512 BF16 and the
 * SIMD level in use (isa.h, GANFW_CPU_ISA) is avx512. 0 otherwise, and always 0 where the
 * kernels are not built per level (GANFW_CPU_ISA_MULTI 0). Cheap: may be called per product. */
int ganfw_cpu_have_bf16_dot(void);

/* 1 when ganfw_cpu_gemm_bf16 runs on AMX tiles (TDPBF16PS) here: ganfw_cpu_have_bf16_dot()
 * and ganfw_cpu_use_amx() (isa.h: the CPU's AMX-BF16, the OS's grant, GANFW_CPU_AMX). The
 * tiles sum in another order than the dot products: the two paths give results within the
 * bound below of each other, not the same bits. Cheap: may be called per product. */
int ganfw_cpu_gemm_bf16_amx(void);

/* C[M,N] = op(A) op(B) + beta * C, row-major, op = transpose when trans_*: op(A) is A[M,K]
 * (lda >= K) or, with trans_a, A[K,M] (lda >= M) transposed; the same for B[K,N] / B[N,K].
 * A and B are f32 arrays whose values are rounded to bf16 (round to nearest even, as
 * ganfw_f32_to_bf16_scalar in cast.h) while they are packed; products of bf16 pairs are exact
 * in f32 and are summed in f32 (both instructions treat subnormal inputs and results as
 * zero). The order of the sums depends on the path and the shape alone, so each path gives the
 * same bits run to run and from any thread; the two paths differ from each other within the
 * rounding of the sums (tests/test_cpu_gemm_bf16.c). beta == 0 overwrites C without reading
 * it; K == 0 gives C = beta * C. On the calling thread only (callers split the work over
 * threads); any number of threads may call it at once. On AMX the calling thread loads the
 * tile configuration at the start and releases the tiles (TILERELEASE) before it returns.
 * Scratch: each calling thread keeps one 64-byte aligned buffer for the packed panels (at most
 * about 1.2 MiB on dot products, 2.3 MiB on AMX), grown on first need and freed when the
 * thread exits, so there is no allocation in steady state; if it cannot be allocated a stack
 * buffer (23 KiB, 64 KiB on AMX) with smaller blocks is used instead (slower, same results).
 * Only call when ganfw_cpu_have_bf16_dot() is 1 (otherwise it aborts). */
void ganfw_cpu_gemm_bf16(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K, const float *A,
                         int64_t lda, const float *B, int64_t ldb, float beta, float *C,
                         int64_t ldc);

/* ganfw_cpu_gemm_bf16 with op(A) held in bf16: A16 is an array of bf16 values (lda in
 * elements), as a bf16 conv's weights are. The result has the bits of ganfw_cpu_gemm_bf16 on
 * those values as f32 (which the packing would not change), from half the bytes of A and
 * without rounding them. Only on AMX: call it where ganfw_cpu_gemm_bf16_amx() is 1
 * (otherwise it aborts). */
void ganfw_cpu_gemm_bf16_a16(int trans_a, int trans_b, int64_t M, int64_t N, int64_t K,
                             const uint16_t *A16, int64_t lda, const float *B, int64_t ldb,
                             float beta, float *C, int64_t ldc);

/* C[M,N] = beta * C (beta 0: zeros, C not read), the product with an empty inner dimension
 * (gemm.c). */
void ganfw_cpu_gemm_scale_only(int64_t M, int64_t N, float beta, float *C, int64_t ldc);

#endif
