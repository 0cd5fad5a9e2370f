/* bench_plot.c — cairo drawing of the bench plot (see bench_plot.h). The same drawing code
 * serves PNG (image surface) and SVG (vector surface). Axes use "nice" 1-2-5 ticks. */
#include "bench_plot.h"

#include <cairo-svg.h>
#include <cairo.h>
#include <fontconfig/fontconfig.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "stats.h"

/* Config line colors (colour-blind friendly, Okabe–Ito) and step segment colors. */
static const double cfg_rgb[][3] = {{0.00, 0.45, 0.70}, {0.84, 0.37, 0.00}, {0.00, 0.62, 0.45},
                                    {0.80, 0.47, 0.65}, {0.94, 0.89, 0.26}, {0.34, 0.71, 0.91},
                                    {0.90, 0.62, 0.00}, {0.30, 0.30, 0.30}};
#define N_CFG_RGB (sizeof cfg_rgb / sizeof cfg_rgb[0])
static const char *const seg_name[] = {"H2D", "compute", "D2H", "idle"};
static const double seg_rgb[][3] = { /* neutral busy shades; idle, the enemy, stands out */
    {0.66, 0.72, 0.80}, {0.40, 0.45, 0.53}, {0.55, 0.60, 0.68}, {0.93, 0.45, 0.40}};

static void set_cfg_color(cairo_t *cr, int c)
{
    const double *k = cfg_rgb[(size_t)c % N_CFG_RGB];
    cairo_set_source_rgb(cr, k[0], k[1], k[2]);
}

/* A plotting area: pixel box and data range; xlog: log2 x axis. */
typedef struct panel {
    double x, y, w, h;
    double x0, x1, y0, y1;
    int xlog;
} panel;

static double tx(const panel *p, double v)
{
    double a = p->xlog ? log2(v) : v, b0 = p->xlog ? log2(p->x0) : p->x0,
           b1 = p->xlog ? log2(p->x1) : p->x1;
    return p->x + (b1 > b0 ? (a - b0) / (b1 - b0) : 0.5) * p->w;
}

static double ty(const panel *p, double v)
{
    return p->y + p->h - (p->y1 > p->y0 ? (v - p->y0) / (p->y1 - p->y0) : 0.5) * p->h;
}

static double nice_step(double range, int target)
{
    double raw = range / target, mag = pow(10, floor(log10(raw))), f = raw / mag;
    return (f < 1.5 ? 1 : f < 3 ? 2 : f < 7 ? 5 : 10) * mag;
}

static void text(cairo_t *cr, double x, double y, const char *s, double align_x, double align_y)
{
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    cairo_move_to(cr, x - align_x * e.width - e.x_bearing, y - align_y * e.height - e.y_bearing);
    cairo_show_text(cr, s);
}

static void fmt_tick(char *b, size_t n, double v, double step)
{
    if (step >= 1 || v == 0)
        snprintf(b, n, "%.0f", v);
    else
        snprintf(b, n, "%.*f", (int)ceil(-log10(step)), v);
}

/* Frame, title, axis labels, y ticks; x ticks: numeric (xt == NULL, n_xt == 0), at the
 * given values (xt), or none for a categorical axis (n_xt < 0). */
