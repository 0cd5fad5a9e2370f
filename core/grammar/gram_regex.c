/* gram_regex.c — regular expressions (Python `re` / PCRE syntax, a subset) to grammar
 * fragments: structured outputs' `regex` (the whole reply matches) and a JSON schema's
 * string `pattern`.
 *
 * Why our own parser rather than PCRE2's matcher: a mask asks, for every token, whether its
 * bytes continue the reply so far; that needs the pattern as an automaton whose state can be
 * stepped byte by byte and shared across the vocabulary trie, which PCRE2 does not expose
 * (its partial matching re-runs the whole subject per question). The subset has exactly the
 * constructs that are regular: literals (UTF-8), `.`, classes `[...]` with ranges and
 * negation, \d \w \s (ASCII, as PCRE2 without UCP) and their negations (ASCII only here, so
 * a reply matches under either reading), escapes \n \t \r \f \v \xHH \uHHHH \\ and escaped
 * punctuation, groups `( )` `(?: )` `(?P<n> )` `(?<n> )`, `|`, `* + ? {m} {m,} {m,n}` (lazy
 * forms too: the language is the same), `^` first and `$` last. Everything else — anchors
 * elsewhere, \b, back-references, look-around, possessive and atomic forms, inline flags —
 * is refused by name (LLMRT_ERR_UNSUPPORTED); a malformed pattern is LLMRT_ERR_INVALID_ARG.
 * tests/unit/test_grammar.c checks the automaton against PCRE2 on random strings. */
#include <stdlib.h>
#include <string.h>

#include "gram_build.h"
#include "gram_regex.h"

#define MAX_COUNT 1000 /* largest {m,n} bound */
#define MAX_NEST 200   /* group nesting */
#define CP_MAX 0x10FFFF

typedef enum rx_kind { RX_CLASS, RX_CAT, RX_ALT, RX_REP, RX_EMPTY } rx_kind;

typedef struct cp_range {
    uint32_t lo, hi;
} cp_range;

typedef struct rx_node {
    rx_kind kind;
    int32_t min, max;   /* RX_REP (max -1: unbounded) */
    int32_t c0, nc;     /* children (RX_CAT, RX_ALT: kids[c0..c0+nc); RX_REP: kids[c0]) */
    int32_t r0, nr;     /* RX_CLASS: ranges[r0..r0+nr), sorted, disjoint */
} rx_node;

typedef struct rx {
    const uint8_t *p;
    size_t n, i;
    rx_node *nodes;
    int32_t n_nodes, cap_nodes;
    int32_t *kids;
    int32_t n_kids, cap_kids;
    cp_range *rg;
    int32_t n_rg, cap_rg;
    int json;           /* only characters a JSON string holds unescaped */
    int failed;
    llmrt_status code;
    char why[LLMRT_ERROR_MSG_MAX - 64];
    int depth;
} rx;

static void rx_fail(rx *r, llmrt_status code, const char *what)
{
    if (r->failed)
        return;
    r->failed = 1;
    r->code = code;
    snprintf(r->why, sizeof r->why, "%s (at offset %zu of the pattern)", what, r->i);
}

static int grow(void **p, int32_t *cap, int32_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    int32_t c = *cap ? *cap : 32;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, (size_t)c * elem);
    if (!q)
        return -1;
    *p = q, *cap = c;
    return 0;
}

static int32_t node_new(rx *r, rx_kind k)
{
    if (grow((void **)&r->nodes, &r->cap_nodes, r->n_nodes + 1, sizeof *r->nodes)) {
        rx_fail(r, LLMRT_ERR_NOMEM, "out of memory");
        return 0;
    }
    rx_node *x = &r->nodes[r->n_nodes];
    memset(x, 0, sizeof *x);
    x->kind = k;
    return r->n_nodes++;
}

/* ---- code point sets ---- */

typedef struct cpset {
    cp_range *r;
    int32_t n, cap;
} cpset;

static void set_add(rx *r, cpset *s, uint32_t lo, uint32_t hi)
{
    if (grow((void **)&s->r, &s->cap, s->n + 1, sizeof *s->r)) {
        rx_fail(r, LLMRT_ERR_NOMEM, "out of memory");
        return;
    }
    s->r[s->n++] = (cp_range){lo, hi};
}

static int cmp_range(const void *a, const void *b)
{
    const cp_range *x = a, *y = b;
    return (x->lo > y->lo) - (x->lo < y->lo);
}

