/* Memory-safety harness for paged/kernels/native_decode.c, built by tests/test_native.py with AddressSanitizer.
 *
 * Every buffer the kernel gets is its own heap allocation of exactly the right size, so a read or write one
 * element outside any of them stops the program with an ASan report. Each case is also checked against a plain
 * attention written here in double, independently of the kernel. Cases cover every storage type, GQA/MQA,
 * head_dims off the vector width, block sizes 1 and odd, ragged lengths, -1 padded tables, 1 and 3 threads and
 * split kv heads, plus the refusal of an out-of-pool block id. Exit status 0 means every case passed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../paged/kernels/native_decode.c"

static uint64_t rng = 88172645463325252ull;
static int64_t rand_int(int64_t n) { /* xorshift: 0 <= r < n */
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (int64_t)(rng % (uint64_t)n);
}

/* A value exactly representable in f16, bf16, f32 and f64: k / 64 with |k| <= 128. */
static double random_value(void) { return (double)(rand_int(257) - 128) / 64.0; }

static uint16_t to_bf16(double v) {
    float f = (float)v;
    uint32_t bits;
    memcpy(&bits, &f, sizeof bits);
    return (uint16_t)(bits >> 16); /* exact for k / 64 */
}

static uint16_t to_f16(double v) { /* normal numbers and zero only, which is all random_value makes */
    if (v == 0) return 0;
    uint16_t sign = v < 0 ? 0x8000u : 0;
    double a = fabs(v);
    int e = 0;
    while (a >= 2) { a /= 2; e++; }
    while (a < 1) { a *= 2; e--; }
    return (uint16_t)(sign | (uint16_t)((e + 15) << 10) | (uint16_t)((a - 1) * 1024));
}

static void *store(const double *src, int64_t n, int dtype) { /* an exact-size heap copy in the storage type */
    size_t size = dtype == 0 ? 4 : dtype == 1 ? 8 : 2;
    char *out = malloc((size_t)n * size);
    for (int64_t i = 0; i < n; i++) {
        if (dtype == 0) ((float *)out)[i] = (float)src[i];
        else if (dtype == 1) ((double *)out)[i] = src[i];
        else if (dtype == 2) ((uint16_t *)out)[i] = to_f16(src[i]);
        else ((uint16_t *)out)[i] = to_bf16(src[i]);
    }
    return out;
}

