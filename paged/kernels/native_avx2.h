/* The AVX2 + FMA inner loops of impl="native" for float32 with head_dim % 8 == 0 (included by native_attend.h,
 * which holds the portable versions and the helpers used here). Defines HAVE_AVX2 when the compiler targets AVX2
 * and FMA (-march=native on such a CPU); otherwise it is empty and the portable loops run. Where it also targets
 * AVX-512F, HAVE_AVX512 and the same loops on 16-float vectors for head_dim % 16 == 0. Which path a build takes
 * is the compiler's flags: the tests build each (default -march=native; -mno-avx512f; no -march at all).
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

/* The largest of a's 8 lanes. */
static inline float max_lanes(__m256 a) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_max_ss(s, _mm_movehdup_ps(s)));
}

/* The online-softmax step of one block for query heads [qa, qb), at most 8: each head's new running max m over
 * its n scores (rows of `scores`, BS apart), the scores replaced by exp(score - m), l and acc (rows of D) rescaled
 * by exp(m_old - m_new) and l increased by the new sum. The maxima are taken 8 scores at a time and the 8 heads'
 * rescale factors by one exp8_nonpositive: one head at a time, in scalar code, this step cost a GQA 8/2 head_dim
 * 64 decode 12-25% of its time (against 6-9% for the exponentials themselves). A score that is NaN is left out of
 * the max, as `x > max ? x : max` does, and makes its head's output NaN through exp. */
static inline void softmax_step(float *scores, float *acc, float *m, float *l, int64_t qa, int64_t qb, int64_t n,
                                int64_t BS, int64_t D) {
    const int64_t n8 = n - n % 8;
    float old[8] = {0}, mx[8] = {0}, alpha[8]; /* lanes past qb - qa: exp(0 - 0), unused */
    for (int64_t qh = qa; qh < qb; qh++) {
        const float *sr = scores + qh * BS;
        __m256 mv = _mm256_set1_ps(m[qh]); /* second operand of max: a NaN score leaves it as it was */
        for (int64_t t = 0; t < n8; t += 8) mv = _mm256_max_ps(_mm256_loadu_ps(sr + t), mv);
        float x = max_lanes(mv);
        for (int64_t t = n8; t < n; t++) x = sr[t] > x ? sr[t] : x;
        old[qh - qa] = m[qh];
        mx[qh - qa] = x;
    }
    /* 0 on the first block, where m is -inf */
    _mm256_storeu_ps(alpha, exp8_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(old), _mm256_loadu_ps(mx))));
    for (int64_t qh = qa; qh < qb; qh++) {
        float *sr = scores + qh * BS, *ar = acc + qh * D;
        const float x = mx[qh - qa], a = alpha[qh - qa];
        const __m256 mv = _mm256_set1_ps(x);
        __m256 sv = _mm256_setzero_ps();
        for (int64_t t = 0; t < n8; t += 8) {
            const __m256 e = exp8_nonpositive(_mm256_sub_ps(_mm256_loadu_ps(sr + t), mv));
            _mm256_storeu_ps(sr + t, e);
            sv = _mm256_add_ps(sv, e);
        }
        float sum = sum_lanes(sv);
        for (int64_t t = n8; t < n; t++) { sr[t] = exp_nonpositive(sr[t] - x); sum += sr[t]; }
        l[qh] = l[qh] * a + sum;
        m[qh] = x;
        if (a != 1.0f) {
            const __m256 av = _mm256_set1_ps(a);
            for (int64_t d = 0; d < D; d += 8) _mm256_storeu_ps(ar + d, _mm256_mul_ps(_mm256_loadu_ps(ar + d), av));
        }
    }
}

/* Register-blocked tiles. R query heads that share one kv head (GQA) are one tile: each K and V vector is loaded
 * once for all R of them, and the tile's accumulators or weights stay in registers (R and T are constants where
 * these are inlined, so the arrays below are registers, not memory). */
#define TILE static inline __attribute__((always_inline))
/* Keep a loaded vector in its register: without this the compiler folds the load into every FMA that uses it,
 * one load per use (12 loads per 8 FMAs in qk_tile), and the loop waits on the load ports. */
