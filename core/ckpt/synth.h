/* synth.h — `llmrt mkmodel`: a synthetic checkpoint from a model plugin's preset (or a
 * config.json), optionally quantized by a quant plugin, written by the host (synth_writer.h).
 *
 * Why here: choosing the plugins (the model plugin that has the preset, or whose probe takes
 * the config.json; the quant plugin by name) and handing them the host's writer is the same
 * for every model; what goes into the checkpoint is the plugins' (llmrt/synth.h). */
#ifndef LLMRT_CORE_SYNTH_H
#define LLMRT_CORE_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include <llmrt/synth.h>

#include "runtime.h"
#include "synth_writer.h"

typedef struct llmrt_synth_opts {
    const char *preset;      /* a preset name (`llmrt mkmodel --list-presets`), or NULL */
    const char *config_path; /* or: a config.json to take the shapes from */
    const char *model;       /* model plugin name, NULL or "auto": the one with the preset, or
                                the one whose probe takes the config.json */
    const char *quant;       /* quant plugin name, or NULL / "none" for a dense checkpoint */
    const char *const *quant_opts; /* [n_quant_opts] "key=value" (e.g. group_size=32) */
    int n_quant_opts;
    const char *const *model_opts; /* [n_model_opts] "key=value" */
    int n_model_opts;
    llmrt_dtype dtype;       /* INVALID: the plugins' choice */
    int tie;                 /* -1: as the preset / config says */
    int tied_lm_head;
    uint64_t seed;
    llmrt_synth_write_opts write;
} llmrt_synth_opts;

void llmrt_synth_opts_init(llmrt_synth_opts *o);

/* Describe and write the checkpoint into dir. Errors name the preset, plugin, option or
 * shape that was wrong. */
llmrt_status llmrt_synth_run(llmrt_runtime *rt, const char *dir, const llmrt_synth_opts *o,
                             llmrt_synth_result *res, llmrt_error *err);

/* Every model plugin's presets, one per line: "  NAME  (PLUGIN) DESCRIPTION". */
void llmrt_synth_preset_list(const llmrt_registry *reg, char *buf, size_t n);

#endif
