/* step_buffers.c — see step_buffers.h. */
#include "step_buffers.h"

#include <string.h>

#include "error.h"

static size_t align16(size_t x) { return (x + 15) & ~(size_t)15; }

void llmrt_step_layout_make(llmrt_step_layout *l, int32_t n_tokens, int32_t n_seqs,
                            int32_t bt_width)
{
    size_t t = (size_t)n_tokens, s = (size_t)n_seqs, off = 0;
    l->n_tokens = n_tokens, l->n_seqs = n_seqs, l->bt_width = bt_width;
    l->token_ids = off, off = align16(off + t * 4);
    l->positions = off, off = align16(off + t * 4);
    l->slot_mapping = off, off = align16(off + t * 4);
    l->query_start = off, off = align16(off + (s + 1) * 4);
    l->seq_lens = off, off = align16(off + s * 4);
    l->logits_rows = off, off = align16(off + s * 4);
    l->sample_params = off, off = align16(off + s * sizeof(llmrt_sample_params));
    l->block_tables = off, off = align16(off + s * (size_t)bt_width * 4);
    l->bytes = off;
}

llmrt_status llmrt_step_buffers_init(llmrt_step_buffers *sb, const llmrt_backend_ref *be,
                                     const llmrt_memory_ref *mem, int32_t max_tokens,
                                     int32_t max_seqs, int32_t max_bt_width, int32_t vocab,
                                     llmrt_error *err)
{
    llmrt_status st = LLMRT_OK;
    memset(sb, 0, sizeof *sb);
    sb->be = *be;
    sb->mem = *mem;
    sb->max_tokens = max_tokens, sb->max_seqs = max_seqs;
    sb->max_bt_width = max_bt_width, sb->vocab = vocab;
    llmrt_step_layout l;
    llmrt_step_layout_make(&l, max_tokens, max_seqs, max_bt_width);
    st = mem->vt->buffer_alloc(mem->m, l.bytes, LLMRT_MEM_TO_DEVICE, &sb->in, err);
    if (st) {
        llmrt_error_prefix(err, "allocating %zu bytes of step inputs", l.bytes);
        goto cleanup;
    }
    st = mem->vt->buffer_alloc(mem->m, (size_t)max_seqs * 4, LLMRT_MEM_TO_HOST, &sb->out, err);
    if (st) {
        llmrt_error_prefix(err, "allocating step outputs");
        goto cleanup;
    }
    size_t logits_bytes = (size_t)max_seqs * (size_t)vocab * sizeof(float);
    st = be->vt->dev_alloc(be->b, logits_bytes, (void **)&sb->logits, err);
    if (st) {
        llmrt_error_prefix(err, "allocating %zu bytes of logits on the device", logits_bytes);
        goto cleanup;
    }
    if (!(be->vt->caps(be->b) & LLMRT_BACKEND_CAP_HOST_IS_DEVICE)) {
        sb->staging_rows = max_seqs < 16 ? max_seqs : 16;
        size_t bytes = (size_t)sb->staging_rows * (size_t)vocab * sizeof(float);
        st = mem->vt->buffer_alloc(mem->m, bytes, LLMRT_MEM_TO_HOST, &sb->staging, err);
        if (st) {
            llmrt_error_prefix(err, "allocating %zu bytes of host logits", bytes);
            goto cleanup;
        }
    }
    sb->mem_caps = mem->vt->caps(mem->m);
cleanup:
    if (st)
        llmrt_step_buffers_free(sb);
    return st;
}

void llmrt_step_buffers_free(llmrt_step_buffers *sb)
{
    if (sb->mem.vt) {
        if (sb->in.bytes)
            sb->mem.vt->buffer_free(sb->mem.m, &sb->in);
        if (sb->out.bytes)
            sb->mem.vt->buffer_free(sb->mem.m, &sb->out);
        if (sb->staging.bytes)
            sb->mem.vt->buffer_free(sb->mem.m, &sb->staging);
    }
    if (sb->logits && sb->be.vt)
        sb->be.vt->dev_free(sb->be.b, sb->logits);
    memset(sb, 0, sizeof *sb);
}
