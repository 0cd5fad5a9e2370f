/* engine_internal.h — what the engine's files share: the engine itself, a request while
 * the engine holds it (eseq), a launched step (flight) and a captured graph (graph_entry),
 * and the functions one file calls in another.
 *
 * Why one header: the engine is one object cut into files by job (submit.c: requests in;
 * events.c: tokens and final events out; step.c: the step loop; create.c: sizing, creation
 * and destruction), and each job reads the same state; open.c, which opens the parts from
 * runtime.ini, needs none of it. Nothing here is API: the functions are named engine_* and
 * libllmrt exports llmrt_* only (core/llmrt.map). */
#ifndef LLMRT_CORE_ENGINE_INTERNAL_H
#define LLMRT_CORE_ENGINE_INTERNAL_H

#include <pthread.h>
#include <stdint.h>
#include <uthash.h>

#include "engine_parts.h"
#include "grammar.h"
#include "kv_cache.h"
#include "sampler.h"
#include "scheduler.h"
#include "step_buffers.h"
#include "stop_strings.h"

/* Captured decode graphs: a bucket (graph_bucket, step.c: 13 up to 256 rows) x the two step
 * halves x chained or not x the device op (argmax, forward_argmax, sample). */
#define MAX_GRAPHS 160

/* A token id that is none: an event without a token, no stop token, a token a launched step
 * is still computing (engine.h spells it -1). */
#define NO_TOKEN (-1)

/* How a flight's sampled ids come out of the device (pick_device_op, step.c). */
typedef enum device_op {
    DEVICE_OP_NONE = 0,       /* no row samples on the device (they sample on the host, or
                                 none samples) */
    DEVICE_OP_ARGMAX,         /* the model's forward, then the backend's argmax */
    DEVICE_OP_SAMPLE,         /* the model's forward, then the backend's sample */
    DEVICE_OP_FORWARD_ARGMAX, /* the model's forward_argmax: the greedy ids, maybe without
                                 the logits */
} device_op;

/* The events each half records on the stream, in this order (launch, finish_launch in
 * step.c). A step's h2d, compute and d2h times are the spans between consecutive ones. */
typedef enum step_event {
    EV_START,        /* before the inputs' copy */
    EV_INPUTS_DONE,  /* after the inputs' copy; when a graph holds the copies, inside the
                        graph after them (graph_events), else before the graph (the copies
                        then count as compute) */
    EV_COMPUTE_DONE, /* after the forward and the device sampling (inside the graph, before
                        its output copy, with graph_events) */
    EV_OUTPUTS_DONE, /* after the sampled ids' copy to the host: collect waits for it */
    EV_COUNT
} step_event;

/* e->cur when no step is in the air. */
#define NO_FLIGHT (-1)

/* What engine_reap_zombies frees. */
typedef enum reap_mode {
    REAP_UNREFERENCED, /* the finished sequences nothing refers to any more */
    REAP_ALL,          /* every one: the engine is failing or going away, no launched step or
                          cancel list will be read */
} reap_mode;

/* ---- one request while the engine holds it ---- */
typedef struct eseq {
    llmrt_sched_seq sched;   /* scheduler bookkeeping; sched.owner == this */
    uint64_t id;
    void *user;
    llmrt_token_cb cb;
    llmrt_sampling sp;       /* stop_ids / stop point at the copies below */
    int32_t *stop_ids;
    char **stops;
    uint64_t seed;
    int32_t *tokens;         /* [cap] prompt then generated; NO_TOKEN = not known yet */
    int32_t cap;
    int32_t n_prompt;
    int32_t n_generated;     /* known generated tokens */
    int32_t placeholder;     /* 1: a launched step is computing an unknown token */
    int32_t refs;            /* launched, not yet collected steps that include it */
    int done;                /* final event delivered */
    int cancel;              /* cancel requested (engine lock) */
    int cancel_queued;       /* a pointer to it sits in a cancel list (engine lock) */
    int cancel_applied;      /* its cancel has been processed (stepping thread) */
    int cancel_held;         /* finished with a cancel still queued: apply_cancels will read it,
                                so it is not freed before then (stepping thread) */
    int in_sched;            /* handed to the scheduler */
    double t_scheduled;      /* llmrt_now_s() of its first step; 0 before */
    llmrt_detok *detok;
    llmrt_stopper *stopper;
    llmrt_grammar *grammar;  /* structured outputs: the reply's grammar and state, or NULL */
    struct eseq *next;       /* inbox link */
    UT_hash_handle hh;       /* by id (engine lock) */
} eseq;

