/* The inner loops of impl="native" (included by native_decode.c): fold one physical block's tokens into the
 * running online-softmax state of some query heads. Portable C for every type, plus an AVX2 + FMA path for float32
 * when head_dim % 8 == 0 (on 16-float AVX-512 vectors when head_dim % 16 == 0 and the CPU has them). Nothing here
 * knows about block tables, threads or partitions.
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


#include "native_avx2.h"

#endif /* PAGED_NATIVE_ATTEND_H */
