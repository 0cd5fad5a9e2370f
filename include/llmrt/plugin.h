/* plugin.h — the plugin ABI: status codes, errors, the descriptor every .so exports, the
 * plugin's key table, and the services the host hands to plugins.
 *
 * Why: plugins are built separately (by us and by third parties) against these headers
 * only. They never link libllmrt; everything they need from the host comes through
 * llmrt_host. Structs only ever grow at the end, and carry struct_size so either side
 * can tell how much of a struct the other knows about.
 *
 * The rules of ABI 1.x:
 *  - A vtable or descriptor only grows at its end. Every member is marked "(required)" or
 *    "(optional, since 1.N)". Required members are the 1.0 set of each vtable (the
 *    LLMRT_*_REQUIRED lists, which the loader checks); everything appended later is optional.
 *  - A member is present when it lies inside the struct_size the other side was built with
 *    and is not NULL: LLMRT_VT_HAS(vt, type, member) is the one check. A caller falls back
 *    when it is absent.
 *  - LLMRT_ABI_MINOR moves with every append. A plugin's minor must not be newer than the
 *    host's; its major must equal the host's.
 *  - Fused and experimental ops are not vtable members: a backend offers them as named,
 *    versioned function tables (backend.h's `extension`), so trying a kernel never edits a
 *    public header. */
#ifndef LLMRT_PLUGIN_H
#define LLMRT_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ABI version: major must be equal; a plugin's minor must be <= the host's. */
#define LLMRT_ABI_MAJOR 1
#define LLMRT_ABI_MINOR 2
#define LLMRT_ABI_VERSION ((uint32_t)((LLMRT_ABI_MAJOR << 16) | LLMRT_ABI_MINOR))
#define LLMRT_ABI_MAJOR_OF(v) ((uint32_t)(v) >> 16)
#define LLMRT_ABI_MINOR_OF(v) ((uint32_t)(v)&0xffffu)

/* 1 when `vt` (a pointer to a vtable or descriptor of `type` that starts with uint32_t
 * struct_size) holds `member` and it is set: the member lies inside the struct_size the
 * other side was built with, and is not NULL. */
#define LLMRT_VT_HAS(vt, type, member)                                                       \
    ((vt) != NULL &&                                                                         \
     (size_t)(vt)->struct_size >= offsetof(type, member) + sizeof(((type *)0)->member) &&    \
     (vt)->member != NULL)

#if defined(__GNUC__)
#define LLMRT_EXPORT __attribute__((visibility("default")))
#define LLMRT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define LLMRT_EXPORT
#define LLMRT_PRINTF(f, a)
#endif

typedef enum llmrt_status {
    LLMRT_OK = 0,
    LLMRT_ERR_INVALID_ARG = 1, /* caller passed something wrong (bad key, bad value, bad shape) */
    LLMRT_ERR_NOMEM = 2,       /* host or device allocation failed */
    LLMRT_ERR_IO = 3,          /* file could not be opened/read/written */
    LLMRT_ERR_FORMAT = 4,      /* malformed input file (INI, JSON, safetensors, ...) */
    LLMRT_ERR_UNSUPPORTED = 5, /* recognised but not supported (e.g. AWQ bits=8) */
    LLMRT_ERR_NOT_FOUND = 6,   /* no such tensor / plugin / key; also "not mine" from probe() */
    LLMRT_ERR_DEVICE = 7,      /* CUDA or other device failure */
    LLMRT_ERR_LIMIT = 8,       /* a capacity limit was hit (KV cache, RLIMIT_MEMLOCK, queue) */
    LLMRT_ERR_STATE = 9,       /* call not valid in the current state */
    LLMRT_ERR_ABI = 10,        /* plugin ABI mismatch */
    LLMRT_ERR_INTERNAL = 11    /* a bug: an invariant did not hold */
} llmrt_status;

/* Caller-owned error: every fallible call fills it on failure. */
#define LLMRT_ERROR_MSG_MAX 1024
typedef struct llmrt_error {
    llmrt_status code;
    char msg[LLMRT_ERROR_MSG_MAX];
} llmrt_error;