/* ---- a launched step ---- */
typedef struct flight {
    int active;
    int half;
    int chained;             /* token ids: the previous step's sampled ids, on the device */
    int graph;
    int d2h_done;            /* outputs' copy enqueued */
    device_op device_op;     /* how its sampled ids come out of the device */
    int any_host;            /* rows sampled on the host */
    llmrt_sched_item *items; /* [max_seqs] */
    uint8_t *row_host;       /* [max_seqs] 1: sampled on the host */
    int32_t n_items;
    int32_t n_rows;          /* sequences in the batch, including padding */
    int32_t n_tokens, n_prefill, n_decode;
    llmrt_step_layout lay;
    double t_start, t_prepared;
    uint64_t h2d_bytes, d2h_bytes;
    int32_t n_masked;        /* rows sampled under a grammar's mask (engine->mask_slot) */
    double mask_ms;          /* host time computing them */
} flight;

typedef struct engine_gram engine_gram; /* a compiled grammar in the engine's cache */

/* What collect does with a sampled row besides accepting its token (constrained rows). */
typedef enum row_fate { ROW_TOKEN = 0, ROW_STOP, ROW_DEAD } row_fate;

/* ---- a captured decode step, replayed for every step of its key ---- */
typedef struct graph_entry {
    int32_t rows;            /* key: sequences, padding included */
    int half;                /* key: the half, or 0 when both halves share addresses */
    int chained;             /* key: token ids from the previous step's output */
    device_op op;            /* key */
    llmrt_graph *g;          /* NULL until captured */
} graph_entry;

struct llmrt_engine {
    llmrt_engine_parts parts;
    llmrt_engine_settings set;
    llmrt_engine_options opts;
    llmrt_model_info info;
    llmrt_device_info dev;
    const llmrt_backend_vtable *bvt;
    llmrt_backend *b;
    uint32_t be_caps;
    int32_t max_model_len;
    int32_t max_bt_width;
    int32_t graph_max_rows;
    int async_on, graphs_on, copies_in_graph;
    uint64_t offload_bytes;  /* offloaded weights each forward moves over the bus (memory
                                plugin's stats; 0: none) */
    int inputs_in_place;     /* kernels read the step inputs in host memory (zero-copy
                                without a gather) */
    int outputs_in_place;    /* the device writes the sampled ids in host memory */
    int graph_events;        /* a graph holding the copies also records the events after
                                them (backend CAP_GRAPH_EVENTS): its h2d/d2h time is timed */
    int out_shared;          /* out.host[0] == out.host[1] */
    int in_shared_async;     /* in.host shared and its copies are truly asynchronous */
    char capacity_source[64];
    char sampling_text[160]; /* llmrt_engine_sampling_defaults_text */

    llmrt_kv kv;
    int kv_ok;
    llmrt_scheduler sched;
    int sched_ok;
    llmrt_step_buffers sb;
    int sb_ok;
    llmrt_sampler *sampler;
    float *row_scratch;      /* [vocab] */
    int32_t *sampled;        /* [max_seqs] */
    float *lp_buf;           /* [max_seqs] */
    int32_t *top_ids;        /* [max_seqs * LLMRT_MAX_TOP_LOGPROBS] */
    float *top_lps;
    int32_t *eos;
    int32_t n_eos;
    llmrt_event *ev[2][EV_COUNT]; /* [half][step_event] */
    flight fl[2];
    int cur;                 /* index of the flight in the air, NO_FLIGHT when none */
    int next_half;           /* half of the next synchronous launch */
    graph_entry graphs[MAX_GRAPHS];
    int n_graphs;
    llmrt_sched_item *plan;  /* [max_seqs] scratch for scheduling */
    eseq **zombies;          /* finished sequences still referenced by a flight */
    int32_t n_zombies, cap_zombies;
    uint64_t step_no;
    double t_prev_out;       /* when the last collected step's outputs reached the host (0:
                                none since the engine was last idle) */
    int prev_left_work;      /* that collect left work behind (running or queued requests):
                                the next step's period starts at t_prev_out; else at the
                                arrival of the next work (t_arrival) */
    double t_arrival;        /* submit time of the oldest request of the last drained inbox
                                (0: none since the last collect) */
    uint64_t seed_base;
    char *text;
    size_t text_len, text_cap;
    llmrt_step_cb on_step;
    void *step_user;
    int warned_preempt, warned_graph;

    /* ---- structured outputs (constrain.c) ---- */
    pthread_mutex_t gmu;     /* the grammar cache, its reference counts, the trie pointer */
    int gmu_ok;
    llmrt_gram_vocab *gvocab;       /* the vocabulary trie, built with the first grammar */
    engine_gram *gcache;            /* compiled grammars, most recently used first */
    int32_t n_gcache;
    const struct llmrt_logits_mask_ops *mask_ops; /* the backend's, or NULL: masks on the host */
    llmrt_mem_buffer masks;  /* TO_DEVICE: int32 row slot [max_seqs] (16-byte aligned), then
                                uint32 words [max_seqs, mask_words]; allocated with a tokenizer */
    int masks_ok;
    int32_t mask_words;      /* (vocab + 31) / 32 */
    size_t mask_map_bytes;
    int32_t *mask_slot;      /* [max_seqs] the mask slot of each row of the last masked flight */
    uint32_t *repick_words;  /* [mask_words] the end-of-budget filter */
    uint8_t *row_fate;       /* [max_seqs] row_fate of each row being collected */

