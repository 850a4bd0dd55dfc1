/* impl="native": paged decode attention as one C function, compiled on first use (paged/kernels/native.py).
 *
 * The algorithm of impl="fused", without its costs: no tile copies and no op dispatch per tile. A work item is one
 * sequence and a range of its kv heads (the whole range unless the batch is too small to keep every thread busy).
 * Worker threads take items from a shared counter. An item walks its block table one physical block at a time:
 *   - while it reads rows t..t+7 of block j it asks the CPU to prefetch the same rows of block j+1, whose address
 *     the table already knows (the hardware prefetcher cannot guess it: logical neighbours sit anywhere in the
 *     pool). Measured on a 2-core EPYC at 2048 tokens: up to 1.3x faster at head_dim 64, no clear change at 128;
 *   - every K and V row is read once, in place, straight out of the pool;
 *   - an online softmax per query head: m running max, l running sum of exp(score - m), acc running sum of p * V,
 *     rescaled by exp(m_old - m_new) whenever a block raises the max.
 * Several tokens are scored at a time (independent sums: 8 in the AVX2 path, which also sums their lanes in one
 * shuffle tree and exponentiates 8 scores at once; 4 in the portable path) and added into acc together, so the
 * vector units are not waiting on one long chain of dependent additions.
 * Threads: OpenMP when built with it (then torch's own thread pool, see native.py), else pthreads.
 *
 * Shapes (all contiguous):
 *   query        [batch, num_heads, head_dim]                        compute type, already multiplied by scale
 *   key_cache    [num_blocks, block_size, num_kv_heads, head_dim]    storage type: f32, f64, f16 or bf16
 *   value_cache  same as key_cache
 *   block_tables int64 [batch, max_blocks]
 *   context_lens int64 [batch], each >= 1
 *   out          [batch, num_heads, head_dim]                        compute type: double for f64, else float
 * GQA: query head h reads kv head h / group, where group = num_heads / num_kv_heads.
 *
 * A physical block id outside [0, num_blocks) is never read: the call returns 1 + the index of the sequence whose
 * table holds it, so Python can raise instead of reading foreign memory.
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
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

/* Prefetch 4 rows (stride rs) of D values each: the same rows of the next block, while this block's are used. */
#define PREFETCH4(p, rs, D, T)                                                                                    \
    for (int64_t r_ = 0; r_ < 4; r_++)                                                                            \
        for (int64_t e_ = 0; e_ < (D); e_ += 64 / (int64_t)sizeof(T)) __builtin_prefetch((p) + r_ * (rs) + e_, 0, 3);

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

/* begin_<T> / end_<T>: an item's running state before its first block (m = -inf, l = 0, acc = 0) and its output
 * after the last (acc / l), for the query heads of kv heads [h0, h1). */
#define DEFINE_ITEM_ENDS(T, SFX)                                                                                  \
    static void begin_##SFX(T *acc, T *m, T *l, int64_t h0, int64_t h1, int64_t G, int64_t D) {                   \
        for (int64_t qh = h0 * G; qh < h1 * G; qh++) { m[qh] = -INFINITY; l[qh] = 0; }                           \
        memset(acc + h0 * G * D, 0, sizeof(T) * (size_t)((h1 - h0) * G * D));                                    \
    }                                                                                                             \
    static void end_##SFX(T *out, const T *acc, const T *l, int64_t h0, int64_t h1, int64_t G, int64_t D) {       \
        for (int64_t qh = h0 * G; qh < h1 * G; qh++)                                                              \
            for (int64_t d = 0; d < D; d++) out[qh * D + d] = acc[qh * D + d] / l[qh];                            \
    }

DEFINE_ATTEND(float, f32, exp_nonpositive)
DEFINE_ATTEND(double, f64, exp)
DEFINE_ITEM_ENDS(float, f32)
DEFINE_ITEM_ENDS(double, f64)


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

/* attend_block_f32 for head_dim % 8 == 0 with AVX2 + FMA: eight tokens at a time, their eight dot products
 * summed across lanes together (one shuffle tree, not eight), exp on eight scores at once. Same arguments. */
