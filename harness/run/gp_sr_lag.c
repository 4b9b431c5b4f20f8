/* gp_sr_lag.c — see gp_sr_lag.h. */
#include "gp_sr_lag.h"

#include <math.h>
#include <stdlib.h>

/* The butterflies of one radix-2 stage (groups of len values) over x[i0 .. i1) (complex
 * values, re and im interleaved; i0, i1 multiples of len), f the stage's factors in order.
 * Not to be cloned for AVX2/AVX-512: there gcc 12 vectorises this complex product into
 * vfmaddsub, an FMA, although contraction is off (-ffp-contract=off), and the bits change
 * (tried: a report's sr_lag_corr_score moved in its last digits). */
static void stage(double *x, size_t i0, size_t i1, size_t len, const double *f)
{
    size_t half = len >> 1;
    for (size_t i = i0; i < i1; i += len)
        for (size_t k = 0; k < half; k++) {
            double wr = f[2 * k], wi = f[2 * k + 1];
            double *a = x + 2 * (i + k), *b = x + 2 * (i + k + half);
            double br = b[0] * wr - b[1] * wi, bi = b[0] * wi + b[1] * wr;
            b[0] = a[0] - br;
            b[1] = a[1] - bi;
            a[0] += br;
            a[1] += bi;
        }
}

/* Stage len's factors tw[k N / len] (conjugated for sign +1), k < len / 2, into f. */
static void factors(double *f, size_t N, size_t len, const double *tw, int sign)
{
    for (size_t k = 0; k < len / 2; k++) {
        f[2 * k] = tw[2 * k * (N / len)];
        f[2 * k + 1] = sign * tw[2 * k * (N / len) + 1];
    }
}

/* Complex values a block of the first stages works on (128 KiB: in a core's L2). */
#define FFT_BLOCK ((size_t)1 << 13)

/* The bit reversal of i + 1 in log2(N) bits, given r, that of i. */
static size_t next_rev(size_t r, size_t N)
{
    size_t bit = N >> 1;
    for (; r & bit; bit >>= 1)
        r ^= bit;
    return r | bit;
}

/* In-place radix-2 FFT of N complex values (re, im interleaved in x), N a power of two;
 * sign -1: forward (X_k = sum_j x_j e^(-2 pi i jk / N)), +1: unnormalised inverse. tw holds
 * e^(-2 pi i k / N) for k < N / 2; w: room for N complex values. reversed: x already holds
 * its values in bit-reversed order (the caller placed them so), else they are permuted here
 * first. The stages of groups up to FFT_BLOCK values run block by block (a group lies in
 * one block, and each butterfly reads only its group's values of the stage before), the
 * wider ones over the whole array: the same butterflies on the same values as stage after
 * stage over the array, so the same bits, with the array read from memory once for all the
 * first stages. */
static void fft(double *x, size_t N, const double *tw, int sign, double *w, int reversed)
{
    for (size_t i = 1, j = 0; i < N && !reversed; i++) { /* bit reversal */
        j = next_rev(j, N);
        if (i < j) {
            double tr = x[2 * i], ti = x[2 * i + 1];
            x[2 * i] = x[2 * j];
            x[2 * i + 1] = x[2 * j + 1];
            x[2 * j] = tr;
            x[2 * j + 1] = ti;
        }
    }
    size_t B = N < FFT_BLOCK ? N : FFT_BLOCK;
    for (size_t len = 2; len <= B; len <<= 1) /* stage len's factors at w + 2 (len / 2 - 1) */
        factors(w + 2 * (len / 2 - 1), N, len, tw, sign);
    for (size_t b0 = 0; b0 < N; b0 += B)
        for (size_t len = 2; len <= B; len <<= 1)
            stage(x, b0, b0 + B, len, w + 2 * (len / 2 - 1));
    for (size_t len = 2 * B; len <= N; len <<= 1) {
        factors(w, N, len, tw, sign);
        stage(x, 0, N, len, w);
    }
}

int gp_sr_lag_sums(const double *u, const double *w, size_t n, double *S, double *V)
{
    size_t N = 2;
    while (N < 2 * n)
        N <<= 1;
    double *A = calloc(2 * N, sizeof *A), *B = calloc(2 * N, sizeof *B), *tw = malloc(N * sizeof *tw);
    double *sw = malloc(2 * N * sizeof *sw); /* stages' factors, contiguous (fft) */
    if (!A || !B || !tw || !sw) {
        free(A);
        free(B);
        free(tw);
        free(sw);
        return -1;
    }
    for (size_t k = 0; k < N / 2; k++) {
        double t = -6.283185307179586476925 * (double)k / (double)N; /* -2 pi k / N */
        tw[2 * k] = cos(t);
        tw[2 * k + 1] = sin(t);
    }
    for (size_t j = 0, r = 0; j < n; j++, r = next_rev(r, N)) { /* placed bit-reversed: fft's first step */
        A[2 * r] = u[j];
        A[2 * r + 1] = w[j];
        B[2 * r] = u[j] * u[j];
    }
    fft(A, N, tw, -1, sw, 1);
    fft(B, N, tw, -1, sw, 1);
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
    fft(B, N, tw, +1, sw, 0);
    for (size_t L = 1; L < n; L++) {
        S[L] = B[2 * L] / (double)N;
        V[L] = B[2 * L + 1] / (double)N;
    }
    free(A);
    free(B);
    free(tw);
    free(sw);
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
