/* The Frechet distance of fid.h: running feature statistics ([N,D] rows in, mean [D] and
 * covariance [D,D] out), a symmetric eigensolver (Householder tridiagonalisation, then
 * implicit QR steps with Wilkinson shifts) and tr(sqrtm(S1 S2)) through it, all in f64. */
#include "tools/fid.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

/* --- statistics ------------------------------------------------------------------------- */

ganfw_status ganfw_fid_stats_init(ganfw_fid_stats *s, int64_t dim) {
  memset(s, 0, sizeof *s);
  if (dim <= 0 || dim > (1 << 15))
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "Frechet distance: %lld features per row (1 to 32768 are supported)",
                           (long long)dim);
  s->dim = dim;
  const size_t D = (size_t)dim;
  s->mean = calloc(D, sizeof *s->mean);
  s->shift = calloc(D, sizeof *s->shift);
  s->sum = calloc(D, sizeof *s->sum);
  s->cov = calloc(D * D, sizeof *s->cov);
  s->outer = calloc(D * D, sizeof *s->outer);
  if (!s->mean || !s->shift || !s->sum || !s->cov || !s->outer)
    return ganfw_error_set(GANFW_ERR_OOM,
                           "out of host memory for the %lld x %lld feature covariance",
                           (long long)dim, (long long)dim);
  return GANFW_OK;
}

void ganfw_fid_stats_free(ganfw_fid_stats *s) {
  if (!s) return;
  free(s->mean);
  free(s->cov);
  free(s->shift);
  free(s->sum);
  free(s->outer);
  memset(s, 0, sizeof *s);
}

ganfw_status ganfw_fid_stats_add(ganfw_fid_stats *s, const float *x, int64_t rows) {
  const int64_t D = s->dim;
  double *dx = malloc((size_t)D * sizeof *dx);
  if (!dx) return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  for (int64_t r = 0; r < rows; r++) {
    const float *row = x + r * D;
    for (int64_t i = 0; i < D; i++)
      if (!isfinite(row[i])) {
        free(dx);
        return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                               "Frechet distance: feature %lld of row %lld is %s", (long long)i,
                               (long long)(s->n + r), isnan(row[i]) ? "NaN" : "infinite");
      }
    if (s->n + r == 0)
      for (int64_t i = 0; i < D; i++) s->shift[i] = row[i];
    for (int64_t i = 0; i < D; i++) {
      dx[i] = (double)row[i] - s->shift[i];
      s->sum[i] += dx[i];
    }
    for (int64_t i = 0; i < D; i++) { /* upper triangle, j >= i */
      const double di = dx[i];
      double *o = s->outer + i * D;
      for (int64_t j = i; j < D; j++) o[j] += di * dx[j];
    }
  }
  s->n += rows;
  free(dx);
  return GANFW_OK;
}

ganfw_status ganfw_fid_stats_finish(ganfw_fid_stats *s) {
  if (s->n < 2)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "Frechet distance: a covariance needs at least 2 rows, got %lld",
                           (long long)s->n);
  const int64_t D = s->dim;
  const double n = (double)s->n;
  for (int64_t i = 0; i < D; i++) s->mean[i] = s->shift[i] + s->sum[i] / n;
  for (int64_t i = 0; i < D; i++)
    for (int64_t j = i; j < D; j++) {
      const double c = (s->outer[i * D + j] - s->sum[i] * s->sum[j] / n) / (n - 1);
      s->cov[i * D + j] = s->cov[j * D + i] = c;
    }
  return GANFW_OK;
}

/* --- symmetric eigendecomposition --------------------------------------------------------- */

/* Reduces the symmetric a[n*n] (overwritten) to the tridiagonal T = Q^T a Q with diagonal
 * d[n] and off-diagonal e[n-1] (e[k] joins k and k+1) by Householder reflections
 * H_k = I - beta_k v_k v_k^T (v_k over indices k+1..n-1), k = 0..n-3, applied from both sides.
 * When qt is not NULL it receives Q^T = H_{n-3} ... H_0 (row-major). */