static void set_norm(cpset *s)
{
    if (s->n > 1)
        qsort(s->r, (size_t)s->n, sizeof *s->r, cmp_range);
    int32_t k = 0;
    for (int32_t i = 0; i < s->n; i++) {
        if (k && s->r[i].lo <= s->r[k - 1].hi + 1) {
            if (s->r[i].hi > s->r[k - 1].hi)
                s->r[k - 1].hi = s->r[i].hi;
        } else {
            s->r[k++] = s->r[i];
        }
    }
    s->n = k;
}

static void set_negate(rx *r, cpset *s)
{
    set_norm(s);
    cpset o = {0};
    uint32_t next = 0;
    for (int32_t i = 0; i < s->n; i++) {
        if (s->r[i].lo > next)
            set_add(r, &o, next, s->r[i].lo - 1);
        next = s->r[i].hi + 1;
    }
    if (next <= CP_MAX)
        set_add(r, &o, next, CP_MAX);
    free(s->r);
    *s = o;
}

/* Keep what a JSON string holds unescaped: no control characters, '"' or '\'. */
static void set_json(rx *r, cpset *s)
{
    static const cp_range ok[] = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, CP_MAX}};
    set_norm(s);
    cpset o = {0};
    for (int32_t i = 0; i < s->n; i++)
        for (int k = 0; k < 3; k++) {
            uint32_t lo = s->r[i].lo > ok[k].lo ? s->r[i].lo : ok[k].lo;
            uint32_t hi = s->r[i].hi < ok[k].hi ? s->r[i].hi : ok[k].hi;
            if (lo <= hi)
                set_add(r, &o, lo, hi);
        }
    free(s->r);
    *s = o;
}

static int32_t class_node(rx *r, cpset *s)
{
    if (r->json)
        set_json(r, s);
    set_norm(s);
    int32_t id = node_new(r, RX_CLASS);
    if (grow((void **)&r->rg, &r->cap_rg, r->n_rg + s->n, sizeof *r->rg)) {
        rx_fail(r, LLMRT_ERR_NOMEM, "out of memory");
        free(s->r);
        return id;
    }
    r->nodes[id].r0 = r->n_rg;
    r->nodes[id].nr = s->n;
    if (s->n)
        memcpy(r->rg + r->n_rg, s->r, (size_t)s->n * sizeof *s->r);
    r->n_rg += s->n;
    free(s->r);
    return id;
}

/* ---- lexing ---- */

static int at_end(const rx *r) { return r->i >= r->n; }
static int peek(const rx *r) { return at_end(r) ? -1 : r->p[r->i]; }

