/* gram_schema.c — a JSON schema (a subset) to grammar fragments: the JSON texts a
 * constrained reply may be.
 *
 * The subset:
 *   type           "object", "array", "string", "integer", "number", "boolean", "null", or a
 *                  list of them; without "type" the keywords present pick it (properties →
 *                  object, items → array, minLength → string, minimum → number), none: any
 *   object         properties (written in their order), required, additionalProperties
 *                  (false; true or absent: other keys — a string key not among the
 *                  properties, with any value; a schema: other keys with such values)
 *   array          items, minItems, maxItems (uniqueItems false)
 *   string         minLength, maxLength (characters), pattern (ECMA regex, unanchored
 *                  unless ^ / $; through gram_regex.c), format date, time, date-time,
 *                  uuid, email, ipv4 (a pattern each that only valid values match)
 *   integer/number minimum, maximum, exclusiveMinimum, exclusiveMaximum (whole-number
 *                  bounds for "number")
 *   any type       enum, const, anyOf, allOf of one schema, $ref into the document ("#",
 *                  "#/$defs/...", "#/definitions/..."; recursion allowed), true / false
 *   annotations    title, description, default, examples, $schema, $id, $comment, $defs,
 *                  definitions, deprecated, readOnly, writeOnly, and "x-..." keys: ignored.
 * Anything else is refused with LLMRT_ERR_UNSUPPORTED naming the keyword and where it is.
 *
 * Choices that make every reply valid but not every valid document a possible reply:
 * properties come in the schema's order; whitespace between tokens is bounded; numbers
 * have capped digits and no exponent when bounded; strings with a pattern or format and
 * other keys hold no escapes; other keys (additionalProperties) come after the declared
 * ones and hold no escapes. Keys are never repeated.
 *
 * Rules: a schema's value is inlined into its parent wherever it appears once (an object's
 * properties, one array item repeated by a loop), so most of a document is one DFA and most
 * tokens are decided by the top state alone; a $ref target, the items of an array with
 * counts, and any-value's objects and arrays are rules of their own (called). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uthash.h>

#include "grammar.h"
#include "gram_json.h"
#include "gram_regex.h"

#define MAX_NEST 64
#define CAP 999999999999999LL /* the largest integer with LLMRT_GRAM_INT_DIGITS digits */

typedef struct ref_rule {
    char *ptr;
    int32_t rule;
    UT_hash_handle hh;
} ref_rule;

struct llmrt_gram_schema_ctx {
    llmrt_gram_builder *b;
    const json_t *root;
    int strict;
    ref_rule *refs;
    int32_t any_object, any_array; /* rules, -1 until needed */
    int depth;
};

llmrt_gram_schema_ctx *llmrt_gram_schema_ctx_new(llmrt_gram_builder *b, const json_t *root,
                                                 int strict)
{
    llmrt_gram_schema_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->b = b;
    c->root = root;
    c->strict = strict;
    c->any_object = c->any_array = -1;
    return c;
}

void llmrt_gram_schema_ctx_free(llmrt_gram_schema_ctx *c)
{
    if (!c)
        return;
    ref_rule *r, *t;
    HASH_ITER(hh, c->refs, r, t) {
        HASH_DEL(c->refs, r);
        free(r->ptr);
        free(r);
    }
    free(c);
}

static const char *where(const char *path) { return path[0] ? path : "/"; }

static llmrt_gram_frag refuse(llmrt_gram_schema_ctx *c, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static llmrt_gram_frag refuse(llmrt_gram_schema_ctx *c, const char *path, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    llmrt_gram_builder_fail(c->b, LLMRT_ERR_UNSUPPORTED, "JSON schema at %s: %s", where(path),
                            msg);
    return llmrt_gram_none(c->b);
}

static llmrt_gram_frag bad(llmrt_gram_schema_ctx *c, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static llmrt_gram_frag bad(llmrt_gram_schema_ctx *c, const char *path, const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    llmrt_gram_builder_fail(c->b, LLMRT_ERR_INVALID_ARG, "JSON schema at %s: %s", where(path),
                            msg);
    return llmrt_gram_none(c->b);
}

/* ---- keywords ---- */

typedef enum kw_group {
    KW_ANNOTATION,
    KW_ANY,    /* type, enum, const, anyOf, allOf, $ref */
    KW_OBJECT,
    KW_ARRAY,
    KW_STRING,
    KW_NUMBER,
} kw_group;

static const struct {
    const char *name;
    kw_group g;
} known[] = {
    {"title", KW_ANNOTATION},       {"description", KW_ANNOTATION},
    {"default", KW_ANNOTATION},     {"examples", KW_ANNOTATION},
    {"$schema", KW_ANNOTATION},     {"$id", KW_ANNOTATION},
    {"$comment", KW_ANNOTATION},    {"$defs", KW_ANNOTATION},
    {"definitions", KW_ANNOTATION}, {"deprecated", KW_ANNOTATION},
    {"readOnly", KW_ANNOTATION},    {"writeOnly", KW_ANNOTATION},
    {"type", KW_ANY},               {"enum", KW_ANY},
    {"const", KW_ANY},              {"anyOf", KW_ANY},
    {"allOf", KW_ANY},              {"$ref", KW_ANY},
    {"properties", KW_OBJECT},      {"required", KW_OBJECT},
    {"additionalProperties", KW_OBJECT},
    {"items", KW_ARRAY},            {"minItems", KW_ARRAY},
    {"maxItems", KW_ARRAY},         {"uniqueItems", KW_ARRAY},
    {"minLength", KW_STRING},       {"maxLength", KW_STRING},
    {"pattern", KW_STRING},         {"format", KW_STRING},
    {"minimum", KW_NUMBER},         {"maximum", KW_NUMBER},
    {"exclusiveMinimum", KW_NUMBER}, {"exclusiveMaximum", KW_NUMBER},
};

static int kw_group_of(const char *k)
{
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (strcmp(known[i].name, k) == 0)
            return (int)known[i].g;
    if (k[0] == 'x' && k[1] == '-')
        return KW_ANNOTATION;
    return -1;
}

/* Every keyword known, else refuse the first that is not. Returns 0 when all are. */
static int check_keywords(llmrt_gram_schema_ctx *c, const json_t *s, const char *path)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)s, k, v) {
        if (kw_group_of(k) >= 0)
            continue;
        (void)v;
        refuse(c, path,
               "keyword '%s' is not supported (structured outputs support type, properties, "
               "required, additionalProperties, items, minItems, maxItems, enum, const, anyOf, "
               "$ref, minLength, maxLength, pattern, format, minimum, maximum, "
               "exclusiveMinimum, exclusiveMaximum)",
               k);
        return -1;
    }
    return 0;
}

