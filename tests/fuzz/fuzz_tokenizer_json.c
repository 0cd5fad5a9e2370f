/* fuzz_tokenizer_json.c — libFuzzer target for the tokenizer: the tokenizer.json loader
 * (llmrt_tokenizer_parse) and, through it, the encoder and decoders.
 *
 * Why: tokenizer.json arrives with every downloaded model and is parsed in full before any
 * text is seen; whatever it holds must end in a tokenizer or an error message, never a
 * crash or a leak. Text reaches the encoder from users and HTTP clients.
 *
 * Input: the first byte picks the mode.
 *   even: the rest is a tokenizer.json; when it loads, a fixed text is encoded, decoded and
 *         streamed through the detokenizer.
 *   odd:  the rest is text for a small built-in byte-level tokenizer (Qwen's regex, NFC,
 *         added tokens with every option); the streamed decode must equal the whole decode,
 *         and valid UTF-8 must round-trip to its NFC form's length or be rejected cleanly. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char builtin_json[] =
    "{\"added_tokens\":["
    "{\"id\":300,\"content\":\"<|end|>\",\"special\":true,\"normalized\":false,\"lstrip\":false,\"rstrip\":false,\"single_word\":false},"
    "{\"id\":301,\"content\":\"<t>\",\"special\":false,\"normalized\":true,\"lstrip\":true,\"rstrip\":true,\"single_word\":true}],"
    "\"normalizer\":{\"type\":\"NFC\"},"
    "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":"
    "\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|\\\\p{N}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|"
    "\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},\"behavior\":\"Isolated\",\"invert\":false},"
    "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":false,\"use_regex\":false}]},"
    "\"decoder\":{\"type\":\"ByteLevel\"},"
    "\"model\":{\"type\":\"BPE\",\"vocab\":{%s},\"merges\":[\"a a\",\"aa aa\",\"\\u0120 a\",\"\\u00c3 \\u00a9\"]}}";

static llmrt_tokenizer *builtin(void)
{
    static llmrt_tokenizer *tok; /* built once: the fuzzer calls us millions of times */
    if (tok)
        return tok;
    /* vocab: the 256 byte-level chars (ids 0..255) and the merged tokens */
    char vocab[8192];
    size_t k = 0;
    for (int b = 0; b < 256; b++) {
        int cp = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174 ? b
                 : b <= 32                                                   ? 256 + b
                 : b <= 160                                                  ? 256 + 33 + (b - 127)
                                                                             : 256 + 33 + 34;
        k += (size_t)snprintf(vocab + k, sizeof vocab - k, "%s\"\\u%04x\":%d", b ? "," : "", cp, b);
    }
    snprintf(vocab + k, sizeof vocab - k,
             ",\"aa\":256,\"aaaa\":257,\"\\u0120a\":258,\"\\u00c3\\u00a9\":259");
    char *json = malloc(sizeof builtin_json + sizeof vocab);
    if (!json)
        abort();
    snprintf(json, sizeof builtin_json + sizeof vocab, builtin_json, vocab);
    llmrt_error err = {0};
    if (llmrt_tokenizer_parse(json, strlen(json), "builtin", &tok, &err) != LLMRT_OK)
        abort(); /* the built-in tokenizer must load */
    free(json);
    return tok;
}

static void exercise(const llmrt_tokenizer *tok, const char *text, size_t len, int check_stream)
{
    llmrt_error err = {0};
    int32_t *ids = NULL;
    size_t n = 0;
    for (uint32_t flags = 0; flags < 4; flags++) {
        if (llmrt_tokenizer_encode(tok, text, len, flags, &ids, &n, &err) != LLMRT_OK) {
            if (!err.msg[0])
                abort(); /* a failure always says why */
            return;
        }
        if (flags != 0) {
            free(ids);
            continue;
        }
        for (int skip = 0; skip < 2; skip++) {
            char *whole = NULL;
            size_t wl = 0;
            if (llmrt_tokenizer_decode(tok, ids, n, skip, &whole, &wl, &err) != LLMRT_OK)
                abort();
            llmrt_detok *d;
            if (llmrt_detok_new(tok, skip, &d, &err) != LLMRT_OK)
                abort();
            size_t al = 0;
            for (size_t i = 0; i < n; i++) {
                const char *piece;
                size_t pl;
                if (llmrt_detok_push(d, ids[i], &piece, &pl, &err) != LLMRT_OK)
                    abort();
                if (check_stream && (al + pl > wl || memcmp(whole + al, piece, pl) != 0))
                    abort(); /* the stream must be a prefix of the whole decode */
                al += pl;
            }
            size_t fl;
            const char *rest = llmrt_detok_flush(d, &fl);
            if (check_stream && (al + fl != wl || memcmp(whole + al, rest, fl) != 0))
                abort();
            llmrt_detok_free(d);
            free(whole);
        }
        free(ids);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    const char *rest = (const char *)data + 1;
    size_t n = size - 1;
    if ((data[0] & 1) == 0) {
        llmrt_tokenizer *tok = NULL;
        llmrt_error err = {0};
        if (llmrt_tokenizer_parse(rest, n, "fuzz/tokenizer.json", &tok, &err) == LLMRT_OK) {
            static const char sample[] = "Hello, world! <|end|> caf\xC3\xA9 \xE4\xBD\xA0\xE5\xA5\xBD 123\n\n  x";
            exercise(tok, sample, sizeof sample - 1, 1);
            (void)llmrt_tokenizer_parse_config(tok, rest, n, "fuzz/tokenizer_config.json", &err);
            llmrt_tokenizer_free(tok);
        } else if (!err.msg[0]) {
            abort();
        }
    } else {
        exercise(builtin(), rest, n, 1);
    }
    return 0;
}
