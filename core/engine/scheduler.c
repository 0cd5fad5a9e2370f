/* scheduler.c — see scheduler.h. */
#include "scheduler.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

void llmrt_sched_default_limits(int on_gpu, int32_t *max_seqs, int32_t *max_tokens)
{
    if (*max_seqs <= 0)
        *max_seqs = on_gpu ? LLMRT_SCHED_GPU_MAX_SEQS : LLMRT_SCHED_CPU_MAX_SEQS;
    if (*max_tokens <= 0)
        *max_tokens = on_gpu ? LLMRT_SCHED_GPU_MAX_TOKENS : LLMRT_SCHED_CPU_MAX_TOKENS;
}

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

/* A plan in the making: the items so far, the budget left, the preemptions so far. */
typedef struct plan {
    llmrt_sched_item *items;
    int32_t n_items, budget, preempted;
} plan;

static int planned(const plan *p, const llmrt_sched_seq *seq)
{
    for (int32_t i = 0; i < p->n_items; i++)
        if (p->items[i].seq == seq)
            return 1;
    return 0;
}

/* Free blocks for seq to hold `len` tokens by preempting the newest running sequences that
 * are not in the plan yet (seq itself too when allow_self and it is the newest). Returns 1
 * when the blocks are free; 0 when not, with *gone set when seq itself was preempted. */
static int make_room(llmrt_scheduler *s, plan *p, llmrt_sched_seq *seq, int32_t len,
                     int allow_self, int *gone)
{
    *gone = 0;
    while (llmrt_kv_blocks_needed(s->kv, &seq->table, len) > s->kv->n_free) {
        llmrt_sched_seq *v = s->running[s->n_running - 1];
        if ((v == seq && !allow_self) || (v != seq && planned(p, v)))
            return 0; /* nothing left to take but what this step already holds */
        preempt_newest(s);
        p->preempted++;
        if (v == seq) {
            *gone = 1;
            return 0;
        }
    }
    return 1;
}

/* Decode rows first (one token to compute), oldest first: a long prefill never delays them. */
static void plan_decodes(llmrt_scheduler *s, plan *p)
{
    for (int32_t i = 0; i < s->n_running && p->budget > 0;) {
        llmrt_sched_seq *seq = s->running[i];
        int gone = 0;
        if (seq->n_tokens - seq->n_computed != 1) {
            i++;
        } else if (make_room(s, p, seq, seq->n_computed + 1, 1, &gone)) {
            take(s, seq, 1, &p->items[p->n_items++]);
            p->budget--;
            i++;
        } else if (gone) {
            break; /* seq was the newest left: every older decode row is planned */
        } else {
            i++;
        }
    }
}

/* Then the running prefills, oldest first, in chunks of what the budget leaves. A chunk that
 * cannot get its blocks from newer sequences outside the step shrinks to the blocks there
 * are; one that gets none is skipped, or, when its sequence is the newest, preempts it (as a
 * decode row would). */
static void plan_prefills(llmrt_scheduler *s, plan *p)
{
    for (int32_t i = 0; i < s->n_running && p->budget > 0;) {
        llmrt_sched_seq *seq = s->running[i];
        int32_t n = seq->n_tokens - seq->n_computed;
        if (n <= 1) { /* planned above, or nothing to compute (cannot happen when synchronous) */
            i++;
            continue;
        }
        if (n > p->budget)
            n = p->budget;
        int gone = 0; /* never set: seq is not preempted here (allow_self 0) */
        if (!make_room(s, p, seq, seq->n_computed + n, 0, &gone)) {
            n = (seq->table.n + s->kv->n_free) * s->kv->block_size - seq->n_computed;
            if (n <= 0) {
                if (seq == s->running[s->n_running - 1] && !planned(p, seq)) {
                    preempt_newest(s);
                    p->preempted++;
                    continue; /* running[i] is now the next sequence (or none) */
                }
                i++;
                continue;
            }
            if (n > p->budget)
                n = p->budget;
        }
        take(s, seq, n, &p->items[p->n_items++]);
        p->budget -= n;
        i++;
    }
}

/* Then waiting sequences in arrival order (FIFO: the head waits for blocks, nobody overtakes
 * it), none in a step that preempted. A joining sequence first takes the cached blocks of
 * its leading full blocks (prefix caching) and computes from the first token after them. */
static void plan_admissions(llmrt_scheduler *s, plan *p)
{
    while (!p->preempted && p->budget > 0 && s->n_waiting > 0 && s->n_running < s->max_seqs) {
        llmrt_sched_seq *seq = s->waiting[0];
        int32_t hit;
        int fits;
        int32_t n = plan_join(s, seq, p->budget, &hit, &fits);
        if (!fits)
            break;
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
        take(s, seq, n, &p->items[p->n_items++]);
        p->budget -= n;
    }
}

int32_t llmrt_sched_schedule(llmrt_scheduler *s, llmrt_sched_item *items, int32_t *n_tokens,
                             int32_t *n_preempted)
{
    plan p = {items, 0, s->max_tokens, 0};
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
    plan_decodes(s, &p);
    plan_prefills(s, &p);
    plan_admissions(s, &p);
    /* The step's full blocks join the prefix cache: from the next step on they may be
     * shared (the step that writes them runs before any step that reads them). */
    for (int32_t i = 0; i < p.n_items; i++)
        llmrt_kv_prefix_commit(s->kv, &items[i].seq->table, items[i].seq->tokens,
                               items[i].seq->n_computed);
    *n_tokens = s->max_tokens - p.budget;
    *n_preempted = p.preempted;
    return p.n_items;
}