/* The first keyword of group g (or of any constraining group when g < 0), or NULL. */
static const char *first_of(const json_t *s, int g, const char *except)
{
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)s, k, v) {
        int kg = kw_group_of(k);
        (void)v;
        if (kg == KW_ANNOTATION || (except && strcmp(k, except) == 0))
            continue;
        if (g < 0 || kg == g)
            return k;
    }
    return NULL;
}

/* ---- numbers ---- */

static int digits_of(int64_t x)
{
    int n = 1;
    while (x >= 10)
        x /= 10, n++;
    return n;
}

static int64_t pow10i(int n)
{
    int64_t p = 1;
    while (n-- > 0)
        p *= 10;
    return p;
}

static llmrt_gram_frag digits(llmrt_gram_builder *b, int n)
{
    llmrt_gram_frag f = llmrt_gram_empty(b);
    for (int i = 0; i < n; i++)
        f = llmrt_gram_cat(b, f, llmrt_gram_range(b, '0', '9'));
    return f;
}

/* Equal-length digit strings lo <= hi: every string between them. */
static llmrt_gram_frag same_len(llmrt_gram_builder *b, const char *lo, const char *hi, int n)
{
    if (n == 0)
        return llmrt_gram_empty(b);
    int all = 1;
    for (int i = 0; i < n && all; i++)
        all = lo[i] == '0' && hi[i] == '9';
    if (all)
        return digits(b, n);
    if (lo[0] == hi[0]) {
        char d = lo[0];
        return llmrt_gram_cat(b, llmrt_gram_bytes(b, &d, 1), same_len(b, lo + 1, hi + 1, n - 1));
    }
    char nines[24], zeros[24];
    memset(nines, '9', sizeof nines);
    memset(zeros, '0', sizeof zeros);
    llmrt_gram_frag parts[3];
    int k = 0;
    parts[k++] = llmrt_gram_cat(b, llmrt_gram_bytes(b, lo, 1), same_len(b, lo + 1, nines, n - 1));
    if (lo[0] + 1 <= hi[0] - 1)
        parts[k++] = llmrt_gram_cat(b, llmrt_gram_range(b, (uint8_t)(lo[0] + 1), (uint8_t)(hi[0] - 1)),
                                    digits(b, n - 1));
    parts[k++] = llmrt_gram_cat(b, llmrt_gram_bytes(b, hi, 1), same_len(b, zeros, hi + 1, n - 1));
    return llmrt_gram_alts(b, parts, k);
}

/* The decimal integers in [a, z] (0 <= a <= z <= CAP), without leading zeros. */
static llmrt_gram_frag uint_range(llmrt_gram_builder *b, int64_t a, int64_t z)
{
    llmrt_gram_frag parts[20];
    int k = 0;
    for (int len = digits_of(a); len <= digits_of(z); len++) {
        int64_t lo = len == 1 ? 0 : pow10i(len - 1), hi = pow10i(len) - 1;
        if (lo < a)
            lo = a;
        if (hi > z)
            hi = z;
        if (lo > hi)
            continue;
        char L[24], H[24];
        snprintf(L, sizeof L, "%lld", (long long)lo);
        snprintf(H, sizeof H, "%lld", (long long)hi);
        parts[k++] = same_len(b, L, H, len);
    }
    if (k == 0)
        return llmrt_gram_none(b);
    return k == 1 ? parts[0] : llmrt_gram_alts(b, parts, k);
}

static llmrt_gram_frag lit_int(llmrt_gram_builder *b, int64_t x)
{
    char t[24];
    snprintf(t, sizeof t, "%lld", (long long)x);
    return llmrt_gram_str(b, t);
}

static llmrt_gram_frag digit_fn(llmrt_gram_builder *b, void *ctx)
{
    (void)ctx;
    return llmrt_gram_range(b, '0', '9');
}

static llmrt_gram_frag zero_fn(llmrt_gram_builder *b, void *ctx)
{
    (void)ctx;
    return llmrt_gram_str(b, "0");
}

/* (.digits)?  (.zeros)?  .digits-not-all-zero */
static llmrt_gram_frag frac_any(llmrt_gram_builder *b)
{
    return llmrt_gram_opt(b, llmrt_gram_cat(b, llmrt_gram_str(b, "."),
                                            llmrt_gram_repeat(b, digit_fn, NULL, 1,
                                                              LLMRT_GRAM_FRAC_DIGITS)));
}

static llmrt_gram_frag frac_zero(llmrt_gram_builder *b)
{
    return llmrt_gram_opt(b, llmrt_gram_cat(b, llmrt_gram_str(b, "."),
                                            llmrt_gram_repeat(b, zero_fn, NULL, 1,
                                                              LLMRT_GRAM_FRAC_DIGITS)));
}

static llmrt_gram_frag frac_nonzero(llmrt_gram_builder *b)
{
    llmrt_gram_frag f = llmrt_gram_cat(b, llmrt_gram_str(b, "."),
                                       llmrt_gram_repeat(b, zero_fn, NULL, 0,
                                                         LLMRT_GRAM_FRAC_DIGITS - 1));
    f = llmrt_gram_cat(b, f, llmrt_gram_range(b, '1', '9'));
    return llmrt_gram_cat(b, f, llmrt_gram_repeat(b, digit_fn, NULL, 0,
                                                  LLMRT_GRAM_FRAC_DIGITS - 1));
}

/* Magnitudes m (written K or K.F) with a <= m <= z (a < m when a_excl, m < z when z_excl;
 * z_open: no upper bound). 0 <= a, a <= z. */
static llmrt_gram_frag magnitude(llmrt_gram_builder *b, int64_t a, int a_excl, int64_t z,
                                 int z_excl, int z_open)
{
    llmrt_gram_frag parts[3];
    int k = 0;
    if (!z_open && a == z) {
        if (a_excl || z_excl)
            return llmrt_gram_none(b);
        return llmrt_gram_cat(b, lit_int(b, a), frac_zero(b));
    }
    parts[k++] = llmrt_gram_cat(b, lit_int(b, a), a_excl ? frac_nonzero(b) : frac_any(b));
    int64_t top = z_open ? CAP : z - 1;
    if (a + 1 <= top)
        parts[k++] = llmrt_gram_cat(b, uint_range(b, a + 1, top), frac_any(b));
    if (!z_open && !z_excl)
        parts[k++] = llmrt_gram_cat(b, lit_int(b, z), frac_zero(b));
    return k == 1 ? parts[0] : llmrt_gram_alts(b, parts, k);
}