static void attend_block_avx2(const float *kb, const float *vb, int64_t n, const float *q, float *acc, float *m,
                              float *l, float *scores, int64_t BS, int64_t h0, int64_t h1, int64_t G, int64_t KVH,
                              int64_t D, const float *kn, const float *vn) {
    const int64_t rs = KVH * D;
    const int64_t n8 = n - n % 8;
    for (int64_t t = 0; t < n8; t += 8)
        for (int64_t h = h0; h < h1; h++) {
            const float *k = kb + t * rs + h * D;
            if (kn) for (int64_t i = 0; i < 8; i++) for (int64_t d = 0; d < D; d += 16) __builtin_prefetch(kn + (t + i) * rs + h * D + d, 0, 3);
            for (int64_t qh = h * G; qh < (h + 1) * G; qh++) {
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
            if (vn) for (int64_t i = 0; i < count; i++) for (int64_t d = 0; d < D; d += 16) __builtin_prefetch(vn + (t + i) * rs + h * D + d, 0, 3);
            for (int64_t qh = h * G; qh < (h + 1) * G; qh++) {
                const float *p = scores + qh * BS + t;
                float *ar = acc + qh * D;
                for (int64_t d = 0; d < D; d += 8) {
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

typedef struct {
    int dtype; /* 0 f32, 1 f64, 2 f16, 3 bf16 */
    const void *query, *key_cache, *value_cache;
    const int64_t *block_tables, *context_lens;
    void *out;
    int64_t batch, num_heads, num_kv_heads, head_dim, block_size, max_blocks, num_blocks, head_chunks;
    int64_t next_item; /* shared work counter */
    int64_t bad_seq;   /* 1 + first sequence found with an out-of-range block id, or 0 */
    int64_t failed;    /* a worker could not allocate its scratch */
} Job;

static void *worker(void *arg) {
    Job *job = (Job *)arg;
    const int64_t H = job->num_heads, KVH = job->num_kv_heads, D = job->head_dim, BS = job->block_size;
    const int64_t G = H / KVH, chunk = (KVH + job->head_chunks - 1) / job->head_chunks;
    const int64_t block_elems = BS * KVH * D, wide = job->dtype == 1;
    const int64_t store_size = job->dtype == 0 ? 4 : job->dtype == 1 ? 8 : 2, compute_size = wide ? 8 : 4;
    /* scratch, in the compute type: acc [H*D], m [H], l [H], scores [H*BS]; f16/bf16 also one K and one V block. */
    const int64_t halves = job->dtype >= 2 ? 2 * block_elems : 0;
    char *scratch = malloc((size_t)(compute_size * (H * D + 2 * H + H * BS) + 4 * halves));
    if (!scratch) {
        __atomic_store_n(&job->failed, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    for (;;) {
        const int64_t item = __atomic_fetch_add(&job->next_item, 1, __ATOMIC_RELAXED);
        if (item >= job->batch * job->head_chunks) break;
        const int64_t b = item / job->head_chunks, h0 = (item % job->head_chunks) * chunk;
        const int64_t h1 = h0 + chunk < KVH ? h0 + chunk : KVH, len = job->context_lens[b];
        if (h0 >= h1) continue;
        const int64_t *table = job->block_tables + b * job->max_blocks, used = (len + BS - 1) / BS;
        int bad = 0;
        for (int64_t j = 0; j < used; j++) bad |= table[j] < 0 || table[j] >= job->num_blocks;
        if (bad) {
            int64_t none = 0;
            __atomic_compare_exchange_n(&job->bad_seq, &none, b + 1, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
            continue;
        }
        const int64_t block_bytes = block_elems * store_size;
        const char *kc = job->key_cache, *vc = job->value_cache;
        if (wide) {
            double *acc = (double *)scratch, *m = acc + H * D, *l = m + H, *scores = l + H;
            begin_f64(acc, m, l, h0, h1, G, D);
            for (int64_t j = 0; j < used; j++) {
                const int64_t n = len - j * BS < BS ? len - j * BS : BS, next = j + 1 < used ? table[j + 1] : -1;
                attend_block_f64((const double *)(kc + table[j] * block_bytes),
                                 (const double *)(vc + table[j] * block_bytes), n,
                                 (const double *)job->query + b * H * D, acc, m, l, scores, BS, h0, h1, G, KVH, D,
                                 next < 0 ? NULL : (const double *)(kc + next * block_bytes),
                                 next < 0 ? NULL : (const double *)(vc + next * block_bytes));
            }
            end_f64((double *)job->out + b * H * D, acc, l, h0, h1, G, D);
            continue;
        }
        float *acc = (float *)scratch, *m = acc + H * D, *l = m + H, *scores = l + H;
        float *kf = scores + H * BS, *vf = kf + block_elems; /* f16/bf16 only: the block converted to float */
        begin_f32(acc, m, l, h0, h1, G, D);
        for (int64_t j = 0; j < used; j++) {
            const int64_t n = len - j * BS < BS ? len - j * BS : BS, next = j + 1 < used ? table[j + 1] : -1;
            const float *kb = (const float *)(kc + table[j] * block_bytes);
            const float *vb = (const float *)(vc + table[j] * block_bytes);
            const float *kn = NULL, *vn = NULL; /* the next block, to prefetch (f32 only) */
            if (job->dtype >= 2) { /* convert the rows this item reads, keeping the block's layout */
                const uint16_t *k16 = (const uint16_t *)kb, *v16 = (const uint16_t *)vb;
                for (int64_t t = 0; t < n; t++)
                    for (int64_t e = (t * KVH + h0) * D; e < (t * KVH + h1) * D; e++) {
                        kf[e] = job->dtype == 2 ? half_to_float(k16[e]) : bf16_to_float(k16[e]);
                        vf[e] = job->dtype == 2 ? half_to_float(v16[e]) : bf16_to_float(v16[e]);
                    }
                kb = kf;
                vb = vf;
            } else if (next >= 0) {
                kn = (const float *)(kc + next * block_bytes);
                vn = (const float *)(vc + next * block_bytes);
            }
            const float *q = (const float *)job->query + b * H * D;
#ifdef HAVE_AVX2
            if (D % 8 == 0)
                attend_block_avx2(kb, vb, n, q, acc, m, l, scores, BS, h0, h1, G, KVH, D, kn, vn);
            else
#endif
                attend_block_f32(kb, vb, n, q, acc, m, l, scores, BS, h0, h1, G, KVH, D, kn, vn);
        }
        end_f32((float *)job->out + b * H * D, acc, l, h0, h1, G, D);
    }
    free(scratch);
    return NULL;
}

/* Runs on `num_threads` threads (the caller's included), each kv-head range of a sequence split `head_chunks`
 * ways. Returns 0; or 1 + the index of a sequence whose table holds a block id outside the pool; or -1 when
 * scratch memory ran out. After a nonzero return `out` is incomplete. */
int64_t paged_decode(int dtype, int64_t num_threads, int64_t head_chunks, const void *query, const void *key_cache,
                     const void *value_cache, const int64_t *block_tables, const int64_t *context_lens, void *out,
                     int64_t batch, int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, int64_t block_size,
                     int64_t max_blocks, int64_t num_blocks) {
    if (head_chunks < 1) head_chunks = 1;
    if (head_chunks > num_kv_heads) head_chunks = num_kv_heads;
    Job job = {dtype, query, key_cache, value_cache, block_tables, context_lens, out, batch, num_heads,
               num_kv_heads, head_dim, block_size, max_blocks, num_blocks, head_chunks, 0, 0, 0};
    if (num_threads > batch * head_chunks) num_threads = batch * head_chunks;
#ifdef _OPENMP
    /* Loaded into a process that runs torch, this is torch's own OpenMP runtime (same soname, libgomp.so.1): its
     * worker threads, which may still be spinning after torch's last op, pick up this work instead of competing
     * with threads of our own. */
#pragma omp parallel num_threads((int)num_threads)
    worker(&job);
#else
    if (num_threads > 64) num_threads = 64;
    pthread_t workers[64];
    int64_t started = 0;
    for (int64_t i = 1; i < num_threads; i++)
        if (pthread_create(&workers[started], NULL, worker, &job) == 0) started++;
    worker(&job);
    for (int64_t i = 0; i < started; i++) pthread_join(workers[i], NULL);
#endif
    return job.failed ? -1 : job.bad_seq;
}
