/* fileutil.h — reading whole files, the one way the core and the CLI do it.
 * Messages name the path: "PATH: cannot open: No such file or directory". */
#ifndef LLMRT_CORE_FILEUTIL_H
#define LLMRT_CORE_FILEUTIL_H

#include <stddef.h>

#include <llmrt/plugin.h>

/* Read all of `path` ("-" = standard input) into a NUL-terminated buffer (caller frees).
 * *len (may be NULL) gets the byte count. LLMRT_ERR_IO when it cannot. */
llmrt_status llmrt_read_file(const char *path, char **data, size_t *len, llmrt_error *err);

#endif