/* One UTF-8 character of the pattern. */
static uint32_t next_cp(rx *r)
{
    const uint8_t *p = r->p + r->i;
    size_t left = r->n - r->i;
    uint32_t c = p[0];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (!len || (size_t)len > left) {
        rx_fail(r, LLMRT_ERR_INVALID_ARG, "the pattern is not valid UTF-8");
        r->i = r->n;
        return 0;
    }
    if (len > 1) {
        c &= 0x3Fu >> (len - 1);
        for (int k = 1; k < len; k++) {
            if ((p[k] & 0xC0) != 0x80) {
                rx_fail(r, LLMRT_ERR_INVALID_ARG, "the pattern is not valid UTF-8");
                r->i = r->n;
                return 0;
            }
            c = (c << 6) | (p[k] & 0x3F);
        }
    }
    r->i += (size_t)len;
    return c;
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static uint32_t hex_digits(rx *r, int n)
{
    uint32_t v = 0;
    for (int k = 0; k < n; k++) {
        int h = hexval(peek(r));
        if (h < 0) {
            rx_fail(r, LLMRT_ERR_INVALID_ARG, "an escape needs hexadecimal digits");
            return 0;
        }
        v = v * 16 + (uint32_t)h;
        r->i++;
    }
    return v;
}

/* After a backslash: a shorthand class into s (returns 1), or one character in *cp
 * (returns 0). in_class: inside [...]. */
static int escape(rx *r, cpset *s, uint32_t *cp, int in_class)
{
    if (at_end(r)) {
        rx_fail(r, LLMRT_ERR_INVALID_ARG, "the pattern ends with a lone backslash");
        return 0;
    }
    int c = r->p[r->i++];
    switch (c) {
    case 'd':
        set_add(r, s, '0', '9');
        return 1;
    case 'D':
        set_add(r, s, 0, '0' - 1), set_add(r, s, '9' + 1, 0x7F);
        return 1;
    case 'w':
        set_add(r, s, '0', '9'), set_add(r, s, 'A', 'Z'), set_add(r, s, '_', '_');
        set_add(r, s, 'a', 'z');
        return 1;
    case 'W':
        set_add(r, s, 0, '0' - 1), set_add(r, s, '9' + 1, 'A' - 1);
        set_add(r, s, 'Z' + 1, '_' - 1), set_add(r, s, '_' + 1, 'a' - 1);
        set_add(r, s, 'z' + 1, 0x7F);
        return 1;
    case 's':
        set_add(r, s, '\t', '\r'), set_add(r, s, ' ', ' ');
        return 1;
    case 'S':
        set_add(r, s, 0, '\t' - 1), set_add(r, s, '\r' + 1, ' ' - 1);
        set_add(r, s, ' ' + 1, 0x7F);
        return 1;
    case 'n': *cp = '\n'; return 0;
    case 't': *cp = '\t'; return 0;
    case 'r': *cp = '\r'; return 0;
    case 'f': *cp = '\f'; return 0;
    case 'v': *cp = '\v'; return 0;
    case 'a': *cp = 7; return 0;
    case 'e': *cp = 27; return 0;
    case 'x':
        if (peek(r) == '{') {
            r->i++;
            uint32_t v = 0;
            int nd = 0;
            while (hexval(peek(r)) >= 0 && nd < 8)
                v = v * 16 + (uint32_t)hexval(r->p[r->i++]), nd++;
            if (peek(r) != '}' || nd == 0 || v > CP_MAX) {
                rx_fail(r, LLMRT_ERR_INVALID_ARG, "bad \\x{...} escape");
                return 0;
            }
            r->i++;
            *cp = v;
            return 0;
        }
        *cp = hex_digits(r, 2);
        return 0;
    case 'u':
        *cp = hex_digits(r, 4);
        if (*cp >= 0xD800 && *cp <= 0xDFFF)
            rx_fail(r, LLMRT_ERR_UNSUPPORTED, "a \\u escape of a surrogate is not supported");
        return 0;
    case 'U':
        *cp = hex_digits(r, 8);
        if (*cp > CP_MAX)
            rx_fail(r, LLMRT_ERR_INVALID_ARG, "\\U escape past U+10FFFF");
        return 0;
    case 'b':
        if (in_class) {
            *cp = 8;
            return 0;
        }
        rx_fail(r, LLMRT_ERR_UNSUPPORTED, "word boundaries (\\b) are not supported");
        return 0;
    case 'B': case 'A': case 'Z': case 'z': case 'G':
        rx_fail(r, LLMRT_ERR_UNSUPPORTED, "anchors (\\B, \\A, \\Z, \\z, \\G) are not supported");
        return 0;
    case 'p': case 'P': case 'X': case 'R': case 'N': case 'h': case 'H': case 'K': case 'Q':
    case 'E': case 'g': case 'k': case 'c':
        rx_fail(r, LLMRT_ERR_UNSUPPORTED,
                "this escape (Unicode properties, \\R, \\K, \\Q..\\E, named back-references, ...) "
                "is not supported");
        return 0;
    default:
        if (c >= '0' && c <= '9') {
            if (c == '0' && !(peek(r) >= '0' && peek(r) <= '7')) {
                *cp = 0;
                return 0;
            }
            rx_fail(r, LLMRT_ERR_UNSUPPORTED, "back-references (\\1 ...) are not supported");
            return 0;
        }
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
            rx_fail(r, LLMRT_ERR_INVALID_ARG, "unknown escape");
            return 0;
        }
        r->i--;
        *cp = next_cp(r); /* an escaped punctuation or non-ASCII character stands for itself */
        return 0;
    }
}

