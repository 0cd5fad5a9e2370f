/* tokenizer_utf8.c — the byte-level details the tokenizer depends on: UTF-8 validation
 * with "maximal subpart" replacement (so decoding matches Rust's from_utf8_lossy), the
 * GPT-2 byte ↔ character alphabet, and the two Unicode predicates HF's added-token options
 * use (White_Space, regex \w). */
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "tokenizer_impl.h"

int llmrt__utf8_next(const uint8_t *s, size_t n)
{
    uint8_t c = s[0];
    if (c < 0x80)
        return 1;
    int need;
    uint8_t lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF)
        need = 1;
    else if (c == 0xE0)
        need = 2, lo = 0xA0;
    else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF)
        need = 2;
    else if (c == 0xED)
        need = 2, hi = 0x9F; /* no surrogates */
    else if (c == 0xF0)
        need = 3, lo = 0x90;
    else if (c >= 0xF1 && c <= 0xF3)
        need = 3;
    else if (c == 0xF4)
        need = 3, hi = 0x8F; /* nothing above U+10FFFF */
    else
        return -1;
    for (int i = 1; i <= need; i++) {
        if ((size_t)i >= n)
            return 0;
        if (s[i] < lo || s[i] > hi)
            return -i;
        lo = 0x80, hi = 0xBF;
    }
    return need + 1;
}

size_t llmrt__utf8_valid_prefix(const uint8_t *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        if (s[i] < 0x80) {
            i++;
            continue;
        }
        int r = llmrt__utf8_next(s + i, n - i);
        if (r <= 0)
            return i;
        i += (size_t)r;
    }
    return n;
}

int llmrt__grow(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap && *buf)
        return 0;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    char *g = realloc(*buf, c);
    if (!g)
        return -1;
    *buf = g;
    *cap = c;
    return 0;
}

int llmrt__utf8_lossy_append(char **buf, size_t *len, size_t *cap, const uint8_t *s, size_t n,
                             int hold_incomplete, size_t *held)
{
    static const char fffd[3] = {(char)0xEF, (char)0xBF, (char)0xBD};
    if (held)
        *held = 0;
    /* Worst case: every byte becomes a 3-byte U+FFFD; +1 for a NUL the caller may add. */
    if (llmrt__grow(buf, cap, *len + 3 * n + 1) != 0)
        return -1;
    char *out = *buf;
    size_t o = *len, i = 0;
    while (i < n) {
        size_t j = i;
        while (j < n && s[j] < 0x80)
            j++;
        memcpy(out + o, s + i, j - i);
        o += j - i;
        i = j;
        if (i >= n)
            break;
        int r = llmrt__utf8_next(s + i, n - i);
        if (r > 0) {
            memcpy(out + o, s + i, (size_t)r);
            o += (size_t)r;
            i += (size_t)r;
        } else if (r == 0) {
            if (hold_incomplete) {
                if (held)
                    *held = n - i;
            } else {
                memcpy(out + o, fffd, 3);
                o += 3;
            }
            break;
        } else {
            memcpy(out + o, fffd, 3);
            o += 3;
            i += (size_t)-r;
        }
    }
    *len = o;
    return 0;
}

int llmrt__utf8_decode(const uint8_t *s, int32_t *cp)
{
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    if (s[0] < 0xE0) {
        *cp = ((s[0] & 0x1F) << 6) | (s[1] & 0x3F);
        return 2;
    }
    if (s[0] < 0xF0) {
        *cp = ((s[0] & 0x0F) << 12) | ((s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        return 3;
    }
    *cp = ((s[0] & 0x07) << 18) | ((s[1] & 0x3F) << 12) | ((s[2] & 0x3F) << 6) | (s[3] & 0x3F);
    return 4;
}

int llmrt__utf8_encode(int32_t cp, uint8_t out[4])
{
    if (cp < 0x80) {
        out[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        out[0] = (uint8_t)(0xC0 | (cp >> 6));
        out[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (uint8_t)(0xE0 | (cp >> 12));
        out[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (uint8_t)(0xF0 | (cp >> 18));
    out[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

/* GPT-2's alphabet: printable Latin-1 bytes stand for themselves; the other 68 bytes
 * (0-32, 127-160, 173) are given code points 256.. in byte order. */
int32_t llmrt__bytelevel_char(uint8_t b)
{
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)
        return b;
    if (b <= 32)
        return 256 + b;
    if (b >= 127 && b <= 160)
        return 256 + 33 + (b - 127);
    return 256 + 33 + 34; /* 173 */
}

int llmrt__bytelevel_byte(int32_t cp)
{
    if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255))
        return cp;
    if (cp >= 256 && cp <= 288)
        return cp - 256;
    if (cp >= 289 && cp <= 322)
        return cp - 289 + 127;
    if (cp == 323)
        return 173;
    return -1;
}

int llmrt__is_whitespace(int32_t cp)
{
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 ||
           cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
           cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

int llmrt__is_word_char(int32_t cp)
{
    if (cp < 0x80)
        return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
               cp == '_';
    if (cp == 0x200C || cp == 0x200D)
        return 1; /* Join_Control */
    if ((cp >= 0x24B6 && cp <= 0x24E9) || (cp >= 0x1F130 && cp <= 0x1F149) ||
        (cp >= 0x1F150 && cp <= 0x1F169) || (cp >= 0x1F170 && cp <= 0x1F189))
        return 1; /* Other_Alphabetic symbols (circled/squared letters) */
    switch (utf8proc_category(cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC:
        return 1;
    default:
        return 0;
    }
}
