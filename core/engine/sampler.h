/* sampler.h — the host sampler: the reference for every sampling parameter, on float32
 * logits of one sequence.
 *
 * Why on the host: penalties and logprobs need the whole row anyway, backends without a
 * sample op need a fallback, and the device samplers are checked against this one.
 * Semantics follow vLLM: penalties on the raw logits (repetition over prompt + output,
 * presence / frequency over the output), then temperature, min-p (relative to the most
 * likely token), top-k, then top-p over what is left; temperature 0 is greedy (argmax,
 * lowest index on ties). Logprobs are the log-softmax of the raw logits.
 *
 * Randomness is counter-based: the draw for a sequence's token i is a pure function of
 * (seed, i), so a request gives the same ids whatever batch it runs in, and after a
 * preemption recomputes it. */
#ifndef LLMRT_CORE_SAMPLER_H
#define LLMRT_CORE_SAMPLER_H

#include <stdint.h>

#include <llmrt/engine.h>

/* A uniform draw in [0, 1) for token `index` of a request with `seed` (24 random bits). */
float llmrt_sampler_uniform(uint64_t seed, uint64_t index);
/* The seed's mixing function (splitmix64), also used to derive per-request seeds. */
uint64_t llmrt_sampler_mix(uint64_t x);

/* Scratch for one vocabulary size; owned by one thread. */
typedef struct llmrt_sampler llmrt_sampler;

llmrt_status llmrt_sampler_new(int32_t vocab, llmrt_sampler **out, llmrt_error *err);
void llmrt_sampler_free(llmrt_sampler *s);

/* Index of the largest logit (lowest index on ties); NaN never wins. */
int32_t llmrt_sampler_argmax(const float *logits, int32_t vocab);

/* 1 when sp samples greedily (the most likely token): temperature 0, or below 1e-5. The one
 * rule the host sampler and the engine's choice of device op share. */
static inline int llmrt_sampler_greedy(const llmrt_sampling *sp)
{
    return !(sp->temperature >= 1e-5f);
}
/* 1 when sp asks for any penalty. */
int llmrt_sampler_has_penalties(const llmrt_sampling *sp);

/* Apply repetition / presence / frequency penalties in place to logits [vocab].
 * prompt [n_prompt] and output [n_output] are the sequence's tokens so far (ids out of
 * range are ignored). */
void llmrt_sampler_apply_penalties(llmrt_sampler *s, float *logits, const llmrt_sampling *sp,
                                   const int32_t *prompt, int32_t n_prompt,
                                   const int32_t *output, int32_t n_output);

/* Draw a token from logits [vocab] (after penalties) with sp's temperature, min_p, top_k
 * and top_p, using `uniform` in [0, 1). Greedy when llmrt_sampler_greedy(sp). */
int32_t llmrt_sampler_pick(llmrt_sampler *s, const float *logits, const llmrt_sampling *sp,
                           float uniform);

/* Log-probability of `token` under log_softmax(logits [vocab]), and the n_top (<=
 * LLMRT_MAX_TOP_LOGPROBS) most likely tokens and their log-probabilities, most likely first
 * (lowest index on ties). */
void llmrt_sampler_logprobs(llmrt_sampler *s, const float *logits, int32_t token, int32_t n_top,
                            float *logprob, int32_t *top_ids, float *top_logprobs);

/* The probability of each token under the same rules as llmrt_sampler_pick, for tests:
 * probs [vocab] sum to 1 (0 for filtered tokens). */
void llmrt_sampler_distribution(llmrt_sampler *s, const float *logits, const llmrt_sampling *sp,
                                double *probs);

#endif
