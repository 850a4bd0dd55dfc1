/* The AVX2 + FMA inner loops of impl="native" for float32 with head_dim % 8 == 0 (included by native_attend.h,
 * which holds the portable versions and the helpers used here). Defines HAVE_AVX2 when the compiler targets AVX2
 * and FMA (-march=native on such a CPU); otherwise it is empty and the portable loops run.
 */
#ifndef PAGED_NATIVE_AVX2_H
#define PAGED_NATIVE_AVX2_H

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define HAVE_AVX2 1

/* exp_nonpositive on 8 lanes; a NaN stays NaN. */
static inline __m256 exp8_nonpositive(__m256 x) {
    const __m256 low = _mm256_set1_ps(-87.0f);
    const __m256 c = _mm256_max_ps(low, x); /* returns x when x is NaN */
    const __m256 n = _mm256_floor_ps(_mm256_fmadd_ps(c, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693145751953125f), c);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(1.42860682030941723212e-6f), r);
    __m256 p = _mm256_set1_ps(1.0f / 5040.0f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 720.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 120.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 24.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f / 6.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.0f));
    const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    const __m256 e = _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
    return _mm256_blendv_ps(e, _mm256_setzero_ps(), _mm256_cmp_ps(x, low, _CMP_LT_OQ));
}

/* The 8 sums of 8 vectors' lanes, as one vector: [sum(a0), ..., sum(a7)]. */
static inline __m256 sum_lanes8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, __m256 a4, __m256 a5, __m256 a6,
                                __m256 a7) {
    const __m256 s0123 = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    const __m256 s4567 = _mm256_hadd_ps(_mm256_hadd_ps(a4, a5), _mm256_hadd_ps(a6, a7));
    return _mm256_add_ps(_mm256_permute2f128_ps(s0123, s4567, 0x20), _mm256_permute2f128_ps(s0123, s4567, 0x31));
}

static inline float sum_lanes(__m256 a) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

/* Scores of 4 tokens (rows k, k + rs, ...) for 2 query heads qa, qb sharing their kv head: every K vector loaded
 * once for both heads (6 loads per 8 FMAs, not 9). Writes sa[0..3] and sb[0..3]. */
static inline void qk_4x2(const float *k, int64_t rs, int64_t D, const float *qa, const float *qb, float *sa,
                          float *sb) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (int64_t d = 0; d < D; d += 8) {
        const __m256 k0 = _mm256_loadu_ps(k + d), k1 = _mm256_loadu_ps(k + rs + d);
        const __m256 k2 = _mm256_loadu_ps(k + 2 * rs + d), k3 = _mm256_loadu_ps(k + 3 * rs + d);
        const __m256 x = _mm256_loadu_ps(qa + d), y = _mm256_loadu_ps(qb + d);
        a0 = _mm256_fmadd_ps(x, k0, a0); a1 = _mm256_fmadd_ps(x, k1, a1);
        a2 = _mm256_fmadd_ps(x, k2, a2); a3 = _mm256_fmadd_ps(x, k3, a3);
        b0 = _mm256_fmadd_ps(y, k0, b0); b1 = _mm256_fmadd_ps(y, k1, b1);
        b2 = _mm256_fmadd_ps(y, k2, b2); b3 = _mm256_fmadd_ps(y, k3, b3);
    }
    const __m256 s = sum_lanes8(a0, a1, a2, a3, b0, b1, b2, b3);
    _mm_storeu_ps(sa, _mm256_castps256_ps128(s));
    _mm_storeu_ps(sb, _mm256_extractf128_ps(s, 1));
}

/* acc += p[0..7] . V rows v, v + rs, ... (8 tokens, one query head). The 8 weights are held in registers: read
 * through `p` inside the loop they would be reloaded for every vector, since the stores to `ar` may alias them. */
