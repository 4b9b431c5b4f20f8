/* gp_sr_lag.c — see gp_sr_lag.h. */
#include "gp_sr_lag.h"

#include <math.h>
#include <stdlib.h>

/* In-place radix-2 FFT of N complex values (re, im interleaved in x), N a power of two;
 * sign -1: forward (X_k = sum_j x_j e^(-2 pi i jk / N)), +1: unnormalised inverse. tw holds
 * e^(-2 pi i k / N) for k < N / 2. */
static void fft(double *x, size_t N, const double *tw, int sign)
{
    for (size_t i = 1, j = 0; i < N; i++) { /* bit reversal */
        size_t bit = N >> 1;
        for (; j & bit; bit >>= 1)
            j ^= bit;
        j |= bit;
        if (i < j) {
            double tr = x[2 * i], ti = x[2 * i + 1];
            x[2 * i] = x[2 * j];
            x[2 * i + 1] = x[2 * j + 1];
            x[2 * j] = tr;
            x[2 * j + 1] = ti;
        }
    }
    for (size_t len = 2; len <= N; len <<= 1) {
        size_t half = len >> 1, stride = N / len;
        for (size_t i = 0; i < N; i += len)
            for (size_t k = 0; k < half; k++) {
                double wr = tw[2 * k * stride], wi = sign * tw[2 * k * stride + 1];
                double *a = x + 2 * (i + k), *b = x + 2 * (i + k + half);
                double br = b[0] * wr - b[1] * wi, bi = b[0] * wi + b[1] * wr;
                b[0] = a[0] - br;
                b[1] = a[1] - bi;
                a[0] += br;
                a[1] += bi;
            }
    }
}

int gp_sr_lag_sums(const double *u, const double *w, size_t n, double *S, double *V)
{
    size_t N = 2;
    while (N < 2 * n)
        N <<= 1;
    double *A = calloc(2 * N, sizeof *A), *B = calloc(2 * N, sizeof *B), *tw = malloc(N * sizeof *tw);
    if (!A || !B || !tw) {
        free(A);
        free(B);
        free(tw);
        return -1;
    }
    for (size_t k = 0; k < N / 2; k++) {
        double t = -6.283185307179586476925 * (double)k / (double)N; /* -2 pi k / N */
        tw[2 * k] = cos(t);
        tw[2 * k + 1] = sin(t);
    }
    for (size_t j = 0; j < n; j++) {
        A[2 * j] = u[j];
        A[2 * j + 1] = w[j];
        B[2 * j] = u[j] * u[j];
    }
    fft(A, N, tw, -1);
    fft(B, N, tw, -1);
    /* A = U + i W with U, W the transforms of the real u, w: U_k = (A_k + conj A_(N-k)) / 2,
     * W_k = (A_k - conj A_(N-k)) / 2i. corr(x, y)[L] = sum_j x_j y_(j+L) is the inverse of
     * conj(X) Y: Z = |U|^2 + i conj(B) W, whose inverse is S + i V (both real). */
    for (size_t k = 0; k < N; k++) {
        size_t m = (N - k) & (N - 1);
        double ar = A[2 * k], ai = A[2 * k + 1], cr = A[2 * m], ci = -A[2 * m + 1];
        double ur = 0.5 * (ar + cr), ui = 0.5 * (ai + ci);
        double dr = 0.5 * (ar - cr), di = 0.5 * (ai - ci); /* W = d / i = (di, -dr) */
        double wr = di, wi = -dr;
        double br = B[2 * k], bi = -B[2 * k + 1]; /* conj(B_k) */
        double sr = ur * ur + ui * ui;
        double vr = br * wr - bi * wi, vi = br * wi + bi * wr;
        B[2 * k] = sr - vi; /* Z = sr + i (vr + i vi) */
        B[2 * k + 1] = vr;
    }
    fft(B, N, tw, +1);
    for (size_t L = 1; L < n; L++) {
        S[L] = B[2 * L] / (double)N;
        V[L] = B[2 * L + 1] / (double)N;
    }
    free(A);
    free(B);
    free(tw);
    return 0;
}

double gp_sr_lag_threshold(double V, uint64_t lags)
{
    double lam = log(130.0 * (double)(lags ? lags : 1) / 1e-9);
    return 2.0 * lam / 3.0 + 2.0 * sqrt(fmax(V, 1.0) * lam);
}

double gp_sr_lag_score(const double *u, const double *w, size_t n, uint64_t lags, int drift, size_t *worst)
{
    *worst = 0;
    if (n < 2)
        return 0;
    double *S = malloc(n * sizeof *S), *V = malloc(n * sizeof *V);
    if (!S || !V || gp_sr_lag_sums(u, w, n, S, V) != 0) {
        free(S);
        free(V);
        return -1;
    }
    double best = 0;
    for (size_t L = 1; L < n; L++) {
        double T = gp_sr_lag_threshold(V[L], lags);
        if (drift)
            T += (double)(n - L) * 0x1p-32;
        double z = fabs(S[L]) / T;
        if (z > best) {
            best = z;
            *worst = L;
        }
    }
    free(S);
    free(V);
    return best;
}
