/* log.h — one log sink for the core and (through host services) every plugin.
 * Lines go to stderr as "llmrt: [level] who: message"; stdout stays for results. */
#ifndef LLMRT_CORE_LOG_H
#define LLMRT_CORE_LOG_H

#include <llmrt/plugin.h>

void llmrt_log_set_level(llmrt_log_level level);
llmrt_log_level llmrt_log_get_level(void);
int llmrt_log_parse_level(const char *s, llmrt_log_level *out);
void llmrt_log(llmrt_log_level level, const char *who, const char *fmt, ...) LLMRT_PRINTF(3, 4);
void llmrt_vlog(llmrt_log_level level, const char *who, const char *fmt, va_list ap);

#define LOG_ERROR(...) llmrt_log(LLMRT_LOG_ERROR, "llmrt", __VA_ARGS__)
#define LOG_WARN(...) llmrt_log(LLMRT_LOG_WARN, "llmrt", __VA_ARGS__)
#define LOG_INFO(...) llmrt_log(LLMRT_LOG_INFO, "llmrt", __VA_ARGS__)
#define LOG_DEBUG(...) llmrt_log(LLMRT_LOG_DEBUG, "llmrt", __VA_ARGS__)

#endif