#define IN_REGISTER(x) __asm__("" : "+x"(x))
/* Accumulators (qk_tile) or weights (pv_tile) one tile holds in registers: 16 where AVX-512VL gives 32 vector
 * registers, else 8 of the 16. A tile of R query heads takes TILE_T(R) tokens at a time. */
#ifdef __AVX512VL__
#define TILE_REGS 16
#else
#define TILE_REGS 8
#endif
#define TILE_T(R) (TILE_REGS / (R) < 8 ? TILE_REGS / (R) : 8)

/* s[r * BS + i] = q[r] . K row i, for R query heads (rows q, q + D, ...) and T tokens (rows k, k + rs, ...), with
 * R * T 8 or 16: as many accumulators, their lanes summed 8 at a time by one shuffle tree. */
TILE void qk_tile(const float *k, int64_t rs, int64_t D, const float *q, float *s, int64_t BS, int R, int T) {
    __m256 a[16], kv[8];
    for (int i = 0; i < R * T; i++) a[i] = _mm256_setzero_ps();
    for (int64_t d = 0; d < D; d += 8) {
        for (int i = 0; i < T; i++) {
            kv[i] = _mm256_loadu_ps(k + i * rs + d);
            if (R > 1) IN_REGISTER(kv[i]); /* used once (R = 1): left to fold into its FMA */
        }
        for (int r = 0; r < R; r++) {
            __m256 x = _mm256_loadu_ps(q + r * D + d);
            IN_REGISTER(x);
            for (int i = 0; i < T; i++) a[r * T + i] = _mm256_fmadd_ps(x, kv[i], a[r * T + i]);
        }
    }
    float out[16];
    for (int i = 0; i < R * T; i += 8) {
        const __m256 *b = a + i;
        _mm256_storeu_ps(out + i, sum_lanes8(b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]));
    }
    for (int r = 0; r < R; r++)
        for (int i = 0; i < T; i++) s[r * BS + i] = out[r * T + i];
}

/* One score: q . k over D values (the block's last tokens that do not fill a tile). */
TILE float qk_one(const float *k, const float *q, int64_t D) {
    __m256 a = _mm256_setzero_ps();
    for (int64_t d = 0; d < D; d += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k + d), a);
    return sum_lanes(a);
}

/* The accumulators of R query heads (rows acc, acc + D, ...) += sum over T tokens i of p[r * BS + i] * V row i
 * (v + i * rs). The R * T weights are held in registers, the T rows are read side by side, front to back, and
 * each accumulator vector is loaded and stored once per T tokens. */
TILE void pv_tile(const float *v, int64_t rs, int64_t D, const float *p, int64_t BS, float *acc, int R, int T) {
    __m256 w[16], x[8];
    for (int r = 0; r < R; r++)
        for (int i = 0; i < T; i++) w[r * T + i] = _mm256_broadcast_ss(p + r * BS + i);
    for (int64_t d = 0; d < D; d += 8) {
        for (int i = 0; i < T; i++) {
            x[i] = _mm256_loadu_ps(v + i * rs + d);
            if (R > 1) IN_REGISTER(x[i]);
        }
        for (int r = 0; r < R; r++) {
            __m256 a = _mm256_loadu_ps(acc + r * D + d);
            for (int i = 0; i < T; i++) a = _mm256_fmadd_ps(w[r * T + i], x[i], a);
            _mm256_storeu_ps(acc + r * D + d, a);
        }
    }
}

/* The query heads of kv head h, [h * G, (h + 1) * G), in tiles of 4, 2 and 1: calls TILE_CALL(qh, R) per tile. */
#define FOR_TILES(h, G, TILE_CALL)                                                                                \
    do {                                                                                                          \
        int64_t qh_ = (h) * (G);                                                                                  \
        for (; qh_ + 4 <= ((h) + 1) * (G); qh_ += 4) TILE_CALL(qh_, 4);                                           \
        if (qh_ + 2 <= ((h) + 1) * (G)) { TILE_CALL(qh_, 2); qh_ += 2; }                                          \
        if (qh_ < ((h) + 1) * (G)) TILE_CALL(qh_, 1);                                                             \
    } while (0)

/* Rows [t, t + count) of kv head h of the next block (`next`, or NULL: none) prefetched into L2, one request per
 * 64-byte line. A macro: written as a static inline function, gcc 12 (-O1 to -O3) emitted no prefetch for it. */
