/* cupti_trace.c — an LD_PRELOAD kernel tracer for the GPU machine, which has CUPTI but no
 * Nsight Systems: every kernel and memory copy (graph nodes included) is recorded with its GPU
 * start and end (copies named "memcpy HtoD 512 B", ...) and written at exit as CSV ("Start (ns)","Duration (ns)","Name") to $LLMRT_CUPTI_TRACE,
 * the format bench/step-timeline.py reads. A developer tool, not part of the runtime.
 *
 * Build: cc -O2 -shared -fPIC -I$CUDA/include cupti_trace.c -o libcupti_trace.so
 *        -L$CUDA/lib64 -lcupti   (CMake builds it as llmrt-cupti-trace with the CUDA backend)
 * Use:   LLMRT_CUPTI_TRACE=trace.csv LD_PRELOAD=.../libllmrt-cupti-trace.so llmrt generate ... */
#include <cupti.h>
#include <stdio.h>
#include <stdlib.h>

#define TRACE_BUF_BYTES (1u << 20)

static FILE *trace_out;

static void CUPTIAPI buffer_requested(uint8_t **buf, size_t *size, size_t *max_records)
{
    *buf = aligned_alloc(8, TRACE_BUF_BYTES);
    *size = *buf ? TRACE_BUF_BYTES : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buf, size_t size,
                                      size_t valid)
{
    (void)ctx, (void)stream, (void)size;
    CUpti_Activity *rec = NULL;
    while (trace_out && cuptiActivityGetNextRecord(buf, valid, &rec) == CUPTI_SUCCESS) {
        if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const CUpti_ActivityMemcpy6 *m = (const CUpti_ActivityMemcpy6 *)rec;
            const char *dir = m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_HTOD   ? "HtoD"
                              : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOH ? "DtoH"
                              : m->copyKind == CUPTI_ACTIVITY_MEMCPY_KIND_DTOD ? "DtoD"
                                                                               : "other";
            fprintf(trace_out, "%llu,%llu,\"memcpy %s %llu B\"\n", (unsigned long long)m->start,
                    (unsigned long long)(m->end - m->start), dir, (unsigned long long)m->bytes);
            continue;
        }
        if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL &&
            rec->kind != CUPTI_ACTIVITY_KIND_KERNEL)
            continue;
        const CUpti_ActivityKernel10 *k = (const CUpti_ActivityKernel10 *)rec;
        fprintf(trace_out, "%llu,%llu,\"%s\"\n", (unsigned long long)k->start,
                (unsigned long long)(k->end - k->start), k->name ? k->name : "?");
    }
    free(buf);
}

__attribute__((constructor)) static void trace_start(void)
{
    const char *path = getenv("LLMRT_CUPTI_TRACE");
    if (!path || !*path)
        return;
    trace_out = fopen(path, "w");
    if (!trace_out) {
        perror(path);
        return;
    }
    fprintf(trace_out, "\"Start (ns)\",\"Duration (ns)\",\"Name\"\n");
    if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) != CUPTI_SUCCESS ||
        cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) != CUPTI_SUCCESS) {
        fprintf(stderr, "cupti_trace: could not enable kernel activity tracing\n");
        fclose(trace_out);
        trace_out = NULL;
        return;
    }
    cuptiActivityFlushPeriod(50);
}

__attribute__((destructor)) static void trace_stop(void)
{
    if (!trace_out)
        return;
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    fclose(trace_out);
    trace_out = NULL;
}