typedef struct bounds {
    int has_lo, has_hi;
    double lo, hi;
    int lo_excl, hi_excl;
} bounds;

/* minimum / maximum / exclusive* (a number, or draft 4's boolean beside minimum). */
static int read_bounds(llmrt_gram_schema_ctx *c, const json_t *s, const char *path, bounds *o)
{
    memset(o, 0, sizeof *o);
    static const char *names[4] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
    const json_t *v[4];
    for (int i = 0; i < 4; i++) {
        v[i] = json_object_get(s, names[i]);
        if (v[i] && !json_is_number(v[i]) && !(i >= 2 && json_is_boolean(v[i]))) {
            bad(c, path, "'%s' must be a number", names[i]);
            return -1;
        }
    }
    if (v[0])
        o->has_lo = 1, o->lo = json_number_value(v[0]);
    if (v[1])
        o->has_hi = 1, o->hi = json_number_value(v[1]);
    if (v[2] && json_is_boolean(v[2])) {
        o->lo_excl = json_is_true(v[2]);
    } else if (v[2]) {
        double x = json_number_value(v[2]);
        if (!o->has_lo || x >= o->lo)
            o->has_lo = 1, o->lo = x, o->lo_excl = 1;
    }
    if (v[3] && json_is_boolean(v[3])) {
        o->hi_excl = json_is_true(v[3]);
    } else if (v[3]) {
        double x = json_number_value(v[3]);
        if (!o->has_hi || x <= o->hi)
            o->has_hi = 1, o->hi = x, o->hi_excl = 1;
    }
    if ((o->has_lo && !isfinite(o->lo)) || (o->has_hi && !isfinite(o->hi))) {
        bad(c, path, "bounds must be finite numbers");
        return -1;
    }
    return 0;
}

static llmrt_gram_frag emit_integer(llmrt_gram_schema_ctx *c, const json_t *s, const char *path)
{
    llmrt_gram_builder *b = c->b;
    bounds bd;
    if (read_bounds(c, s, path, &bd))
        return llmrt_gram_none(b);
    double lo = -(double)CAP, hi = (double)CAP;
    if (bd.has_lo)
        lo = bd.lo_excl ? floor(bd.lo) + 1 : ceil(bd.lo);
    if (bd.has_hi)
        hi = bd.hi_excl ? ceil(bd.hi) - 1 : floor(bd.hi);
    if (lo > (double)CAP || hi < -(double)CAP)
        return refuse(c, path, "integer bounds beyond +-%lld are not supported (integers have "
                               "at most %d digits)",
                      CAP, LLMRT_GRAM_INT_DIGITS);
    if (lo < -(double)CAP)
        lo = -(double)CAP;
    if (hi > (double)CAP)
        hi = (double)CAP;
    if (lo > hi)
        return bad(c, path, "no integer lies between the bounds");
    int64_t L = (int64_t)lo, H = (int64_t)hi;
    llmrt_gram_frag parts[2];
    int k = 0;
    if (H >= 0)
        parts[k++] = uint_range(b, L > 0 ? L : 0, H);
    if (L < 0)
        parts[k++] = llmrt_gram_cat(b, llmrt_gram_str(b, "-"),
                                    uint_range(b, H < 0 ? -H : 1, -L));
    return k == 1 ? parts[0] : llmrt_gram_alt(b, parts[0], parts[1]);
}

static int whole(double x) { return floor(x) == x; }

static llmrt_gram_frag emit_number(llmrt_gram_schema_ctx *c, const json_t *s, const char *path)
{
    llmrt_gram_builder *b = c->b;
    bounds bd;
    if (read_bounds(c, s, path, &bd))
        return llmrt_gram_none(b);
    if (!bd.has_lo && !bd.has_hi)
        return llmrt_gram_json_number(b);
    if (bd.has_lo && !whole(bd.lo))
        return refuse(c, path, "'%s' %g on a number: only whole-number bounds are supported "
                               "(use type integer, or a whole bound)",
                      bd.lo_excl ? "exclusiveMinimum" : "minimum", bd.lo);
    if (bd.has_hi && !whole(bd.hi))
        return refuse(c, path, "'%s' %g on a number: only whole-number bounds are supported "
                               "(use type integer, or a whole bound)",
                      bd.hi_excl ? "exclusiveMaximum" : "maximum", bd.hi);
    if ((bd.has_lo && bd.lo > (double)CAP) || (bd.has_hi && bd.hi < -(double)CAP))
        return refuse(c, path, "number bounds beyond +-%lld are not supported", CAP);
    int lo_open = !bd.has_lo || bd.lo < -(double)CAP, hi_open = !bd.has_hi || bd.hi > (double)CAP;
    int64_t lo = lo_open ? 0 : (int64_t)bd.lo, hi = hi_open ? 0 : (int64_t)bd.hi;
    if (!lo_open && !hi_open && (lo > hi || (lo == hi && (bd.lo_excl || bd.hi_excl))))
        return bad(c, path, "no number lies between the bounds");
    llmrt_gram_frag parts[2];
    int k = 0;
    /* x >= 0 */
    if (hi_open || hi > 0 || (hi == 0 && !bd.hi_excl)) {
        int64_t a = !lo_open && lo > 0 ? lo : 0;
        int a_excl = !lo_open && lo >= 0 ? bd.lo_excl : 0;
        parts[k++] = magnitude(b, a, a_excl, hi_open ? 0 : hi, bd.hi_excl, hi_open);
    }
    /* x < 0: m = -x > 0 */
    if (lo_open || lo < 0) {
        int64_t a = !hi_open && hi < 0 ? -hi : 0;
        int a_excl = !hi_open && hi < 0 ? bd.hi_excl : 1;
        parts[k++] = llmrt_gram_cat(b, llmrt_gram_str(b, "-"),
                                    magnitude(b, a, a_excl, lo_open ? 0 : -lo, bd.lo_excl,
                                              lo_open));
    }
    if (k == 0)
        return bad(c, path, "no number lies between the bounds");
    return k == 1 ? parts[0] : llmrt_gram_alt(b, parts[0], parts[1]);
}

/* ---- strings ---- */

static const struct {
    const char *name, *re;
} formats[] = {
    {"date", "^[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-"
             "(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))$"},
    {"time", "^(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,6})?"
             "(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])$"},
    {"date-time", "^[0-9]{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-"
                  "(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))T(?:[01][0-9]|2[0-3]):"
                  "[0-5][0-9]:[0-5][0-9](?:\\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):"
                  "[0-5][0-9])$"},
    {"uuid", "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"},
    {"email", "^[a-z0-9]{1,20}(?:\\.[a-z0-9]{1,20}){0,3}@[a-z0-9]{1,20}(?:\\.[a-z0-9]{1,20})"
              "{0,3}\\.[a-z]{2,6}$"},
    {"ipv4", "^(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\\.){3}"
             "(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$"},
};

