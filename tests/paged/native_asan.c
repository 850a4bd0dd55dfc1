/* Memory-safety harness for paged/kernels/native_decode.c (and the native_ops.h it includes), built by
 * tests/test_native.py with AddressSanitizer.
 *
 * Every buffer the kernel gets is its own heap allocation of exactly the right size, so a read or write one
 * element outside any of them stops the program with an ASan report. Each case is also checked against a plain
 * attention written here in double, independently of the kernel. Cases cover every storage type, GQA/MQA,
 * head_dims off the vector width, block sizes 1 and odd, ragged lengths, -1 padded tables (int64 or int32), 1 and 3
 * threads, split kv heads, partitions of 1 to 3 blocks (merged by the combine step) or none, plus the refusal of an
 * out-of-pool block id and of a context_len past the table; and the model's small ops (native_ops.h, ops_cases).
 * Exit status 0 means every case passed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../paged/kernels/native_decode.c"

#ifndef PREFETCH_MIN_BYTES /* K/V bytes from which a call prefetches (-D on the command line); default: never here */
#define PREFETCH_MIN_BYTES INT64_MAX
#endif

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
                    int64_t chunks, int64_t partition_blocks, int table_int32) {
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
    int32_t *tables32 = malloc(sizeof(int32_t) * (size_t)(B * width));
    int64_t next = 0;
    for (int64_t b = 0; b < B; b++) {
        lens[b] = lens_buf[b];
        int64_t used = (lens[b] + BS - 1) / BS;
        for (int64_t j = 0; j < width; j++) tables[b * width + j] = j < used ? perm[next++] : -1;
    }
    for (int64_t i = 0; i < B * width; i++) tables32[i] = (int32_t)tables[i];
    const void *table_arg = table_int32 ? (const void *)tables32 : (const void *)tables;
    const double scale = 0.75;
    const int wide = dtype == 1;
    double *qd = malloc(sizeof(double) * (size_t)(B * H * D));
    for (int64_t i = 0; i < B * H * D; i++) qd[i] = random_value() / 4;
    void *q = malloc((size_t)(B * H * D) * (wide ? 8 : 4)), *out = malloc((size_t)(B * H * D) * (wide ? 8 : 4));
    for (int64_t i = 0; i < B * H * D; i++) {
        if (wide) ((double *)q)[i] = qd[i];
        else ((float *)q)[i] = (float)qd[i];
    }
    void *kc = store(kd, NB * block_elems, dtype), *vc = store(vd, NB * block_elems, dtype);
    int64_t status = paged_decode(dtype, threads, chunks, partition_blocks, table_int32, scale, q, kc, vc, table_arg,
                                  lens, out, B, H, KVH, D, BS, width, NB, PREFETCH_MIN_BYTES);
    int bad = status != 0;
    for (int64_t b = 0; b < B && !bad; b++)
        for (int64_t h = 0; h < H && !bad; h++) { /* plain softmax attention, in double */
            const int64_t kvh = h / (H / KVH), n = lens[b];
            double mx = -INFINITY, sum = 0, *w = malloc(sizeof(double) * (size_t)n);
            for (int64_t t = 0; t < n; t++) {
                const double *k = kd + (tables[b * width + t / BS] * BS + t % BS) * KVH * D + kvh * D;
                double s = 0;
                for (int64_t d = 0; d < D; d++) s += qd[(b * H + h) * D + d] * k[d];
                w[t] = s * scale;
                mx = s > mx ? s : mx;
            }
            for (int64_t t = 0; t < n; t++) { w[t] = exp(w[t] - mx); sum += w[t]; }
            for (int64_t d = 0; d < D && !bad; d++) {
                double ref = 0;
                for (int64_t t = 0; t < n; t++)
                    ref += w[t] / sum * vd[(tables[b * width + t / BS] * BS + t % BS) * KVH * D + kvh * D + d];
                const double got = wide ? ((double *)out)[(b * H + h) * D + d] : ((float *)out)[(b * H + h) * D + d];
                if (fabs(got - ref) > (wide ? 1e-12 : 2e-5) * (1 + fabs(ref))) {
                    fprintf(stderr, "mismatch dtype %d H %ld KVH %ld D %ld BS %ld partition %ld seq %ld head %ld d %ld: "
                            "%g vs %g\n", dtype, (long)H, (long)KVH, (long)D, (long)BS, (long)partition_blocks,
                            (long)b, (long)h, (long)d, got, ref);
                    bad = 1;
                }
            }
            free(w);
        }
    if (!bad) { /* a block id one past the pool in the last sequence is refused, never read */
        int64_t used = (lens[B - 1] + BS - 1) / BS;
        tables[(B - 1) * width + used - 1] = NB;
        tables32[(B - 1) * width + used - 1] = (int32_t)NB;
        status = paged_decode(dtype, threads, chunks, partition_blocks, table_int32, scale, q, kc, vc, table_arg,
                              lens, out, B, H, KVH, D, BS, width, NB, PREFETCH_MIN_BYTES);
        if (status != B) {
            fprintf(stderr, "out-of-pool block id: status %ld, expected %ld\n", (long)status, (long)B);
            bad = 1;
        }
    }
    if (!bad) { /* a context_len past the table's end in the first sequence is refused, never read */
        lens[0] = width * BS + 1;
        status = paged_decode(dtype, threads, chunks, partition_blocks, table_int32, scale, q, kc, vc, table_arg,
                              lens, out, B, H, KVH, D, BS, width, NB, PREFETCH_MIN_BYTES);
        if (status != -2) {
            fprintf(stderr, "context_len past the table: status %ld, expected -2\n", (long)status);
            bad = 1;
        }
    }
    free(kd); free(vd); free(perm); free(tables); free(tables32); free(lens); free(qd); free(q); free(out);
    free(kc); free(vc);
    return bad;
}