#define PREFETCH_ROWS(next, t, count, h, rs, D)                                                                   \
    if (next)                                                                                                     \
        for (int64_t i_ = (t); i_ < (t) + (count); i_++)                                                          \
            for (int64_t d_ = 0; d_ < (D); d_ += 16)                                                              \
                __builtin_prefetch((next) + i_ * (rs) + (h) * (D) + d_, 0, PREFETCH_LOCALITY);

/* The tiles on 16-float (512-bit) vectors, where the compiler targets AVX-512F, for head_dim % 16 == 0: the same
 * loops as qk_tile and pv_tile with twice the floats per instruction. On a 2-core Xeon (AVX-512), warm, the 8-wide
 * tiles took about 16 ns each for q.K and p.V per token and kv head at GQA 8/2, d128 (64 FMAs each: near what one
 * core issues), so doubling the width is what speeds up the grouped heads, whose 4 query heads per K/V row make
 * them compute-bound once K/V are in cache: 0.83x the time, one thread. */
#ifdef __AVX512F__
#define HAVE_AVX512 1
#define TILE_T16(R) (16 / (R) < 16 ? 16 / (R) : 16) /* q.K: R * T = 16 accumulators */
#define TILE_P16(R) (16 / (R) < 8 ? 16 / (R) : 8)   /* p.V: R * T = 16 weights, or 8 (T at most 8 rows at once) */

/* The 16 sums of 16 vectors' lanes, as one vector: lane i = sum(a[i]). A tree of 15 shuffle-and-add steps, each
 * halving what is left to sum per vector while doubling the vectors packed into one (46 instructions, against
 * 58 for folding each to 8 lanes and summing those 8 at a time). */
TILE __m512 sum_lanes16(const __m512 *a) {
    __m512 c[8], d[4], e[2];
    for (int j = 0; j < 8; j++) /* [a_j's 8 partial sums | a_{j+8}'s] */
        c[j] = _mm512_add_ps(_mm512_shuffle_f32x4(a[j], a[j + 8], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_f32x4(a[j], a[j + 8], _MM_SHUFFLE(3, 2, 3, 2)));
    for (int j = 0; j < 4; j++) /* 128-bit lanes: 4 partial sums of a_j, a_{j+8}, a_{j+4}, a_{j+12} */
        d[j] = _mm512_add_ps(_mm512_shuffle_f32x4(c[j], c[j + 4], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(c[j], c[j + 4], _MM_SHUFFLE(3, 1, 3, 1)));
    for (int j = 0; j < 2; j++) /* 2 partial sums each, d_j's and d_{j+2}'s interleaved */
        e[j] = _mm512_add_ps(_mm512_unpacklo_ps(d[j], d[j + 2]), _mm512_unpackhi_ps(d[j], d[j + 2]));
    /* lane 4L + p: the whole sum of a_{p + (0, 8, 4, 12)[L]}; put the 128-bit lanes in order */
    const __m512 f = _mm512_add_ps(_mm512_unpacklo_ps(e[0], e[1]), _mm512_unpackhi_ps(e[0], e[1]));
    return _mm512_shuffle_f32x4(f, f, _MM_SHUFFLE(3, 1, 2, 0));
}

/* exp_nonpositive on 16 lanes (exp8_nonpositive's steps; 2^n applied by scalef); a NaN stays NaN. */
static inline __m512 exp16_nonpositive(__m512 x) {
    const __m512 low = _mm512_set1_ps(-87.0f);
    const __m512 c = _mm512_max_ps(low, x); /* returns x when x is NaN */
    const __m512 n = _mm512_roundscale_ps(_mm512_fmadd_ps(c, _mm512_set1_ps(1.44269504088896341f),
                                                          _mm512_set1_ps(0.5f)),
                                          _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693145751953125f), c);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(1.42860682030941723212e-6f), r);
    __m512 p = _mm512_set1_ps(1.0f / 5040.0f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 720.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 120.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 24.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f / 6.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.0f));
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, low, _CMP_LT_OQ), _mm512_scalef_ps(p, n), _mm512_setzero_ps());
}

/* softmax_step for up to 16 query heads [qa, qb), on 16-float vectors (head_dim % 16 == 0): a block's 16 scores
 * of one head are one vector, so its max, exponentials and sum take one pass each, and the heads' rescale factors
 * one exp16_nonpositive. Lanes past n are read as -inf (their exp is 0) and never written. Same NaN rule. */