static int read_count(llmrt_gram_schema_ctx *c, const json_t *s, const char *key, int32_t cap,
                      const char *path, int32_t *out)
{
    const json_t *v = json_object_get(s, key);
    if (!v)
        return 0;
    double x = json_is_integer(v) ? (double)json_integer_value(v)
               : json_is_real(v)  ? json_real_value(v)
                                  : -1;
    if (!json_is_number(v) || x < 0 || !whole(x)) {
        bad(c, path, "'%s' must be a non-negative integer", key);
        return -1;
    }
    if (x > cap) {
        refuse(c, path, "'%s' %.0f is above the supported %d", key, x, cap);
        return -1;
    }
    *out = (int32_t)x;
    return 1;
}

static llmrt_gram_frag emit_string(llmrt_gram_schema_ctx *c, const json_t *s, const char *path)
{
    llmrt_gram_builder *b = c->b;
    int32_t lo = 0, hi = -1;
    if (read_count(c, s, "minLength", LLMRT_GRAM_MAX_LENGTH, path, &lo) < 0 ||
        read_count(c, s, "maxLength", LLMRT_GRAM_MAX_LENGTH, path, &hi) < 0)
        return llmrt_gram_none(b);
    if (hi >= 0 && hi < lo)
        return bad(c, path, "maxLength %d is below minLength %d", hi, lo);
    const json_t *pat = json_object_get(s, "pattern"), *fmt = json_object_get(s, "format");
    if (pat && !json_is_string(pat))
        return bad(c, path, "'pattern' must be a string");
    if (fmt && !json_is_string(fmt))
        return bad(c, path, "'format' must be a string");
    const char *re = NULL;
    size_t re_len = 0;
    if (fmt) {
        for (size_t i = 0; i < sizeof formats / sizeof *formats; i++)
            if (strcmp(formats[i].name, json_string_value(fmt)) == 0)
                re = formats[i].re;
        if (!re)
            return refuse(c, path, "'format' \"%s\" is not supported (supported: date, time, "
                                   "date-time, uuid, email, ipv4)",
                          json_string_value(fmt));
        if (pat)
            return refuse(c, path, "'format' together with 'pattern' is not supported");
        re_len = strlen(re);
    } else if (pat) {
        re = json_string_value(pat);
        re_len = json_string_length(pat);
    }
    if (!re)
        return llmrt_gram_json_string(b, lo, hi);
    if (lo > 0 || hi >= 0)
        return refuse(c, path, "'%s' together with minLength / maxLength is not supported",
                      fmt ? "format" : "pattern");
    int a0, a1;
    llmrt_gram_frag body = llmrt_gram_regex_frag(b, re, re_len, 1, &a0, &a1);
    if (!a0)
        body = llmrt_gram_cat(b, llmrt_gram_repeat(b, llmrt_gram_json_char, NULL, 0, -1), body);
    if (!a1)
        body = llmrt_gram_cat(b, body, llmrt_gram_repeat(b, llmrt_gram_json_char, NULL, 0, -1));
    return llmrt_gram_cat(b, llmrt_gram_str(b, "\""), llmrt_gram_cat(b, body, llmrt_gram_str(b, "\"")));
}

/* ---- any value ---- */

static llmrt_gram_frag sep(llmrt_gram_builder *b)
{
    return llmrt_gram_cat(b, llmrt_gram_json_ws(b),
                          llmrt_gram_cat(b, llmrt_gram_str(b, ","), llmrt_gram_json_ws(b)));
}

/* open ws (item (sep item)*)? ws close, with one copy of item, or "open ws close". */
static llmrt_gram_frag list_of(llmrt_gram_builder *b, const char *open, const char *close,
                               llmrt_gram_frag item, int allow_empty)
{
    llmrt_gram_frag o = llmrt_gram_cat(b, llmrt_gram_str(b, open), llmrt_gram_json_ws(b));
    int32_t end = llmrt_gram_junction(b);
    llmrt_gram_link(b, o.end, item.start);
    llmrt_gram_frag s = sep(b);
    llmrt_gram_link(b, item.end, s.start);
    llmrt_gram_link(b, s.end, item.start);
    llmrt_gram_frag cl = llmrt_gram_cat(b, llmrt_gram_json_ws(b), llmrt_gram_str(b, close));
    llmrt_gram_link(b, item.end, cl.start);
    llmrt_gram_link(b, cl.end, end);
    if (allow_empty) {
        llmrt_gram_frag c0 = llmrt_gram_str(b, close);
        llmrt_gram_link(b, o.end, c0.start);
        llmrt_gram_link(b, c0.end, end);
    }
    return (llmrt_gram_frag){o.start, end};
}

/* Any value, written in place: scalars inline (so a token that ends a string and goes on
 * with ',' is decided by its top state alone), objects and arrays called (they nest). */
static llmrt_gram_frag any_value_here(llmrt_gram_schema_ctx *c)
{
    llmrt_gram_builder *b = c->b;
    llmrt_gram_frag v[7] = {
        llmrt_gram_call(b, c->any_object), llmrt_gram_call(b, c->any_array),
        llmrt_gram_json_string(b, 0, -1),  llmrt_gram_json_number(b),
        llmrt_gram_str(b, "true"),         llmrt_gram_str(b, "false"),
        llmrt_gram_str(b, "null"),
    };
    return llmrt_gram_alts(b, v, 7);
}

static void make_any(llmrt_gram_schema_ctx *c)
{
    if (c->any_object >= 0)
        return;
    llmrt_gram_builder *b = c->b;
    c->any_object = llmrt_gram_rule_new(b);
    c->any_array = llmrt_gram_rule_new(b);
    llmrt_gram_frag member = llmrt_gram_json_string(b, 0, -1);
    member = llmrt_gram_cat(b, member, llmrt_gram_json_ws(b));
    member = llmrt_gram_cat(b, member, llmrt_gram_str(b, ":"));
    member = llmrt_gram_cat(b, member, llmrt_gram_json_ws(b));
    member = llmrt_gram_cat(b, member, any_value_here(c));
    llmrt_gram_rule_set(b, c->any_object, list_of(b, "{", "}", member, 1));
    llmrt_gram_rule_set(b, c->any_array, list_of(b, "[", "]", any_value_here(c), 1));
}

