/* The foreach kernels of foreach.c built on fmaf, compiled once per SIMD level by
 * isa_each.h: from AVX2 up (FMA) fmaf is one vfmadd per 8 or 16 lanes, while the portable
 * copy calls the C library's fmaf, which gives the same bits more slowly. No include
 * guard: included once per level. Each name below becomes that level's (GANFW_ISA). */
#define foreach_axpy    GANFW_ISA(foreach_axpy)
#define foreach_addcmul GANFW_ISA(foreach_addcmul)
#define foreach_lerp    GANFW_ISA(foreach_lerp)

/* y += alpha * x, fused (torch.add(y, x, alpha=alpha)) */
static void foreach_axpy(ganfw_backend *be, int64_t n, float *y, float alpha, const float *x) {
#pragma omp parallel for if (n >= FOREACH_OMP_MIN) schedule(static)
  for (int64_t i = 0; i < n; i++) y[i] = fmaf(alpha, x[i], y[i]);
}

/* y += (v * a) * b, the product with y fused (torch.addcmul) */
static void foreach_addcmul(ganfw_backend *be, int64_t n, float *y, float v, const float *a,
                            const float *b) {
#pragma omp parallel for if (n >= FOREACH_OMP_MIN) schedule(static)
  for (int64_t i = 0; i < n; i++) y[i] = fmaf(v * a[i], b[i], y[i]);
}

/* y = lerp(y, x, w) as torch.lerp computes it: from the nearer end, fused. */
static void foreach_lerp(ganfw_backend *be, int64_t n, float *y, const float *x, float w) {
  if (fabsf(w) < 0.5f) {
#pragma omp parallel for if (n >= FOREACH_OMP_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) y[i] = fmaf(w, x[i] - y[i], y[i]);
  } else {
    float omw = 1.0f - w;
#pragma omp parallel for if (n >= FOREACH_OMP_MIN) schedule(static)
    for (int64_t i = 0; i < n; i++) y[i] = fmaf(y[i] - x[i], omw, x[i]);
  }
}

#undef foreach_axpy
#undef foreach_addcmul
#undef foreach_lerp
