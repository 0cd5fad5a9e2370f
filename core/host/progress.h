/* progress.h — a progress display for long byte-moving jobs (loading a checkpoint, writing
 * one with mkmodel): bytes, items (tensors) and MB/s.
 *
 * Why: loading an 8B checkpoint takes seconds to minutes; a user should see that it moves
 * and how fast. On a terminal one line is redrawn in place (at most 10 times a second);
 * in a log file or pipe a plain line is printed every ~10%, so logs stay readable.
 * Updates are thread-safe (plugins may load tensors from several threads). */
#ifndef LLMRT_CORE_PROGRESS_H
#define LLMRT_CORE_PROGRESS_H

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>

typedef struct llmrt_progress {
    FILE *out;
    int tty;              /* 1: redraw one line with '\r'; 0: plain lines every ~10% */
    const char *label;    /* "loading", "writing" */
    const char *unit;     /* what items are: "tensors" */
    uint64_t total_bytes, done_bytes;
    uint64_t total_items, done_items;
    double t0;            /* monotonic seconds at init */
    double last_draw;     /* tty: time of the last redraw */
    int last_tenth;       /* plain: last 10% step printed */
    double quiet_s;       /* plain: no step lines during the first quiet_s seconds (a job
                             that short needs only the final line); 0.5 by default */
    int drawn;            /* tty: a bar is on screen; the final line replaces it */
    int finished;
    pthread_mutex_t lock;
} llmrt_progress;

/* 1 when `out` is a terminal (and TERM is not "dumb"). */
int llmrt_progress_is_tty(FILE *out);
/* Start a display. Totals may be 0 when unknown (percentages are then omitted). */
void llmrt_progress_init(llmrt_progress *p, FILE *out, int tty, const char *label,
                         const char *unit, uint64_t total_bytes, uint64_t total_items);
/* Count work done; redraws when due. */
void llmrt_progress_add(llmrt_progress *p, uint64_t bytes, uint64_t items);
/* Print the final line with totals, time and throughput (once; later calls do nothing). */
void llmrt_progress_done(llmrt_progress *p);
/* Release the lock; does not print. */
void llmrt_progress_free(llmrt_progress *p);

#endif
