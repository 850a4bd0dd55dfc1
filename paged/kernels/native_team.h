/* The thread team of one impl="native" call (included by native_decode.c): OpenMP when built with it, else
 * pthreads; and the rule that keeps calls on one thread while helper threads come too late.
 *
 * Late helpers. On a machine whose other cores are busy, a helper thread may first run a whole scheduler slice
 * (4-8 ms) after the call started; the caller takes every item meanwhile (they come from a shared counter), then
 * waits for it at the team's end: a 0.3 ms call takes 8 ms. When a call's helpers took no item, the next calls run
 * on the caller's thread alone: 1 call after the first such call, then 2, 4, ... up to SOLO_MAX_CALLS while the
 * helpers keep coming too late; a call whose helpers take part resets the count. On a 2-core EPYC shared with
 * other jobs (load 3.7), B=16, ctx 512, GQA 8/2, d64 then took 0.38 ms by the median of 61 calls, against 4.2 ms
 * without this rule and 0.43 ms on one thread; on a quiet machine nothing changes (helpers are never that late).
 * LATE_HELPER_US (tests only) makes every helper sleep that long before it starts.
 */
#ifndef PAGED_NATIVE_TEAM_H
#define PAGED_NATIVE_TEAM_H

#include <pthread.h>
#include <stdint.h>
#ifdef LATE_HELPER_US
#include <unistd.h>
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

#ifndef SOLO_MAX_CALLS
#define SOLO_MAX_CALLS 64
#endif
static int64_t solo_calls_left, solo_streak;

/* Calls left to run on one thread before helpers are tried again. */
int64_t paged_solo_calls_left(void) { return __atomic_load_n(&solo_calls_left, __ATOMIC_RELAXED); }

/* The threads a call that wants `wanted` should start: 1 while recent calls' helpers came too late. */
static int64_t team_size(int64_t wanted) {
    if (wanted <= 1 || __atomic_load_n(&solo_calls_left, __ATOMIC_RELAXED) <= 0) return wanted;
    __atomic_fetch_sub(&solo_calls_left, 1, __ATOMIC_RELAXED);
    return 1;
}

/* After a team's call: `late`, its helpers took no item. */
static void team_after(int late) {
    const int64_t last = __atomic_load_n(&solo_streak, __ATOMIC_RELAXED); /* calls may run on several threads */
    int64_t streak = late ? (last ? 2 * last : 1) : 0;
    streak = streak < SOLO_MAX_CALLS ? streak : SOLO_MAX_CALLS;
    __atomic_store_n(&solo_streak, streak, __ATOMIC_RELAXED);
    __atomic_store_n(&solo_calls_left, streak, __ATOMIC_RELAXED);
}

#ifndef _OPENMP
typedef struct {
    void *(*fn)(void *);
    void *arg;
} TeamTask;

static void *team_helper(void *task) { /* fn(arg), on a thread of its own */
#ifdef LATE_HELPER_US
    usleep(LATE_HELPER_US);
#endif
    return ((TeamTask *)task)->fn(((TeamTask *)task)->arg);
}
#endif

/* fn(arg) on `threads` threads, the caller's one of them; fn counts into *working each thread that took an item.
 * Returns 1 when the helpers took none (they came too late: see above), else 0. */
static int team_run(void *(*fn)(void *), void *arg, int64_t threads, const int64_t *working) {
#ifdef _OPENMP
    /* Loaded into a process that runs torch, this is torch's own OpenMP runtime (same soname, libgomp.so.1): its
     * worker threads, which may still be spinning after torch's last op, pick up this work instead of competing
     * with threads of our own. */
#pragma omp parallel num_threads((int)threads)
    {
#ifdef LATE_HELPER_US
        if (omp_get_thread_num() != 0) usleep(LATE_HELPER_US);
#endif
        fn(arg);
    }
#else
    if (threads > 64) threads = 64;
    pthread_t helpers[64];
    TeamTask task = {fn, arg};
    int64_t started = 0;
    for (int64_t i = 1; i < threads; i++)
        if (pthread_create(&helpers[started], NULL, team_helper, &task) == 0) started++;
    fn(arg);
    for (int64_t i = 0; i < started; i++) pthread_join(helpers[i], NULL);
#endif
    return *working <= 1;
}

#endif /* PAGED_NATIVE_TEAM_H */