/* [...] after the '['. */
static int32_t parse_class(rx *r)
{
    cpset s = {0};
    int neg = 0;
    if (peek(r) == '^') {
        neg = 1;
        r->i++;
    }
    int first = 1;
    for (;;) {
        if (at_end(r)) {
            rx_fail(r, LLMRT_ERR_INVALID_ARG, "a character class [...] is not closed");
            break;
        }
        int c = peek(r);
        if (c == ']' && !first) {
            r->i++;
            break;
        }
        if (c == '[' && r->i + 1 < r->n && (r->p[r->i + 1] == ':' || r->p[r->i + 1] == '=' ||
                                             r->p[r->i + 1] == '.')) {
            rx_fail(r, LLMRT_ERR_UNSUPPORTED, "POSIX classes ([:alpha:] ...) are not supported");
            break;
        }
        first = 0;
        uint32_t lo;
        if (c == '\\') {
            r->i++;
            if (escape(r, &s, &lo, 1))
                continue;
        } else {
            lo = next_cp(r);
        }
        if (r->failed)
            break;
        uint32_t hi = lo;
        if (peek(r) == '-' && r->i + 1 < r->n && r->p[r->i + 1] != ']') {
            r->i++;
            if (peek(r) == '\\') {
                r->i++;
                cpset tmp = {0};
                if (escape(r, &tmp, &hi, 1)) {
                    free(tmp.r);
                    rx_fail(r, LLMRT_ERR_INVALID_ARG, "a class shorthand cannot end a range");
                    break;
                }
            } else {
                hi = next_cp(r);
            }
            if (hi < lo) {
                rx_fail(r, LLMRT_ERR_INVALID_ARG, "a range in a character class is reversed");
                break;
            }
        }
        set_add(r, &s, lo, hi);
    }
    if (neg)
        set_negate(r, &s);
    return class_node(r, &s);
}

static int32_t parse_alt(rx *r);

static int read_int(rx *r, int32_t *v)
{
    int nd = 0;
    int64_t x = 0;
    while (peek(r) >= '0' && peek(r) <= '9') {
        x = x * 10 + (r->p[r->i++] - '0');
        if (x > 1000000)
            x = 1000000;
        nd++;
    }
    *v = (int32_t)x;
    return nd;
}

/* A quantifier at r->i, if any: {m}, {m,}, {m,n}, *, +, ?. Returns 1 and sets min/max. */
static int quantifier(rx *r, int32_t *min, int32_t *max)
{
    int c = peek(r);
    if (c == '*') {
        r->i++, *min = 0, *max = -1;
    } else if (c == '+') {
        r->i++, *min = 1, *max = -1;
    } else if (c == '?') {
        r->i++, *min = 0, *max = 1;
    } else if (c == '{') {
        size_t save = r->i;
        r->i++;
        int32_t a = 0, b = -1;
        int na = read_int(r, &a);
        if (peek(r) == ',') {
            r->i++;
            if (read_int(r, &b) == 0)
                b = -1;
            if (na == 0)
                a = 0; /* {,n} as Python reads it */
        } else {
            b = a;
            if (na == 0) {
                r->i = save; /* not a quantifier: a literal '{' */
                return 0;
            }
        }
        if (peek(r) != '}') {
            r->i = save;
            return 0;
        }
        r->i++;
        if (a > MAX_COUNT || b > MAX_COUNT) {
            rx_fail(r, LLMRT_ERR_UNSUPPORTED, "a repetition count above 1000 is not supported");
            return 0;
        }
        if (b >= 0 && b < a) {
            rx_fail(r, LLMRT_ERR_INVALID_ARG, "a repetition {m,n} has n < m");
            return 0;
        }
        *min = a, *max = b;
    } else {
        return 0;
    }
    if (peek(r) == '?') {
        r->i++; /* lazy: the same strings match as a whole */
    } else if (peek(r) == '+') {
        rx_fail(r, LLMRT_ERR_UNSUPPORTED, "possessive quantifiers are not supported");
        return 0;
    }
    return 1;
}

