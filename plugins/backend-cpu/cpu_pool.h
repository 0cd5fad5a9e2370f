/* cpu_pool.h — a small persistent pthread pool: parallel_for over [0, n).
 *
 * Why: a decode step runs hundreds of short ops; creating threads per op would cost more
 * than the ops. Workers live as long as the backend, spin briefly after each job (the next
 * op usually follows within microseconds) and then sleep on a condition variable.
 *
 * Work is handed out in chunks of `grain` items from a shared counter, so an uneven job
 * (causal attention) balances itself. Which thread computes an item never changes what is
 * computed, so results do not depend on the thread count. A call made while the pool is
 * busy (from inside a chunk, or from a second host thread) runs inline on the caller. */
#ifndef LLMRT_CPU_POOL_H
#define LLMRT_CPU_POOL_H

#include <stdint.h>

#include <llmrt/plugin.h>

typedef struct cpu_pool cpu_pool;
typedef void (*cpu_pool_fn)(void *ctx, int64_t begin, int64_t end);

/* n_threads >= 1 counts the calling thread: n_threads - 1 workers are started. */
llmrt_status cpu_pool_create(int n_threads, cpu_pool **out, llmrt_error *err);
void cpu_pool_destroy(cpu_pool *p);
int cpu_pool_threads(const cpu_pool *p);

/* Run fn over [0, n) in chunks of `grain` items (grain <= 0: about four chunks per
 * thread). Blocks until every chunk is done. */
void cpu_pool_run(cpu_pool *p, int64_t n, int64_t grain, cpu_pool_fn fn, void *ctx);

#endif
