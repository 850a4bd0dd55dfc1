/* impl="native": paged decode attention as one C function, compiled on first use (paged/kernels/native.py).
 *
 * The algorithm of impl="fused", without its costs: no tile copies and no op dispatch per tile. A work item is one
 * sequence, a range of its kv heads and a range of its logical blocks (a partition). Worker threads take items from
 * a shared counter. An item walks its part of the block table one physical block at a time (native_attend.h):
 *   - while it reads rows t..t+7 of block j it asks the CPU to prefetch the same rows of block j+1 into L2 (after
 *     a sequence's last block, the next sequence's first), whose address the table already knows (the hardware
 *     prefetcher cannot guess it: logical neighbours sit anywhere in the pool). Only in calls that read at least
 *     `prefetch_min_bytes` of K/V (native.py's rule);
 *   - every K and V row is read once from memory, in place, straight out of the pool; query heads that share a kv
 *     head (GQA) are scored and accumulated in register-blocked tiles of up to 4 (native_avx2.h), so each vector
 *     is also loaded once per tile from cache;
 *   - an online softmax per query head: m running max, l running sum of exp(score - m), acc running sum of p * V,
 *     rescaled by exp(m_old - m_new) whenever a block raises the max.
 * Partitions (vLLM's "v2" decode): when a batch is too small to keep every thread busy, each sequence's blocks are
 * cut into partitions of `partition_blocks` blocks, each partition an item of its own that leaves its (m, l, acc)
 * behind; a combine step then merges them per query head: M = max m_p, out = sum acc_p e^(m_p - M) / sum l_p
 * e^(m_p - M). With one partition an item writes its output directly.
 * Threads: OpenMP when built with it (then torch's own thread pool, see native.py), else pthreads
 * (native_team.h, which also keeps calls on one thread while helpers come too late).
 *
 * Shapes (all contiguous):
 *   query        [batch, num_heads, head_dim]                        compute type (not yet multiplied by scale)
 *   key_cache    [num_blocks, block_size, num_kv_heads, head_dim]    storage type: f32, f64, f16 or bf16
 *   value_cache  same as key_cache
 *   block_tables int32 or int64 [batch, max_blocks]
 *   context_lens int64 [batch]
 *   out          [batch, num_heads, head_dim]                        compute type: double for f64, else float
 * GQA: query head h reads kv head h / group, where group = num_heads / num_kv_heads.
 *
 * Nothing outside the buffers is ever read: a context_len outside 1..max_blocks * block_size, or a physical block
 * id outside [0, num_blocks) within a sequence's context, is refused and reported (see paged_decode's return).
 */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "native_attend.h"
#include "native_ops.h" /* the model's small ops (RMSNorm, RoPE, SwiGLU, the K/V write) */
#include "native_team.h"

/* begin_<T> / end_<T> / combine_<T>: an item's running state before its first block (m = -inf, l = 0, acc = 0),
 * its output after the last (acc / l), and the merge of a sequence's partitions for the query heads [qh0, qh1).
 * `part` points at partition 0's state [m (H) | l (H) | acc (H * D)]; partition p's is `stride` further. */
#define DEFINE_ITEM_ENDS(T, SFX, EXPFN)                                                                           \
    static void begin_##SFX(T *acc, T *m, T *l, int64_t qh0, int64_t qh1, int64_t D) {                            \
        for (int64_t qh = qh0; qh < qh1; qh++) { m[qh] = -INFINITY; l[qh] = 0; }                                  \
        memset(acc + qh0 * D, 0, sizeof(T) * (size_t)((qh1 - qh0) * D));                                        \
    }                                                                                                             \
    static void end_##SFX(T *out, const T *acc, const T *l, int64_t qh0, int64_t qh1, int64_t D) {                \
        for (int64_t qh = qh0; qh < qh1; qh++)                                                                    \
            for (int64_t d = 0; d < D; d++) out[qh * D + d] = acc[qh * D + d] / l[qh];                            \
    }                                                                                                             \
    static void combine_##SFX(T *out, const T *part, int64_t parts, int64_t stride, int64_t H, int64_t D) {       \
        for (int64_t qh = 0; qh < H; qh++) {                                                                      \
            T mx = -INFINITY, sum = 0;                                                                            \
            for (int64_t p = 0; p < parts; p++) mx = part[p * stride + qh] > mx ? part[p * stride + qh] : mx;     \
            for (int64_t d = 0; d < D; d++) out[qh * D + d] = 0;                                                  \
            for (int64_t p = 0; p < parts; p++) {                                                                 \
                const T *m = part + p * stride, *l = m + H, *acc = l + H;                                         \
                if (l[qh] == 0) continue; /* a partition past this sequence's end */                              \
                const T w = EXPFN(m[qh] - mx);                                                                    \
                sum += l[qh] * w;                                                                                 \
                for (int64_t d = 0; d < D; d++) out[qh * D + d] += acc[qh * D + d] * w;                           \
            }                                                                                                     \
            for (int64_t d = 0; d < D; d++) out[qh * D + d] /= sum;                                               \
        }                                                                                                         \
    }