static void axes(cairo_t *cr, const panel *p, const char *title, const char *xlabel,
                 const char *ylabel, const double *xt, int n_xt)
{
    char b[32];
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, p->x, p->y, p->w, p->h);
    cairo_stroke(cr);
    cairo_set_font_size(cr, 15);
    text(cr, p->x + p->w / 2, p->y - 14, title, 0.5, 1);
    cairo_set_font_size(cr, 12);
    if (xlabel)
        text(cr, p->x + p->w / 2, p->y + p->h + (n_xt < 0 ? 72 : 38), xlabel, 0.5, 0);
    cairo_save(cr);
    cairo_translate(cr, p->x - 52, p->y + p->h / 2);
    cairo_rotate(cr, -M_PI / 2);
    text(cr, 0, 0, ylabel, 0.5, 0.5);
    cairo_restore(cr);
    cairo_set_font_size(cr, 11);
    double ys = nice_step(p->y1 - p->y0, 5);
    for (double v = ceil(p->y0 / ys) * ys; v <= p->y1 + ys * 1e-9; v += ys) {
        double y = ty(p, v);
        cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
        cairo_move_to(cr, p->x, y);
        cairo_line_to(cr, p->x + p->w, y);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        fmt_tick(b, sizeof b, v, ys);
        text(cr, p->x - 6, y, b, 1, 0.5);
    }
    if (xt) {
        for (int i = 0; i < n_xt; i++) {
            snprintf(b, sizeof b, "%g", xt[i]);
            text(cr, tx(p, xt[i]), p->y + p->h + 8, b, 0.5, 0);
        }
    } else if (n_xt == 0) {
        double xs = nice_step(p->x1 - p->x0, 6);
        for (double v = ceil(p->x0 / xs) * xs; v <= p->x1 + xs * 1e-9; v += xs) {
            double x = tx(p, v);
            cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
            cairo_move_to(cr, x, p->y);
            cairo_line_to(cr, x, p->y + p->h);
            cairo_stroke(cr);
            cairo_set_source_rgb(cr, 0, 0, 0);
            fmt_tick(b, sizeof b, v, xs);
            text(cr, x, p->y + p->h + 8, b, 0.5, 0);
        }
    }
}

enum { TOP_LEFT, TOP_RIGHT, BOTTOM_RIGHT };

/* Legend box inside the panel at `where`: a color swatch and a label per entry. */
static void legend(cairo_t *cr, const panel *p, const char *const *labels, int n,
                   const double (*rgb)[3], int line_swatch, int where)
{
    cairo_set_font_size(cr, 11);
    double wmax = 0;
    for (int i = 0; i < n; i++) {
        cairo_text_extents_t e;
        cairo_text_extents(cr, labels[i], &e);
        if (e.x_advance > wmax)
            wmax = e.x_advance;
    }
    double bw = wmax + 40, bh = 18.0 * n + 8;
    double x = where == TOP_LEFT ? p->x + 8 : p->x + p->w - bw - 8;
    double y = where == BOTTOM_RIGHT ? p->y + p->h - bh - 8 : p->y + 8;
    cairo_set_source_rgba(cr, 1, 1, 1, 0.9);
    cairo_rectangle(cr, x, y, bw, bh);
    cairo_fill_preserve(cr);
    cairo_set_source_rgb(cr, 0.6, 0.6, 0.6);
    cairo_stroke(cr);
    for (int i = 0; i < n; i++) {
        double ly = y + 13 + 18.0 * i;
        cairo_set_source_rgb(cr, rgb[i % N_CFG_RGB][0], rgb[i % N_CFG_RGB][1],
                             rgb[i % N_CFG_RGB][2]);
        if (line_swatch) {
            cairo_set_line_width(cr, 2.5);
            cairo_move_to(cr, x + 6, ly);
            cairo_line_to(cr, x + 28, ly);
            cairo_stroke(cr);
        } else {
            cairo_rectangle(cr, x + 8, ly - 6, 18, 12);
            cairo_fill(cr);
        }
        cairo_set_source_rgb(cr, 0, 0, 0);
        text(cr, x + 34, ly, labels[i], 0, 0.5);
    }
}