    /* ---- shared with other threads: under mu ---- */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    eseq *by_id;
    eseq *inbox, *inbox_tail;
    double t_inbox_first;    /* submit time of the oldest request in the inbox (0: empty) */
    eseq **cancels;
    int32_t n_cancels, cap_cancels;
    uint64_t next_id;
    int failed;
    int wake;
    int work_pending;        /* inbox or cancels non-empty (the stepping thread's view is
                                in the fields below) */
    int active_count;        /* sequences admitted and not finished (stepping thread writes) */
    llmrt_engine_stats pub;
};

/* ---- submit.c: requests in, published stats ---- */

void engine_seq_free(eseq *s);
/* Append s to a growing list (the cancel list, the zombies); -1 when out of memory, then the
 * list is unchanged. */
int engine_seq_list_push(eseq ***list, int32_t *n, int32_t *cap, eseq *s);
/* Refresh the published counters that the stepping thread owns. */
void engine_publish(llmrt_engine *e);
/* Take the inbox and the cancellations from other threads (stepping thread). *cancels is
 * the caller's to free. */
void engine_drain_inbox(llmrt_engine *e, eseq ***cancels, int32_t *n_cancels);
/* End the drained cancellations' sequences (stepping thread). */
void engine_apply_cancels(llmrt_engine *e, eseq **cancels, int32_t n);

/* ---- constrain.c: structured outputs ---- */

/* The mask buffer and the backend's mask op (when the model folder has a tokenizer). */
llmrt_status engine_grammar_init(llmrt_engine *e, llmrt_error *err);
/* The grammar cache, the trie, the mask buffer (every request has ended). */
void engine_grammar_free_all(llmrt_engine *e);
/* Submit: the handle is this engine's and not yet given to another request. */
llmrt_status engine_grammar_take(llmrt_engine *e, llmrt_grammar *g, llmrt_error *err);
/* The reply may end here / must end here (complete and nothing may follow). */
int engine_grammar_complete(const llmrt_grammar *g);
int engine_grammar_finished(const llmrt_grammar *g);
/* The token's bytes into the state: 1, or 0 when they do not continue it. */
int engine_grammar_advance(llmrt_grammar *g, int32_t token);
/* The masks of flight f's constrained rows into the host half of the mask buffer, each
 * row's slot into engine->mask_slot, device rows' slots into the buffer's row map. Returns
 * how many device rows are masked; *bytes = the buffer bytes in use. */
int32_t engine_masks_fill(llmrt_engine *e, flight *f, size_t *bytes);
/* -inf into logits [vocab] where mask slot `slot` of half `half` forbids a token. */
void engine_mask_apply_host(const llmrt_engine *e, int half, int32_t slot, float *logits);
/* May token t come next in s's reply, leaving room to finish within the budget? */
int engine_grammar_fits(llmrt_engine *e, const eseq *s, int32_t t);
/* The tokens that fit (engine_grammar_fits for each, and stop ids when the reply may end)
 * into w [mask_words]; their number (0: none at all), -1 when out of memory. */
int32_t engine_grammar_allowed(llmrt_engine *e, const eseq *s, uint32_t *w);

/* ---- events.c: tokens and final events out ---- */

/* A sampled token reached the host: append it, detokenize, check every stop rule, emit. */
void engine_accept_token(llmrt_engine *e, eseq *s, int32_t t, float lp, int32_t n_top,
                         const int32_t *top_ids, const float *top_lps);
/* End a sequence without a new token (cancel, error): release any held text first. */
void engine_finish_without_token(llmrt_engine *e, eseq *s, llmrt_finish_reason why,
                                 const char *error);
/* Free finished sequences: those nothing refers to any more (no launched step, refs; no
 * queued cancel, cancel_held), or all of them. */
void engine_reap_zombies(llmrt_engine *e, reap_mode mode);
/* Every request ends with FINISH_ERROR; the engine takes no more. */
void engine_fail_all(llmrt_engine *e, const char *msg);
/* End every sequence the scheduler holds (running or waiting) with `why` and free every
 * finished one: the results of launched steps are dropped (failure, destroy). */
void engine_end_all(llmrt_engine *e, llmrt_finish_reason why, const char *msg);

#endif
