/* cuda_stream.c — the backend's single stream: copies, synchronization, timing events and
 * CUDA graph capture/replay.
 *
 * Why: everything the engine enqueues (copies, ops, events) goes on one stream, so stream
 * order is program order and a decode step can be captured whole as a graph and replayed
 * with one launch; an event recorded during a capture becomes a node of the graph, so a
 * replayed step is still timed piece by piece. Copies are cudaMemcpyAsync, except small ones between device and
 * page-locked host memory, which a kernel does (cuda_copy.cu: no copy-engine hand-off in the
 * step); from page-locked memory they are truly asynchronous (and capturable); from pageable
 * memory the driver stages them (and a capture refuses them — memory plugins keep those
 * outside graphs). */
#include "cuda_backend.h"

#include <stdlib.h>

struct llmrt_event {
    cudaEvent_t ev;
};

struct llmrt_graph {
    cudaGraph_t graph;
    cudaGraphExec_t exec;
};

llmrt_status cuda_copy(llmrt_backend *b, void *dst, const void *src, size_t bytes,
                       llmrt_copy_kind kind, llmrt_error *err)
{
    if (bytes == 0)
        return LLMRT_OK;
    enum cudaMemcpyKind k;
    const char *what;
    switch (kind) {
    case LLMRT_COPY_H2D: k = cudaMemcpyHostToDevice, what = "cudaMemcpyAsync(host to device)"; break;
    case LLMRT_COPY_D2H: k = cudaMemcpyDeviceToHost, what = "cudaMemcpyAsync(device to host)"; break;
    case LLMRT_COPY_D2D: k = cudaMemcpyDeviceToDevice, what = "cudaMemcpyAsync(device to device)"; break;
    default:
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "cuda backend: copy kind %d is not one of "
                          "H2D (1), D2H (2), D2D (3)", (int)kind);
    }
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    if (cuda_copy_by_kernel(b, dst, src, bytes, kind, err, &st))
        return st;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, k, b->stream);
    if (e != cudaSuccess) {
        cudaGetLastError();
        if (b->capturing && kind != LLMRT_COPY_D2D)
            return llmrt_fail(err, LLMRT_ERR_STATE,
                              "cuda backend: %s of %zu bytes during graph capture: %s (copies "
                              "from pageable host memory cannot be captured; keep them outside "
                              "the graph or use page-locked memory)",
                              what, bytes, cudaGetErrorString(e));
        return cuda_fail(err, LLMRT_ERR_DEVICE, e, what);
    }
    return LLMRT_OK;
}

llmrt_status cuda_synchronize(llmrt_backend *b, llmrt_error *err)
{
    if (b->capturing)
        return llmrt_fail(err, LLMRT_ERR_STATE,
                          "cuda backend: synchronize during graph capture (end the capture "
                          "first)");
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    cudaError_t e = cudaStreamSynchronize(b->stream);
    if (e != cudaSuccess)
        return cuda_fail(err, LLMRT_ERR_DEVICE, e, "cudaStreamSynchronize (an earlier kernel or "
                         "copy on the stream failed)");
    return LLMRT_OK;
}

/* ---- events ---- */

llmrt_status cuda_event_create(llmrt_backend *b, llmrt_event **out, llmrt_error *err)
{
    *out = NULL;
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    llmrt_event *ev = calloc(1, sizeof *ev);
    if (!ev)
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "cuda backend: out of memory");
    /* default flags: timing enabled, blocking sync off (a spin wait is the lowest latency) */
    cudaError_t e = cudaEventCreate(&ev->ev);
    if (e != cudaSuccess) {
        free(ev);
        return cuda_fail(err, LLMRT_ERR_DEVICE, e, "cudaEventCreate");
    }
    *out = ev;
    return LLMRT_OK;
}

void cuda_event_destroy(llmrt_backend *b, llmrt_event *e)
{
    if (!e)
        return;
    cudaSetDevice(b->device);
    cudaEventDestroy(e->ev);
    cudaGetLastError();
    free(e);
}

llmrt_status cuda_event_record(llmrt_backend *b, llmrt_event *e, llmrt_error *err)
{
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    /* During a capture: an event-record node (External), recorded at that point each time
     * the graph is launched (CAP_GRAPH_EVENTS); a plain record there would only order the
     * capture and never record anything at replay. */
    cudaError_t ce = b->capturing ? cudaEventRecordWithFlags(e->ev, b->stream, cudaEventRecordExternal)
                                  : cudaEventRecord(e->ev, b->stream);
    if (ce != cudaSuccess)
        return cuda_fail(err, LLMRT_ERR_DEVICE, ce,
                         b->capturing ? "cudaEventRecordWithFlags(External) during a capture"
                                      : "cudaEventRecord");
    return LLMRT_OK;
}

/* copy_side: fork from `stream` at this point (a plain record: inside a capture it makes the
 * copy stream join the capture), copy, record `done` on the copy stream; event_wait joins it
 * back. Plain records, not External ones: they order, they are not timed. */