/* ITL CDF of every config at level l. */
static llmrt_status cdf_panel(cairo_t *cr, const bench_result *r, int l, panel p,
                              llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    const char *names[BENCH_MAX_CONFIGS];
    double *sorted = NULL;
    p.x0 = INFINITY;
    p.x1 = -INFINITY;
    for (int c = 0; c < r->n_configs; c++) {
        const bench_cell *k = bench_cell_at(r, l, c);
        names[c] = r->configs[c].name;
        if (k->itl_ms.n == 0)
            continue;
        p.x0 = fmin(p.x0, k->itl_ms.min);
        p.x1 = fmax(p.x1, k->itl_ms.p99);
    }
    if (!(p.x1 >= p.x0)) { /* no ITL anywhere (output_len 1) */
        p.x0 = 0;
        p.x1 = 1;
    }
    double pad = (p.x1 - p.x0) * 0.05 + 1e-6;
    p.x0 = fmax(0, p.x0 - pad);
    p.x1 += pad;
    p.y0 = 0;
    p.y1 = 1;
    char title[96];
    snprintf(title, sizeof title, "ITL distribution (CDF), concurrency %d", r->settings->levels[l]);
    axes(cr, &p, title, "inter-token latency (ms); x axis ends past the largest p99", "fraction of tokens", NULL, 0);
    cairo_save(cr);
    cairo_rectangle(cr, p.x, p.y, p.w, p.h);
    cairo_clip(cr);
    for (int c = 0; c < r->n_configs; c++) {
        const bench_cell *k = bench_cell_at(r, l, c);
        size_t n = k->itl_ms.n;
        if (n == 0)
            continue;
        sorted = malloc(n * sizeof *sorted);
        TRY_ALLOC(err, sorted, "plot data");
        memcpy(sorted, k->itl, n * sizeof *sorted);
        llmrt_stats_sort(sorted, n);
        set_cfg_color(cr, c);
        cairo_set_line_width(cr, 2);
        cairo_move_to(cr, tx(&p, sorted[0]), ty(&p, 0));
        for (size_t i = 0; i < n; i++) {
            cairo_line_to(cr, tx(&p, sorted[i]), ty(&p, (double)i / (double)n));
            cairo_line_to(cr, tx(&p, sorted[i]), ty(&p, (double)(i + 1) / (double)n));
        }
        cairo_line_to(cr, p.x + p.w + 5, ty(&p, 1));
        cairo_stroke(cr);
        free(sorted);
        sorted = NULL;
    }
    cairo_restore(cr);
    legend(cr, &p, names, r->n_configs, cfg_rgb, 1, TOP_RIGHT);
cleanup:
    free(sorted);
    return st;
}

/* Stacked mean decode step per config (per level in load mode). */
static void bars_panel(cairo_t *cr, const bench_result *r, panel p)
{
    int nl = r->settings->n_levels, nc = r->n_configs;
    double top = 0;
    for (int l = 0; l < nl; l++)
        for (int c = 0; c < nc; c++) {
            const bench_step_summary *s = &bench_cell_at(r, l, c)->steps;
            double h = (isnan(s->h2d_ms.mean) ? 0 : s->h2d_ms.mean) +
                       (isnan(s->compute_ms.mean) ? 0 : s->compute_ms.mean) +
                       (isnan(s->d2h_ms.mean) ? 0 : s->d2h_ms.mean) +
                       (isnan(s->idle_ms.mean) ? 0 : s->idle_ms.mean);
            top = fmax(top, fmax(h, isnan(s->wall_ms.mean) ? 0 : s->wall_ms.mean));
        }
    p.x0 = 0;
    p.x1 = 1;
    p.y0 = 0;
    p.y1 = top > 0 ? top * 1.4 : 1; /* headroom for the legend */
    axes(cr, &p, "mean decode step: device busy (H2D, compute, D2H) + idle",
         NULL, "milliseconds per step", NULL, -1);
    double group_w = p.w / nl, bar_w = fmin(60, group_w * 0.8 / nc);
    cairo_set_font_size(cr, 11);
    int rotate = 0; /* slant the names when one is wider than its bar */
    for (int c = 0; c < nc; c++) {
        cairo_text_extents_t e;
        cairo_text_extents(cr, r->configs[c].name, &e);
        rotate |= e.x_advance > bar_w;
    }
    for (int l = 0; l < nl; l++) {
        double gx = p.x + group_w * l + (group_w - bar_w * nc) / 2;
        for (int c = 0; c < nc; c++) {
            const bench_step_summary *s = &bench_cell_at(r, l, c)->steps;
            double seg[4] = {s->h2d_ms.mean, s->compute_ms.mean, s->d2h_ms.mean, s->idle_ms.mean};
            double x = gx + bar_w * c + 2, w = bar_w - 4, base = 0;
            for (int k = 0; k < 4; k++) {
                double v = isnan(seg[k]) ? 0 : seg[k];
                cairo_set_source_rgb(cr, seg_rgb[k][0], seg_rgb[k][1], seg_rgb[k][2]);
                cairo_rectangle(cr, x, ty(&p, base + v), w, ty(&p, base) - ty(&p, base + v));
                cairo_fill(cr);
                base += v;
            }
            set_cfg_color(cr, c); /* outline in the config's color ties bars to the CDF */
            cairo_set_line_width(cr, 2);
            cairo_rectangle(cr, x, ty(&p, base), w, ty(&p, 0) - ty(&p, base));
            cairo_stroke(cr);
            cairo_set_source_rgb(cr, 0, 0, 0);
            char b[32];
            snprintf(b, sizeof b, "%.2f", base);
            text(cr, x + w / 2, ty(&p, base) - 3, b, 0.5, 1);
            cairo_save(cr);
            cairo_translate(cr, x + w / 2, p.y + p.h + 6);
            if (rotate)
                cairo_rotate(cr, M_PI / 6);
            text(cr, 0, 0, r->configs[c].name, rotate ? 0 : 0.5, 0);
            cairo_restore(cr);
        }
        if (nl > 1) {
            char b[32];
            snprintf(b, sizeof b, "c=%d", r->settings->levels[l]);
            text(cr, p.x + group_w * (l + 0.5), p.y + p.h + 50, b, 0.5, 0);
        }
    }
    legend(cr, &p, seg_name, 4, seg_rgb, 0, TOP_LEFT);
}

