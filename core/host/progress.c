/* progress.c — see progress.h. Byte figures use decimal units (1 MB = 10^6 bytes, like
 * disk and network speeds), so "MB/s" compares directly with dd or fio output. */
#include "progress.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"

#define REDRAW_INTERVAL_S 0.1
#define BAR_WIDTH 24


int llmrt_progress_is_tty(FILE *out)
{
    const char *term = getenv("TERM");
    if (term && strcmp(term, "dumb") == 0)
        return 0;
    return isatty(fileno(out));
}

void llmrt_progress_init(llmrt_progress *p, FILE *out, int tty, const char *label,
                         const char *unit, uint64_t total_bytes, uint64_t total_items)
{
    memset(p, 0, sizeof *p);
    p->out = out;
    p->tty = tty;
    p->label = label;
    p->unit = unit;
    p->total_bytes = total_bytes;
    p->total_items = total_items;
    p->t0 = llmrt_now_s();
    p->last_draw = -1.0;
    p->quiet_s = 0.5;
    pthread_mutex_init(&p->lock, NULL);
}

/* "812.3 MB" below 1 GB, "5.50 GB" above; same unit for done and total so they compare. */
static void fmt_bytes_pair(char *buf, size_t n, uint64_t done, uint64_t total)
{
    if (total >= 1000000000ull || done >= 1000000000ull)
        snprintf(buf, n, "%.2f/%.2f GB", (double)done / 1e9, (double)total / 1e9);
    else
        snprintf(buf, n, "%.1f/%.1f MB", (double)done / 1e6, (double)total / 1e6);
}

static double rate_mb_s(const llmrt_progress *p, double now)
{
    double dt = now - p->t0;
    return dt > 0 ? (double)p->done_bytes / 1e6 / dt : 0.0;
}

/* Fraction done in [0, 1]: by bytes when the byte total is known, else by items; -1 when
 * neither total is known. */
static double fraction(const llmrt_progress *p)
{
    double f;
    if (p->total_bytes)
        f = (double)p->done_bytes / (double)p->total_bytes;
    else if (p->total_items)
        f = (double)p->done_items / (double)p->total_items;
    else
        return -1.0;
    return f > 1.0 ? 1.0 : f;
}

static void draw_tty(llmrt_progress *p, double now)
{
    char bytes[64], bar[BAR_WIDTH + 1];
    double f = fraction(p);
    int filled = f < 0 ? 0 : (int)(f * BAR_WIDTH + 0.5);
    for (int i = 0; i < BAR_WIDTH; i++)
        bar[i] = i < filled ? '#' : '-';
    bar[BAR_WIDTH] = 0;
    fmt_bytes_pair(bytes, sizeof bytes, p->done_bytes, p->total_bytes);
    fprintf(p->out, "\r%s [%s] %3d%%  %s  %llu/%llu %s  %.0f MB/s\033[K", p->label, bar,
            f < 0 ? 0 : (int)(f * 100.0), bytes, (unsigned long long)p->done_items,
            (unsigned long long)p->total_items, p->unit, rate_mb_s(p, now));
    fflush(p->out);
    p->drawn = 1;
    p->last_draw = now;
}

/* A plain line: on stderr while the log writes JSON, it is a log line of its own (one JSON
 * object, like every other line there). */
static void plain_line(llmrt_progress *p, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void plain_line(llmrt_progress *p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (!p->tty && p->out == stderr && llmrt_log_get_format() == LLMRT_LOG_JSON)
        llmrt_vlog(LLMRT_LOG_INFO, "progress", fmt, ap);
    else
        vfprintf(p->out, fmt, ap);
    va_end(ap);
    fflush(p->out);
}

static void draw_plain(llmrt_progress *p, double now)
{
    double f = fraction(p);
    if (f < 0)
        return;
    int tenth = (int)(f * 10.0);
    if (tenth <= p->last_tenth || tenth >= 10) /* 100% is the final line's job */
        return;
    if (now - p->t0 < p->quiet_s)
        return;
    p->last_tenth = tenth;
    char bytes[64];
    fmt_bytes_pair(bytes, sizeof bytes, p->done_bytes, p->total_bytes);
    plain_line(p, "%s: %d%% (%s, %llu/%llu %s, %.0f MB/s)\n", p->label, tenth * 10, bytes,
               (unsigned long long)p->done_items, (unsigned long long)p->total_items, p->unit,
               rate_mb_s(p, now));
}

void llmrt_progress_add(llmrt_progress *p, uint64_t bytes, uint64_t items)
{
    pthread_mutex_lock(&p->lock);
    p->done_bytes += bytes;
    p->done_items += items;
    if (!p->finished) {
        double now = llmrt_now_s();
        if (!p->tty)
            draw_plain(p, now);
        else if (p->last_draw < 0 || now - p->last_draw >= REDRAW_INTERVAL_S)
            draw_tty(p, now);
    }
    pthread_mutex_unlock(&p->lock);
}

void llmrt_progress_done(llmrt_progress *p)
{
    pthread_mutex_lock(&p->lock);
    if (!p->finished) {
        double now = llmrt_now_s();
        char bytes[32];
        if (p->done_bytes >= 1000000000ull)
            snprintf(bytes, sizeof bytes, "%.2f GB", (double)p->done_bytes / 1e9);
        else
            snprintf(bytes, sizeof bytes, "%.1f MB", (double)p->done_bytes / 1e6);
        plain_line(p, "%s%s: done: %s, %llu %s in %.2f s (%.0f MB/s)\n",
                   p->drawn ? "\r\033[K" : "", p->label, bytes,
                   (unsigned long long)p->done_items, p->unit, now - p->t0, rate_mb_s(p, now));
        p->finished = 1;
    }
    pthread_mutex_unlock(&p->lock);
}

void llmrt_progress_free(llmrt_progress *p)
{
    pthread_mutex_destroy(&p->lock);
}
