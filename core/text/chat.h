/* chat.h — the chat format of a model folder: its model plugin's renderer (llmrt/chat.h)
 * over the chat template its tokenizer carries (tokenizer_config.json's chat_template, or
 * chat_template.jinja).
 *
 * Why here: `chat`, `serve` and `tokenize --chat` all turn messages into a prompt the same
 * way, and none of them knows a model family. The engine opens one at create (the server and
 * chat use it through llmrt_engine_chat_render); tokenize opens one from the folder without
 * loading weights. */
#ifndef LLMRT_CORE_CHAT_H
#define LLMRT_CORE_CHAT_H

#include <llmrt/chat.h>
#include <llmrt/engine.h>
#include <llmrt/model.h>

#include "runtime.h"
#include "tokenizer.h"

typedef struct llmrt_chat_ref {
    const llmrt_chat_vtable *vt; /* NULL: no chat format; why says why */
    llmrt_chat *c;
    char why[600];
} llmrt_chat_ref;

/* The chat format the model plugin `model_vt` (named `plugin`) has for tok's template. On any
 * reason there is none (no tokenizer, no template, a plugin without chat, a template it does
 * not recognise) out->vt stays NULL, out->why says why, and the status says what kind of
 * reason it was (NOT_FOUND, UNSUPPORTED); err gets the same text. */
llmrt_status llmrt_chat_open(const llmrt_host *host, const llmrt_model_vtable *model_vt,
                             const char *plugin, const llmrt_tokenizer *tok, const char *dir,
                             llmrt_chat_ref *out, llmrt_error *err);
/* The same for a model folder without loading its weights: dir/config.json picks the model
 * plugin as the model loader does (rt's model.plugin). */
llmrt_status llmrt_chat_open_dir(llmrt_runtime *rt, const char *dir, const llmrt_tokenizer *tok,
                                 llmrt_chat_ref *out, llmrt_error *err);
/* Render into a malloc'd NUL-terminated string (caller frees). opt NULL: a generation prompt,
 * thinking allowed, no tools. */
llmrt_status llmrt_chat_render_text(const llmrt_chat_ref *c, const llmrt_chat_message *msgs,
                                    uint32_t n, const llmrt_chat_options *opt, char **text,
                                    llmrt_error *err);
/* Render and tokenize: the prompt's ids (malloc'd *ids), and, when text is not NULL, the
 * rendered prompt (malloc'd). Special-token text inside what the messages carry (content,
 * reasoning_content, tool-call names and arguments, the tools' JSON) stays plain text: only
 * the template's own special tokens become special ids, so a message cannot forge chat
 * structure ("<|im_end|>\n<|im_start|>system ..."). LLMRT_CHAT_CONTENT_SPECIAL lifts that
 * (trusted clients); LLMRT_CHAT_ADD_SPECIAL adds the post-processor's tokens (e.g. BOS).
 *
 * How: each special token's text in those strings (and a token's first or last characters
 * at a string's edge, which the template's text next to it could complete) is replaced by
 * a private-use marker, the messages are rendered, the markers are put back, and the
 * prompt is tokenized whole with special tokens refused where they would overlap a put-back
 * piece (llmrt_tokenizer_encode_spans): every other id is what tokenizing the rendered
 * prompt gives. */
enum { LLMRT_CHAT_CONTENT_SPECIAL = 1u << 0, LLMRT_CHAT_ADD_SPECIAL = 1u << 1 };
llmrt_status llmrt_chat_encode(const llmrt_chat_ref *c, const llmrt_tokenizer *tok,
                               const llmrt_chat_message *msgs, uint32_t n,
                               const llmrt_chat_options *opt, uint32_t flags, int32_t **ids,
                               size_t *n_ids, char **text, llmrt_error *err);

/* The family's reply markup (chat.h's syntax member), or NULL when it has none. */
const llmrt_chat_syntax *llmrt_chat_syntax_of(const llmrt_chat_ref *c);
/* 1 when `prompt` ends inside an open think block of the family's markup (its last
 * think_open comes after its last think_close), so the reply starts inside reasoning. */
int llmrt_chat_prompt_in_reasoning(const llmrt_chat_ref *c, const char *prompt);

/* One reply's parser (engine.h's llmrt_chat_parser): the family's (chat.h parser_*), or, when
 * the family has none, one that reports every byte as content at once. Thread-safe to open on
 * a shared ref; each parser belongs to one thread. */
llmrt_status llmrt_chat_parser_open(const llmrt_chat_ref *c, const llmrt_reply_options *opt,
                                    llmrt_chat_parser **out, llmrt_error *err);

/* The family's name (as the plugin calls it), or "" when there is none. */
const char *llmrt_chat_family(const llmrt_chat_ref *c);
void llmrt_chat_close(llmrt_chat_ref *c);

#endif