DEFINE_ITEM_ENDS(float, f32, expf)
DEFINE_ITEM_ENDS(double, f64, exp)

typedef struct {
    int dtype;       /* 0 f32, 1 f64, 2 f16, 3 bf16 */
    int table_int32; /* block_tables are int32 (else int64) */
    double scale;
    const void *query, *key_cache, *value_cache, *block_tables;
    const int64_t *context_lens;
    void *out;
    int64_t batch, num_heads, num_kv_heads, head_dim, block_size, max_blocks, num_blocks, head_chunks;
    int64_t partition_blocks, parts; /* parts > 1: items leave (m, l, acc) in `partial`, combined at the end */
    void *partial;                   /* [batch, parts, H * (D + 2)] in the compute type */
    int64_t next_item; /* shared work counter */
    int64_t bad_seq;   /* 1 + first sequence found with an out-of-range block id, or 0 */
    int64_t bad_len;   /* 1 + first sequence found with a context_len outside 1..max_blocks * block_size, or 0 */
    int64_t failed;    /* a worker could not allocate its scratch */
    int prefetch;      /* prefetch each next block (the call reads >= prefetch_min_bytes of K/V) */
    int64_t working;   /* threads that took at least one item */
    int64_t threads;   /* the threads this call runs on */
} Job;

static inline int64_t table_entry(const Job *job, int64_t b, int64_t j) {
    const int64_t at = b * job->max_blocks + j;
    return job->table_int32 ? ((const int32_t *)job->block_tables)[at] : ((const int64_t *)job->block_tables)[at];
}

/* The block to prefetch while block j of `item` (blocks [.., j1) of sequence b) is read: the next one of this
 * item; after its last, the first block of the item this thread will probably take next (item + threads: exactly
 * the next one on one thread), when every item is a whole sequence; else -1. Without that, each sequence's first
 * block came from memory unannounced: one block in seven of the tiny model's engine (1.04-1.09x on its attention,
 * medians of 11-15 interleaved generations at batch 32; 1 block further ahead gave nothing more). */
static int64_t block_ahead(const Job *job, int64_t item, int64_t b, int64_t j, int64_t j1) {
    if (j + 1 < j1) return table_entry(job, b, j + 1);
    const int64_t next = item + job->threads;
    if (job->head_chunks != 1 || job->parts != 1 || next >= job->batch || job->context_lens[next] < 1) return -1;
    const int64_t id = table_entry(job, next, 0);
    return id >= 0 && id < job->num_blocks ? id : -1;
}

