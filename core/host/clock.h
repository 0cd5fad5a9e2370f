/* clock.h — the one clock: CLOCK_MONOTONIC seconds, as every timing in llmrt (engine steps,
 * token events, load times, benchmarks, the server's latencies) reads it; and the process's
 * CPU time, which benchmark tools set beside it (wall / CPU shows how much of a shared
 * machine a run had). */
#ifndef LLMRT_CORE_CLOCK_H
#define LLMRT_CORE_CLOCK_H

/* Seconds on the monotonic clock (never jumps with the wall clock). */
double llmrt_now_s(void);
/* CPU seconds this process has used, all threads together (CLOCK_PROCESS_CPUTIME_ID). */
double llmrt_cpu_s(void);

#endif
