/* scheduler.c — see scheduler.h. */
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

llmrt_status llmrt_sched_init(llmrt_scheduler *s, llmrt_kv *kv, int32_t max_seqs,
                              int32_t max_tokens, llmrt_error *err)
{
    memset(s, 0, sizeof *s);
    if (max_seqs <= 0 || max_tokens <= 0)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "scheduler: max_num_seqs %d, "
                          "max_num_batched_tokens %d (both must be >= 1)", max_seqs, max_tokens);
    s->kv = kv;
    s->max_seqs = max_seqs;
    s->max_tokens = max_tokens;
    s->running = calloc((size_t)max_seqs, sizeof *s->running);
    s->cap_waiting = 64;
    s->waiting = calloc((size_t)s->cap_waiting, sizeof *s->waiting);
    if (!s->running || !s->waiting) {
        llmrt_sched_free(s);
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory for the scheduler");
    }
    return LLMRT_OK;
}

void llmrt_sched_free(llmrt_scheduler *s)
{
    free(s->running);
    free(s->waiting);
    memset(s, 0, sizeof *s);
}

/* Insert into a list sorted by order. */
static void insert_sorted(llmrt_sched_seq **list, int32_t *n, llmrt_sched_seq *seq)
{
    int32_t i = *n;
    while (i > 0 && list[i - 1]->order > seq->order) {
        list[i] = list[i - 1];
        i--;
    }
    list[i] = seq;
    (*n)++;
}

static void remove_at(llmrt_sched_seq **list, int32_t *n, int32_t i)
{
    memmove(list + i, list + i + 1, sizeof *list * (size_t)(*n - i - 1));
    (*n)--;
}

static int32_t index_of(llmrt_sched_seq **list, int32_t n, const llmrt_sched_seq *seq)
{
    for (int32_t i = 0; i < n; i++)
        if (list[i] == seq)
            return i;
    return -1;
}

static llmrt_status push_waiting(llmrt_scheduler *s, llmrt_sched_seq *seq, llmrt_error *err)
{
    if (s->n_waiting == s->cap_waiting) {
        int32_t cap = s->cap_waiting * 2;
        llmrt_sched_seq **w = realloc(s->waiting, sizeof *w * (size_t)cap);
        if (!w)
            return llmrt_fail(err, LLMRT_ERR_NOMEM, "out of memory growing the waiting queue");
        s->waiting = w, s->cap_waiting = cap;
    }
    insert_sorted(s->waiting, &s->n_waiting, seq);
    seq->queued = 1;
    return LLMRT_OK;
}

llmrt_status llmrt_sched_add(llmrt_scheduler *s, llmrt_sched_seq *seq, llmrt_error *err)
{
    seq->n_computed = 0;
    seq->running = 0;
    return push_waiting(s, seq, err);
}

void llmrt_sched_remove(llmrt_scheduler *s, llmrt_sched_seq *seq)
{
    int32_t i;
    if (seq->running && (i = index_of(s->running, s->n_running, seq)) >= 0)
        remove_at(s->running, &s->n_running, i);
    if (seq->queued && (i = index_of(s->waiting, s->n_waiting, seq)) >= 0)
        remove_at(s->waiting, &s->n_waiting, i);
    seq->running = seq->queued = 0;
    llmrt_kv_table_release(s->kv, &seq->table);
}

/* Preempt the newest running sequence: free its blocks, queue it for recomputation. The
 * waiting queue always has room for it: the running list has a slot's worth of capacity
 * reserved in the waiting array (see llmrt_sched_schedule). */
static llmrt_sched_seq *preempt_newest(llmrt_scheduler *s)
{
    llmrt_sched_seq *v = s->running[s->n_running - 1];
    s->n_running--;
    v->running = 0;
    llmrt_kv_table_release(s->kv, &v->table);
    v->n_computed = 0;
    v->n_preempted++;
    s->preemptions++;
    insert_sorted(s->waiting, &s->n_waiting, v);
    v->queued = 1;
    return v;
}

/* What a waiting sequence needs to join a step with `budget` tokens left: its cached
 * blocks (*hit), the tokens it would compute (returned) and whether the blocks for them are
 * free (*fits). */
