/* gram_json.c — the JSON tokens the grammars are built from: bounded whitespace, string
 * characters (valid UTF-8, escapes), strings of a length, numbers with capped digits, and
 * literal values. */
#include <stdlib.h>
#include <string.h>

#include "grammar.h"
#include "gram_json.h"

static void set_bit(uint8_t bits[32], int c) { bits[c >> 3] |= (uint8_t)(1u << (c & 7)); }

static llmrt_gram_frag one_ws(llmrt_gram_builder *b, void *ctx)
{
    (void)ctx;
    uint8_t bits[32] = {0};
    set_bit(bits, ' '), set_bit(bits, '\t'), set_bit(bits, '\n');
    return llmrt_gram_set(b, bits);
}

llmrt_gram_frag llmrt_gram_json_ws(llmrt_gram_builder *b)
{
    return llmrt_gram_repeat(b, one_ws, NULL, 0, LLMRT_GRAM_JSON_WS_MAX);
}

static llmrt_gram_frag hex(llmrt_gram_builder *b)
{
    uint8_t bits[32] = {0};
    for (int c = '0'; c <= '9'; c++)
        set_bit(bits, c);
    for (int c = 'a'; c <= 'f'; c++)
        set_bit(bits, c), set_bit(bits, c - 'a' + 'A');
    return llmrt_gram_set(b, bits);
}

static llmrt_gram_frag hex_from(llmrt_gram_builder *b, const char *chars)
{
    uint8_t bits[32] = {0};
    for (const char *p = chars; *p; p++)
        set_bit(bits, (unsigned char)*p);
    return llmrt_gram_set(b, bits);
}

/* \uXXXX but a surrogate (D800-DFFF) or 0000. */
static llmrt_gram_frag u_escape(llmrt_gram_builder *b)
{
    llmrt_gram_frag a = llmrt_gram_cat(b, hex_from(b, "123456789abcefABCEF"),
                                       llmrt_gram_cat(b, hex(b), llmrt_gram_cat(b, hex(b), hex(b))));
    llmrt_gram_frag d = llmrt_gram_cat(b, hex_from(b, "dD"),
                                       llmrt_gram_cat(b, hex_from(b, "01234567"),
                                                      llmrt_gram_cat(b, hex(b), hex(b))));
    /* 0 then not 000 */
    const char *nz = "123456789abcdefABCDEF";
    llmrt_gram_frag z3 = llmrt_gram_cat(b, hex_from(b, nz), llmrt_gram_cat(b, hex(b), hex(b)));
    llmrt_gram_frag z2 = llmrt_gram_cat(b, llmrt_gram_str(b, "0"),
                                        llmrt_gram_cat(b, hex_from(b, nz), hex(b)));
    llmrt_gram_frag z1 = llmrt_gram_cat(b, llmrt_gram_str(b, "00"), hex_from(b, nz));
    llmrt_gram_frag zs[3] = {z3, z2, z1};
    llmrt_gram_frag z = llmrt_gram_cat(b, llmrt_gram_str(b, "0"), llmrt_gram_alts(b, zs, 3));
    llmrt_gram_frag all[3] = {a, d, z};
    return llmrt_gram_cat(b, llmrt_gram_str(b, "\\u"), llmrt_gram_alts(b, all, 3));
}

llmrt_gram_frag llmrt_gram_json_char(llmrt_gram_builder *b, void *unused)
{
    (void)unused;
    uint8_t ascii[32] = {0};
    for (int c = 0x20; c < 0x80; c++)
        if (c != '"' && c != '\\')
            set_bit(ascii, c);
    uint8_t esc[32] = {0};
    for (const char *p = "\"\\/bfnrt"; *p; p++)
        set_bit(esc, (unsigned char)*p);
    llmrt_gram_frag parts[4] = {
        llmrt_gram_set(b, ascii),
        llmrt_gram_utf8_range(b, 0x80, 0x10FFFF),
        llmrt_gram_cat(b, llmrt_gram_str(b, "\\"), llmrt_gram_set(b, esc)),
        u_escape(b),
    };
    return llmrt_gram_alts(b, parts, 4);
}

llmrt_gram_frag llmrt_gram_json_string(llmrt_gram_builder *b, int32_t min, int32_t max)
{
    llmrt_gram_frag body = llmrt_gram_repeat(b, llmrt_gram_json_char, NULL, min, max);
    return llmrt_gram_cat(b, llmrt_gram_str(b, "\""), llmrt_gram_cat(b, body, llmrt_gram_str(b, "\"")));
}

static llmrt_gram_frag digit(llmrt_gram_builder *b, void *ctx)
{
    (void)ctx;
    return llmrt_gram_range(b, '0', '9');
}

llmrt_gram_frag llmrt_gram_json_number(llmrt_gram_builder *b)
{
    llmrt_gram_frag intpart = llmrt_gram_alt(
        b, llmrt_gram_str(b, "0"),
        llmrt_gram_cat(b, llmrt_gram_range(b, '1', '9'),
                       llmrt_gram_repeat(b, digit, NULL, 0, LLMRT_GRAM_INT_DIGITS - 1)));
    llmrt_gram_frag frac = llmrt_gram_opt(
        b, llmrt_gram_cat(b, llmrt_gram_str(b, "."),
                          llmrt_gram_repeat(b, digit, NULL, 1, LLMRT_GRAM_FRAC_DIGITS)));
    uint8_t e[32] = {0}, sg[32] = {0};
    set_bit(e, 'e'), set_bit(e, 'E'), set_bit(sg, '+'), set_bit(sg, '-');
    llmrt_gram_frag exp = llmrt_gram_opt(
        b, llmrt_gram_cat(b, llmrt_gram_set(b, e),
                          llmrt_gram_cat(b, llmrt_gram_opt(b, llmrt_gram_set(b, sg)),
                                         llmrt_gram_repeat(b, digit, NULL, 1,
                                                           LLMRT_GRAM_EXP_DIGITS))));
    llmrt_gram_frag f = llmrt_gram_cat(b, llmrt_gram_opt(b, llmrt_gram_str(b, "-")), intpart);
    return llmrt_gram_cat(b, f, llmrt_gram_cat(b, frac, exp));
}

llmrt_gram_frag llmrt_gram_json_literal(llmrt_gram_builder *b, const json_t *v)
{
    char *text = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!text) {
        llmrt_gram_builder_fail(b, LLMRT_ERR_NOMEM, "out of memory writing a JSON literal");
        return llmrt_gram_none(b);
    }
    llmrt_gram_frag f = llmrt_gram_str(b, text);
    free(text);
    return f;
}
