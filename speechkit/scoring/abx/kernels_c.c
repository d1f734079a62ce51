/* The two CPU kernels of speechkit.scoring.abx in C: the same computations, in the same order, as the numba
 * kernels of kernels_numba.py (dtw_strided, count_cells), so the same bits. Loaded with ctypes (plain C ABI, no
 * Python API): a ctypes call releases the GIL, so several Python threads run them at once, as the numba kernels
 * (nogil). Built by tools/install.sh (python -m speechkit.scoring.abx.build_kernels --build); see kernels_c.py.
 * Compile without -ffast-math and with -ffp-contract=off: no reassociation, no fused multiply-add. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifndef SK_SOURCE_HASH
#define SK_SOURCE_HASH "unknown"
#endif

/* sha256 of this file when it was built: the loader refuses a library built from another version of it. */
const char *sk_source_hash(void) { return SK_SOURCE_HASH; }

/* DTW of bsz token pairs whose frame distances lie in one float64 array: pair b's entry [i, j] at
 * flat[base[b] + i * row_stride[b] + j * col_stride[b]]. Writes total[b] (the minimal path cost) and the path
 * lengths under the two tie-breaks (len_rc: diagonal, then column-1; len_cr: diagonal, then row-1). See
 * kernels_numba.dtw_strided, whose recursion this is, line for line. Returns 0, or -1 when out of memory. */
int sk_dtw_strided(const double *flat, const int64_t *base, const int64_t *row_stride, const int64_t *col_stride,
                   const int64_t *n_rows, const int64_t *n_cols, int64_t bsz, double *total, int64_t *len_rc,
                   int64_t *len_cr) {
    int64_t mmax = 1;
    for (int64_t b = 0; b < bsz; b++)
        if (n_cols[b] > mmax) mmax = n_cols[b];
    double *fbuf = malloc(2 * (size_t)mmax * sizeof(double));
    int64_t *ibuf = malloc(4 * (size_t)mmax * sizeof(int64_t));
    if (fbuf == NULL || ibuf == NULL) {
        free(fbuf);
        free(ibuf);
        return -1;
    }
    double *prev = fbuf, *cur = fbuf + mmax, *tf;
    int64_t *prc = ibuf, *crc = ibuf + mmax, *pcr = ibuf + 2 * mmax, *ccr = ibuf + 3 * mmax, *ti;
    for (int64_t b = 0; b < bsz; b++) {
        const int64_t n = n_rows[b], m = n_cols[b], o = base[b], rs = row_stride[b], cs = col_stride[b];
        prev[0] = flat[o];
        prc[0] = 1;
        pcr[0] = 1;
        for (int64_t j = 1; j < m; j++) {
            prev[j] = flat[o + j * cs] + prev[j - 1];
            prc[j] = j + 1;
            pcr[j] = j + 1;
        }
        for (int64_t i = 1; i < n; i++) {
            int64_t q = o + i * rs;
            double left = flat[q] + prev[0];
            int64_t lrc = i + 1, lcr = i + 1;
            cur[0] = left;
            crc[0] = lrc;
            ccr[0] = lcr;
            double diag = prev[0];
            int64_t drc = prc[0], dcr = pcr[0];
            for (int64_t j = 1; j < m; j++) {
                q += cs;
                const double up = prev[j];
                const int64_t urc = prc[j], ucr = pcr[j];
                /* Python's min(a, b): a unless b < a */
                const int64_t t_lu = left <= up, t_ul = up <= left, t_d = (diag <= left) & (diag <= up);
                const double lu = up < left ? up : left;
                const double best = lu < diag ? lu : diag;
                const int64_t nrc = t_d * drc + (1 - t_d) * (t_lu * lrc + (1 - t_lu) * urc);
                const int64_t ncr = t_d * dcr + (1 - t_d) * (t_ul * ucr + (1 - t_ul) * lcr);
                left = flat[q] + best;
                lrc = nrc + 1;
                lcr = ncr + 1;
                cur[j] = left;
                crc[j] = lrc;
                ccr[j] = lcr;
                diag = up;
                drc = urc;
                dcr = ucr;
            }
            tf = prev; prev = cur; cur = tf;
            ti = prc; prc = crc; crc = ti;
            ti = pcr; pcr = ccr; ccr = ti;
        }
        total[b] = prev[m - 1];
        len_rc[b] = prc[m - 1];
        len_cr[b] = pcr[m - 1];
    }
    free(fbuf);
    free(ibuf);
    return 0;
}