static int run_case(int dtype, int64_t H, int64_t KVH, int64_t D, int64_t BS, int64_t B, int64_t threads,
                    int64_t chunks) {
    int64_t lens_buf[8], max_used = 0, total_blocks = 0;
    for (int64_t b = 0; b < B; b++) {
        lens_buf[b] = 1 + rand_int(3 * BS + 40);
        int64_t used = (lens_buf[b] + BS - 1) / BS;
        max_used = used > max_used ? used : max_used;
        total_blocks += used;
    }
    const int64_t NB = total_blocks + 3, width = max_used + 1, block_elems = BS * KVH * D;
    double *kd = malloc(sizeof(double) * (size_t)(NB * block_elems)), *vd = malloc(sizeof(double) * (size_t)(NB * block_elems));
    for (int64_t i = 0; i < NB * block_elems; i++) { kd[i] = random_value(); vd[i] = random_value(); }
    int64_t *perm = malloc(sizeof(int64_t) * (size_t)NB);
    for (int64_t i = 0; i < NB; i++) perm[i] = i;
    for (int64_t i = NB - 1; i > 0; i--) { int64_t j = rand_int(i + 1), t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
    int64_t *tables = malloc(sizeof(int64_t) * (size_t)(B * width)), *lens = malloc(sizeof(int64_t) * (size_t)B);
    int64_t next = 0;
    for (int64_t b = 0; b < B; b++) {
        lens[b] = lens_buf[b];
        int64_t used = (lens[b] + BS - 1) / BS;
        for (int64_t j = 0; j < width; j++) tables[b * width + j] = j < used ? perm[next++] : -1;
    }
    const int wide = dtype == 1;
    double *qd = malloc(sizeof(double) * (size_t)(B * H * D));
    for (int64_t i = 0; i < B * H * D; i++) qd[i] = random_value() / 4;
    void *q = malloc((size_t)(B * H * D) * (wide ? 8 : 4)), *out = malloc((size_t)(B * H * D) * (wide ? 8 : 4));
    for (int64_t i = 0; i < B * H * D; i++) {
        if (wide) ((double *)q)[i] = qd[i];
        else ((float *)q)[i] = (float)qd[i];
    }
    void *kc = store(kd, NB * block_elems, dtype), *vc = store(vd, NB * block_elems, dtype);
    int64_t status = paged_decode(dtype, threads, chunks, q, kc, vc, tables, lens, out, B, H, KVH, D, BS, width, NB);
    int bad = status != 0;
    for (int64_t b = 0; b < B && !bad; b++)
        for (int64_t h = 0; h < H && !bad; h++) { /* plain softmax attention, in double */
            const int64_t kvh = h / (H / KVH), n = lens[b];
            double mx = -INFINITY, sum = 0, *w = malloc(sizeof(double) * (size_t)n);
            for (int64_t t = 0; t < n; t++) {
                const double *k = kd + (tables[b * width + t / BS] * BS + t % BS) * KVH * D + kvh * D;
                double s = 0;
                for (int64_t d = 0; d < D; d++) s += qd[(b * H + h) * D + d] * k[d];
                w[t] = s;
                mx = s > mx ? s : mx;
            }
            for (int64_t t = 0; t < n; t++) { w[t] = exp(w[t] - mx); sum += w[t]; }
            for (int64_t d = 0; d < D && !bad; d++) {
                double ref = 0;
                for (int64_t t = 0; t < n; t++)
                    ref += w[t] / sum * vd[(tables[b * width + t / BS] * BS + t % BS) * KVH * D + kvh * D + d];
                const double got = wide ? ((double *)out)[(b * H + h) * D + d] : ((float *)out)[(b * H + h) * D + d];
                if (fabs(got - ref) > (wide ? 1e-12 : 2e-5) * (1 + fabs(ref))) {
                    fprintf(stderr, "mismatch dtype %d H %ld KVH %ld D %ld BS %ld seq %ld head %ld d %ld: %g vs %g\n",
                            dtype, (long)H, (long)KVH, (long)D, (long)BS, (long)b, (long)h, (long)d, got, ref);
                    bad = 1;
                }
            }
            free(w);
        }
    if (!bad) { /* a block id one past the pool in the last sequence is refused, never read */
        int64_t used = (lens[B - 1] + BS - 1) / BS;
        tables[(B - 1) * width + used - 1] = NB;
        status = paged_decode(dtype, threads, chunks, q, kc, vc, tables, lens, out, B, H, KVH, D, BS, width, NB);
        if (status != B) {
            fprintf(stderr, "out-of-pool block id: status %ld, expected %ld\n", (long)status, (long)B);
            bad = 1;
        }
    }
    free(kd); free(vd); free(perm); free(tables); free(lens); free(qd); free(q); free(out); free(kc); free(vc);
    return bad;
}

int main(void) {
    const int64_t heads[][2] = {{4, 4}, {8, 2}, {6, 1}}, dims[] = {4, 8, 20, 64}, block_sizes[] = {1, 3, 16};
    int failures = 0, cases = 0;
    for (int dtype = 0; dtype < 4; dtype++)
        for (int hi = 0; hi < 3; hi++)
            for (int di = 0; di < 4; di++)
                for (int bi = 0; bi < 3; bi++) {
                    const int64_t B = 1 + rand_int(4), threads = 1 + 2 * rand_int(2), chunks = 1 + rand_int(2);
                    failures += run_case(dtype, heads[hi][0], heads[hi][1], dims[di], block_sizes[bi], B, threads,
                                         chunks);
                    cases++;
                }
    printf("%d cases, %d failed\n", cases, failures);
    return failures != 0;
}
