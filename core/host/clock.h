/* clock.h — the one clock: CLOCK_MONOTONIC seconds, as every timing in llmrt (engine steps,
 * token events, load times, benchmarks, the server's latencies) reads it. */
#ifndef LLMRT_CORE_CLOCK_H
#define LLMRT_CORE_CLOCK_H

/* Seconds on the monotonic clock (never jumps with the wall clock). */
double llmrt_now_s(void);

#endif
