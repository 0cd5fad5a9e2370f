/* cpu_pool.c — see cpu_pool.h.
 *
 * Protocol. A job is numbered by `generation`. The caller writes the job's fields, sets
 * `claim` to (job number << 32 | chunk 0) and `done` to 0, then bumps `generation` under the
 * mutex (so a worker that checked it under the mutex and went to sleep cannot miss the
 * wakeup). Every participant, the caller included, claims chunks with a compare-and-swap on
 * `claim` that also checks the job number, runs them and counts them in `done`; the caller
 * returns when done reaches the chunk count.
 *
 * The caller never waits for a worker that has not started: on a machine shared with other
 * processes a worker may be off its core for a scheduler tick, and then the caller simply
 * runs the remaining chunks itself. A worker that wakes up late finds the job number in
 * `claim` changed (or no chunk left) and claims nothing. Before writing a new job's fields the
 * caller closes `claim` (new job number, chunk CLAIM_CLOSED), so a successful claim always
 * belongs to a job that is still running, whose fields are the ones the worker reads. (Found
 * with ThreadSanitizer: without the close, a late worker could claim a chunk of the finished
 * job while the next job's fields were half written, and count it in the next job's `done`.) */
#include "cpu_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CPU_RELAX() _mm_pause()
#else
#define CPU_RELAX() ((void)0)
#endif

/* How long a waiting thread spins before it sleeps: about the gap between two ops of a
 * decode step. Measured in time, not iterations (PAUSE takes 3 to 100 ns depending on the CPU). */
#define POOL_SPIN_NS 50000

static int64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Spin while cond holds, for at most POOL_SPIN_NS. */
#define SPIN_WHILE(cond)                                                                      \
    do {                                                                                      \
        int64_t spin_end_ = now_ns() + POOL_SPIN_NS;                                          \
        for (int k_ = 1; (cond); k_++) {                                                      \
            CPU_RELAX();                                                                      \
            if ((k_ & 15) == 0 && now_ns() > spin_end_)                                       \
                break;                                                                        \
        }                                                                                     \
    } while (0)

struct cpu_pool {
    int n_threads; /* including the caller */
    pthread_t *workers;
    int n_started;

    pthread_mutex_t mu;
    pthread_cond_t wake;     /* generation changed, or stop */
    pthread_cond_t finished; /* done reached n_chunks */
    atomic_uint_fast64_t generation;
    atomic_int stop;
    atomic_flag busy; /* a job is running: nested or concurrent calls run inline */

    /* the current job: fields written before generation is bumped */
    cpu_pool_fn fn;
    void *ctx;
    int64_t n, grain;
    atomic_int_fast64_t n_chunks; /* read by late workers while the next job is written */
    atomic_uint_fast64_t claim; /* (job number & 0xffffffff) << 32 | next chunk */
    atomic_int_fast64_t done;   /* chunks finished */
};

/* A chunk index no job reaches: the job's fields are being written, nothing to claim. */
#define CLAIM_CLOSED 0xffffffffu

/* Claim and run chunks of job `job` until none is left (or the job is over). */
static void run_chunks(cpu_pool *p, uint64_t job)
{
    const uint64_t tag = (job & 0xffffffffu) << 32;
    for (;;) {
        uint64_t cur = atomic_load(&p->claim);
        if ((cur & ~(uint64_t)0xffffffffu) != tag)
            return; /* a later job: this one is finished */
        int64_t chunk = (int64_t)(cur & 0xffffffffu);
        if (chunk >= atomic_load_explicit(&p->n_chunks, memory_order_relaxed))
            return;
        if (!atomic_compare_exchange_weak(&p->claim, &cur, cur + 1))
            continue;
        int64_t begin = chunk * p->grain;
        int64_t end = begin + p->grain < p->n ? begin + p->grain : p->n;
        p->fn(p->ctx, begin, end);
        if (atomic_fetch_add(&p->done, 1) + 1 == p->n_chunks) {
            pthread_mutex_lock(&p->mu);
            pthread_cond_signal(&p->finished);
            pthread_mutex_unlock(&p->mu);
        }
    }
}

