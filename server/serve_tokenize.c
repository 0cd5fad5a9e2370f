/* serve_tokenize.c — POST /tokenize and POST /detokenize in vLLM's shapes:
 *   /tokenize   {"prompt": "..."} or {"messages": [...]} (+ add_special_tokens,
 *               add_generation_prompt, return_token_strs, chat_template_kwargs)
 *               → {"count", "max_model_len", "tokens", "token_strs"}
 *   /detokenize {"tokens": [...]} → {"prompt": "..."}
 * Clients use them to count tokens against max_model_len before sending a request. */
#include <jansson.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"
#include "serve_response.h"

static int no_tokenizer(struct MHD_Connection *c, serve_conn *cx)
{
    llmrt_serve_error e;
    llmrt_serve_error_set(&e, 400, NULL, NULL, NULL,
                          "the model `%s` has no tokenizer.json, so it cannot tokenize or "
                          "detokenize text",
                          cx->srv->model_name);
    return serve_reply_error(c, cx, &e);
}

int serve_tokenize(struct MHD_Connection *c, serve_conn *cx)
{
    llmrt_server *s = cx->srv;
    llmrt_serve_error e;
    llmrt_serve_request *req = NULL;
    int32_t *ids = NULL;
    size_t n = 0;
    int rc;

    if (serve_check_ready(s, &e) != 0 ||
        llmrt_serve_request_parse(LLMRT_SERVE_TOKENIZE, cx->body, cx->len, &req, &e) != LLMRT_OK ||
        serve_check_model(s, req->model, &e) != 0) {
        rc = serve_reply_error(c, cx, &e);
        goto cleanup;
    }
    if (!s->tok) {
        rc = no_tokenizer(c, cx);
        goto cleanup;
    }
    if (req->messages) {
        if (serve_chat_prompt(s, req, &ids, &n, NULL, &e) != LLMRT_OK) {
            rc = serve_reply_error(c, cx, &e);
            goto cleanup;
        }
    } else {
        llmrt_error err = {0};
        const llmrt_serve_prompt *p = &req->prompts[0];
        if (llmrt_tokenizer_encode(s->tok, p->text, p->text_len,
                                   req->add_special_tokens ? LLMRT_ENCODE_ADD_SPECIAL : 0, &ids,
                                   &n, &err) != LLMRT_OK) {
            llmrt_serve_error_set(&e, 400, NULL, NULL, "prompt", "%s", err.msg);
            rc = serve_reply_error(c, cx, &e);
            goto cleanup;
        }
    }
    json_t *tokens = json_array();
    json_t *strs = req->return_token_strs ? json_array() : json_null();
    for (size_t i = 0; tokens && i < n; i++) {
        json_array_append_new(tokens, json_integer(ids[i]));
        if (req->return_token_strs) {
            const char *t = llmrt_tokenizer_token_str(s->tok, ids[i]);
            json_array_append_new(strs, llmrt_serve_json_string(t ? t : "", t ? strlen(t) : 0));
        }
    }
    json_t *o = json_pack("{s:I, s:i, s:o, s:o}", "count", (json_int_t)n, "max_model_len",
                          s->max_model_len, "tokens", tokens, "token_strs", strs);
    rc = serve_reply_json(c, cx, 200, o);
cleanup:
    free(ids);
    llmrt_serve_request_free(req);
    return rc;
}

int serve_detokenize(struct MHD_Connection *c, serve_conn *cx)
{
    llmrt_server *s = cx->srv;
    llmrt_serve_error e;
    llmrt_serve_request *req = NULL;
    char *text = NULL;
    size_t len = 0;
    int rc;

    if (serve_check_ready(s, &e) != 0 ||
        llmrt_serve_request_parse(LLMRT_SERVE_DETOKENIZE, cx->body, cx->len, &req, &e) !=
            LLMRT_OK ||
        serve_check_model(s, req->model, &e) != 0) {
        rc = serve_reply_error(c, cx, &e);
        goto cleanup;
    }
    if (!s->tok) {
        rc = no_tokenizer(c, cx);
        goto cleanup;
    }
    int32_t vocab = llmrt_tokenizer_vocab_size(s->tok);
    for (int32_t i = 0; i < req->n_tokens; i++)
        if (req->tokens[i] >= vocab) {
            llmrt_serve_error_set(&e, 400, NULL, NULL, "tokens",
                                  "'tokens[%d]' = %d is out of range: the tokenizer has %d "
                                  "tokens",
                                  i, req->tokens[i], vocab);
            rc = serve_reply_error(c, cx, &e);
            goto cleanup;
        }
    llmrt_error err = {0};
    if (llmrt_tokenizer_decode(s->tok, req->tokens, (size_t)req->n_tokens, 0, &text, &len,
                               &err) != LLMRT_OK) {
        llmrt_serve_error_set(&e, 400, NULL, NULL, "tokens", "%s", err.msg);
        rc = serve_reply_error(c, cx, &e);
        goto cleanup;
    }
    json_t *o = json_object();
    if (o)
        json_object_set_new(o, "prompt", llmrt_serve_json_string(text, len));
    rc = serve_reply_json(c, cx, 200, o);
cleanup:
    free(text);
    llmrt_serve_request_free(req);
    return rc;
}