llmrt_gram_frag llmrt_gram_any_value(llmrt_gram_schema_ctx *c)
{
    make_any(c);
    return any_value_here(c);
}

llmrt_gram_frag llmrt_gram_any_object(llmrt_gram_schema_ctx *c)
{
    make_any(c);
    return llmrt_gram_call(c->b, c->any_object);
}

/* ---- objects ---- */

/* Keys other than `names` [n]: a JSON string without escapes whose text is none of them.
 * A trie of the names' code points: from each node, a child's character goes on along the
 * trie, any other character leaves it for good; the closing quote is allowed except where a
 * name ends. */
typedef struct key_node {
    int32_t state;   /* NFA junction of this node */
    int terminal;    /* a name ends here */
    uint32_t *kids;  /* child code points */
    int32_t *kid;    /* child node index */
    int n_kids, cap_kids;
} key_node;

static int decode_cp(const uint8_t *s, size_t n, uint32_t *cp)
{
    uint32_t c = s[0];
    int len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
    if ((size_t)len > n)
        return -1;
    if (len > 1)
        c &= 0x3Fu >> (len - 1);
    for (int k = 1; k < len; k++)
        c = (c << 6) | (s[k] & 0x3F);
    *cp = c;
    return len;
}

static int unescaped_cp(uint32_t cp)
{
    return cp >= 0x20 && cp != '"' && cp != '\\' && !(cp >= 0xD800 && cp <= 0xDFFF);
}

