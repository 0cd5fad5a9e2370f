/* safetensors.h — the safetensors checkpoint reader (single file or sharded via
 * model.safetensors.index.json), exposed to plugins as an llmrt_checkpoint.
 *
 * Why: checkpoints are untrusted input. Every file is mmapped and its header validated in
 * full before any tensor is used: header length against file size, JSON, dtypes, shape x
 * dtype size = span, spans inside the data area and not overlapping. Every failure names
 * the file and tensor and what was wrong. */
#ifndef LLMRT_CORE_SAFETENSORS_H
#define LLMRT_CORE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include <llmrt/checkpoint.h>

typedef struct llmrt_st_file llmrt_st_file;   /* one mmapped, validated .safetensors file */
typedef struct llmrt_st_model llmrt_st_model; /* a model folder: all shards + config.json */

/* Parse and validate a safetensors header held in memory (`data`, `size` bytes: the whole
 * file). `name` is used in messages. On success *out_n tensors are described in *out
 * (caller frees with llmrt_st_views_free). Used by the reader and the fuzz target. */
llmrt_status llmrt_st_parse(const char *name, const uint8_t *data, size_t size,
                            llmrt_tensor_view **out, size_t *out_n, llmrt_error *err);
void llmrt_st_views_free(llmrt_tensor_view *views, size_t n);

llmrt_status llmrt_st_file_open(const char *path, llmrt_st_file **out, llmrt_error *err);
void llmrt_st_file_close(llmrt_st_file *f);
size_t llmrt_st_file_count(const llmrt_st_file *f);
const llmrt_tensor_view *llmrt_st_file_at(const llmrt_st_file *f, size_t i);
const llmrt_tensor_view *llmrt_st_file_find(const llmrt_st_file *f, const char *name);

/* Open a model folder: config.json (kept as text), then model.safetensors.index.json and its
 * shards, or every *.safetensors file. A tensor name present in two files is an error.
 * show_progress: 1 = progress bar on a terminal (plain lines otherwise) while plugins load
 * tensors through the accessor; 0 = silent. */
llmrt_status llmrt_st_model_open(const char *dir, int show_progress, llmrt_st_model **out,
                                 llmrt_error *err);
void llmrt_st_model_close(llmrt_st_model *m);
/* The accessor handed to model/quant plugins; valid until close. Its find() always returns
 * data aligned to the element size: tensors that are misaligned in the file (an unpadded
 * header) are copied once to the heap. llmrt_st_file_at/find give the raw mapping. */
const llmrt_checkpoint *llmrt_st_model_checkpoint(llmrt_st_model *m);
/* Finish the progress display (prints the final line with totals). */
void llmrt_st_model_progress_done(llmrt_st_model *m);
uint64_t llmrt_st_model_total_bytes(const llmrt_st_model *m);
/* The files of the model, in the order they were opened (index order, or name order). */
size_t llmrt_st_model_file_count(const llmrt_st_model *m);
const llmrt_st_file *llmrt_st_model_file(const llmrt_st_model *m, size_t i);

/* ---- writing (mkmodel, tests) ---- */
typedef struct llmrt_st_writer llmrt_st_writer;
/* Declare all tensors first (name, dtype, shape), then write each one's bytes in order. */
llmrt_status llmrt_st_writer_open(const char *path, llmrt_st_writer **out, llmrt_error *err);
llmrt_status llmrt_st_writer_add(llmrt_st_writer *w, const char *name, llmrt_dtype dtype,
                                 int32_t ndim, const int64_t *shape, llmrt_error *err);
/* Writes the header; afterwards write every tensor's bytes in declaration order. The data is
 * one byte stream: a tensor may be written in several calls, or several tensors in one;
 * close checks that exactly the declared number of bytes arrived. */
llmrt_status llmrt_st_writer_begin_data(llmrt_st_writer *w, llmrt_error *err);
llmrt_status llmrt_st_writer_write(llmrt_st_writer *w, const void *data, size_t bytes,
                                   llmrt_error *err);
llmrt_status llmrt_st_writer_close(llmrt_st_writer *w, llmrt_error *err);

#endif