/* numpy's order of float64 (sort, searchsorted): NaN after every number. */
static inline int lt(double a, double b) { return a < b || (b != b && a == a); }

/* Quicksort (median of three, Hoare partition, the smaller side recursed) with insertion sort below 17 values.
 * Any correct sort gives count_cells the same counts: they depend on the sorted values only. */
static void sort_doubles(double *v, int64_t n) {
    while (n > 16) {
        double a = v[0], b = v[n / 2], c = v[n - 1], pivot;  /* median of three */
        if (lt(a, b)) pivot = lt(b, c) ? b : (lt(a, c) ? c : a);
        else pivot = lt(a, c) ? a : (lt(b, c) ? c : b);
        int64_t i = 0, j = n - 1;
        for (;;) {
            while (lt(v[i], pivot)) i++;
            while (lt(pivot, v[j])) j--;
            if (i >= j) break;
            double t = v[i]; v[i] = v[j]; v[j] = t;
            i++;
            j--;
        }
        /* recurse into the smaller side, loop on the larger: O(log n) stack */
        if (j + 1 < n - j - 1) {
            sort_doubles(v, j + 1);
            v += j + 1;
            n -= j + 1;
        } else {
            sort_doubles(v + j + 1, n - j - 1);
            n = j + 1;
        }
    }
    for (int64_t i = 1; i < n; i++) {
        double x = v[i];
        int64_t k = i;
        while (k > 0 && lt(x, v[k - 1])) {
            v[k] = v[k - 1];
            k--;
        }
        v[k] = x;
    }
}

/* The sort count_cells uses, for tests against numpy's. */
void sk_sort_doubles(double *v, int64_t n) { sort_doubles(v, n); }

/* np.searchsorted(v[:n], x, side="left" (right = 0) or "right" (right = 1)) */
static inline int64_t search(const double *v, int64_t n, double x, int right) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (right ? !lt(x, v[mid]) : lt(v[mid], x)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Wins and ties of the triplets of cell groups g0 .. g1-1: kernels_numba.count_cells, the same loops. Returns 0, or
 * -1 when out of memory. */
int sk_count_cells(int64_t g0, int64_t g1, const double *dflat, const int64_t *ctx_off, const int64_t *ctx_w,
                   const int64_t *a_ptr, const int64_t *a_pool, const int64_t *b_ptr, const int64_t *b_pool,
                   const int64_t *x_ptr, const int64_t *x_pool, const int64_t *x_cell, int64_t within, int64_t *wins,
                   int64_t *ties) {
    int64_t nb_max = 1;
    for (int64_t g = g0; g < g1; g++)
        if (b_ptr[g + 1] - b_ptr[g] > nb_max) nb_max = b_ptr[g + 1] - b_ptr[g];
    double *buf = malloc((size_t)nb_max * sizeof(double));
    if (buf == NULL) return -1;
    for (int64_t g = g0; g < g1; g++) {
        const int64_t off = ctx_off[g], w = ctx_w[g], b0 = b_ptr[g], nb = b_ptr[g + 1] - b0;
        for (int64_t k = x_ptr[g]; k < x_ptr[g + 1]; k++) {
            const int64_t x = x_pool[k];
            for (int64_t q = 0; q < nb; q++) buf[q] = dflat[off + b_pool[b0 + q] * w + x];
            sort_doubles(buf, nb);
            int64_t nw = 0, nt = 0;
            for (int64_t p = a_ptr[g]; p < a_ptr[g + 1]; p++) {
                const int64_t a = a_pool[p];
                if (within && a == x) continue;
                const double v = dflat[off + a * w + x];
                const int64_t lo = search(buf, nb, v, 0), hi = search(buf, nb, v, 1);
                nw += nb - hi;
                nt += hi - lo;
            }
            const int64_t c = x_cell[k];
            wins[c] += nw;
            ties[c] += nt;
        }
    }
    free(buf);
    return 0;
}