/* native_ops.h on exact-size buffers, each result checked against a double computation here: RMSNorm (with and
 * without the residual, cols off the 16-float lanes), RoPE on a narrow of a wider row, silu(gate) * up on two
 * halves of one buffer, and the K/V write (a slot outside the pool writes nothing). Returns the number of failed
 * checks. */
static int ops_cases(void) {
    int failures = 0;
    const int64_t rows = 3, cols = 21;
    float *x = malloc(sizeof(float) * rows * cols), *res = malloc(sizeof(float) * rows * cols);
    float *w = malloc(sizeof(float) * cols), *out = malloc(sizeof(float) * rows * cols);
    for (int64_t i = 0; i < rows * cols; i++) { x[i] = (float)random_value(); res[i] = (float)random_value(); }
    for (int64_t c = 0; c < cols; c++) w[c] = (float)random_value();
    for (int with_res = 0; with_res < 2; with_res++) {
        double sum[3] = {0};
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) {
                const double v = (double)x[r * cols + c] + (with_res ? res[r * cols + c] : 0.0);
                sum[r] += v * v;
            }
        const int64_t args[6] = {(int64_t)x, with_res ? (int64_t)res : 0, (int64_t)w, (int64_t)out, rows, cols};
        failures += paged_rms_norm(args, 1e-5) != 0;
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) {
                const double want = x[r * cols + c] / sqrt(sum[r] / cols + 1e-5) * w[c];
                failures += fabs(out[r * cols + c] - want) > 1e-5 * (1 + fabs(want));
            }
    }
    const int64_t heads = 3, wide = 5, D = 10;
    /* cos and sin rows interleaved in one buffer [rows, 2, D], as RotaryEmbedding's lookup hands them */
    float *q = malloc(sizeof(float) * rows * wide * D), *trig = malloc(sizeof(float) * rows * 2 * D);
    float *before = malloc(sizeof(float) * rows * wide * D);
    for (int64_t i = 0; i < rows * wide * D; i++) before[i] = q[i] = (float)random_value();
    for (int64_t i = 0; i < rows * 2 * D; i++) trig[i] = (float)random_value();
    const float *cs = trig, *sn = trig + D;
    const int64_t rope_args[8] = {(int64_t)q, wide * D, (int64_t)cs, (int64_t)sn, 2 * D, rows, heads, D};
    failures += paged_rope(rope_args) != 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t h = 0; h < wide; h++)
            for (int64_t d = 0; d < D; d++) {
                const int64_t at = (r * wide + h) * D;
                const double rolled = before[at + (d + D / 2) % D];
                const double want = h < heads ? before[at + d] * (double)cs[r * 2 * D + d] + rolled * sn[r * 2 * D + d]
                                              : before[at + d];
                failures += fabs(q[at + d] - want) > 1e-5 * (1 + fabs(want));
            }
    /* silu(gate) * up on the two halves of one [rows, 2 * cols] buffer */
    float *gu = malloc(sizeof(float) * rows * 2 * cols), *gu0 = malloc(sizeof(float) * rows * 2 * cols);
    for (int64_t i = 0; i < rows * 2 * cols; i++) gu0[i] = gu[i] = (float)(4 * random_value());
    const int64_t silu_args[5] = {(int64_t)gu, (int64_t)(gu + cols), 2 * cols, rows, cols};
    failures += paged_silu_mul(silu_args) != 0;
    for (int64_t r = 0; r < rows; r++)
        for (int64_t c = 0; c < 2 * cols; c++) {
            const double g = gu0[r * 2 * cols + c]; /* the up half (c >= cols) is left as it was */
            const double want = c < cols ? g / (1 + exp(-g)) * gu0[r * 2 * cols + cols + c] : g;
            failures += fabs(gu[r * 2 * cols + c] - want) > 1e-5 * (1 + fabs(want));
        }
    free(gu); free(gu0);
    const int64_t slots_n = 8, row = 2 * 4; /* a pool of 8 slots of 2 kv heads x 4 dims; 3 rows written */
    float *kc = calloc((size_t)(slots_n * row), sizeof(float)), *vc = calloc((size_t)(slots_n * row), sizeof(float));
    int64_t *slots = malloc(sizeof(int64_t) * 3);
    slots[0] = 7; slots[1] = 0; slots[2] = 8; /* the last one is outside the pool */
    int64_t write_args[10] = {(int64_t)kc, (int64_t)vc, (int64_t)before, (int64_t)(before + row), 2 * row * 4,
                              2 * row * 4, (int64_t)slots, 3, row * 4, slots_n};
    failures += paged_write_rows(write_args) != 3;
    for (int64_t i = 0; i < slots_n * row; i++) failures += kc[i] != 0 || vc[i] != 0;
    write_args[7] = 2; /* the two good rows */
    failures += paged_write_rows(write_args) != 0;
    for (int64_t e = 0; e < row; e++)
        failures += kc[7 * row + e] != before[e] || kc[e] != before[2 * row + e] || vc[e] != before[3 * row + e];
    free(x); free(res); free(w); free(out); free(q); free(trig); free(before); free(kc); free(vc); free(slots);
    return failures;
}

int main(void) {
    /* groups of 1, 4, 6 and 3 query heads per kv head: GQA pairs, and a pair plus a single one */
    const int64_t heads[][2] = {{4, 4}, {8, 2}, {6, 1}, {6, 2}}, dims[] = {4, 8, 20, 64}, block_sizes[] = {1, 3, 16};
    int failures = 0, cases = 0;
    for (int dtype = 0; dtype < 4; dtype++)
        for (int hi = 0; hi < 4; hi++)
            for (int di = 0; di < 4; di++)
                for (int bi = 0; bi < 3; bi++) {
                    const int64_t B = 1 + rand_int(4), threads = 1 + 2 * rand_int(2), chunks = 1 + rand_int(2);
                    const int64_t partition_blocks = rand_int(4); /* 0: none */
                    failures += run_case(dtype, heads[hi][0], heads[hi][1], dims[di], block_sizes[bi], B, threads,
                                         chunks, partition_blocks, (int)rand_int(2));
                    cases++;
                }
    const int op_failures = ops_cases();
    failures += op_failures;
    printf("%d cases, %d failed; model ops: %d failed checks\n", cases, failures - op_failures, op_failures);
    return failures != 0;
}
