/* The worker pool of worker_pool.h. */
#include "worker_pool.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#define MAX_WORKERS 15
#define SPIN_NS 500000          /* 0.5 ms: longer than the gaps between a native step's kernel calls */
#define CHUNKS_PER_THREAD 4
#define YIELD_EVERY 256         /* spinning: give the core away every 256 pauses (~5 us), in case the thread waited
                                   for, or another (Python) thread, is waiting for it: more threads than cores */

static struct {
    pthread_mutex_t busy;                  /* held by the calling thread for the whole call */
    pthread_mutex_t sleep_lock;
    pthread_cond_t wake;
    atomic_uint_least64_t task;            /* generation << 32 | next chunk index */
    atomic_int_least64_t done;             /* chunks finished in this generation */
    range_fn fn;
    const void *args;
    int64_t n, chunk, chunks;
    int workers;
} pool = {.busy = PTHREAD_MUTEX_INITIALIZER, .sleep_lock = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

static atomic_int_least64_t spin_limit_ns;    /* SPIN_NS inside a native step (pool_spin), else 0 */

void pool_spin(int on) { atomic_store_explicit(&spin_limit_ns, on ? SPIN_NS : 0, memory_order_relaxed); }

static int64_t monotonic_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__)
    __builtin_ia32_pause();
#endif
}

/* Take and run chunks of generation `generation` until none is left or the generation changed. */
static void run_chunks(uint64_t generation) {
    for (;;) {
        uint64_t seen = atomic_load_explicit(&pool.task, memory_order_acquire);
        if ((seen >> 32) != generation || (int64_t)(seen & 0xffffffffu) >= pool.chunks) return;
        if (!atomic_compare_exchange_weak_explicit(&pool.task, &seen, seen + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue;
        const int64_t start = (int64_t)(seen & 0xffffffffu) * pool.chunk;
        const int64_t stop = start + pool.chunk < pool.n ? start + pool.chunk : pool.n;
        pool.fn(pool.args, start, stop);
        atomic_fetch_add_explicit(&pool.done, 1, memory_order_acq_rel);
    }
}

static void *worker_main(void *unused) {
    (void)unused;
    uint64_t last = 0;
    for (;;) {
        int64_t spin_start = monotonic_ns();
        uint64_t generation;
        for (int i = 0;; i++) {
            generation = atomic_load_explicit(&pool.task, memory_order_acquire) >> 32;
            if (generation != last) break;
            if (i % YIELD_EVERY == YIELD_EVERY - 1) {
                if (monotonic_ns() - spin_start > atomic_load_explicit(&spin_limit_ns, memory_order_relaxed)) {
                    pthread_mutex_lock(&pool.sleep_lock);
                    while ((atomic_load_explicit(&pool.task, memory_order_acquire) >> 32) == last)
                        pthread_cond_wait(&pool.wake, &pool.sleep_lock);
                    pthread_mutex_unlock(&pool.sleep_lock);
                    spin_start = monotonic_ns();
                } else {
                    sched_yield();
                }
            }
            cpu_relax();
        }
        last = generation;
        run_chunks(generation);
    }
    return NULL;
}

/* fn over 0..n in chunks of `chunk`, split across the caller and threads - 1 workers (threads at most
MAX_WORKERS + 1; the caller alone for one chunk, or while another thread uses the pool). */
static void dispatch(range_fn fn, const void *args, int64_t n, int64_t chunk, int threads) {
    if (threads < 2 || n <= chunk || pthread_mutex_trylock(&pool.busy) != 0) {
        fn(args, 0, n);
        return;
    }
    while (pool.workers < threads - 1) {
        pthread_t thread;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        const int failed = pthread_create(&thread, &attr, worker_main, NULL);
        pthread_attr_destroy(&attr);
        if (failed) break;
        pool.workers++;
    }
    pool.fn = fn;
    pool.args = args;
    pool.n = n;
    pool.chunk = chunk;
    pool.chunks = (n + chunk - 1) / chunk;
    atomic_store_explicit(&pool.done, 0, memory_order_relaxed);
    const uint64_t generation = (atomic_load_explicit(&pool.task, memory_order_relaxed) >> 32) + 1;
    pthread_mutex_lock(&pool.sleep_lock);
    atomic_store_explicit(&pool.task, generation << 32, memory_order_release);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.sleep_lock);
    run_chunks(generation);
    for (int i = 1; atomic_load_explicit(&pool.done, memory_order_acquire) < pool.chunks; i++) {
        cpu_relax();
        if (i % YIELD_EVERY == 0) sched_yield();      /* the last chunk's thread may be waiting for this core */
    }
    pthread_mutex_unlock(&pool.busy);
}

/* The threads a call may use: the caller and at most MAX_WORKERS workers. */
static int usable(int threads) { return threads > MAX_WORKERS + 1 ? MAX_WORKERS + 1 : threads; }

void parallel_range(range_fn fn, const void *args, int64_t n, int threads) {
    threads = usable(threads);
    if (threads < 2 || n < 2 * CHUNKS_PER_THREAD) {
        fn(args, 0, n);
        return;
    }
    const int64_t chunks = (int64_t)threads * CHUNKS_PER_THREAD;
    dispatch(fn, args, n, (n + chunks - 1) / chunks, threads);
}

void parallel_items(range_fn fn, const void *args, int64_t n, int threads) {
    dispatch(fn, args, n, 1, usable(threads));
}

/* The OpenMP team of the process's torch, through its runtime's GOMP_parallel (registered by use_torch_team; NULL:
none). */
typedef void (*gomp_parallel_fn)(void (*fn)(void *), void *data, unsigned threads, unsigned flags);
static _Atomic(gomp_parallel_fn) torch_team;

void use_torch_team(void *gomp_parallel) { atomic_store(&torch_team, (gomp_parallel_fn)gomp_parallel); }

typedef struct {
    range_fn fn;
    const void *args;
    int64_t n, chunk;
    atomic_int_least64_t next;
} team_task_t;

static void team_main(void *p) {
    team_task_t *t = p;
    for (int64_t c; (c = atomic_fetch_add(&t->next, 1)) * t->chunk < t->n;)
        t->fn(t->args, c * t->chunk, (c + 1) * t->chunk < t->n ? (c + 1) * t->chunk : t->n);
}

/* fn over 0..n in chunks of `chunk` on torch's team (its threads take chunks from one counter, as the pool's do). */
static void on_team(gomp_parallel_fn team, range_fn fn, const void *args, int64_t n, int64_t chunk, int threads) {
    team_task_t task = {fn, args, n, chunk, 0};
    team(team_main, &task, (unsigned)usable(threads), 0);
}

void team_items(range_fn fn, const void *args, int64_t n, int threads) {
    const gomp_parallel_fn team = atomic_load(&torch_team);
    if (!team || threads < 2 || n < 2) parallel_items(fn, args, n, threads);
    else on_team(team, fn, args, n, 1, threads);
}

void team_range(range_fn fn, const void *args, int64_t n, int threads) {
    const gomp_parallel_fn team = atomic_load(&torch_team);
    if (!team || threads < 2 || n < 2 * CHUNKS_PER_THREAD) {
        parallel_range(fn, args, n, threads);
        return;
    }
    const int64_t chunks = (int64_t)usable(threads) * CHUNKS_PER_THREAD;
    on_team(team, fn, args, n, (n + chunks - 1) / chunks, threads);
}