/* A metric against concurrency, one line per config (load mode). */
static void level_panel(cairo_t *cr, const bench_result *r, panel p, int itl)
{
    int nl = r->settings->n_levels, nc = r->n_configs;
    const char *names[BENCH_MAX_CONFIGS];
    double xt[32], top = 0;
    for (int l = 0; l < nl; l++)
        xt[l] = r->settings->levels[l];
    for (int l = 0; l < nl; l++)
        for (int c = 0; c < nc; c++) {
            const bench_cell *k = bench_cell_at(r, l, c);
            double v = itl ? k->itl_ms.p50 : k->output_tok_s;
            if (isfinite(v))
                top = fmax(top, v);
        }
    for (int c = 0; c < nc; c++)
        names[c] = r->configs[c].name;
    p.xlog = 1;
    p.x0 = xt[0] / 1.3;
    p.x1 = xt[nl - 1] * 1.3;
    p.y0 = 0;
    p.y1 = top > 0 ? top * 1.15 : 1;
    axes(cr, &p, itl ? "median ITL against load" : "output throughput against load",
         "concurrent requests", itl ? "median ITL (ms)" : "output tokens per second", xt, nl);
    for (int c = 0; c < nc; c++) {
        set_cfg_color(cr, c);
        cairo_set_line_width(cr, 2);
        int started = 0;
        for (int l = 0; l < nl; l++) {
            const bench_cell *k = bench_cell_at(r, l, c);
            double v = itl ? k->itl_ms.p50 : k->output_tok_s;
            if (!isfinite(v))
                continue;
            if (started)
                cairo_line_to(cr, tx(&p, xt[l]), ty(&p, v));
            else
                cairo_move_to(cr, tx(&p, xt[l]), ty(&p, v));
            started = 1;
        }
        cairo_stroke(cr);
        for (int l = 0; l < nl; l++) {
            const bench_cell *k = bench_cell_at(r, l, c);
            double v = itl ? k->itl_ms.p50 : k->output_tok_s;
            if (!isfinite(v))
                continue;
            cairo_arc(cr, tx(&p, xt[l]), ty(&p, v), 3.5, 0, 2 * M_PI);
            cairo_fill(cr);
        }
    }
    legend(cr, &p, names, nc, cfg_rgb, 1, itl ? BOTTOM_RIGHT : TOP_LEFT);
}

