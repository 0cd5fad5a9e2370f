/* config_key.c — keys and values: an llmrt_key's value checked against its type and range
 * (the same check for core's keys and a plugin's), key tables checked when a plugin is
 * loaded, typed comparison, and the edit distance behind "did you mean". */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config_internal.h"

int llmrt_edit_distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la > 128 || lb > 128)
        return 99;
    int prev[129], cur[129];
    for (size_t j = 0; j <= lb; j++)
        prev[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            int best = prev[j - 1] + cost;
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            cur[j] = best;
        }
        memcpy(prev, cur, sizeof(int) * (lb + 1));
    }
    return prev[lb];
}

int cfg_parse_bool(const char *v, int *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    for (int i = 0; i < 4; i++) {
        if (strcasecmp(v, yes[i]) == 0)
            return *out = 1, 1;
        if (strcasecmp(v, no[i]) == 0)
            return *out = 0, 1;
    }
    return 0;
}

int cfg_parse_i64(const char *v, int64_t *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (end == v || *end || isspace((unsigned char)v[0]))
        return 0;
    if (errno == ERANGE)
        return -1;
    *out = (int64_t)x;
    return 1;
}

int cfg_parse_f64(const char *v, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end || errno || !isfinite(x) || isspace((unsigned char)v[0]))
        return 0;
    *out = x;
    return 1;
}

/* "lo..hi" split at the first "..": each side must parse whole (strtod alone reads "1." of
 * "1..5" and stops — the bug that let every upper bound pass). */
static int split_range(const char *allowed, char *lo, char *hi, size_t n)
{
    const char *dots = allowed ? strstr(allowed, "..") : NULL;
    if (!dots || (size_t)(dots - allowed) >= n || strlen(dots + 2) >= n)
        return 0;
    memcpy(lo, allowed, (size_t)(dots - allowed));
    lo[dots - allowed] = 0;
    strcpy(hi, dots + 2);
    return 1;
}

static int int_range(const char *allowed, int64_t *lo, int64_t *hi)
{
    char a[64], b[64];
    return split_range(allowed, a, b, sizeof a) && cfg_parse_i64(a, lo) == 1 &&
           cfg_parse_i64(b, hi) == 1 && *lo <= *hi;
}

static int float_range(const char *allowed, double *lo, double *hi)
{
    char a[64], b[64];
    return split_range(allowed, a, b, sizeof a) && cfg_parse_f64(a, lo) && cfg_parse_f64(b, hi) &&
           *lo <= *hi;
}

static int enum_has(const char *allowed, const char *value)
{
    size_t vl = strlen(value);
    for (const char *p = allowed; p && *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == vl && strncmp(p, value, len) == 0)
            return 1;
        p = bar ? bar + 1 : NULL;
    }
    return 0;
}

llmrt_status llmrt_key_check_value(const char *section, const llmrt_key *k, const char *value,
                                   const char *where, llmrt_error *err)
{
    /* a secret is never repeated, not even in an error */
    const char *v = k->flags & LLMRT_KEY_SECRET ? "(the secret)" : value;
    switch (k->type) {
    case LLMRT_KEY_STRING:
    case LLMRT_KEY_PATH:
        return LLMRT_OK;
    case LLMRT_KEY_BOOL: {
        int b;
        if (!cfg_parse_bool(value, &b))
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "%s: %s.%s = '%s' is not a boolean (use true or false)", where,
                              section, k->name, v);
        return LLMRT_OK;
    }
    case LLMRT_KEY_ENUM:
        if (!enum_has(k->allowed, value))
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "%s: %s.%s = '%s' is not allowed (allowed: %s)", where, section,
                              k->name, v, k->allowed);
        return LLMRT_OK;
    case LLMRT_KEY_INT: {
        int64_t x, lo = INT64_MIN, hi = INT64_MAX;
        int ok = cfg_parse_i64(value, &x);
        if (ok == 0)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "%s: %s.%s = '%s' is not an integer",
                              where, section, k->name, v);
        if (k->allowed)
            int_range(k->allowed, &lo, &hi); /* checked when the table was */
        if (ok < 0 || x < lo || x > hi)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "%s: %s.%s = %s is out of range (allowed: %s)", where, section,
                              k->name, v, k->allowed ? k->allowed : "64-bit integers");
        return LLMRT_OK;
    }
    case LLMRT_KEY_FLOAT: {
        double x, lo = -INFINITY, hi = INFINITY;
        if (!cfg_parse_f64(value, &x))
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "%s: %s.%s = '%s' is not a number",
                              where, section, k->name, v);
        if (k->allowed)
            float_range(k->allowed, &lo, &hi);
        if (x < lo || x > hi)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                              "%s: %s.%s = %s is out of range (allowed: %s)", where, section,
                              k->name, v, k->allowed);
        return LLMRT_OK;
    }
    }
    return llmrt_fail(err, LLMRT_ERR_INTERNAL, "%s.%s: unknown key type %d", section, k->name,
                      (int)k->type);
}