static inline void pv_8x1(const float *v, int64_t rs, int64_t D, const float *p, float *ar) {
    const __m256 p0 = _mm256_set1_ps(p[0]), p1 = _mm256_set1_ps(p[1]), p2 = _mm256_set1_ps(p[2]);
    const __m256 p3 = _mm256_set1_ps(p[3]), p4 = _mm256_set1_ps(p[4]), p5 = _mm256_set1_ps(p[5]);
    const __m256 p6 = _mm256_set1_ps(p[6]), p7 = _mm256_set1_ps(p[7]);
    for (int64_t d = 0; d < D; d += 8) {
        __m256 a = _mm256_fmadd_ps(p0, _mm256_loadu_ps(v + d), _mm256_loadu_ps(ar + d));
        __m256 b = _mm256_mul_ps(p1, _mm256_loadu_ps(v + rs + d));
        a = _mm256_fmadd_ps(p2, _mm256_loadu_ps(v + 2 * rs + d), a);
        b = _mm256_fmadd_ps(p3, _mm256_loadu_ps(v + 3 * rs + d), b);
        a = _mm256_fmadd_ps(p4, _mm256_loadu_ps(v + 4 * rs + d), a);
        b = _mm256_fmadd_ps(p5, _mm256_loadu_ps(v + 5 * rs + d), b);
        a = _mm256_fmadd_ps(p6, _mm256_loadu_ps(v + 6 * rs + d), a);
        b = _mm256_fmadd_ps(p7, _mm256_loadu_ps(v + 7 * rs + d), b);
        _mm256_storeu_ps(ar + d, _mm256_add_ps(a, b));
    }
}

/* aa += pa[0..3] . V rows and ab += pb[0..3] . V rows (4 tokens, 2 query heads sharing their kv head): every V
 * vector loaded once for both heads. */
static inline void pv_4x2(const float *v, int64_t rs, int64_t D, const float *pa, const float *pb, float *aa,
                          float *ab) {
    const __m256 a0 = _mm256_set1_ps(pa[0]), a1 = _mm256_set1_ps(pa[1]), a2 = _mm256_set1_ps(pa[2]);
    const __m256 a3 = _mm256_set1_ps(pa[3]), b0 = _mm256_set1_ps(pb[0]), b1 = _mm256_set1_ps(pb[1]);
    const __m256 b2 = _mm256_set1_ps(pb[2]), b3 = _mm256_set1_ps(pb[3]);
    for (int64_t d = 0; d < D; d += 8) {
        const __m256 v0 = _mm256_loadu_ps(v + d), v1 = _mm256_loadu_ps(v + rs + d);
        const __m256 v2 = _mm256_loadu_ps(v + 2 * rs + d), v3 = _mm256_loadu_ps(v + 3 * rs + d);
        __m256 x = _mm256_fmadd_ps(a0, v0, _mm256_loadu_ps(aa + d));
        __m256 y = _mm256_fmadd_ps(b0, v0, _mm256_loadu_ps(ab + d));
        x = _mm256_fmadd_ps(a1, v1, x); y = _mm256_fmadd_ps(b1, v1, y);
        x = _mm256_fmadd_ps(a2, v2, x); y = _mm256_fmadd_ps(b2, v2, y);
        x = _mm256_fmadd_ps(a3, v3, x); y = _mm256_fmadd_ps(b3, v3, y);
        _mm256_storeu_ps(aa + d, x);
        _mm256_storeu_ps(ab + d, y);
    }
}

/* attend_block_f32 for head_dim % 8 == 0 with AVX2 + FMA: eight tokens at a time, their eight dot products
 * summed across lanes together (one shuffle tree, not eight), exp on eight scores at once; query heads that share a
 * kv head are taken in pairs, so each K and V vector is loaded once per pair. Same arguments. */
