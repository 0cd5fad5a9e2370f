/* log.h — one log sink for the core and (through host services) every plugin.
 * Lines go to stderr, stdout stays for results. Each line carries a UTC timestamp:
 *   text: "2026-05-01T12:00:00.123Z llmrt: [info] who: message key=value ..."
 *   json: {"time": "...", "level": "info", "logger": "who", "message": "...", key: value ...}
 * (llmrt_log_set_format; `llmrt serve` takes it from server.log_format). */
#ifndef LLMRT_CORE_LOG_H
#define LLMRT_CORE_LOG_H

#include <stddef.h>
#include <stdint.h>

#include <llmrt/plugin.h>

typedef enum llmrt_log_format { LLMRT_LOG_TEXT = 0, LLMRT_LOG_JSON = 1 } llmrt_log_format;

void llmrt_log_set_level(llmrt_log_level level);
llmrt_log_level llmrt_log_get_level(void);
int llmrt_log_parse_level(const char *s, llmrt_log_level *out);
void llmrt_log_set_format(llmrt_log_format format);
llmrt_log_format llmrt_log_get_format(void);
void llmrt_log(llmrt_log_level level, const char *who, const char *fmt, ...) LLMRT_PRINTF(3, 4);
void llmrt_vlog(llmrt_log_level level, const char *who, const char *fmt, va_list ap);

/* A structured field of a log line: a string (str != NULL; NULL values are left out) or a
 * number (str == NULL). Text lines append them as key=value (strings with spaces quoted),
 * JSON lines as members. */
typedef struct llmrt_log_field {
    const char *key;
    const char *str;
    double num;
} llmrt_log_field;
void llmrt_log_fields(llmrt_log_level level, const char *who, const llmrt_log_field *fields,
                      size_t n, const char *fmt, ...) LLMRT_PRINTF(5, 6);

/* "2026-05-01T12:00:00.123Z" (UTC, milliseconds) into buf[n] (n >= 25); returns buf. */
char *llmrt_log_timestamp(char *buf, size_t n);

#define LOG_ERROR(...) llmrt_log(LLMRT_LOG_ERROR, "llmrt", __VA_ARGS__)
#define LOG_WARN(...) llmrt_log(LLMRT_LOG_WARN, "llmrt", __VA_ARGS__)
#define LOG_INFO(...) llmrt_log(LLMRT_LOG_INFO, "llmrt", __VA_ARGS__)
#define LOG_DEBUG(...) llmrt_log(LLMRT_LOG_DEBUG, "llmrt", __VA_ARGS__)

#endif