int cfg_values_equal(const llmrt_key *k, const char *a, const char *b)
{
    switch (k->type) {
    case LLMRT_KEY_INT: {
        int64_t x, y;
        return cfg_parse_i64(a, &x) == 1 && cfg_parse_i64(b, &y) == 1 ? x == y : strcmp(a, b) == 0;
    }
    case LLMRT_KEY_FLOAT: {
        double x, y;
        return cfg_parse_f64(a, &x) && cfg_parse_f64(b, &y) ? x == y : strcmp(a, b) == 0;
    }
    case LLMRT_KEY_BOOL: {
        int x, y;
        return cfg_parse_bool(a, &x) && cfg_parse_bool(b, &y) ? x == y : strcmp(a, b) == 0;
    }
    default:
        return strcmp(a, b) == 0;
    }
}

static int key_name_ok(const char *name)
{
    if (!name || !(name[0] >= 'a' && name[0] <= 'z') || strlen(name) > 64)
        return 0;
    for (const char *p = name; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_' || *p == '-'))
            return 0;
    return 1;
}

/* Equal once '-' reads as '_' (the environment variable cannot tell them apart). */
static int same_env_name(const char *a, const char *b)
{
    for (; *a && *b; a++, b++)
        if ((*a == '-' ? '_' : *a) != (*b == '-' ? '_' : *b))
            return 0;
    return *a == *b;
}

llmrt_status llmrt_key_table_check(const char *section, const llmrt_key *keys, uint32_t n,
                                   llmrt_error *err)
{
    if (n > LLMRT_CONFIG_MAX_PLUGIN_KEYS)
        return llmrt_fail(err, LLMRT_ERR_ABI, "[%s]: %u keys (at most %d)", section, n,
                          LLMRT_CONFIG_MAX_PLUGIN_KEYS);
    if (n && !keys)
        return llmrt_fail(err, LLMRT_ERR_ABI, "[%s]: n_keys is %u but keys is NULL", section, n);
    for (uint32_t i = 0; i < n; i++) {
        const llmrt_key *k = &keys[i];
        if (!key_name_ok(k->name))
            return llmrt_fail(err, LLMRT_ERR_ABI,
                              "[%s] key %u: invalid name '%s' (expected 1-64 characters of a-z, "
                              "0-9, _ or -, starting with a letter)",
                              section, i, k->name ? k->name : "(null)");
        for (uint32_t j = 0; j < i; j++)
            if (same_env_name(keys[j].name, k->name))
                return llmrt_fail(err, LLMRT_ERR_ABI,
                                  "[%s] keys %u and %u: '%s' and '%s' are the same key (names "
                                  "must be unique, also with - read as _)",
                                  section, j, i, keys[j].name, k->name);
        if (k->type < LLMRT_KEY_STRING || k->type > LLMRT_KEY_ENUM)
            return llmrt_fail(err, LLMRT_ERR_ABI,
                              "[%s] key '%s': unknown type %d (expected 1-6, llmrt_key_type)",
                              section, k->name, (int)k->type);
        if (k->flags & ~(uint32_t)(LLMRT_KEY_DEVELOPER | LLMRT_KEY_SECRET))
            return llmrt_fail(err, LLMRT_ERR_ABI,
                              "[%s] key '%s': unknown flags 0x%x (known: LLMRT_KEY_DEVELOPER, "
                              "LLMRT_KEY_SECRET)",
                              section, k->name, k->flags);
        if (!k->help || !k->help[0])
            return llmrt_fail(err, LLMRT_ERR_ABI, "[%s] key '%s': help is missing", section,
                              k->name);
        if (!k->def)
            return llmrt_fail(err, LLMRT_ERR_ABI,
                              "[%s] key '%s': default is NULL (use \"\" for none)", section,
                              k->name);
        int64_t ilo, ihi;
        double flo, fhi;
        switch (k->type) {
        case LLMRT_KEY_ENUM: {
            int bad = !k->allowed || !k->allowed[0];
            for (const char *p = k->allowed; !bad && *p; p++)
                bad = *p == '|' && (p == k->allowed || p[1] == '|' || p[1] == 0);
            if (bad)
                return llmrt_fail(err, LLMRT_ERR_ABI,
                                  "[%s] key '%s': an enum key needs allowed = \"a|b|c\" (got "
                                  "%s%s%s)",
                                  section, k->name, k->allowed ? "'" : "",
                                  k->allowed ? k->allowed : "NULL", k->allowed ? "'" : "");
            break;
        }
        case LLMRT_KEY_INT:
            if (k->allowed && !int_range(k->allowed, &ilo, &ihi))
                return llmrt_fail(err, LLMRT_ERR_ABI,
                                  "[%s] key '%s': allowed '%s' is not \"min..max\" of 64-bit "
                                  "integers with min <= max",
                                  section, k->name, k->allowed);
            break;
        case LLMRT_KEY_FLOAT:
            if (k->allowed && !float_range(k->allowed, &flo, &fhi))
                return llmrt_fail(err, LLMRT_ERR_ABI,
                                  "[%s] key '%s': allowed '%s' is not \"min..max\" of numbers "
                                  "with min <= max",
                                  section, k->name, k->allowed);
            break;
        default:
            if (k->allowed)
                return llmrt_fail(err, LLMRT_ERR_ABI,
                                  "[%s] key '%s': allowed is only for enum, int and float keys "
                                  "(got '%s')",
                                  section, k->name, k->allowed);
        }
        llmrt_error verr = {0};
        if (llmrt_key_check_value(section, k, k->def, "default", &verr) != LLMRT_OK)
            return llmrt_fail(err, LLMRT_ERR_ABI, "[%s] key '%s': invalid default: %s", section,
                              k->name, verr.msg);
    }
    return LLMRT_OK;
}