/* One unescaped character other than the code points excl [n] (sorted). */
static llmrt_gram_frag char_except(llmrt_gram_builder *b, const uint32_t *excl, int n)
{
    static const uint32_t ok[][2] = {{0x20, 0x21}, {0x23, 0x5B}, {0x5D, 0x10FFFF}};
    llmrt_gram_frag parts[64];
    int k = 0;
    uint8_t ascii[32] = {0};
    int any_ascii = 0;
    for (int r = 0; r < 3; r++) {
        uint32_t lo = ok[r][0];
        for (int i = 0; i <= n; i++) {
            uint32_t hi = i < n ? excl[i] : ok[r][1] + 1;
            if (i < n && (excl[i] < ok[r][0] || excl[i] > ok[r][1]))
                continue;
            if (lo < hi) {
                uint32_t a = lo, z = hi - 1;
                for (uint32_t x = a; x <= z && x < 0x80; x++)
                    ascii[x >> 3] |= (uint8_t)(1u << (x & 7)), any_ascii = 1;
                if (z >= 0x80 && k < 63)
                    parts[k++] = llmrt_gram_utf8_range(b, a < 0x80 ? 0x80 : a, z);
            }
            lo = hi + 1;
        }
    }
    if (any_ascii)
        parts[k++] = llmrt_gram_set(b, ascii);
    return k == 1 ? parts[0] : llmrt_gram_alts(b, parts, k);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static llmrt_gram_frag other_key(llmrt_gram_builder *b, const char *const *names, int n)
{
    key_node *t = calloc(1, sizeof *t);
    int nt = 1, cap = 1;
    llmrt_gram_frag out = {0, 0};
    if (!t) {
        llmrt_gram_builder_fail(b, LLMRT_ERR_NOMEM, "out of memory");
        return llmrt_gram_none(b);
    }
    for (int i = 0; i < n; i++) {
        const uint8_t *s = (const uint8_t *)names[i];
        size_t len = strlen(names[i]), at = 0;
        int node = 0, ok = 1;
        while (at < len) {
            uint32_t cp;
            int l = decode_cp(s + at, len - at, &cp);
            if (l < 0 || !unescaped_cp(cp)) {
                ok = 0; /* such a name can never equal a key without escapes */
                break;
            }
            at += (size_t)l;
            int j;
            for (j = 0; j < t[node].n_kids; j++)
                if (t[node].kids[j] == cp)
                    break;
            if (j == t[node].n_kids) {
                if (nt == cap) {
                    key_node *g = realloc(t, (size_t)cap * 2 * sizeof *t);
                    if (!g)
                        goto oom;
                    t = g, cap *= 2;
                }
                memset(&t[nt], 0, sizeof t[nt]);
                key_node *p = &t[node];
                if (p->n_kids == p->cap_kids) {
                    int c2 = p->cap_kids ? p->cap_kids * 2 : 4;
                    uint32_t *k1 = realloc(p->kids, (size_t)c2 * sizeof *k1);
                    if (!k1)
                        goto oom;
                    p->kids = k1;
                    int32_t *k2 = realloc(p->kid, (size_t)c2 * sizeof *k2);
                    if (!k2)
                        goto oom;
                    p->kid = k2;
                    p->cap_kids = c2;
                }
                p->kids[p->n_kids] = cp;
                p->kid[p->n_kids++] = nt++;
            }
            node = t[node].kid[j];
        }
        if (ok)
            t[node].terminal = 1;
    }
    for (int i = 0; i < nt; i++)
        t[i].state = llmrt_gram_junction(b);
    int32_t end = llmrt_gram_junction(b);
    int32_t freestate = llmrt_gram_junction(b);
    /* free: any characters, then the closing quote */
    llmrt_gram_frag fc = llmrt_gram_json_char(b, NULL);
    llmrt_gram_link(b, freestate, fc.start);
    llmrt_gram_link(b, fc.end, freestate);
    llmrt_gram_frag q = llmrt_gram_str(b, "\"");
    llmrt_gram_link(b, freestate, q.start);
    llmrt_gram_link(b, q.end, end);
    for (int i = 0; i < nt; i++) {
        key_node *x = &t[i];
        for (int j = 0; j < x->n_kids; j++) {
            uint8_t enc[4];
            uint32_t cp = x->kids[j];
            int l = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
            if (l == 1) {
                enc[0] = (uint8_t)cp;
            } else {
                for (int k = l - 1; k > 0; k--, cp >>= 6)
                    enc[k] = (uint8_t)(0x80 | (cp & 0x3F));
                enc[0] = (uint8_t)((0xF00 >> l) | cp);
            }
            llmrt_gram_frag e = llmrt_gram_bytes(b, enc, (size_t)l);
            llmrt_gram_link(b, x->state, e.start);
            llmrt_gram_link(b, e.end, t[x->kid[j]].state);
        }
        if (x->n_kids > 1)
            qsort(x->kids, (size_t)x->n_kids, sizeof *x->kids, cmp_u32);
        llmrt_gram_frag o = char_except(b, x->kids, x->n_kids);
        llmrt_gram_link(b, x->state, o.start);
        llmrt_gram_link(b, o.end, freestate);
        if (!x->terminal) {
            llmrt_gram_frag cq = llmrt_gram_str(b, "\"");
            llmrt_gram_link(b, x->state, cq.start);
            llmrt_gram_link(b, cq.end, end);
        }
    }
    llmrt_gram_frag open = llmrt_gram_str(b, "\"");
    llmrt_gram_link(b, open.end, t[0].state);
    out = (llmrt_gram_frag){open.start, end};
    goto done;
oom:
    llmrt_gram_builder_fail(b, LLMRT_ERR_NOMEM, "out of memory");
    out = llmrt_gram_none(b);
done:
    for (int i = 0; i < nt; i++) {
        free(t[i].kids);
        free(t[i].kid);
    }
    free(t);
    return out;
}

static llmrt_gram_frag member(llmrt_gram_schema_ctx *c, llmrt_gram_frag key, llmrt_gram_frag value)
{
    llmrt_gram_builder *b = c->b;
    llmrt_gram_frag m = llmrt_gram_cat(b, key, llmrt_gram_json_ws(b));
    m = llmrt_gram_cat(b, m, llmrt_gram_str(b, ":"));
    m = llmrt_gram_cat(b, m, llmrt_gram_json_ws(b));
    return llmrt_gram_cat(b, m, value);
}

typedef struct prop {
    const char *name;
    const json_t *schema; /* NULL: any value */
    int required;
} prop;

static llmrt_gram_frag emit_object(llmrt_gram_schema_ctx *c, const json_t *s, const char *path)
{
    llmrt_gram_builder *b = c->b;
    const json_t *props = json_object_get(s, "properties");
    const json_t *req = json_object_get(s, "required");
    const json_t *add = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props))
        return bad(c, path, "'properties' must be an object");
    if (req && !json_is_array(req))
        return bad(c, path, "'required' must be an array of strings");
    if (add && !json_is_boolean(add) && !json_is_object(add))
        return bad(c, path, "'additionalProperties' must be a boolean or a schema");
    size_t np = props ? json_object_size(props) : 0, nr = req ? json_array_size(req) : 0;
    prop *p = calloc(np + nr + 1, sizeof *p);
    const char **names = calloc(np + nr + 1, sizeof *names);
    llmrt_gram_frag out;
    if (!p || !names) {
        free(p);
        free(names);
        llmrt_gram_builder_fail(b, LLMRT_ERR_NOMEM, "out of memory");
        return llmrt_gram_none(b);
    }
    int n = 0;
    const char *k;
    json_t *v;
    if (props)
        json_object_foreach((json_t *)props, k, v) {
            p[n].name = k;
            p[n].schema = v;
            n++;
        }
    for (size_t i = 0; i < nr; i++) {
        const json_t *r = json_array_get(req, i);
        if (!json_is_string(r)) {
            out = bad(c, path, "'required' must be an array of strings");
            goto done;
        }
        int j;
        for (j = 0; j < n; j++)
            if (strcmp(p[j].name, json_string_value(r)) == 0)
                break;
        if (j == n) { /* required but not described: any value */
            p[n].name = json_string_value(r);
            p[n].schema = NULL;
            n++;
        }
        p[j].required = 1;
    }
    for (int i = 0; i < n; i++)
        names[i] = p[i].name;
    int extras = add ? !json_is_false(add) : !c->strict;
    /* junctions J[i][f]: before property i, f = something was written */
    int32_t (*J)[2] = calloc((size_t)n + 1, sizeof *J);
    if (!J) {
        llmrt_gram_builder_fail(b, LLMRT_ERR_NOMEM, "out of memory");
        out = llmrt_gram_none(b);
        goto done;
    }
    for (int i = 0; i <= n; i++)
        J[i][0] = llmrt_gram_junction(b), J[i][1] = llmrt_gram_junction(b);
    llmrt_gram_frag open = llmrt_gram_cat(b, llmrt_gram_str(b, "{"), llmrt_gram_json_ws(b));
    llmrt_gram_link(b, open.end, J[0][0]);
    for (int i = 0; i < n && !llmrt_gram_builder_failed(b); i++) {
        char sub[1024];
        snprintf(sub, sizeof sub, "%s/properties/%s", path, p[i].name);
        json_t *name = json_string(p[i].name);
        llmrt_gram_frag key = name ? llmrt_gram_json_literal(b, name) : llmrt_gram_none(b);
        json_decref(name);
        llmrt_gram_frag val = p[i].schema ? llmrt_gram_schema_value(c, p[i].schema, sub)
                                          : llmrt_gram_any_value(c);
        llmrt_gram_frag m = member(c, key, val);
        llmrt_gram_frag sp = sep(b);
        llmrt_gram_link(b, J[i][0], m.start);
        llmrt_gram_link(b, J[i][1], sp.start);
        llmrt_gram_link(b, sp.end, m.start);
        llmrt_gram_link(b, m.end, J[i + 1][1]);
        if (!p[i].required) {
            llmrt_gram_link(b, J[i][0], J[i + 1][0]);
            llmrt_gram_link(b, J[i][1], J[i + 1][1]);
        }
    }
    int32_t end = llmrt_gram_junction(b);
    llmrt_gram_frag close1 = llmrt_gram_cat(b, llmrt_gram_json_ws(b), llmrt_gram_str(b, "}"));
    llmrt_gram_frag close0 = llmrt_gram_str(b, "}");
    llmrt_gram_link(b, J[n][0], close0.start);
    llmrt_gram_link(b, J[n][1], close1.start);
    llmrt_gram_link(b, close0.end, end);
    llmrt_gram_link(b, close1.end, end);
    if (extras) {
        char sub[1024];
        snprintf(sub, sizeof sub, "%s/additionalProperties", path);
        llmrt_gram_frag val = add && json_is_object(add) ? llmrt_gram_schema_value(c, add, sub)
                                                         : llmrt_gram_any_value(c);
        llmrt_gram_frag m = member(c, other_key(b, names, n), val);
        int32_t after = llmrt_gram_junction(b);
        llmrt_gram_frag s1 = sep(b), s2 = sep(b);
        llmrt_gram_link(b, J[n][0], m.start);
        llmrt_gram_link(b, J[n][1], s1.start);
        llmrt_gram_link(b, s1.end, m.start);
        llmrt_gram_link(b, m.end, after);
        llmrt_gram_link(b, after, s2.start);
        llmrt_gram_link(b, s2.end, m.start);
        llmrt_gram_link(b, after, close1.start);
    }
    out = (llmrt_gram_frag){open.start, end};
    free(J);