typedef enum llmrt_plugin_kind {
    LLMRT_PLUGIN_BACKEND = 1,
    LLMRT_PLUGIN_MEMORY = 2,
    LLMRT_PLUGIN_QUANT = 3,
    LLMRT_PLUGIN_MODEL = 4
} llmrt_plugin_kind;

typedef enum llmrt_log_level {
    LLMRT_LOG_ERROR = 0,
    LLMRT_LOG_WARN = 1,
    LLMRT_LOG_INFO = 2,
    LLMRT_LOG_DEBUG = 3
} llmrt_log_level;

/* A plugin's own INI section (e.g. [memory.pinned]), as parsed by the host.
 * The plugin validates its keys itself and reports unknown ones with `where`. */
typedef struct llmrt_section {
    const char *name;                /* "memory.pinned" */
    size_t n;                        /* number of keys */
    const char *const *keys;         /* [n] */
    const char *const *values;       /* [n] */
    const char *const *where;        /* [n] "conf/runtime.ini:12", "env LLMRT_...", "--set" */
} llmrt_section;

/* Where a plugin writes text the host keeps (a rendered prompt, a JSON document): write()
 * appends n bytes; it fails only when the host is out of memory (LLMRT_ERR_NOMEM). */
typedef struct llmrt_sink {
    void *ctx;
    llmrt_status (*write)(void *ctx, const char *s, size_t n);
} llmrt_sink;

/* ---- a plugin's INI keys (since 1.1) ----
 * Each descriptor may carry a table of the keys of its own section ([backend.cuda],
 * [memory.pinned], ...). The host then treats them like its own keys: it validates values
 * and names (unknown keys are errors naming file:line, with "did you mean"), applies
 * LLMRT_<KIND>_<NAME>_<KEY> from the environment, fills in defaults, shows where each value
 * came from (`llmrt config --show`) and writes them into `llmrt config --template`. The
 * section handed to create() then holds every declared key with its effective value.
 * A plugin without a table (1.0, or keys NULL) gets its section as written and validates it
 * itself; a table of no keys (keys set, n_keys 0) says the section takes none. */
typedef enum llmrt_key_type {
    LLMRT_KEY_STRING = 1,
    LLMRT_KEY_PATH = 2,  /* a file or folder; relative paths in an INI resolve against its folder */
    LLMRT_KEY_INT = 3,   /* allowed: "min..max" (inclusive, 64-bit integers) */
    LLMRT_KEY_FLOAT = 4, /* allowed: "min..max" (inclusive) */
    LLMRT_KEY_BOOL = 5,  /* true/false, yes/no, on/off, 1/0 */
    LLMRT_KEY_ENUM = 6   /* allowed: "a|b|c" */
} llmrt_key_type;

enum {
    /* A developer's tuning knob (kernel choices for benchmark sweeps): not for users, so the
     * template lists it commented out; bench reports record its effective value. */
    LLMRT_KEY_DEVELOPER = 1u << 0,
    /* A secret (an API key): shown as "(set)" or "(unset)", never its value. */
    LLMRT_KEY_SECRET = 1u << 1
};

/* One key. Frozen: this struct never grows (tables are arrays of it). */
typedef struct llmrt_key {
    const char *name;    /* "pdl" */
    llmrt_key_type type;
    const char *def;     /* default, as text ("" for none) */
    const char *allowed; /* ENUM: "a|b|c"; INT/FLOAT: "min..max"; else NULL */
    const char *help;    /* one or two sentences */
    uint32_t flags;      /* LLMRT_KEY_* */
} llmrt_key;

/* Services the host provides. Plugins must not assume any other host symbol exists. */
typedef struct llmrt_host {
    uint32_t struct_size;
    uint32_t abi_version;
    void *ctx;
    /* Log a line (no trailing newline needed). `who` is the plugin name. Thread-safe. */
    void (*log)(void *ctx, llmrt_log_level level, const char *who, const char *fmt, ...)
        LLMRT_PRINTF(4, 5);
    /* Effective value of any "section.key" of runtime.ini (after env/--set overrides);
     * NULL when the key is unknown. The string lives as long as the host. */
    const char *(*config_get)(void *ctx, const char *key);
} llmrt_host;