static void flag(int64_t *where, int64_t value) { /* keep the first report */
    int64_t none = 0;
    __atomic_compare_exchange_n(where, &none, value, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
}

static void *worker(void *arg) {
    Job *job = (Job *)arg;
    const int64_t H = job->num_heads, KVH = job->num_kv_heads, D = job->head_dim, BS = job->block_size;
    const int64_t G = H / KVH, chunk = (KVH + job->head_chunks - 1) / job->head_chunks, P = job->parts;
    const int64_t block_elems = BS * KVH * D, wide = job->dtype == 1;
    const int64_t store_size = job->dtype == 0 ? 4 : job->dtype == 1 ? 8 : 2, compute_size = wide ? 8 : 4;
    const int64_t stride = H * (D + 2); /* one (sequence, partition) state in `partial` */
    /* scratch, in the compute type: acc [H*D], m [H], l [H], scores [H*BS], scaled query [H*D]; f16/bf16 also one
     * K and one V block converted to float. */
    const int64_t halves = job->dtype >= 2 ? 2 * block_elems : 0;
    char *scratch = malloc((size_t)(compute_size * (2 * H * D + 2 * H + H * BS) + 4 * halves));
    if (!scratch) {
        __atomic_store_n(&job->failed, 1, __ATOMIC_RELAXED);
        return NULL;
    }
    for (int64_t taken = 0;; taken++) {
        const int64_t item = __atomic_fetch_add(&job->next_item, 1, __ATOMIC_RELAXED);
        if (item >= job->batch * job->head_chunks * P) break;
        if (taken == 0) __atomic_fetch_add(&job->working, 1, __ATOMIC_RELAXED);
        const int64_t b = item / (job->head_chunks * P), part = item % P;
        const int64_t h0 = (item / P % job->head_chunks) * chunk, h1 = h0 + chunk < KVH ? h0 + chunk : KVH;
        const int64_t len = job->context_lens[b];
        if (h0 >= h1) continue;
        if (len < 1 || len > job->max_blocks * BS) {
            flag(&job->bad_len, b + 1);
            continue;
        }
        const int64_t used = (len + BS - 1) / BS, j0 = part * job->partition_blocks;
        const int64_t j1 = j0 + job->partition_blocks < used ? j0 + job->partition_blocks : used;
        int bad = 0;
        for (int64_t j = j0; j < j1; j++)
            bad |= table_entry(job, b, j) < 0 || table_entry(job, b, j) >= job->num_blocks;
        if (bad) {
            flag(&job->bad_seq, b + 1);
            continue;
        }
        const int64_t block_bytes = block_elems * store_size, qh0 = h0 * G, qh1 = h1 * G;
        const char *kc = job->key_cache, *vc = job->value_cache;
        if (wide) {
            double *acc = (double *)scratch, *m = acc + H * D, *l = m + H, *scores = l + H, *q = scores + H * BS;
            if (P > 1) { m = (double *)job->partial + (b * P + part) * stride; l = m + H; acc = l + H; }
            const double *query = (const double *)job->query + b * H * D;
            for (int64_t e = qh0 * D; e < qh1 * D; e++) q[e] = query[e] * job->scale;
            begin_f64(acc, m, l, qh0, qh1, D);
            for (int64_t j = j0; j < j1; j++) {
                const int64_t n = len - j * BS < BS ? len - j * BS : BS, id = table_entry(job, b, j);
                const int64_t next = j + 1 < j1 && job->prefetch ? table_entry(job, b, j + 1) : -1;
                attend_block_f64((const double *)(kc + id * block_bytes), (const double *)(vc + id * block_bytes), n,
                                 q, acc, m, l, scores, BS, h0, h1, G, KVH, D,
                                 next < 0 ? NULL : (const double *)(kc + next * block_bytes),
                                 next < 0 ? NULL : (const double *)(vc + next * block_bytes));
            }
            if (P == 1) end_f64((double *)job->out + b * H * D, acc, l, qh0, qh1, D);
            continue;
        }
        float *acc = (float *)scratch, *m = acc + H * D, *l = m + H, *scores = l + H, *q = scores + H * BS;
        float *kf = q + H * D, *vf = kf + block_elems; /* f16/bf16 only: the block converted to float */
        if (P > 1) { m = (float *)job->partial + (b * P + part) * stride; l = m + H; acc = l + H; }
        const float *query = (const float *)job->query + b * H * D;
        for (int64_t e = qh0 * D; e < qh1 * D; e++) q[e] = (float)(query[e] * job->scale);
        begin_f32(acc, m, l, qh0, qh1, D);
        for (int64_t j = j0; j < j1; j++) {
            const int64_t n = len - j * BS < BS ? len - j * BS : BS, id = table_entry(job, b, j);
            const int64_t next = job->prefetch ? block_ahead(job, item, b, j, j1) : -1;
            const float *kb = (const float *)(kc + id * block_bytes), *vb = (const float *)(vc + id * block_bytes);
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
#ifdef HAVE_AVX512
            if (D % 16 == 0)
                attend_block_avx512(kb, vb, n, q, acc, m, l, scores, BS, h0, h1, G, KVH, D, kn, vn);
            else
#endif
#ifdef HAVE_AVX2
            if (D % 8 == 0)
                attend_block_avx2(kb, vb, n, q, acc, m, l, scores, BS, h0, h1, G, KVH, D, kn, vn);
            else
#endif
                attend_block_f32(kb, vb, n, q, acc, m, l, scores, BS, h0, h1, G, KVH, D, kn, vn);
        }
        if (P == 1) end_f32((float *)job->out + b * H * D, acc, l, qh0, qh1, D);
    }
    free(scratch);
    return NULL;
}

/* Decode attention for a batch; see the top of this file. Runs on `num_threads` threads (the caller's included).
 * Work items: each sequence x `head_chunks` ranges of kv heads x partitions of `partition_blocks` logical blocks
 * (0: one partition, the whole context). `scale` multiplies every score. Returns 0; or 1 + the index of a sequence
 * whose table holds a block id outside the pool; or -2 - the index of a sequence whose context_len is outside
 * 1..max_blocks * block_size; or -1 when memory ran out. After a nonzero return `out` is incomplete.
 * prefetch_min_bytes: a call whose sequences' K/V (sum of context_lens x num_kv_heads x head_dim x 2 x the storage
 * size) reach this many bytes prefetches each next block while it reads the current one (0: every call). */
int64_t paged_decode(int dtype, int64_t num_threads, int64_t head_chunks, int64_t partition_blocks,
                     int table_int32, double scale, const void *query, const void *key_cache,
                     const void *value_cache, const void *block_tables, const int64_t *context_lens, void *out,
                     int64_t batch, int64_t num_heads, int64_t num_kv_heads, int64_t head_dim, int64_t block_size,
                     int64_t max_blocks, int64_t num_blocks, int64_t prefetch_min_bytes) {
    if (batch <= 0) return 0;
    if (head_chunks < 1) head_chunks = 1;
    if (head_chunks > num_kv_heads) head_chunks = num_kv_heads;
    if (partition_blocks < 1 || partition_blocks > max_blocks) partition_blocks = max_blocks > 0 ? max_blocks : 1;
    const int64_t parts = (max_blocks + partition_blocks - 1) / partition_blocks;
    const int64_t stride = num_heads * (head_dim + 2), compute_size = dtype == 1 ? 8 : 4;
    Job job = {dtype, table_int32, scale, query, key_cache, value_cache, block_tables, context_lens, out, batch,
               num_heads, num_kv_heads, head_dim, block_size, max_blocks, num_blocks, head_chunks,
               partition_blocks, parts > 0 ? parts : 1, NULL, 0, 0, 0, 0, 0, 0};
    int64_t tokens = 0; /* the K/V this call reads (lengths out of range are refused later, by the items) */
    for (int64_t b = 0; b < batch; b++)
        tokens += context_lens[b] < 0 ? 0 : context_lens[b] > max_blocks * block_size ? max_blocks * block_size
                                                                                      : context_lens[b];
    job.prefetch = (double)tokens * (double)(num_kv_heads * head_dim * 2 * (dtype == 1 ? 8 : dtype == 0 ? 4 : 2))
                   >= (double)prefetch_min_bytes;
    if (job.parts > 1 && !(job.partial = malloc((size_t)(compute_size * batch * job.parts * stride)))) return -1;
    const int64_t items = batch * head_chunks * job.parts;
    if (num_threads > items) num_threads = items;
    num_threads = team_size(num_threads); /* 1 while recent calls' helpers came too late */
    job.threads = num_threads;
    if (num_threads <= 1)
        worker(&job); /* on the caller's thread, no thread team to start and join */
    else
        team_after(team_run(worker, &job, num_threads, &job.working));
    const int64_t status = job.failed ? -1 : job.bad_len ? -1 - job.bad_len : job.bad_seq;
    if (status == 0 && job.parts > 1)
        for (int64_t b = 0; b < batch; b++) {
            const int64_t used = (context_lens[b] + block_size - 1) / block_size;
            const int64_t parts = (used + partition_blocks - 1) / partition_blocks; /* the rest are empty */
            const int64_t at = b * num_heads * head_dim, from = b * job.parts * stride;
            if (dtype == 1)
                combine_f64((double *)out + at, (const double *)job.partial + from, parts, stride, num_heads, head_dim);
            else
                combine_f32((float *)out + at, (const float *)job.partial + from, parts, stride, num_heads, head_dim);
        }
    free(job.partial);
    return status;
}

/* paged_decode with its arguments in one array, as the Python wrapper calls it: one pointer and the scale instead
 * of 19 arguments that ctypes converts one by one (about 1 us less per call; a short decode takes 10-20 us).
 * args = {dtype, num_threads, head_chunks, partition_blocks, table_int32, query, key_cache, value_cache,
 * block_tables, context_lens, out, batch, num_heads, num_kv_heads, head_dim, block_size, max_blocks, num_blocks,
 * prefetch_min_bytes},
 * the pointers as integers. */
int64_t paged_decode_packed(const int64_t *args, double scale) {
    return paged_decode((int)args[0], args[1], args[2], args[3], (int)args[4], scale, (const void *)args[5],
                        (const void *)args[6], (const void *)args[7], (const void *)args[8],
                        (const int64_t *)args[9], (void *)args[10], args[11], args[12], args[13], args[14],
                        args[15], args[16], args[17], args[18]);
}