done:
    free(p);
    free(names);
    return out;
}

/* ---- arrays ---- */

typedef struct item_ctx {
    llmrt_gram_schema_ctx *c;
    int32_t rule;
} item_ctx;

static llmrt_gram_frag sep_item(llmrt_gram_builder *b, void *ctx)
{
    item_ctx *it = ctx;
    return llmrt_gram_cat(b, sep(b), llmrt_gram_call(b, it->rule));
}

static llmrt_gram_frag emit_array(llmrt_gram_schema_ctx *c, const json_t *s, const char *path)
{
    llmrt_gram_builder *b = c->b;
    const json_t *items = json_object_get(s, "items");
    const json_t *uniq = json_object_get(s, "uniqueItems");
    if (uniq && !json_is_boolean(uniq))
        return bad(c, path, "'uniqueItems' must be a boolean");
    if (uniq && json_is_true(uniq))
        return refuse(c, path, "keyword 'uniqueItems': true is not supported");
    if (items && json_is_array(items))
        return refuse(c, path, "'items' as an array (tuples) is not supported; give one schema");
    if (items && !json_is_object(items) && !json_is_boolean(items))
        return bad(c, path, "'items' must be a schema");
    int32_t lo = 0, hi = -1;
    if (read_count(c, s, "minItems", LLMRT_GRAM_MAX_ITEMS, path, &lo) < 0 ||
        read_count(c, s, "maxItems", LLMRT_GRAM_MAX_ITEMS, path, &hi) < 0)
        return llmrt_gram_none(b);
    if (hi >= 0 && hi < lo)
        return bad(c, path, "maxItems %d is below minItems %d", hi, lo);
    if (items && json_is_false(items))
        hi = 0;
    if (hi == 0) {
        if (lo > 0)
            return bad(c, path, "no array satisfies minItems %d", lo);
        return llmrt_gram_cat(b, llmrt_gram_cat(b, llmrt_gram_str(b, "["), llmrt_gram_json_ws(b)),
                              llmrt_gram_str(b, "]"));
    }
    char sub[1024];
    snprintf(sub, sizeof sub, "%s/items", path);
    if (hi < 0 && lo <= 1) { /* one copy of the item, looped */
        llmrt_gram_frag item = items && json_is_object(items)
                                   ? llmrt_gram_schema_value(c, items, sub)
                                   : llmrt_gram_any_value(c);
        return list_of(b, "[", "]", item, lo == 0);
    }
    /* counted: the item is a rule, so copies are small */
    item_ctx it = {c, llmrt_gram_rule_new(b)};
    llmrt_gram_rule_set(b, it.rule,
                        items && json_is_object(items) ? llmrt_gram_schema_value(c, items, sub)
                                                       : llmrt_gram_any_value(c));
    llmrt_gram_frag body = llmrt_gram_cat(
        b, llmrt_gram_call(b, it.rule),
        llmrt_gram_repeat(b, sep_item, &it, lo > 1 ? lo - 1 : 0, hi < 0 ? -1 : hi - 1));
    body = llmrt_gram_cat(b, body, llmrt_gram_cat(b, llmrt_gram_json_ws(b), llmrt_gram_str(b, "]")));
    if (lo == 0)
        body = llmrt_gram_alt(b, body, llmrt_gram_str(b, "]"));
    return llmrt_gram_cat(b, llmrt_gram_cat(b, llmrt_gram_str(b, "["), llmrt_gram_json_ws(b)), body);
}

/* ---- $ref ---- */

static const json_t *resolve(const json_t *root, const char *ref)
{
    if (ref[0] != '#')
        return NULL;
    const json_t *cur = root;
    const char *p = ref + 1;
    if (*p == 0)
        return root;
    if (*p != '/')
        return NULL;
    while (*p == '/' && cur) {
        p++;
        char tok[512];
        size_t n = 0;
        while (*p && *p != '/' && n + 1 < sizeof tok) {
            if (p[0] == '~' && p[1] == '0')
                tok[n++] = '~', p += 2;
            else if (p[0] == '~' && p[1] == '1')
                tok[n++] = '/', p += 2;
            else
                tok[n++] = *p++;
        }
        tok[n] = 0;
        if (json_is_object(cur)) {
            cur = json_object_get(cur, tok);
        } else if (json_is_array(cur)) {
            char *e;
            long i = strtol(tok, &e, 10);
            cur = *e || i < 0 ? NULL : json_array_get(cur, (size_t)i);
        } else {
            cur = NULL;
        }
    }
    return *p ? NULL : cur;
}

static llmrt_gram_frag emit_ref(llmrt_gram_schema_ctx *c, const char *ref, const char *path)
{
    ref_rule *r = NULL;
    HASH_FIND_STR(c->refs, ref, r);
    if (r)
        return llmrt_gram_call(c->b, r->rule);
    const json_t *target = resolve(c->root, ref);
    if (!target)
        return refuse(c, path, "'$ref' \"%s\" does not point into this schema (only local "
                               "references \"#/...\" are supported)",
                      ref);
    r = calloc(1, sizeof *r);
    if (r)
        r->ptr = strdup(ref);
    if (!r || !r->ptr) {
        free(r);
        llmrt_gram_builder_fail(c->b, LLMRT_ERR_NOMEM, "out of memory");
        return llmrt_gram_none(c->b);
    }
    r->rule = llmrt_gram_rule_new(c->b);
    HASH_ADD_KEYPTR(hh, c->refs, r->ptr, strlen(r->ptr), r);
    int32_t rule = r->rule;
    llmrt_gram_rule_set(c->b, rule, llmrt_gram_schema_value(c, target, ref + 1));
    return llmrt_gram_call(c->b, rule);
}

/* ---- a value ---- */

static int type_ok(const json_t *v, const char *t)
{
    if (strcmp(t, "object") == 0)
        return json_is_object(v);
    if (strcmp(t, "array") == 0)
        return json_is_array(v);
    if (strcmp(t, "string") == 0)
        return json_is_string(v);
    if (strcmp(t, "integer") == 0)
        return json_is_integer(v) || (json_is_real(v) && whole(json_real_value(v)));
    if (strcmp(t, "number") == 0)
        return json_is_number(v);
    if (strcmp(t, "boolean") == 0)
        return json_is_boolean(v);
    if (strcmp(t, "null") == 0)
        return json_is_null(v);
    return 0;
}

static int type_allows(const json_t *type, const json_t *v)
{
    if (!type)
        return 1;
    if (json_is_string(type))
        return type_ok(v, json_string_value(type));
    for (size_t i = 0; i < json_array_size(type); i++)
        if (json_is_string(json_array_get(type, i)) &&
            type_ok(v, json_string_value(json_array_get(type, i))))
            return 1;
    return 0;
}