static void draw_caption(cairo_t *cr, const bench_result *r, double w)
{
    const bench_settings *s = r->settings;
    char b[512];
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_font_size(cr, 16);
    snprintf(b, sizeof b, "llmrt bench: %s on %s (%s)", r->configs[0].stats.model_arch,
             r->configs[0].stats.device, r->configs[0].stats.backend);
    text(cr, w / 2, 14, b, 0.5, 0);
    cairo_set_font_size(cr, 11);
    snprintf(b, sizeof b,
             "%s mode, prompt %d, output %d tokens, %d round%s x %d %s per config, order %s; "
             "commit %s, %s",
             s->load_mode ? "load" : "latency", s->input_len, s->output_len, s->rounds,
             s->rounds == 1 ? "" : "s", s->requests, s->load_mode ? "batches" : "requests", s->order == BENCH_ORDER_ABAB ? "abab" : "random", r->env.commit,
             r->env.date_utc);
    text(cr, w / 2, 36, b, 0.5, 0);
}

static llmrt_status draw(cairo_t *cr, const bench_result *r, double w, double h,
                         llmrt_error *err)
{
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    draw_caption(cr, r, w);
    double pw = (w - 3 * 90) / 2, ph = r->settings->load_mode ? (h - 80 - 2 * 110) / 2 : h - 80 - 120;
    panel a = {90, 100, pw, ph, 0, 0, 0, 0, 0}, b = {90 * 2 + pw, 100, pw, ph, 0, 0, 0, 0, 0};
    llmrt_status st = cdf_panel(cr, r, 0, a, err);
    if (st != LLMRT_OK)
        return st;
    bars_panel(cr, r, b);
    if (r->settings->load_mode) {
        panel c = {90, 100 + ph + 110, pw, ph, 0, 0, 0, 0, 0};
        panel d = {90 * 2 + pw, 100 + ph + 110, pw, ph, 0, 0, 0, 0, 0};
        level_panel(cr, r, c, 0);
        level_panel(cr, r, d, 1);
    }
    return LLMRT_OK;
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcasecmp(s + n - m, suffix) == 0;
}

llmrt_status bench_plot_write(const bench_result *r, const char *path, llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    int png = ends_with(path, ".png"), svg = ends_with(path, ".svg");
    if (!png && !svg)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "--plot %s: unknown format (the file name must end in .png or .svg)",
                          path);
    double w = 1400, h = r->settings->load_mode ? 1000 : 560;
    cairo_surface_t *surf = png ? cairo_image_surface_create(CAIRO_FORMAT_RGB24, (int)w, (int)h)
                                : cairo_svg_surface_create(path, w, h);
    cairo_t *cr = cairo_create(surf);
    if (cairo_status(cr) != CAIRO_STATUS_SUCCESS)
        FAIL(err, LLMRT_ERR_IO, "--plot %s: cannot create the drawing: %s", path,
             cairo_status_to_string(cairo_status(cr)));
    TRY(draw(cr, r, w, h, err));
    if (cairo_status(cr) != CAIRO_STATUS_SUCCESS)
        FAIL(err, LLMRT_ERR_INTERNAL, "--plot %s: drawing failed: %s", path,
             cairo_status_to_string(cairo_status(cr)));
    cairo_surface_flush(surf);
    if (png) {
        cairo_status_t cs = cairo_surface_write_to_png(surf, path);
        if (cs != CAIRO_STATUS_SUCCESS)
            FAIL(err, LLMRT_ERR_IO, "--plot %s: cannot write the PNG: %s", path,
                 cairo_status_to_string(cs));
    }
cleanup:
    cairo_destroy(cr);
    cairo_surface_finish(surf);
    if (st == LLMRT_OK && cairo_surface_status(surf) != CAIRO_STATUS_SUCCESS)
        st = llmrt_fail(err, LLMRT_ERR_IO, "--plot %s: cannot write the file: %s", path,
                        cairo_status_to_string(cairo_surface_status(surf)));
    cairo_surface_destroy(surf);
    /* The toy font API loads fontconfig's caches; release them (and cairo's) so the process
     * exits clean under LeakSanitizer. Nothing else in llmrt uses cairo or fontconfig. */
    cairo_debug_reset_static_data();
    FcFini();
    return st;
}