static void attend_block_avx2(const float *kb, const float *vb, int64_t n, const float *q, float *acc, float *m,
                              float *l, float *scores, int64_t BS, int64_t h0, int64_t h1, int64_t G, int64_t KVH,
                              int64_t D, const float *kn, const float *vn) {
    const int64_t rs = KVH * D;
    const int64_t n8 = n - n % 8;
    for (int64_t t = 0; t < n8; t += 8)
        for (int64_t h = h0; h < h1; h++) {
            const float *k = kb + t * rs + h * D;
            if (kn)
                for (int64_t i = 0; i < 8; i++)
                    for (int64_t d = 0; d < D; d += 16)
                        __builtin_prefetch(kn + (t + i) * rs + h * D + d, 0, PREFETCH_LOCALITY);
            int64_t qh = h * G;
            for (; qh + 2 <= (h + 1) * G; qh += 2) {
                const float *qa = q + qh * D, *qb = qa + D;
                float *sa = scores + qh * BS + t, *sb = sa + BS;
                qk_4x2(k, rs, D, qa, qb, sa, sb);
                qk_4x2(k + 4 * rs, rs, D, qa, qb, sa + 4, sb + 4);
            }
            for (; qh < (h + 1) * G; qh++) {
                const float *qr = q + qh * D;
                __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0;
                for (int64_t d = 0; d < D; d += 8) {
                    const __m256 qv = _mm256_loadu_ps(qr + d);
                    a0 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + d), a0);
                    a1 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + rs + d), a1);
                    a2 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + 2 * rs + d), a2);
                    a3 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + 3 * rs + d), a3);
                    a4 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + 4 * rs + d), a4);
                    a5 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + 5 * rs + d), a5);
                    a6 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + 6 * rs + d), a6);
                    a7 = _mm256_fmadd_ps(qv, _mm256_loadu_ps(k + 7 * rs + d), a7);
                }
                _mm256_storeu_ps(scores + qh * BS + t, sum_lanes8(a0, a1, a2, a3, a4, a5, a6, a7));
            }
        }
    for (int64_t t = n8; t < n; t++)
        for (int64_t h = h0; h < h1; h++)
            for (int64_t qh = h * G; qh < (h + 1) * G; qh++) {
                const float *qr = q + qh * D, *k0 = kb + t * rs + h * D;
                __m256 a = _mm256_setzero_ps();
                for (int64_t d = 0; d < D; d += 8)
                    a = _mm256_fmadd_ps(_mm256_loadu_ps(qr + d), _mm256_loadu_ps(k0 + d), a);
                scores[qh * BS + t] = sum_lanes(a);
            }
    for (int64_t qh = h0 * G; qh < h1 * G; qh++) {
        float *sr = scores + qh * BS, *ar = acc + qh * D, mx = m[qh], sum = 0;
        for (int64_t t = 0; t < n; t++) mx = sr[t] > mx ? sr[t] : mx;
        const float alpha = exp_nonpositive(m[qh] - mx);
        const __m256 mv = _mm256_set1_ps(mx);
        __m256 sv = _mm256_setzero_ps();
        for (int64_t t = 0; t < n8; t += 8) {
            const __m256 p = exp8_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(sr + t), mv));
            _mm256_storeu_ps(sr + t, p);
            sv = _mm256_add_ps(sv, p);
        }
        sum = sum_lanes(sv);
        for (int64_t t = n8; t < n; t++) { sr[t] = exp_nonpositive(sr[t] - mx); sum += sr[t]; }
        l[qh] = l[qh] * alpha + sum;
        m[qh] = mx;
        if (alpha != 1.0f) {
            const __m256 av = _mm256_set1_ps(alpha);
            for (int64_t d = 0; d < D; d += 8) _mm256_storeu_ps(ar + d, _mm256_mul_ps(_mm256_loadu_ps(ar + d), av));
        }
    }
    for (int64_t t = 0; t < n; t += 8) {
        const int64_t count = n - t < 8 ? n - t : 8;
        for (int64_t h = h0; h < h1; h++) {
            const float *v = vb + t * rs + h * D;
            if (vn)
                for (int64_t i = 0; i < count; i++)
                    for (int64_t d = 0; d < D; d += 16)
                        __builtin_prefetch(vn + (t + i) * rs + h * D + d, 0, PREFETCH_LOCALITY);
            int64_t qh = h * G;
            if (count == 8)
                for (; qh + 2 <= (h + 1) * G; qh += 2) {
                    const float *pa = scores + qh * BS + t, *pb = pa + BS;
                    float *aa = acc + qh * D, *ab = aa + D;
                    pv_4x2(v, rs, D, pa, pb, aa, ab);
                    pv_4x2(v + 4 * rs, rs, D, pa + 4, pb + 4, aa, ab);
                }
            for (; qh < (h + 1) * G; qh++) {
                const float *p = scores + qh * BS + t;
                float *ar = acc + qh * D;
                if (count == 8) {
                    pv_8x1(v, rs, D, p, ar);
                    continue;
                }
                for (int64_t d = 0; d < D; d += 8) { /* the block's last 1..7 tokens */
                    __m256 a = _mm256_loadu_ps(ar + d);
                    for (int64_t i = 0; i < count; i++)
                        a = _mm256_fmadd_ps(_mm256_set1_ps(p[i]), _mm256_loadu_ps(v + i * rs + d), a);
                    _mm256_storeu_ps(ar + d, a);
                }
            }
        }
    }
}
#endif

#endif /* PAGED_NATIVE_AVX2_H */
