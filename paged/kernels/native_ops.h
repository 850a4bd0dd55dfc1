/* The model's small ops as C loops (included by native_decode.c; called by paged/kernels/native_ops.py): RMSNorm
 * (with the residual add before it, optionally), RoPE in place, SwiGLU's silu(gate) * up, and the K/V write through
 * slot_mapping. float32 only.
 *
 * Why: at decode, each of these ops handles a few thousand numbers, and torch spends its time dispatching them, not
 * computing: F.rms_norm alone is six ops (~25 us at 32 x 128 on one core; about twice that inside an engine step,
 * whose K/V reads push torch's code and data out of the caches). A loop here does the same arithmetic in ~1 us.
 * The products and their rounding are torch's, op for op, except where a sum is taken (RMSNorm's mean): there the
 * order differs, as it does between torch's own CPU kernels.
 */
#ifndef PAGED_NATIVE_OPS_H
#define PAGED_NATIVE_OPS_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "native_attend.h" /* exp_nonpositive */

/* Keep a * b + c * d as two rounded products and a rounded sum (what torch's separate ops give), not a fused
 * multiply-add, which -march=native would otherwise allow. */
#if defined(__clang__)
#define PAGED_EXACT_PRODUCTS _Pragma("clang fp contract(off)")
#define PAGED_NO_CONTRACT
#elif defined(__GNUC__)
#define PAGED_EXACT_PRODUCTS
#define PAGED_NO_CONTRACT __attribute__((optimize("fp-contract=off")))
#else
#define PAGED_EXACT_PRODUCTS
#define PAGED_NO_CONTRACT
#endif

/* sum of x[0..n)^2 in 16 running float sums (as a vectorised reduction keeps them), added up at the end. */
PAGED_NO_CONTRACT static float sum_of_squares(const float *x, int64_t n) {
    PAGED_EXACT_PRODUCTS
    float lanes[16] = {0};
    int64_t c = 0;
    for (; c + 16 <= n; c += 16)
        for (int j = 0; j < 16; j++) lanes[j] += x[c + j] * x[c + j];
    float total = 0;
    for (int j = 0; j < 16; j++) total += lanes[j];
    for (; c < n; c++) total += x[c] * x[c];
    return total;
}

/* RMSNorm of `rows` rows of `cols` floats: out[r] = (x[r] * (1 / sqrt(mean(x[r]^2) + eps))) * weight, the order
 * F.rms_norm takes. With `residual` non-NULL, first x[r] += residual[r] (in place: x then holds the sum the next
 * residual add starts from). Every row `cols` floats after the last. Returns 0. */
PAGED_NO_CONTRACT static int64_t rms_norm(float *x, const float *residual, const float *weight, float *out,
                                          int64_t rows, int64_t cols, double eps) {
    PAGED_EXACT_PRODUCTS
    for (int64_t r = 0; r < rows; r++) {
        float *xr = x + r * cols, *o = out + r * cols;
        if (residual)
            for (int64_t c = 0; c < cols; c++) xr[c] += residual[r * cols + c];
        const float inv = 1.0f / sqrtf(sum_of_squares(xr, cols) / (float)cols + (float)eps);
        for (int64_t c = 0; c < cols; c++) o[c] = (xr[c] * inv) * weight[c];
    }
    return 0;
}

/* Rotate-half RoPE in place on `rows` x `heads` vectors of head_dim floats: x = x * cos + roll(x, D/2) * sin, with
 * cos and (signed) sin rows of head_dim as paged/model/rope.py builds them, `trig_stride` floats from one row to
 * the next. Row r's heads start at x + r * row_stride, one after another. head_dim must be even and at most 1024.
 * Returns 0, or 1 if it is not. */
PAGED_NO_CONTRACT static int64_t rope(float *x, int64_t row_stride, const float *cos, const float *sin,
                                      int64_t trig_stride, int64_t rows, int64_t heads, int64_t head_dim) {
    PAGED_EXACT_PRODUCTS
    if (head_dim % 2 || head_dim > 1024) return 1;
    const int64_t half = head_dim / 2;
    float rolled[1024];
    for (int64_t r = 0; r < rows; r++) {
        const float *c = cos + r * trig_stride, *s = sin + r * trig_stride;
        for (int64_t h = 0; h < heads; h++) {
            float *v = x + r * row_stride + h * head_dim;
            memcpy(rolled, v + half, sizeof(float) * (size_t)half);
            memcpy(rolled + half, v, sizeof(float) * (size_t)half);
            for (int64_t d = 0; d < head_dim; d++) v[d] = v[d] * c[d] + rolled[d] * s[d];
        }
    }
    return 0;
}

