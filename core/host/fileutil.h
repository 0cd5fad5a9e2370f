/* fileutil.h — opening and reading the files the core reads, the one way it does it.
 *
 * Why bounds: every file the core reads comes from outside (a model folder, a plugin folder,
 * an INI file, the command line). A FIFO blocks open() until some writer comes, /dev/zero
 * reads until memory runs out, a directory fails deep inside a parser. So a file must be a
 * regular file — checked on the opened descriptor, opened without blocking — and no larger
 * than its kind can sensibly be. Standard input ("-") is read with the same bound.
 * Messages name the path: "PATH: cannot open: No such file or directory",
 * "PATH: not a regular file (a FIFO)",
 * "PATH: 17.0 MiB is larger than the 16 MiB a config.json may be". */
#ifndef LLMRT_CORE_FILEUTIL_H
#define LLMRT_CORE_FILEUTIL_H

#include <stddef.h>
#include <stdint.h>

#include <llmrt/plugin.h>

/* Size limits by kind of file, each far above any real file of that kind. */
#define LLMRT_MAX_CONFIG_BYTES (16ull << 20)     /* config.json, generation_config.json,
                                                    tokenizer_config.json, chat_template.jinja */
#define LLMRT_MAX_INDEX_BYTES (64ull << 20)      /* model.safetensors.index.json */
#define LLMRT_MAX_TOKENIZER_BYTES (256ull << 20) /* tokenizer.json */
#define LLMRT_MAX_INPUT_BYTES (1ull << 30)       /* a file named on the command line */

/* Open `path` (flags: O_RDONLY, plus e.g. O_NOFOLLOW; O_NONBLOCK and O_CLOEXEC are added, so
 * a FIFO never blocks the open) and check on the descriptor that it is a regular file of at
 * most max_bytes (0: any size). On success *fd is open (blocking again; caller closes) and
 * *size (may be NULL) holds the file's size. `what` names the kind of file in the size
 * message ("config.json"). LLMRT_ERR_IO when it cannot open or it is not a regular file,
 * LLMRT_ERR_LIMIT when it is too large. */
llmrt_status llmrt_open_regular(const char *path, int flags, uint64_t max_bytes,
                                const char *what, int *fd, uint64_t *size, llmrt_error *err);

/* Read all of `path` — a regular file (see llmrt_open_regular), or standard input for "-" —
 * into a NUL-terminated buffer (caller frees); at most max_bytes (> 0), else LLMRT_ERR_LIMIT
 * naming `what`. *len (may be NULL) gets the byte count. */
llmrt_status llmrt_read_file_bounded(const char *path, size_t max_bytes, const char *what,
                                     char **data, size_t *len, llmrt_error *err);

/* A file the user named ("-" = standard input): llmrt_read_file_bounded with
 * LLMRT_MAX_INPUT_BYTES. */
llmrt_status llmrt_read_file(const char *path, char **data, size_t *len, llmrt_error *err);

/* 1 when something exists at `path`, whatever it is (lstat: never blocks; a dangling link
 * counts): for optional files, so that the reader says what is wrong with a FIFO or a broken
 * link there instead of the file being skipped. */
int llmrt_path_exists(const char *path);

#endif