static void *worker_main(void *arg)
{
    cpu_pool *p = arg;
    uint64_t seen = 0;
    for (;;) {
        SPIN_WHILE(atomic_load(&p->generation) == seen && !atomic_load(&p->stop));
        if (atomic_load(&p->generation) == seen) {
            pthread_mutex_lock(&p->mu);
            while (atomic_load(&p->generation) == seen && !atomic_load(&p->stop))
                pthread_cond_wait(&p->wake, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop))
            break;
        seen = atomic_load(&p->generation);
        run_chunks(p, seen);
    }
    return NULL;
}

llmrt_status cpu_pool_create(int n_threads, cpu_pool **out, llmrt_error *err)
{
    *out = NULL;
    if (n_threads < 1)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "cpu backend: thread count %d must be >= 1",
                          n_threads);
    cpu_pool *p = calloc(1, sizeof *p);
    if (!p)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "cpu backend: out of memory for the thread pool");
    p->n_threads = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->wake, NULL);
    pthread_cond_init(&p->finished, NULL);
    atomic_init(&p->generation, 0);
    atomic_init(&p->stop, 0);
    atomic_flag_clear(&p->busy);
    atomic_init(&p->claim, 0);
    atomic_init(&p->done, 0);
    atomic_init(&p->n_chunks, 0);
    if (n_threads > 1) {
        p->workers = calloc((size_t)n_threads - 1, sizeof *p->workers);
        if (!p->workers) {
            cpu_pool_destroy(p);
            return llmrt_fail(err, LLMRT_ERR_NOMEM, "cpu backend: out of memory for the thread pool");
        }
        for (int i = 0; i < n_threads - 1; i++) {
            int rc = pthread_create(&p->workers[i], NULL, worker_main, p);
            if (rc != 0) {
                cpu_pool_destroy(p);
                return llmrt_fail(err, LLMRT_ERR_LIMIT,
                                  "cpu backend: could not start worker thread %d of %d (%s); "
                                  "set [backend.cpu] threads to a smaller number",
                                  i + 1, n_threads - 1, strerror(rc));
            }
            p->n_started++;
        }
    }
    *out = p;
    return LLMRT_OK;
}

void cpu_pool_destroy(cpu_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_started; i++)
        pthread_join(p->workers[i], NULL);
    free(p->workers);
    pthread_cond_destroy(&p->finished);
    pthread_cond_destroy(&p->wake);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

int cpu_pool_threads(const cpu_pool *p)
{
    return p->n_threads;
}

void cpu_pool_run(cpu_pool *p, int64_t n, int64_t grain, cpu_pool_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    if (grain <= 0) /* four chunks per thread: a thread that lost its core to another
                       process holds back at most a quarter of its share */
        grain = (n + 4 * p->n_threads - 1) / (4 * p->n_threads);
    if (p->n_threads == 1 || grain >= n || atomic_flag_test_and_set(&p->busy)) {
        fn(ctx, 0, n);
        return;
    }
    uint64_t job = atomic_load(&p->generation) + 1;
    /* Close the previous job before touching its fields: a worker that woke up late for it
     * may still try to claim one of its chunks, and must fail (its compare-and-swap sees the
     * new tag) rather than run a chunk of a half-written job. The new job opens below, once
     * its fields are written. */
    atomic_store(&p->claim, (job & 0xffffffffu) << 32 | CLAIM_CLOSED);
    p->fn = fn;
    p->ctx = ctx;
    p->n = n;
    p->grain = grain;
    atomic_store(&p->n_chunks, (n + grain - 1) / grain);
    atomic_store(&p->done, 0);
    atomic_store(&p->claim, (job & 0xffffffffu) << 32);
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->generation, job);
    pthread_cond_broadcast(&p->wake);
    pthread_mutex_unlock(&p->mu);

    run_chunks(p, job);

    SPIN_WHILE(atomic_load(&p->done) < p->n_chunks);
    if (atomic_load(&p->done) < p->n_chunks) {
        pthread_mutex_lock(&p->mu);
        while (atomic_load(&p->done) < p->n_chunks)
            pthread_cond_wait(&p->finished, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
    atomic_flag_clear(&p->busy);
}