static int32_t parse_atom(rx *r)
{
    int c = peek(r);
    cpset s = {0};
    if (c == '(') {
        r->i++;
        if (peek(r) == '?') {
            r->i++;
            int k = peek(r);
            if (k == ':') {
                r->i++;
            } else if (k == 'P' || k == '<') {
                if (k == 'P')
                    r->i++;
                if (peek(r) != '<') {
                    rx_fail(r, LLMRT_ERR_UNSUPPORTED,
                            "(?P=name) back-references and (?P>name) calls are not supported");
                    return node_new(r, RX_EMPTY);
                }
                r->i++;
                if (peek(r) == '=' || peek(r) == '!') {
                    rx_fail(r, LLMRT_ERR_UNSUPPORTED, "look-behind is not supported");
                    return node_new(r, RX_EMPTY);
                }
                while (!at_end(r) && peek(r) != '>')
                    r->i++;
                if (at_end(r)) {
                    rx_fail(r, LLMRT_ERR_INVALID_ARG, "a group name is not closed");
                    return node_new(r, RX_EMPTY);
                }
                r->i++;
            } else if (k == '=' || k == '!') {
                rx_fail(r, LLMRT_ERR_UNSUPPORTED, "look-ahead is not supported");
                return node_new(r, RX_EMPTY);
            } else if (k == '>') {
                rx_fail(r, LLMRT_ERR_UNSUPPORTED, "atomic groups are not supported");
                return node_new(r, RX_EMPTY);
            } else if (k == '#') {
                rx_fail(r, LLMRT_ERR_UNSUPPORTED, "comments (?#...) are not supported");
                return node_new(r, RX_EMPTY);
            } else {
                rx_fail(r, LLMRT_ERR_UNSUPPORTED,
                        "inline flags and other (?...) groups are not supported");
                return node_new(r, RX_EMPTY);
            }
        }
        if (++r->depth > MAX_NEST) {
            rx_fail(r, LLMRT_ERR_LIMIT, "groups nest too deeply");
            return node_new(r, RX_EMPTY);
        }
        int32_t inner = parse_alt(r);
        r->depth--;
        if (peek(r) != ')') {
            rx_fail(r, LLMRT_ERR_INVALID_ARG, "a group ( is not closed");
            return inner;
        }
        r->i++;
        return inner;
    }
    if (c == '[') {
        r->i++;
        return parse_class(r);
    }
    if (c == '.') {
        r->i++;
        set_add(r, &s, 0, '\n' - 1);
        set_add(r, &s, '\n' + 1, CP_MAX);
        return class_node(r, &s);
    }
    if (c == '\\') {
        r->i++;
        uint32_t cp = 0;
        if (!escape(r, &s, &cp, 0))
            set_add(r, &s, cp, cp);
        return class_node(r, &s);
    }
    if (c == '*' || c == '+' || c == '?') {
        rx_fail(r, LLMRT_ERR_INVALID_ARG, "a quantifier follows nothing");
        return node_new(r, RX_EMPTY);
    }
    if (c == '^' || c == '$') {
        rx_fail(r, LLMRT_ERR_UNSUPPORTED,
                "anchors ^ and $ are supported only at the very start and end of the pattern");
        return node_new(r, RX_EMPTY);
    }
    uint32_t cp = next_cp(r);
    set_add(r, &s, cp, cp);
    return class_node(r, &s);
}

/* Children are gathered on a scratch list first, then copied contiguously. */
static int32_t make_list(rx *r, rx_kind k, const int32_t *items, int32_t n)
{
    if (n == 1 && k != RX_REP)
        return items[0];
    int32_t id = node_new(r, n == 0 ? RX_EMPTY : k);
    if (n == 0)
        return id;
    if (grow((void **)&r->kids, &r->cap_kids, r->n_kids + n, sizeof *r->kids)) {
        rx_fail(r, LLMRT_ERR_NOMEM, "out of memory");
        return id;
    }
    r->nodes[id].c0 = r->n_kids;
    r->nodes[id].nc = n;
    memcpy(r->kids + r->n_kids, items, (size_t)n * sizeof *items);
    r->n_kids += n;
    return id;
}

typedef struct ilist {
    int32_t *v;
    int32_t n, cap;
} ilist;

static void il_push(rx *r, ilist *l, int32_t x)
{
    if (grow((void **)&l->v, &l->cap, l->n + 1, sizeof *l->v)) {
        rx_fail(r, LLMRT_ERR_NOMEM, "out of memory");
        return;
    }
    l->v[l->n++] = x;
}

static int32_t parse_seq(rx *r)
{
    ilist l = {0};
    while (!at_end(r) && !r->failed) {
        int c = peek(r);
        if (c == '|' || c == ')')
            break;
        if (c == '$' && r->i + 1 == r->n)
            break; /* the end anchor: handled by the caller */
        int32_t a = parse_atom(r);
        int32_t min, max;
        while (!r->failed && quantifier(r, &min, &max)) {
            int32_t rep = make_list(r, RX_REP, &a, 1);
            r->nodes[rep].min = min;
            r->nodes[rep].max = max;
            a = rep;
        }
        il_push(r, &l, a);
    }
    int32_t id = make_list(r, RX_CAT, l.v, l.n);
    free(l.v);
    return id;
}

static int32_t parse_alt(rx *r)
{
    ilist l = {0};
    il_push(r, &l, parse_seq(r));
    while (!r->failed && peek(r) == '|') {
        r->i++;
        il_push(r, &l, parse_seq(r));
    }
    int32_t id = make_list(r, RX_ALT, l.v, l.n);
    free(l.v);
    return id;
}