static ganfw_status tridiagonalize(int64_t n, double *a, double *d, double *e, double *qt) {
  double *beta = calloc((size_t)n, sizeof *beta), *p = malloc((size_t)n * sizeof *p);
  if (!beta || !p) {
    free(beta);
    free(p);
    return ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  }
  for (int64_t k = 0; k + 2 < n; k++) {
    double *x = a + k * n + k + 1; /* row k right of the diagonal: v_k is stored here */
    const int64_t m = n - k - 1;
    double tail = 0;
    for (int64_t i = 1; i < m; i++) tail += x[i] * x[i];
    d[k] = a[k * n + k];
    if (tail == 0) { /* already tridiagonal in this row: H_k = I */
      e[k] = x[0];
      beta[k] = 0;
      continue;
    }
    const double norm = sqrt(x[0] * x[0] + tail);
    const double alpha = x[0] > 0 ? -norm : norm; /* H_k x = (alpha, 0, ..., 0) */
    x[0] -= alpha;
    const double b = 2.0 / (x[0] * x[0] + tail);
    beta[k] = b;
    e[k] = alpha;
    /* the trailing block B (rows and columns k+1..n-1) becomes H B H = B - v q^T - q v^T
     * with p = b B v and q = p - (b/2)(v^T p) v */
    double *B = a + (k + 1) * n + (k + 1);
    double vp = 0;
    for (int64_t i = 0; i < m; i++) {
      double t = 0;
      const double *row = B + i * n;
      for (int64_t j = 0; j < m; j++) t += row[j] * x[j];
      p[i] = b * t;
      vp += x[i] * p[i];
    }
    const double K = 0.5 * b * vp;
    for (int64_t i = 0; i < m; i++) p[i] -= K * x[i]; /* q */
    for (int64_t i = 0; i < m; i++) {
      double *row = B + i * n;
      const double vi = x[i], qi = p[i];
      for (int64_t j = 0; j < m; j++) row[j] -= vi * p[j] + qi * x[j];
    }
  }
  if (n >= 2) {
    d[n - 2] = a[(n - 2) * n + n - 2];
    e[n - 2] = a[(n - 2) * n + n - 1];
  }
  d[n - 1] = a[(n - 1) * n + n - 1];
  if (qt) {
    /* Q = H_0 ... H_{n-3}, built from the right end: Q <- H_k Q touches rows and columns
     * k+1..n-1 only, then transposed */
    memset(qt, 0, (size_t)(n * n) * sizeof *qt);
    for (int64_t i = 0; i < n; i++) qt[i * n + i] = 1;
    for (int64_t k = n - 3; k >= 0; k--) {
      if (beta[k] == 0) continue;
      const double *v = a + k * n + k + 1;
      const int64_t m = n - k - 1;
      double *Q = qt + (k + 1) * n + (k + 1);
      for (int64_t j = 0; j < m; j++) p[j] = 0;
      for (int64_t i = 0; i < m; i++) /* p = v^T Q (a row) */
        for (int64_t j = 0; j < m; j++) p[j] += v[i] * Q[i * n + j];
      for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < m; j++) Q[i * n + j] -= beta[k] * v[i] * p[j];
    }
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = i + 1; j < n; j++) {
        const double t = qt[i * n + j];
        qt[i * n + j] = qt[j * n + i];
        qt[j * n + i] = t;
      }
  }
  free(beta);
  free(p);
  return GANFW_OK;
}

/* One implicit QR step with the Wilkinson shift on the unreduced block lo..hi of the
 * tridiagonal (d, e): rotations R_k in the planes (k, k+1) chase the bulge down, T <- R^T T R.
 * When w is not NULL its rows (the eigenvectors so far, transposed) get W <- R^T W. */
static void qr_step(int64_t n, double *d, double *e, int64_t lo, int64_t hi, double *w) {
  const double delta = 0.5 * (d[hi - 1] - d[hi]), b = e[hi - 1];
  const double r0 = hypot(delta, b);
  const double mu = d[hi] - b * b / (delta >= 0 ? delta + r0 : delta - r0);
  double x = d[lo] - mu, z = e[lo];
  for (int64_t k = lo; k < hi; k++) {
    const double r = hypot(x, z);
    const double c = r > 0 ? x / r : 1, s = r > 0 ? z / r : 0;
    if (k > lo) e[k - 1] = r;
    const double a = d[k], bk = e[k], d2 = d[k + 1];
    d[k] = c * c * a + 2 * c * s * bk + s * s * d2;
    d[k + 1] = s * s * a - 2 * c * s * bk + c * c * d2;
    e[k] = c * s * (d2 - a) + (c * c - s * s) * bk;
    if (k + 1 < hi) { /* the bulge at (k, k+2) */
      z = s * e[k + 1];
      e[k + 1] *= c;
      x = e[k];
    }
    if (w) {
      double *wk = w + k * n, *wk1 = w + (k + 1) * n;
      for (int64_t j = 0; j < n; j++) {
        const double u = wk[j], t = wk1[j];
        wk[j] = c * u + s * t;
        wk1[j] = c * t - s * u;
      }
    }
  }
}

ganfw_status ganfw_fid_eigh(int64_t n, const double *a, double *w, double *v) {
  if (n <= 0) return GANFW_OK;
  double *work = malloc((size_t)(n * n) * sizeof *work);
  double *e = calloc((size_t)n, sizeof *e);
  double *vt = v ? malloc((size_t)(n * n) * sizeof *vt) : NULL;
  ganfw_status st = GANFW_OK;
  if (!work || !e || (v && !vt)) st = ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  if (st == GANFW_OK) {
    memcpy(work, a, (size_t)(n * n) * sizeof *work);
    st = tridiagonalize(n, work, w, e, vt);
  }
  /* deflate from the bottom: split off hi once e[hi-1] is negligible next to its
   * neighbours, else run QR steps on the unreduced block that ends at hi */
  const int64_t max_steps = 60 * n + 60;
  int64_t steps = 0;
  for (int64_t hi = n - 1; st == GANFW_OK && hi > 0;) {
    int64_t lo = hi;
    while (lo > 0) {
      const double off = fabs(e[lo - 1]);
      if (off <= DBL_EPSILON * (fabs(w[lo - 1]) + fabs(w[lo])) || off < DBL_MIN) {
        e[lo - 1] = 0;
        break;
      }
      lo--;
    }
    if (lo == hi) {
      hi--;
      continue;
    }
    if (++steps > max_steps || !isfinite(w[hi]) || !isfinite(e[hi - 1])) {
      st = ganfw_error_set(GANFW_ERR_INTERNAL,
                           "symmetric eigendecomposition of a %lld x %lld matrix did not "
                           "converge (does it hold NaN or inf?)",
                           (long long)n, (long long)n);
      break;
    }
    qr_step(n, w, e, lo, hi, vt);
  }
  if (st == GANFW_OK && v)
    for (int64_t i = 0; i < n; i++)
      for (int64_t j = 0; j < n; j++) v[i * n + j] = vt[j * n + i];
  free(work);
  free(e);
  free(vt);
  return st;
}

