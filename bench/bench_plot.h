/* bench_plot.h — --plot FILE.png|FILE.svg of `llmrt bench`, drawn with cairo.
 *
 * Panels: the ITL distribution of each config as a CDF (at the first concurrency level) and
 * stacked bars of the mean decode step — H2D, compute, D2H (device busy) and idle on top, so
 * a bar's height is the step's wall time — one bar per config (and per level in load mode).
 * In load mode two more panels show output tok/s and median ITL against concurrency.
 *
 * Why: the motivating measurement is a picture — same busy time, less idle — and a CDF shows
 * a shift and a tail at a glance where a table of percentiles does not. */
#ifndef LLMRT_BENCH_BENCH_PLOT_H
#define LLMRT_BENCH_BENCH_PLOT_H

#include "bench_summary.h"

/* The format follows the extension (.png or .svg, any case); anything else is an error. */
llmrt_status bench_plot_write(const bench_result *r, const char *path, llmrt_error *err);

#endif