/* ---- emission ---- */

typedef struct emit_ctx {
    const rx *r;
    int32_t node;
} emit_ctx;

static llmrt_gram_frag emit(llmrt_gram_builder *b, const rx *r, int32_t id);

static llmrt_gram_frag emit_cb(llmrt_gram_builder *b, void *ctx)
{
    emit_ctx *c = ctx;
    return emit(b, c->r, c->node);
}

static llmrt_gram_frag emit(llmrt_gram_builder *b, const rx *r, int32_t id)
{
    const rx_node *x = &r->nodes[id];
    switch (x->kind) {
    case RX_EMPTY:
        return llmrt_gram_empty(b);
    case RX_CLASS: {
        uint8_t ascii[32];
        memset(ascii, 0, sizeof ascii);
        int any_ascii = 0;
        int32_t n_parts = 0;
        llmrt_gram_frag *parts = malloc((size_t)(x->nr + 1) * sizeof *parts);
        if (!parts) {
            llmrt_gram_builder_fail(b, LLMRT_ERR_NOMEM, "out of memory");
            return llmrt_gram_none(b);
        }
        for (int32_t i = 0; i < x->nr; i++) {
            cp_range g = r->rg[x->r0 + i];
            for (uint32_t c = g.lo; c <= g.hi && c < 0x80; c++) {
                ascii[c >> 3] |= (uint8_t)(1u << (c & 7));
                any_ascii = 1;
            }
            if (g.hi >= 0x80)
                parts[n_parts++] = llmrt_gram_utf8_range(b, g.lo < 0x80 ? 0x80 : g.lo, g.hi);
        }
        if (any_ascii)
            parts[n_parts++] = llmrt_gram_set(b, ascii);
        llmrt_gram_frag f = n_parts == 0   ? llmrt_gram_none(b)
                            : n_parts == 1 ? parts[0]
                                           : llmrt_gram_alts(b, parts, n_parts);
        free(parts);
        return f;
    }
    case RX_CAT: {
        llmrt_gram_frag f = emit(b, r, r->kids[x->c0]);
        for (int32_t i = 1; i < x->nc && !llmrt_gram_builder_failed(b); i++)
            f = llmrt_gram_cat(b, f, emit(b, r, r->kids[x->c0 + i]));
        return f;
    }
    case RX_ALT: {
        llmrt_gram_frag *f = malloc((size_t)x->nc * sizeof *f);
        if (!f) {
            llmrt_gram_builder_fail(b, LLMRT_ERR_NOMEM, "out of memory");
            return llmrt_gram_none(b);
        }
        for (int32_t i = 0; i < x->nc; i++)
            f[i] = emit(b, r, r->kids[x->c0 + i]);
        llmrt_gram_frag a = llmrt_gram_alts(b, f, x->nc);
        free(f);
        return a;
    }
    case RX_REP: {
        emit_ctx c = {r, r->kids[x->c0]};
        return llmrt_gram_repeat(b, emit_cb, &c, x->min, x->max);
    }
    }
    return llmrt_gram_none(b);
}

llmrt_gram_frag llmrt_gram_regex_frag(llmrt_gram_builder *b, const char *pattern, size_t len,
                                      int json_chars, int *anchor_start, int *anchor_end)
{
    rx r;
    memset(&r, 0, sizeof r);
    r.p = (const uint8_t *)pattern;
    r.n = len;
    r.json = json_chars;
    *anchor_start = *anchor_end = 0;
    if (r.n && r.p[0] == '^') {
        *anchor_start = 1;
        r.i = 1;
    }
    int32_t root = parse_alt(&r);
    if (!r.failed && r.i + 1 == r.n && r.p[r.i] == '$') {
        *anchor_end = 1;
        r.i++;
    }
    if (!r.failed && !at_end(&r))
        rx_fail(&r, LLMRT_ERR_INVALID_ARG,
                peek(&r) == ')' ? "an unmatched ')'" : "unexpected character");
    llmrt_gram_frag f;
    if (r.failed) {
        llmrt_gram_builder_fail(b, r.code, "%s", r.why);
        f = llmrt_gram_none(b);
    } else {
        f = emit(b, &r, root);
    }
    free(r.nodes);
    free(r.kids);
    free(r.rg);
    return f;
}