static int32_t plan_join(const llmrt_scheduler *s, const llmrt_sched_seq *seq, int32_t budget,
                         int32_t *hit, int *fits)
{
    int32_t unheld = 0;
    *hit = seq->table.n == 0 ? llmrt_kv_prefix_probe(s->kv, seq->tokens, seq->n_tokens, &unheld)
                             : 0;
    int32_t start = *hit * s->kv->block_size;
    int32_t n = seq->n_tokens - start;
    if (n > budget)
        n = budget;
    int32_t need = llmrt_kv_blocks_for(s->kv, start + n) - *hit;
    *fits = need <= s->kv->n_free - unheld;
    return n;
}

int llmrt_sched_can_admit(const llmrt_scheduler *s)
{
    if (s->n_waiting == 0 || s->n_running >= s->max_seqs)
        return 0;
    int32_t hit;
    int fits;
    plan_join(s, s->waiting[0], s->max_tokens, &hit, &fits);
    return fits;
}

/* Put seq's next n tokens in the step (the caller made sure the blocks are free): reserve
 * them, advance n_computed, fill its item. */
static void take(llmrt_scheduler *s, llmrt_sched_seq *seq, int32_t n, llmrt_sched_item *item)
{
    llmrt_kv_table_reserve(s->kv, &seq->table, seq->n_computed + n, NULL);
    item->seq = seq;
    item->start = seq->n_computed;
    item->n_new = n;
    seq->n_computed += n;
    item->samples = seq->n_computed == seq->n_tokens;
}

int32_t llmrt_sched_schedule(llmrt_scheduler *s, llmrt_sched_item *items, int32_t *n_tokens,
                             int32_t *n_preempted)
{
    int32_t n_items = 0, budget = s->max_tokens, preempted = 0;
    *n_tokens = 0;
    /* Make sure preemption can always queue its victims without allocating. */
    if (s->cap_waiting < s->n_waiting + s->n_running) {
        int32_t cap = s->n_waiting + s->n_running + 64;
        llmrt_sched_seq **w = realloc(s->waiting, sizeof *w * (size_t)cap);
        if (!w) {
            *n_preempted = 0;
            return 0; /* out of memory: run nothing this step; the caller retries */
        }
        s->waiting = w, s->cap_waiting = cap;
    }
    for (int32_t i = 0; i < s->n_running && budget > 0;) {
        llmrt_sched_seq *seq = s->running[i];
        int32_t n = seq->n_tokens - seq->n_computed;
        if (n <= 0) { /* nothing to compute (cannot happen when synchronous) */
            i++;
            continue;
        }
        if (n > budget)
            n = budget;
        int32_t need = llmrt_kv_blocks_needed(s->kv, &seq->table, seq->n_computed + n);
        int gone = 0;
        while (need > s->kv->n_free) {
            llmrt_sched_seq *v = preempt_newest(s);
            preempted++;
            if (v == seq) {
                gone = 1;
                break;
            }
        }
        if (gone)
            break; /* seq was the newest left: every older one is already scheduled */
        take(s, seq, n, &items[n_items++]);
        budget -= n;
        i++;
    }
    while (!preempted && budget > 0 && s->n_waiting > 0 && s->n_running < s->max_seqs) {
        llmrt_sched_seq *seq = s->waiting[0];
        int32_t hit;
        int fits;
        int32_t n = plan_join(s, seq, budget, &hit, &fits);
        if (!fits)
            break; /* FIFO: the head waits for blocks; nobody overtakes it */
        int32_t start = hit * s->kv->block_size;
        if (llmrt_kv_table_room(&seq->table, llmrt_kv_blocks_for(s->kv, start + n)) != LLMRT_OK)
            break; /* out of memory for its table: it waits, and the next step retries */
        remove_at(s->waiting, &s->n_waiting, 0);
        seq->queued = 0;
        insert_sorted(s->running, &s->n_running, seq);
        seq->running = 1;
        /* A waiting sequence holds no blocks and has nothing computed (new, or preempted).
         * Attach finds what plan_join found: the table has room, and nothing changed the
         * cache in between. */
        llmrt_kv_prefix_attach(s->kv, &seq->table, seq->tokens, seq->n_tokens);
        seq->n_computed = start;
        if (seq->n_preempted == 0)
            seq->n_cached = start;
        take(s, seq, n, &items[n_items++]);
        budget -= n;
    }
    /* The step's full blocks join the prefix cache: from the next step on they may be
     * shared (the step that writes them runs before any step that reads them). */
    for (int32_t i = 0; i < n_items; i++)
        llmrt_kv_prefix_commit(s->kv, &items[i].seq->table, items[i].seq->tokens,
                               items[i].seq->n_computed);
    *n_tokens = s->max_tokens - budget;
    *n_preempted = preempted;
    return n_items;
}