static inline void softmax_step16(float *scores, float *acc, float *m, float *l, int64_t qa, int64_t qb, int64_t n,
                                  int64_t BS, int64_t D) {
    float old[16] = {0}, mx[16] = {0}, alpha[16]; /* lanes past qb - qa: exp(0 - 0), unused */
    const __m512 none = _mm512_set1_ps(-INFINITY);
    for (int64_t qh = qa; qh < qb; qh++) {
        const float *sr = scores + qh * BS;
        __m512 mv = _mm512_set1_ps(m[qh]); /* second operand of max: a NaN score leaves it as it was */
        for (int64_t t = 0; t < n; t += 16) {
            const __mmask16 k = n - t >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - t)) - 1);
            mv = _mm512_max_ps(_mm512_mask_loadu_ps(none, k, sr + t), mv);
        }
        old[qh - qa] = m[qh];
        mx[qh - qa] = _mm512_reduce_max_ps(mv);
    }
    /* 0 on the first block, where m is -inf */
    _mm512_storeu_ps(alpha, exp16_nonpositive(_mm512_sub_ps(_mm512_loadu_ps(old), _mm512_loadu_ps(mx))));
    for (int64_t qh = qa; qh < qb; qh++) {
        float *sr = scores + qh * BS, *ar = acc + qh * D;
        const float x = mx[qh - qa], a = alpha[qh - qa];
        const __m512 mv = _mm512_set1_ps(x);
        __m512 sv = _mm512_setzero_ps();
        for (int64_t t = 0; t < n; t += 16) {
            const __mmask16 k = n - t >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - t)) - 1);
            const __m512 e = exp16_nonpositive(_mm512_sub_ps(_mm512_mask_loadu_ps(none, k, sr + t), mv));
            _mm512_mask_storeu_ps(sr + t, k, e);
            sv = _mm512_add_ps(sv, e);
        }
        l[qh] = l[qh] * a + _mm512_reduce_add_ps(sv);
        m[qh] = x;
        if (a != 1.0f) {
            const __m512 av = _mm512_set1_ps(a);
            for (int64_t d = 0; d < D; d += 16) _mm512_storeu_ps(ar + d, _mm512_mul_ps(_mm512_loadu_ps(ar + d), av));
        }
    }
}

/* qk_tile on 16-float vectors: R * T accumulators (16, or 8 when R = 1 would need more rows than a block has). */
TILE void qk_tile16(const float *k, int64_t rs, int64_t D, const float *q, float *s, int64_t BS, int R, int T) {
    __m512 a[16], kv[16];
    for (int i = 0; i < 16; i++) a[i] = _mm512_setzero_ps();
    for (int64_t d = 0; d < D; d += 16) {
        for (int i = 0; i < T; i++) {
            kv[i] = _mm512_loadu_ps(k + i * rs + d);
            if (R > 1) IN_REGISTER(kv[i]);
        }
        for (int r = 0; r < R; r++) {
            __m512 x = _mm512_loadu_ps(q + r * D + d);
            IN_REGISTER(x);
            for (int i = 0; i < T; i++) a[r * T + i] = _mm512_fmadd_ps(x, kv[i], a[r * T + i]);
        }
    }
    float out[16];
    _mm512_storeu_ps(out, sum_lanes16(a)); /* lanes past R * T sum the zeros they started as: unused */
    for (int r = 0; r < R; r++)
        for (int i = 0; i < T; i++) s[r * BS + i] = out[r * T + i];
}

/* pv_tile on 16-float vectors. */
TILE void pv_tile16(const float *v, int64_t rs, int64_t D, const float *p, int64_t BS, float *acc, int R, int T) {
    __m512 w[16], x[8];
    for (int r = 0; r < R; r++)
        for (int i = 0; i < T; i++) w[r * T + i] = _mm512_set1_ps(p[r * BS + i]);
    for (int64_t d = 0; d < D; d += 16) {
        for (int i = 0; i < T; i++) {
            x[i] = _mm512_loadu_ps(v + i * rs + d);
            if (R > 1) IN_REGISTER(x[i]);
        }
        for (int r = 0; r < R; r++) {
            __m512 a = _mm512_loadu_ps(acc + r * D + d);
            for (int i = 0; i < T; i++) a = _mm512_fmadd_ps(w[r * T + i], x[i], a);
            _mm512_storeu_ps(acc + r * D + d, a);
        }
    }
}

