/* The inner loops of impl="native" (included by native_decode.c): fold one physical block's tokens into the
 * running online-softmax state of some query heads. Portable C for every type, plus an AVX2 + FMA path for float32
 * when head_dim % 8 == 0. Nothing here knows about block tables, threads or partitions.
 */
#ifndef PAGED_NATIVE_ATTEND_H
#define PAGED_NATIVE_ATTEND_H

#include <math.h>
#include <stdint.h>
#include <string.h>

/* fp16 and bf16 bits -> float, written out so that no compiler extension is needed. */
static inline float half_to_float(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu, bits;
    if (exp == 0x1fu) {
        bits = sign | 0x7f800000u | (man << 13); /* inf or nan */
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (man << 13); /* normal: rebias 15 -> 127 */
    } else if (man == 0) {
        bits = sign; /* signed zero */
    } else {         /* subnormal: shift the mantissa up until its leading 1 becomes the implicit bit */
        exp = 113u;
        while (!(man & 0x400u)) { man <<= 1; exp--; }
        bits = sign | (exp << 23) | ((man & 0x3ffu) << 13);
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline float bf16_to_float(uint16_t b) {
    uint32_t bits = (uint32_t)b << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* exp(x) for x <= 0 (a score minus the running max), to within 2 float ulps, in plain arithmetic that the
 * compiler can vectorise (a call to libm's expf cannot be). x = n ln2 + r with |r| <= ln2 / 2; e^r by its Taylor
 * polynomial to r^7; 2^n built in the exponent bits. Below -87 (and for -inf) the answer is 0. */
static inline float exp_nonpositive(float x) {
    const float clamped = x < -87.0f ? -87.0f : x;
    const float n = __builtin_floorf(clamped * 1.44269504088896341f + 0.5f);
    const float r = (clamped - n * 0.693145751953125f) - n * 1.42860682030941723212e-6f; /* ln2, hi + lo */
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    union { int32_t i; float f; } scale = {.i = ((int32_t)n + 127) << 23};
    return x < -87.0f ? 0.0f : p * scale.f;
}

/* Where prefetched rows of the next block go: 2 = L2 (prefetcht1 on x86). Into L1 (3) they evicted the rows in
 * use and filled L1's few miss slots: on a 2-core EPYC, B=16 x 2048 tokens (K/V from DRAM), L2 ran 1.2-1.7x
 * faster than L1 at head_dim 64 and 128, MHA and GQA, and no slower from cache. */
#define PREFETCH_LOCALITY 2

/* Prefetch 4 rows (stride rs) of D values each: the same rows of the next block, while this block's are used. */
#define PREFETCH4(p, rs, D, T)                                                                                    \
    for (int64_t r_ = 0; r_ < 4; r_++)                                                                            \
        for (int64_t e_ = 0; e_ < (D); e_ += 64 / (int64_t)sizeof(T))                                             \
            __builtin_prefetch((p) + r_ * (rs) + e_, 0, PREFETCH_LOCALITY);

/* attend_block_<T>: fold tokens [0, n) of one block into the running state of the query heads of kv heads
 * [h0, h1). kb, vb: the block's first row, [block_size, num_kv_heads, head_dim]; q, acc: [num_heads, head_dim];
 * m, l: [num_heads]; scores: scratch [num_heads, block_size]. Tokens are the outer loop, so the block is read front
 * to back, as the memory system likes best. */
#define DEFINE_ATTEND(T, SFX, EXPFN)                                                                              \
    static void attend_block_##SFX(const T *kb, const T *vb, int64_t n, const T *q, T *acc, T *m, T *l,           \
                                   T *scores, int64_t BS, int64_t h0, int64_t h1, int64_t G, int64_t KVH,         \
                                   int64_t D, const T *kn, const T *vn) {                                         \
        const int64_t rs = KVH * D; /* row stride: one token */                                                    \
        int64_t t = 0;                                                                                            \
        for (; t + 4 <= n; t += 4) /* scores[qh, t..t+3] = q[qh] . K[t..t+3, h] */                                \
            for (int64_t h = h0; h < h1; h++) {                                                                   \
                const T *k0 = kb + t * rs + h * D, *k1 = k0 + rs, *k2 = k1 + rs, *k3 = k2 + rs;                   \
                if (kn) PREFETCH4(kn + t * rs + h * D, rs, D, T)                                                \
                for (int64_t qh = h * G; qh < (h + 1) * G; qh++) {                                                \
                    const T *qr = q + qh * D;                                                                     \
                    T s0 = 0, s1 = 0, s2 = 0, s3 = 0;                                                             \
                    _Pragma("omp simd reduction(+:s0,s1,s2,s3)")                                                  \
                    for (int64_t d = 0; d < D; d++) {                                                             \
                        s0 += qr[d] * k0[d]; s1 += qr[d] * k1[d]; s2 += qr[d] * k2[d]; s3 += qr[d] * k3[d];       \
                    }                                                                                             \
                    T *sr = scores + qh * BS + t;                                                                 \
                    sr[0] = s0; sr[1] = s1; sr[2] = s2; sr[3] = s3;                                               \
                }                                                                                                 \
            }                                                                                                     \
        for (; t < n; t++)                                                                                        \
            for (int64_t h = h0; h < h1; h++)                                                                     \
                for (int64_t qh = h * G; qh < (h + 1) * G; qh++) {                                                \
                    const T *qr = q + qh * D, *k0 = kb + t * rs + h * D;                                          \
                    T s0 = 0;                                                                                     \
                    _Pragma("omp simd reduction(+:s0)")                                                           \
                    for (int64_t d = 0; d < D; d++) s0 += qr[d] * k0[d];                                          \
                    scores[qh * BS + t] = s0;                                                                     \
                }                                                                                                 \
        for (int64_t qh = h0 * G; qh < h1 * G; qh++) { /* online softmax: new max, rescale, exponentiate */      \
            T *sr = scores + qh * BS, *ar = acc + qh * D, mx = m[qh], sum = 0;                                     \
            _Pragma("omp simd reduction(max:mx)")                                                                 \
            for (t = 0; t < n; t++) mx = sr[t] > mx ? sr[t] : mx;                                                 \
            const T alpha = EXPFN(m[qh] - mx); /* 0 on the first block, where m is -inf */                         \
            _Pragma("omp simd reduction(+:sum)")                                                                  \
            for (t = 0; t < n; t++) { sr[t] = EXPFN(sr[t] - mx); sum += sr[t]; }                                  \
            l[qh] = l[qh] * alpha + sum;                                                                          \
            m[qh] = mx;                                                                                           \
            if (alpha != (T)1) {                                                                                  \
                _Pragma("omp simd")                                                                               \
                for (int64_t d = 0; d < D; d++) ar[d] *= alpha;                                                   \
            }                                                                                                     \
        }                                                                                                         \
        for (t = 0; t + 4 <= n; t += 4) /* acc[qh] += p[qh, t..t+3] * V[t..t+3, h] */                             \
            for (int64_t h = h0; h < h1; h++) {                                                                   \
                const T *v0 = vb + t * rs + h * D, *v1 = v0 + rs, *v2 = v1 + rs, *v3 = v2 + rs;                   \
                if (vn) PREFETCH4(vn + t * rs + h * D, rs, D, T)                                                \
                for (int64_t qh = h * G; qh < (h + 1) * G; qh++) {                                                \
                    const T *p = scores + qh * BS + t, p0 = p[0], p1 = p[1], p2 = p[2], p3 = p[3];                \
                    T *ar = acc + qh * D;                                                                         \
                    _Pragma("omp simd")                                                                           \
                    for (int64_t d = 0; d < D; d++) ar[d] += p0 * v0[d] + p1 * v1[d] + p2 * v2[d] + p3 * v3[d];   \
                }                                                                                                 \
            }                                                                                                     \
        for (; t < n; t++)                                                                                        \
            for (int64_t h = h0; h < h1; h++)                                                                     \
                for (int64_t qh = h * G; qh < (h + 1) * G; qh++) {                                                \
                    const T *v0 = vb + t * rs + h * D, p0 = scores[qh * BS + t];                                  \
                    T *ar = acc + qh * D;                                                                         \
                    _Pragma("omp simd")                                                                           \
                    for (int64_t d = 0; d < D; d++) ar[d] += p0 * v0[d];                                          \
                }                                                                                                 \
    }

DEFINE_ATTEND(float, f32, exp_nonpositive)
DEFINE_ATTEND(double, f64, exp)


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
        __m256 x = _mm256_fmadd_ps(a0, v0, _mm256_loadu_ps(aa + d)), y = _mm256_fmadd_ps(b0, v0, _mm256_loadu_ps(ab + d));
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
            if (kn) for (int64_t i = 0; i < 8; i++) for (int64_t d = 0; d < D; d += 16) __builtin_prefetch(kn + (t + i) * rs + h * D + d, 0, PREFETCH_LOCALITY);
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
                for (int64_t d = 0; d < D; d += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(qr + d), _mm256_loadu_ps(k0 + d), a);
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
            if (vn) for (int64_t i = 0; i < count; i++) for (int64_t d = 0; d < D; d += 16) __builtin_prefetch(vn + (t + i) * rs + h * D + d, 0, PREFETCH_LOCALITY);
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

#endif /* PAGED_NATIVE_ATTEND_H */
