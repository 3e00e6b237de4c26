/* The Frechet distance between two Gaussians fitted to feature sets (FID as pytorch-fid
 * computes it, in f64): |mu1 - mu2|^2 + tr(S1) + tr(S2) - 2 tr(sqrtm(S1 S2)), with the mean
 * and the covariance (N - 1 in the denominator, as numpy.cov) of N rows of D features.
 * tr(sqrtm(S1 S2)) comes from two symmetric eigendecompositions (Householder reduction to
 * a tridiagonal matrix, then implicit QR steps with Wilkinson shifts): A = sqrt(S1), then
 * the eigenvalues of the symmetric positive semi-definite A S2 A, which are those of S1 S2. */
#ifndef GANFW_FID_H
#define GANFW_FID_H

#include <stdint.h>

#include "ganfw/status.h"

/* Running statistics of rows of `dim` features: fed in batches, then finished. The sums
 * are taken about the first row seen (a shift that keeps the covariance accurate when the
 * features' mean is large next to their spread). */
typedef struct ganfw_fid_stats {
  int64_t dim;                 /* D */
  int64_t n;                   /* rows seen */
  double *mean;                /* [D], after finish */
  double *cov;                 /* [D*D] row-major, after finish */
  double *shift, *sum, *outer; /* [D], [D], [D*D] (upper triangle): the running sums */
} ganfw_fid_stats;

/* Zeroed statistics of `dim` > 0 features; GANFW_ERR_OOM when the D*D matrices do not fit.
 * Free with ganfw_fid_stats_free (also after a failed init). */
ganfw_status ganfw_fid_stats_init(ganfw_fid_stats *s, int64_t dim);
/* Adds rows x[rows * dim] (row-major f32). A NaN or inf is GANFW_ERR_INVALID_ARG. */
ganfw_status ganfw_fid_stats_add(ganfw_fid_stats *s, const float *x, int64_t rows);
/* mean and cov from the rows seen; fewer than 2 rows is GANFW_ERR_INVALID_ARG. */
ganfw_status ganfw_fid_stats_finish(ganfw_fid_stats *s);
void ganfw_fid_stats_free(ganfw_fid_stats *s); /* accepts NULL and zeroed statistics */

/* Eigenvalues w[n] and, when v is not NULL, orthonormal eigenvectors (column j of the
 * row-major v[n*n] belongs to w[j]) of the symmetric a[n*n] (row-major; only read). Not
 * sorted. GANFW_ERR_INTERNAL when the QR steps do not converge (NaN input). */
ganfw_status ganfw_fid_eigh(int64_t n, const double *a, double *w, double *v);

/* tr(sqrtm(s1 s2)) of two symmetric positive semi-definite d x d matrices (row-major):
 * the sum of the square roots of the eigenvalues of s1 s2. Eigenvalues (of s1, and of
 * sqrt(s1) s2 sqrt(s1)) below d * DBL_EPSILON times the largest, negative ones included, are
 * rounding noise and count as zero, so that singular covariances (fewer rows than
 * features) add no sqrt(eps) bias. */
ganfw_status ganfw_fid_sqrtm_trace(int64_t d, const double *s1, const double *s2, double *trace);

/* The Frechet distance of two finished statistics of the same dimension. */
ganfw_status ganfw_fid_distance(const ganfw_fid_stats *a, const ganfw_fid_stats *b, double *fid);

#endif