llmrt_status cuda_copy_side(llmrt_backend *b, void *dst, const void *src, size_t bytes,
                            llmrt_event *done, llmrt_error *err)
{
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    cudaError_t ce;
    if ((ce = cudaEventRecord(b->fork_ev, b->stream)) != cudaSuccess ||
        (ce = cudaStreamWaitEvent(b->copy_stream, b->fork_ev, 0)) != cudaSuccess ||
        (ce = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, b->copy_stream)) !=
            cudaSuccess ||
        (ce = cudaEventRecord(done->ev, b->copy_stream)) != cudaSuccess)
        return cuda_fail(err, LLMRT_ERR_DEVICE, ce, "copy_side (weight prefetch)");
    return LLMRT_OK;
}

llmrt_status cuda_event_wait(llmrt_backend *b, llmrt_event *e, llmrt_error *err)
{
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    cudaError_t ce = cudaStreamWaitEvent(b->stream, e->ev, 0);
    if (ce != cudaSuccess)
        return cuda_fail(err, LLMRT_ERR_DEVICE, ce, "cudaStreamWaitEvent");
    return LLMRT_OK;
}

llmrt_status cuda_event_sync(llmrt_backend *b, llmrt_event *e, llmrt_error *err)
{
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    cudaError_t ce = cudaEventSynchronize(e->ev);
    if (ce != cudaSuccess)
        return cuda_fail(err, LLMRT_ERR_DEVICE, ce, "cudaEventSynchronize");
    return LLMRT_OK;
}

llmrt_status cuda_event_elapsed_ms(llmrt_backend *b, llmrt_event *start, llmrt_event *end,
                                   float *ms, llmrt_error *err)
{
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    cudaError_t ce = cudaEventElapsedTime(ms, start->ev, end->ev);
    if (ce != cudaSuccess) {
        cudaGetLastError();
        return cuda_fail(err, ce == cudaErrorNotReady ? LLMRT_ERR_STATE : LLMRT_ERR_DEVICE, ce,
                         "cudaEventElapsedTime (both events must be recorded and complete)");
    }
    return LLMRT_OK;
}

/* ---- graphs ---- */

llmrt_status cuda_graph_begin(llmrt_backend *b, llmrt_error *err)
{
    if (b->capturing)
        return llmrt_fail(err, LLMRT_ERR_STATE,
                          "cuda backend: graph_begin while a capture is already open");
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    /* Relaxed: other threads (and this one) may still call cudaMalloc & co. during the
     * capture; the captured work is only what is enqueued on b->stream. */
    cudaError_t e = cudaStreamBeginCapture(b->stream, cudaStreamCaptureModeRelaxed);
    if (e != cudaSuccess)
        return cuda_fail(err, LLMRT_ERR_DEVICE, e, "cudaStreamBeginCapture");
    b->capturing = 1;
    return LLMRT_OK;
}

llmrt_status cuda_graph_end(llmrt_backend *b, llmrt_graph **out, llmrt_error *err)
{
    *out = NULL;
    if (!b->capturing)
        return llmrt_fail(err, LLMRT_ERR_STATE, "cuda backend: graph_end without graph_begin");
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    b->capturing = 0;
    cudaGraph_t g = NULL;
    cudaError_t e = cudaStreamEndCapture(b->stream, &g);
    if (e != cudaSuccess) {
        cudaGetLastError();
        if (g)
            cudaGraphDestroy(g);
        return cuda_fail(err, LLMRT_ERR_DEVICE, e,
                         "cudaStreamEndCapture (an operation during the capture was not "
                         "capturable, e.g. a synchronous call or a pageable copy)");
    }
    llmrt_graph *lg = calloc(1, sizeof *lg);
    if (!lg) {
        cudaGraphDestroy(g);
        return llmrt_fail(err, LLMRT_ERR_NOMEM, "cuda backend: out of memory");
    }
    lg->graph = g;
    e = cudaGraphInstantiate(&lg->exec, g, 0);
    if (e != cudaSuccess) {
        cudaGetLastError();
        cudaGraphDestroy(g);
        free(lg);
        return cuda_fail(err, LLMRT_ERR_DEVICE, e, "cudaGraphInstantiate");
    }
    *out = lg;
    return LLMRT_OK;
}

llmrt_status cuda_graph_launch(llmrt_backend *b, llmrt_graph *g, llmrt_error *err)
{
    if (b->capturing)
        return llmrt_fail(err, LLMRT_ERR_STATE,
                          "cuda backend: graph_launch during a capture is not supported");
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    cudaError_t e = cudaGraphLaunch(g->exec, b->stream);
    if (e != cudaSuccess)
        return cuda_fail(err, LLMRT_ERR_DEVICE, e, "cudaGraphLaunch");
    return LLMRT_OK;
}

void cuda_graph_destroy(llmrt_backend *b, llmrt_graph *g)
{
    if (!g)
        return;
    cudaSetDevice(b->device);
    if (g->exec)
        cudaGraphExecDestroy(g->exec);
    if (g->graph)
        cudaGraphDestroy(g->graph);
    cudaGetLastError();
    free(g);
}