static llmrt_gram_frag emit_type(llmrt_gram_schema_ctx *c, const json_t *s, const char *t,
                                 const char *path)
{
    llmrt_gram_builder *b = c->b;
    if (strcmp(t, "object") == 0)
        return emit_object(c, s, path);
    if (strcmp(t, "array") == 0)
        return emit_array(c, s, path);
    if (strcmp(t, "string") == 0)
        return emit_string(c, s, path);
    if (strcmp(t, "integer") == 0)
        return emit_integer(c, s, path);
    if (strcmp(t, "number") == 0)
        return emit_number(c, s, path);
    if (strcmp(t, "boolean") == 0)
        return llmrt_gram_alt(b, llmrt_gram_str(b, "true"), llmrt_gram_str(b, "false"));
    if (strcmp(t, "null") == 0)
        return llmrt_gram_str(b, "null");
    return bad(c, path, "unknown type \"%s\" (object, array, string, integer, number, boolean, "
                        "null)",
               t);
}

llmrt_gram_frag llmrt_gram_schema_value(llmrt_gram_schema_ctx *c, const json_t *s,
                                        const char *path)
{
    llmrt_gram_builder *b = c->b;
    if (llmrt_gram_builder_failed(b))
        return llmrt_gram_none(b);
    if (json_is_true(s))
        return llmrt_gram_any_value(c);
    if (json_is_false(s))
        return llmrt_gram_none(b);
    if (!json_is_object(s))
        return bad(c, path, "a schema must be an object or a boolean");
    if (c->depth >= MAX_NEST)
        return refuse(c, path, "schemas nested more than %d deep are not supported", MAX_NEST);
    if (check_keywords(c, s, path))
        return llmrt_gram_none(b);
    c->depth++;
    llmrt_gram_frag out;
    const json_t *ref = json_object_get(s, "$ref"), *all = json_object_get(s, "allOf");
    const json_t *any = json_object_get(s, "anyOf"), *cst = json_object_get(s, "const");
    const json_t *en = json_object_get(s, "enum"), *type = json_object_get(s, "type");
    const char *other;
    if (type && !json_is_string(type) && !json_is_array(type)) {
        out = bad(c, path, "'type' must be a string or an array of strings");
    } else if (ref) {
        if (!json_is_string(ref))
            out = bad(c, path, "'$ref' must be a string");
        else if ((other = first_of(s, -1, "$ref")))
            out = refuse(c, path, "'$ref' together with keyword '%s' is not supported", other);
        else
            out = emit_ref(c, json_string_value(ref), path);
    } else if (all) {
        if (!json_is_array(all) || json_array_size(all) == 0)
            out = bad(c, path, "'allOf' must be a non-empty array of schemas");
        else if (json_array_size(all) > 1)
            out = refuse(c, path, "keyword 'allOf' with more than one schema is not supported");
        else if ((other = first_of(s, -1, "allOf")))
            out = refuse(c, path, "'allOf' together with keyword '%s' is not supported", other);
        else {
            char sub[1024];
            snprintf(sub, sizeof sub, "%s/allOf/0", path);
            out = llmrt_gram_schema_value(c, json_array_get(all, 0), sub);
        }
    } else if (any) {
        size_t n = json_is_array(any) ? json_array_size(any) : 0;
        if (n == 0)
            out = bad(c, path, "'anyOf' must be a non-empty array of schemas");
        else if ((other = first_of(s, -1, "anyOf")))
            out = refuse(c, path, "'anyOf' together with keyword '%s' is not supported (move it "
                                  "into each alternative)",
                         other);
        else {
            llmrt_gram_frag *f = malloc(n * sizeof *f);
            if (!f) {
                llmrt_gram_builder_fail(b, LLMRT_ERR_NOMEM, "out of memory");
                out = llmrt_gram_none(b);
            } else {
                for (size_t i = 0; i < n; i++) {
                    char sub[1024];
                    snprintf(sub, sizeof sub, "%s/anyOf/%zu", path, i);
                    f[i] = llmrt_gram_schema_value(c, json_array_get(any, i), sub);
                }
                out = llmrt_gram_alts(b, f, (int)n);
                free(f);
            }
        }
    } else if (cst || en) {
        if (en && (!json_is_array(en) || json_array_size(en) == 0)) {
            out = bad(c, path, "'enum' must be a non-empty array");
        } else {
            size_t n = cst ? 1 : json_array_size(en);
            llmrt_gram_frag *f = malloc(n * sizeof *f);
            int k = 0;
            if (!f) {
                llmrt_gram_builder_fail(b, LLMRT_ERR_NOMEM, "out of memory");
                out = llmrt_gram_none(b);
            } else {
                for (size_t i = 0; i < n; i++) {
                    const json_t *v = cst ? cst : json_array_get(en, i);
                    if (type_allows(type, v))
                        f[k++] = llmrt_gram_json_literal(b, v);
                }
                out = k ? llmrt_gram_alts(b, f, k)
                        : bad(c, path, "no value of '%s' has the schema's type",
                              cst ? "const" : "enum");
                free(f);
            }
        }
    } else {
        const char *types[8];
        int nt = 0;
        if (json_is_string(type)) {
            types[nt++] = json_string_value(type);
        } else if (json_is_array(type)) {
            for (size_t i = 0; i < json_array_size(type) && nt < 8; i++) {
                const json_t *t = json_array_get(type, i);
                if (!json_is_string(t)) {
                    nt = -1;
                    break;
                }
                types[nt++] = json_string_value(t);
            }
        } else { /* no type: what the keywords describe, else anything */
            if (first_of(s, KW_OBJECT, NULL))
                types[nt++] = "object";
            if (first_of(s, KW_ARRAY, NULL))
                types[nt++] = "array";
            if (first_of(s, KW_STRING, NULL))
                types[nt++] = "string";
            if (first_of(s, KW_NUMBER, NULL))
                types[nt++] = "number";
        }
        if (nt < 0 || (type && nt == 0)) {
            out = bad(c, path, "'type' must be a string or a non-empty array of strings");
        } else if (nt == 0) {
            out = llmrt_gram_any_value(c);
        } else {
            llmrt_gram_frag f[8];
            for (int i = 0; i < nt; i++)
                f[i] = emit_type(c, s, types[i], path);
            out = nt == 1 ? f[0] : llmrt_gram_alts(b, f, nt);
        }
    }
    c->depth--;
    return out;
}
