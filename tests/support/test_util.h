/* test_util.h — small helpers shared by unit tests: temp folders, files, running the llmrt
 * binary and capturing its output, loading a plugin .so by path. */
#ifndef LLMRT_TEST_UTIL_H
#define LLMRT_TEST_UTIL_H

#include <stddef.h>

#include <llmrt/plugin.h>

/* A fresh folder under $TMPDIR (or /tmp); caller frees the string. */
char *tu_mkdtemp(void);
/* Recursively remove a folder. */
void tu_rmtree(const char *dir);
/* Write text to dir/name; returns the full path (caller frees). */
char *tu_write_file(const char *dir, const char *name, const char *text);
/* Make a FIFO dir/name, or a symbolic link dir/name -> target; return the full path (caller
 * frees). A test that opens a FIFO should also set an alarm (tu_guard) so that a reader which
 * blocks fails the test instead of hanging it. */
char *tu_mkfifo(const char *dir, const char *name);
char *tu_symlink(const char *dir, const char *name, const char *target);
/* Kill the test process (SIGALRM) if it runs `seconds` longer; 0 cancels. Works with and
 * without Check's fork mode. */
void tu_guard(unsigned seconds);
/* Make dir/name a file of `bytes` bytes (sparse: costs no disk); returns the path. */
char *tu_sized_file(const char *dir, const char *name, long long bytes);
/* Run a shell command; captures stdout+stderr (caller frees *out); returns exit status. */
int tu_run(const char *cmd, char **out);
/* Environment variable or abort the test with a message. */
const char *tu_env(const char *name);
/* dlopen a plugin .so and return its descriptor `index` (NULL on failure). */
const llmrt_plugin_desc *tu_load_plugin(const char *path, unsigned index);
/* Path of a built plugin: $LLMRT_PLUGIN_DIR/<file> (caller frees). */
char *tu_plugin_path(const char *file);

/* Run a Check suite with the default (forking) runner; returns the exit status (0 = all
 * passed). */
typedef struct Suite Suite;
int tu_run_suite(Suite *s);

#endif