/* SwiGLU's middle: gate = silu(gate) * up on `rows` rows of `cols` floats, in place; gate and up rows `stride`
 * floats apart (two halves of one [rows, 2 * cols] matmul output, or contiguous with stride = cols). silu(g) =
 * g * sigmoid(g), with e = exp(-|g|) from the kernel's exp_nonpositive (within 2 ulps): sigmoid = 1 / (1 + e) for
 * g >= 0, e / (1 + e) for g < 0. On 16- or 8-float vectors where the CPU has them (the compiler does not vectorise
 * the scalar loop: it ran 90 us at 32 x 384 against torch's 20). torch's silu takes exp(-g) from its own vector exp,
 * so the two are a few ulps apart; below g = -87 this exp is 0 where torch's is subnormal (silu under 1e-35). */
static inline float silu_times(float x, float u) {
    const float e = exp_nonpositive(x < 0 ? x : -x);
    return (x * ((x < 0 ? e : 1.0f) / (1.0f + e))) * u;
}

static int64_t silu_mul(float *gate, const float *up, int64_t stride, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; r++) {
        float *g = gate + r * stride;
        const float *u = up + r * stride;
        int64_t c = 0;
#ifdef HAVE_AVX512
        const __m512 one16 = _mm512_set1_ps(1.0f);
        for (; c + 16 <= cols; c += 16) {
            const __m512 x = _mm512_loadu_ps(g + c);
            const __m512 e = exp16_nonpositive(_mm512_min_ps(x, _mm512_sub_ps(_mm512_setzero_ps(), x)));
            const __m512 top = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, _mm512_setzero_ps(), _CMP_LT_OQ), one16, e);
            const __m512 sigmoid = _mm512_div_ps(top, _mm512_add_ps(one16, e));
            _mm512_storeu_ps(g + c, _mm512_mul_ps(_mm512_mul_ps(x, sigmoid), _mm512_loadu_ps(u + c)));
        }
#endif
#ifdef HAVE_AVX2
        const __m256 one8 = _mm256_set1_ps(1.0f);
        for (; c + 8 <= cols; c += 8) {
            const __m256 x = _mm256_loadu_ps(g + c);
            const __m256 e = exp8_nonpositive(_mm256_min_ps(x, _mm256_sub_ps(_mm256_setzero_ps(), x)));
            const __m256 top = _mm256_blendv_ps(one8, e, _mm256_cmp_ps(x, _mm256_setzero_ps(), _CMP_LT_OQ));
            const __m256 sigmoid = _mm256_div_ps(top, _mm256_add_ps(one8, e));
            _mm256_storeu_ps(g + c, _mm256_mul_ps(_mm256_mul_ps(x, sigmoid), _mm256_loadu_ps(u + c)));
        }
#endif
        for (; c < cols; c++) g[c] = silu_times(g[c], u[c]);
    }
    return 0;
}

/* Write n rows of `row_bytes` into a flat cache of num_slots rows, key and value in one call:
 * key_cache[slots[i]] = key[i], key rows `key_stride` bytes apart (value alike). Returns 0, or 1 + i for the first
 * slot i outside [0, num_slots), and then writes nothing. */
static int64_t write_rows(char *key_cache, char *value_cache, const char *key, const char *value,
                          int64_t key_stride, int64_t value_stride, const int64_t *slots, int64_t n,
                          int64_t row_bytes, int64_t num_slots) {
    for (int64_t i = 0; i < n; i++)
        if (slots[i] < 0 || slots[i] >= num_slots) return 1 + i;
    for (int64_t i = 0; i < n; i++) {
        const int64_t s = slots[i];
        memcpy(key_cache + s * row_bytes, key + i * key_stride, (size_t)row_bytes);
        memcpy(value_cache + s * row_bytes, value + i * value_stride, (size_t)row_bytes);
    }
    return 0;
}

/* The four as Python calls them: their arguments in one int64 array (pointers as integers), so that ctypes
 * converts one pointer instead of 7-10 arguments (0.8 instead of 2.4 us a call, at ~15 calls a decode step). */
int64_t paged_rms_norm(const int64_t *a, double eps) {
    return rms_norm((float *)a[0], (const float *)a[1], (const float *)a[2], (float *)a[3], a[4], a[5], eps);
}

int64_t paged_rope(const int64_t *a) {
    return rope((float *)a[0], a[1], (const float *)a[2], (const float *)a[3], a[4], a[5], a[6], a[7]);
}

int64_t paged_silu_mul(const int64_t *a) {
    return silu_mul((float *)a[0], (const float *)a[1], a[2], a[3], a[4]);
}

int64_t paged_write_rows(const int64_t *a) {
    return write_rows((char *)a[0], (char *)a[1], (const char *)a[2], (const char *)a[3], a[4], a[5],
                      (const int64_t *)a[6], a[7], a[8], a[9]);
}

#endif