/* --- the distance -------------------------------------------------------------------------- */

/* d * DBL_EPSILON * max(w[0..d)): eigenvalues of a positive semi-definite matrix below it
 * are rounding noise around zero, whose square roots (about sqrt(eps) of the largest) would
 * otherwise add up to a bias when the matrix is singular (fewer samples than features). */
static double cutoff(int64_t d, const double *w) {
  double mx = 0;
  for (int64_t k = 0; k < d; k++) mx = w[k] > mx ? w[k] : mx;
  return (double)d * DBL_EPSILON * mx;
}

ganfw_status ganfw_fid_sqrtm_trace(int64_t d, const double *s1, const double *s2, double *trace) {
  *trace = 0;
  const size_t nn = (size_t)(d * d);
  double *w = malloc((size_t)d * sizeof *w), *v = malloc(nn * sizeof *v);
  double *A = malloc(nn * sizeof *A), *T = calloc(nn, sizeof *T), *M = calloc(nn, sizeof *M);
  ganfw_status st =
      w && v && A && T && M ? GANFW_OK : ganfw_error_set(GANFW_ERR_OOM, "out of host memory");
  if (st == GANFW_OK) st = ganfw_fid_eigh(d, s1, w, v);
  if (st == GANFW_OK) {
    /* A = sqrt(s1) = V diag(sqrt(w)) V^T, with the eigenvalues at rounding level (below
     * d * eps * the largest, numpy's rank cut-off) and the negative ones as zero */
    const double cut1 = cutoff(d, w);
    for (int64_t k = 0; k < d; k++) w[k] = w[k] > cut1 ? sqrt(w[k]) : 0;
    for (int64_t i = 0; i < d; i++)
      for (int64_t j = i; j < d; j++) {
        double t = 0;
        for (int64_t k = 0; k < d; k++) t += v[i * d + k] * w[k] * v[j * d + k];
        A[i * d + j] = A[j * d + i] = t;
      }
    /* M = A s2 A, symmetric positive semi-definite, with the eigenvalues of s1 s2 */
    for (int64_t i = 0; i < d; i++)
      for (int64_t k = 0; k < d; k++) {
        const double aik = A[i * d + k];
        for (int64_t j = 0; j < d; j++) T[i * d + j] += aik * s2[k * d + j];
      }
    for (int64_t i = 0; i < d; i++)
      for (int64_t k = 0; k < d; k++) {
        const double tik = T[i * d + k];
        for (int64_t j = 0; j < d; j++) M[i * d + j] += tik * A[k * d + j];
      }
    for (int64_t i = 0; i < d; i++)
      for (int64_t j = i + 1; j < d; j++)
        M[i * d + j] = M[j * d + i] = 0.5 * (M[i * d + j] + M[j * d + i]);
    st = ganfw_fid_eigh(d, M, w, NULL);
  }
  if (st == GANFW_OK) {
    const double cut = cutoff(d, w);
    double t = 0;
    for (int64_t k = 0; k < d; k++) t += w[k] > cut ? sqrt(w[k]) : 0;
    *trace = t;
  }
  free(w);
  free(v);
  free(A);
  free(T);
  free(M);
  return st;
}

ganfw_status ganfw_fid_distance(const ganfw_fid_stats *a, const ganfw_fid_stats *b, double *fid) {
  *fid = NAN;
  if (a->dim != b->dim)
    return ganfw_error_set(GANFW_ERR_INVALID_ARG,
                           "Frechet distance: %lld features against %lld; both sets need the "
                           "same dimension",
                           (long long)a->dim, (long long)b->dim);
  const int64_t D = a->dim;
  double tr_c = 0;
  ganfw_status st = ganfw_fid_sqrtm_trace(D, a->cov, b->cov, &tr_c);
  if (st != GANFW_OK) return st;
  double diff2 = 0, tr1 = 0, tr2 = 0;
  for (int64_t i = 0; i < D; i++) {
    const double t = a->mean[i] - b->mean[i];
    diff2 += t * t;
    tr1 += a->cov[i * D + i];
    tr2 += b->cov[i * D + i];
  }
  *fid = diff2 + tr1 + tr2 - 2 * tr_c;
  return GANFW_OK;
}
