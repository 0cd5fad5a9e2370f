/* error.h — error discipline for the core: status + message threaded through `goto cleanup`.
 *
 * CHECK-style macros fill the caller-owned llmrt_error (plugin.h) and jump to cleanup, so
 * every function has one exit path that frees what it took. */
#ifndef LLMRT_CORE_ERROR_H
#define LLMRT_CORE_ERROR_H

#include <llmrt/plugin.h>

/* Fail with a message and jump to cleanup. Requires `llmrt_status st` and label `cleanup`. */
#define FAIL(err, code, ...)                                                                  \
    do {                                                                                      \
        st = llmrt_fail((err), (code), __VA_ARGS__);                                          \
        goto cleanup;                                                                         \
    } while (0)

/* Evaluate a call returning llmrt_status; on failure keep its message and jump to cleanup. */
#define TRY(call)                                                                             \
    do {                                                                                      \
        st = (call);                                                                          \
        if (st != LLMRT_OK)                                                                   \
            goto cleanup;                                                                     \
    } while (0)

/* An allocation that must not fail silently. */
#define TRY_ALLOC(err, ptr, what)                                                             \
    do {                                                                                      \
        if (!(ptr))                                                                           \
            FAIL((err), LLMRT_ERR_NOMEM, "out of memory allocating %s (%s:%d)", (what),       \
                 __FILE__, __LINE__);                                                         \
    } while (0)

/* Prefix an existing error message: "loading model: <old message>". */
void llmrt_error_prefix(llmrt_error *err, const char *fmt, ...) LLMRT_PRINTF(2, 3);

#endif
