/* scheduler.h — continuous batching over the paged KV cache: which sequences run in the next
 * step and how many of their tokens.
 *
 * Policy (vLLM-like):
 *  - Running sequences first: every decode row (one token to compute), oldest first, then
 *    the running prefills, oldest first, each the rest of its prompt up to the token budget
 *    left (scheduler.max_num_batched_tokens). Prefill and decode share a step (a mixed step),
 *    and a long prompt, prefilled in chunks, never stalls the decode rows.
 *  - Then waiting sequences join in arrival order (FIFO, never skipping the head) while
 *    there is room: scheduler.max_num_seqs, the token budget, and free KV blocks. With
 *    prefix caching, a joining sequence first takes the cached blocks of its leading full
 *    blocks (kv_cache.h) and computes from the first token after them: the cached tokens
 *    cost no budget, and the free-block check counts only the blocks it still needs,
 *    against free blocks less the cached ones it is about to hold.
 *  - When a running sequence needs a block and none is free, the newest running sequence not
 *    yet in the step is preempted: its blocks are freed and it goes back to the waiting queue
 *    in arrival order; when readmitted, its prompt and generated tokens are recomputed as one
 *    prefill (from the first of them not in the prefix cache: its released blocks stay cached
 *    until evicted). A prefill chunk that would need a sequence already in the step shrinks
 *    to the blocks there are. No new sequence is admitted in a step that preempted.
 *  - A step's full blocks are indexed in the prefix cache once the step is planned, so a
 *    sequence admitted in a later step may share them; one admitted in the same step
 *    computes its own (no block is shared while a step that writes it is being planned).
 * The scheduler only moves bookkeeping; the engine fills step buffers from the items. */
#ifndef LLMRT_CORE_SCHEDULER_H
#define LLMRT_CORE_SCHEDULER_H

#include <stdint.h>

#include "kv_cache.h"

typedef struct llmrt_sched_seq {
    uint64_t order;          /* arrival order: smaller is older */
    int32_t n_tokens;        /* tokens known so far: prompt + generated */
    int32_t n_computed;      /* tokens whose KV is written or being written */
    llmrt_block_table table;
    int32_t running;         /* 1 while in the running set */
    int32_t queued;          /* 1 while in the waiting queue */
    int32_t n_preempted;     /* times this sequence was preempted */
    const int32_t *tokens;   /* [n_tokens] its token ids, for the prefix cache (a negative id
                                is one still being computed); NULL: never cached */
    int32_t n_cached;        /* prompt tokens found in the prefix cache at its first
                                admission */
    void *owner;             /* the engine's sequence */
} llmrt_sched_seq;

/* One sequence's share of a step: token rows [start, start + n_new) of its positions. */
typedef struct llmrt_sched_item {
    llmrt_sched_seq *seq;
    int32_t start;
    int32_t n_new;
    int32_t samples; /* 1: the step computes the sequence's last known token, so it samples */
} llmrt_sched_item;

typedef struct llmrt_scheduler {
    llmrt_kv *kv;
    int32_t max_seqs;
    int32_t max_tokens;
    llmrt_sched_seq **running; /* [max_seqs] sorted by order */
    int32_t n_running;
    llmrt_sched_seq **waiting; /* sorted by order */
    int32_t n_waiting, cap_waiting;
    uint64_t preemptions;      /* total */
} llmrt_scheduler;

/* scheduler.max_num_seqs and max_num_batched_tokens when set to 0 (their default): by the
 * backend. A GPU step costs about the same from 1 to 256 decode rows (the weights are read
 * once), and 8192 tokens keep a prefill step at tensor-core efficiency while a 2048-token
 * prompt still fits one step; a CPU step costs in proportion to its rows. */
#define LLMRT_SCHED_GPU_MAX_SEQS 256
#define LLMRT_SCHED_GPU_MAX_TOKENS 8192
#define LLMRT_SCHED_CPU_MAX_SEQS 32
#define LLMRT_SCHED_CPU_MAX_TOKENS 2048
/* Fill whichever of *max_seqs, *max_tokens is 0 with the default for the backend kind. */
void llmrt_sched_default_limits(int on_gpu, int32_t *max_seqs, int32_t *max_tokens);

llmrt_status llmrt_sched_init(llmrt_scheduler *s, llmrt_kv *kv, int32_t max_seqs,
                              int32_t max_tokens, llmrt_error *err);
void llmrt_sched_free(llmrt_scheduler *s);

/* Queue a sequence (n_tokens > 0, n_computed 0, no blocks). */
llmrt_status llmrt_sched_add(llmrt_scheduler *s, llmrt_sched_seq *seq, llmrt_error *err);
/* Take a sequence out (finished or cancelled), wherever it is, and free its blocks. */
void llmrt_sched_remove(llmrt_scheduler *s, llmrt_sched_seq *seq);

/* Plan the next step into items [max_seqs]. Returns the number of items (0: nothing can run);
 * *n_tokens is the total of their n_new. Each item's sequence has its blocks reserved and
 * n_computed advanced to start + n_new (a joining sequence's start is after its cached
 * blocks), and its full blocks up to n_computed indexed in the prefix cache. *n_preempted:
 * sequences preempted by this call. */
int32_t llmrt_sched_schedule(llmrt_scheduler *s, llmrt_sched_item *items, int32_t *n_tokens,
                             int32_t *n_preempted);

/* 1 when the head of the waiting queue could join a step now (room in seqs and blocks). */
int llmrt_sched_can_admit(const llmrt_scheduler *s);

#endif