/* The descriptor. A plugin .so exports exactly one symbol, llmrt_plugin_get, which returns
 * descriptors for index 0, 1, ... and NULL after the last. */
typedef struct llmrt_plugin_desc {
    uint32_t struct_size;   /* (required) sizeof(llmrt_plugin_desc) as the plugin was built */
    uint32_t abi_version;   /* (required) LLMRT_ABI_VERSION as the plugin was built */
    llmrt_plugin_kind kind; /* (required) */
    const char *name;       /* (required) the INI value: "pinned", "cuda", "awq", "qwen3" */
    const char *version;    /* (required) the plugin's own version, "1.0.0" */
    const char *description; /* (required) */
    const char *license;    /* (required) SPDX identifier */
    const void *vtable;     /* (required) llmrt_backend_vtable, llmrt_memory_vtable, ... by kind */
    /* (optional, since 1.0) Called once after validation, before any vtable use. A failure
     * rejects the plugin with err's message. */
    llmrt_status (*init)(const llmrt_host *host, llmrt_error *err);
    /* (optional, since 1.1) The keys of the plugin's own INI section (see llmrt_key). */
    const llmrt_key *keys; /* [n_keys] */
    uint32_t n_keys;
} llmrt_plugin_desc;

#define LLMRT_PLUGIN_ENTRY "llmrt_plugin_get"
typedef const llmrt_plugin_desc *(*llmrt_plugin_get_fn)(uint32_t index);

/* Fill an error; returns err->code so `return llmrt_fail(err, ...)` reads naturally.
 * Header-only so plugins need not link anything. */
#include <stdarg.h>
#include <stdio.h>
static inline llmrt_status llmrt_fail(llmrt_error *err, llmrt_status code, const char *fmt, ...)
    LLMRT_PRINTF(3, 4);
static inline llmrt_status llmrt_fail(llmrt_error *err, llmrt_status code, const char *fmt, ...)
{
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* Look up a key in a plugin section; NULL when absent. */
static inline const char *llmrt_section_get(const llmrt_section *s, const char *key)
{
    if (!s)
        return NULL;
    for (size_t i = 0; i < s->n; i++) {
        const char *a = s->keys[i], *b = key;
        while (*a && *a == *b)
            a++, b++;
        if (*a == *b)
            return s->values[i];
    }
    return NULL;
}

/* A declared key's effective value: the section's (the host fills in every declared key of
 * a plugin with a table), else the table's default. NULL when `key` is not in the table. */
static inline const char *llmrt_key_value(const llmrt_section *s, const llmrt_key *table,
                                          uint32_t n, const char *key)
{
    const char *v = llmrt_section_get(s, key);
    if (v)
        return v;
    for (uint32_t i = 0; i < n; i++) {
        const char *a = table[i].name, *b = key;
        while (*a && *a == *b)
            a++, b++;
        if (*a == *b)
            return table[i].def;
    }
    return NULL;
}

static inline const char *llmrt_status_str(llmrt_status s)
{
    switch (s) {
    case LLMRT_OK: return "ok";
    case LLMRT_ERR_INVALID_ARG: return "invalid argument";
    case LLMRT_ERR_NOMEM: return "out of memory";
    case LLMRT_ERR_IO: return "I/O error";
    case LLMRT_ERR_FORMAT: return "malformed input";
    case LLMRT_ERR_UNSUPPORTED: return "unsupported";
    case LLMRT_ERR_NOT_FOUND: return "not found";
    case LLMRT_ERR_DEVICE: return "device error";
    case LLMRT_ERR_LIMIT: return "limit reached";
    case LLMRT_ERR_STATE: return "invalid state";
    case LLMRT_ERR_ABI: return "ABI mismatch";
    case LLMRT_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

#ifdef __cplusplus
}
#endif
#endif