/* The accumulators of R query heads (rows acc, acc + D, ...) += sum over the block's `count` tokens i of
 * p[r * BS + i] * V row i (v + i * rs), on 16-float vectors, with the accumulators in registers for the whole
 * block: 16 of them, so head_dim is taken in slices of 16 / R vectors (4 heads: 64 floats), each slice's
 * accumulators loaded and stored once per block instead of once per few tokens (pv_tile16), and each weight
 * broadcast straight into its FMA. While row i is used, row i of the next block (`next`, or NULL) is prefetched.
 * For grouped heads (R > 1) only: one thread, warm, GQA 8/2 and 4/1 at d64 and d128 took 0.87-0.97x the time of
 * pv_tile16 (best of 5000 calls, interleaved), the same with K/V from DRAM (0.98-1.00x); with one query head per
 * kv head (MHA) it measured 0.96-1.05x, so MHA keeps pv_tile16. */
TILE void pv_rows16(const float *v, int64_t rs, int64_t D, const float *p, int64_t BS, float *acc, int R,
                    int64_t count, const float *next) {
    const int NV = 16 / R; /* vectors per head in one slice */
    for (int64_t dc = 0; dc < D; dc += 16 * NV) {
        const int64_t nv = (D - dc) / 16 < NV ? (D - dc) / 16 : NV; /* the last slice may be narrower */
        __m512 a[16];
        for (int r = 0; r < R; r++)
            for (int j = 0; j < NV; j++)
                a[r * NV + j] = j < nv ? _mm512_loadu_ps(acc + r * D + dc + 16 * j) : _mm512_setzero_ps();
        for (int64_t i = 0; i < count; i++) {
            const float *row = v + i * rs + dc;
            if (dc == 0) PREFETCH_ROWS(next, i, 1, 0, rs, D) /* row i of the next block, while row i is used */
            for (int j = 0; j < NV; j++)
                if (j < nv) {
                    const __m512 x = _mm512_loadu_ps(row + 16 * j);
                    for (int r = 0; r < R; r++)
                        a[r * NV + j] = _mm512_fmadd_ps(_mm512_set1_ps(p[r * BS + i]), x, a[r * NV + j]);
                }
        }
        for (int r = 0; r < R; r++)
            for (int j = 0; j < NV; j++)
                if (j < nv) _mm512_storeu_ps(acc + r * D + dc + 16 * j, a[r * NV + j]);
    }
}
#endif

/* attend_block_avx2 (head_dim % 8 == 0) and attend_block_avx512 (head_dim % 16 == 0, AVX-512F): attend_block_f32
 * on vectors of W = 8 or 16 floats. The block is read front to back, 8 tokens at a time, first K (scores), then V
 * (accumulation); per kv head its G query heads are taken in register-blocked tiles of 4, 2 and 1, so each K and V
 * vector is loaded once per tile: once for G <= 4. While rows t..t+7 are used, the same rows of the next block
 * (kn, vn; NULL: none) are prefetched. Same arguments. */
TILE void attend_block_vec(const float *kb, const float *vb, int64_t n, const float *q, float *acc, float *m,
                           float *l, float *scores, int64_t BS, int64_t h0, int64_t h1, int64_t G, int64_t KVH,
                           int64_t D, const float *kn, const float *vn, int W) {
    const int64_t rs = KVH * D, n8 = n - n % 8;
#ifdef HAVE_AVX512
#define QK_(...) (W == 16 ? qk_tile16(__VA_ARGS__) : qk_tile(__VA_ARGS__))
#define PV_(...) (W == 16 ? pv_tile16(__VA_ARGS__) : pv_tile(__VA_ARGS__))
#define TQ_(R) (W == 16 ? (TILE_T16(R) < 8 ? TILE_T16(R) : 8) : TILE_T(R)) /* within a step of 8 tokens */
#define TP_(R) (W == 16 ? TILE_P16(R) : TILE_T(R))
#else
#define QK_(...) qk_tile(__VA_ARGS__)
#define PV_(...) pv_tile(__VA_ARGS__)
#define TQ_(R) TILE_T(R)
#define TP_(R) TILE_T(R)
#endif
    for (int64_t t = 0; t < n8; t += 8)
        for (int64_t h = h0; h < h1; h++) {
            const float *k = kb + t * rs + h * D;
            PREFETCH_ROWS(kn, t, 8, h, rs, D)
#define QK_TILE(qh, R)                                                                                            \
    for (int64_t i = 0; i < 8; i += TQ_(R))                                                                       \
        QK_(k + i * rs, rs, D, q + (qh) * D, scores + (qh) * BS + t + i, BS, R, TQ_(R))
            FOR_TILES(h, G, QK_TILE);
#undef QK_TILE
        }
    for (int64_t t = n8; t < n; t++) /* the block's last 1..7 tokens */
        for (int64_t qh = h0 * G; qh < h1 * G; qh++)
            scores[qh * BS + t] = qk_one(kb + t * rs + qh / G * D, q + qh * D, D);
#ifdef HAVE_AVX512
    if (W == 16) { /* online softmax, 16 query heads at a time */
        for (int64_t qa = h0 * G; qa < h1 * G; qa += 16)
            softmax_step16(scores, acc, m, l, qa, qa + 16 < h1 * G ? qa + 16 : h1 * G, n, BS, D);
    } else
#endif
    {
        for (int64_t qa = h0 * G; qa < h1 * G; qa += 8) /* online softmax, 8 query heads at a time */
            softmax_step(scores, acc, m, l, qa, qa + 8 < h1 * G ? qa + 8 : h1 * G, n, BS, D);
    }
#ifdef HAVE_AVX512
    if (W == 16 && G > 1) { /* grouped heads: p.V a block at a time (pv_rows16) */
        for (int64_t h = h0; h < h1; h++) {
            const float *next = vn ? vn + h * D : NULL; /* prefetched by the first tile of this kv head */
#define PV_ROWS_TILE(qh, R)                                                                                       \
    do {                                                                                                          \
        pv_rows16(vb + h * D, rs, D, scores + (qh) * BS, BS, acc + (qh) * D, R, n, next);                         \
        next = NULL;                                                                                              \
    } while (0)
            FOR_TILES(h, G, PV_ROWS_TILE);
#undef PV_ROWS_TILE
        }
        return;
    }
#endif
    for (int64_t t = 0; t < n; t += 8) {
        const int64_t count = n - t < 8 ? n - t : 8;
        for (int64_t h = h0; h < h1; h++) {
            const float *v = vb + t * rs + h * D;
            PREFETCH_ROWS(vn, t, count, h, rs, D)
#define PV_TILE(qh, R)                                                                                            \
    do {                                                                                                          \
        int64_t i_ = 0;                                                                                           \
        for (; i_ + TP_(R) <= count; i_ += TP_(R))                                                                \
            PV_(v + i_ * rs, rs, D, scores + (qh) * BS + t + i_, BS, acc + (qh) * D, R, TP_(R));                  \
        for (; i_ < count; i_++) PV_(v + i_ * rs, rs, D, scores + (qh) * BS + t + i_, BS, acc + (qh) * D, R, 1);  \
    } while (0)
            FOR_TILES(h, G, PV_TILE);
#undef PV_TILE
        }
    }
#undef QK_
#undef PV_
#undef TQ_
#undef TP_
}

static void attend_block_avx2(const float *kb, const float *vb, int64_t n, const float *q, float *acc, float *m,
                              float *l, float *scores, int64_t BS, int64_t h0, int64_t h1, int64_t G, int64_t KVH,
                              int64_t D, const float *kn, const float *vn) {
    attend_block_vec(kb, vb, n, q, acc, m, l, scores, BS, h0, h1, G, KVH, D, kn, vn, 8);
}
#ifdef HAVE_AVX512
static void attend_block_avx512(const float *kb, const float *vb, int64_t n, const float *q, float *acc, float *m,
                                float *l, float *scores, int64_t BS, int64_t h0, int64_t h1, int64_t G, int64_t KVH,
                                int64_t D, const float *kn, const float *vn) {
    attend_block_vec(kb, vb, n, q, acc, m, l, scores, BS, h0, h1, G, KVH, D, kn, vn, 16);
}
#endif
#endif

#endif /* PAGED_NATIVE_AVX2_H */
