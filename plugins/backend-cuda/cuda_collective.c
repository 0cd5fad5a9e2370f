/* cuda_collective.c — the "llmrt.collective" extension (ext/collective.h) on CUDA, through
 * NCCL: one process, one thread per GPU, the communicators of all ranks created at once by
 * ncclCommInitAll at load, every collective enqueued on its rank's backend stream (so it
 * orders with the rank's ops and is captured into a CUDA graph like any of them).
 *
 * Why NCCL: it is the engine for collectives between the GPUs of a host (NVLink, PCIe P2P,
 * through the host when neither); writing our own would be slower and wrong on some
 * topologies. NVLink multicast (NVLS) stays off (NCCL_NVLS_ENABLE=0 unless the user set it):
 * it can take a host's GPUs out of service. Built only when the toolkit ships NCCL
 * (LLMRT_CUDA_HAVE_NCCL); otherwise the backend offers no collectives and
 * runtime.tensor_parallel > 1 is refused by name. */
#include "cuda_backend.h"

#include <llmrt/ext/collective.h>

#include <stdio.h>
#include <stdlib.h>

#ifdef LLMRT_CUDA_HAVE_NCCL
#include <nccl.h>

#define CUDA_TP_MAX 16

static llmrt_status nccl_fail(llmrt_error *err, ncclResult_t r, const char *what)
{
    return llmrt_fail(err, LLMRT_ERR_DEVICE, "cuda backend: %s: %s", what, ncclGetErrorString(r));
}

static llmrt_status grp_init(llmrt_backend *const *ranks, int32_t n, llmrt_error *err)
{
    if (!ranks || n < 2 || n > CUDA_TP_MAX)
        return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                          "cuda collective: a group takes 2..%d ranks (got %d)", CUDA_TP_MAX,
                          (int)n);
    int devs[CUDA_TP_MAX];
    int visible = 0;
    cudaGetDeviceCount(&visible);
    for (int32_t r = 0; r < n; r++) {
        if (!ranks[r] || ranks[r]->nccl_comm)
            return llmrt_fail(err, LLMRT_ERR_INVALID_ARG, "cuda collective: rank %d is %s",
                              (int)r, ranks[r] ? "already in a group" : "NULL");
        devs[r] = ranks[r]->device;
        for (int32_t q = 0; q < r; q++)
            if (devs[q] == devs[r])
                return llmrt_fail(err, LLMRT_ERR_INVALID_ARG,
                                  "cuda collective: ranks %d and %d are both on device %d (each "
                                  "rank needs its own GPU: %d visible; set backend.cuda.device "
                                  "so that device + tensor_parallel - 1 exists)",
                                  (int)q, (int)r, devs[r], visible);
    }
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    ncclComm_t comms[CUDA_TP_MAX];
    ncclResult_t res = ncclCommInitAll(comms, n, devs);
    if (res != ncclSuccess)
        return nccl_fail(err, res, "ncclCommInitAll");
    for (int32_t r = 0; r < n; r++) {
        ranks[r]->nccl_comm = comms[r];
        ranks[r]->tp_rank = r;
        ranks[r]->tp_size = n;
    }
    return LLMRT_OK;
}

static void grp_free(llmrt_backend *const *ranks, int32_t n)
{
    for (int32_t r = 0; ranks && r < n; r++) {
        if (!ranks[r] || !ranks[r]->nccl_comm)
            continue;
        cudaSetDevice(ranks[r]->device);
        ncclCommDestroy((ncclComm_t)ranks[r]->nccl_comm);
        ranks[r]->nccl_comm = NULL;
        ranks[r]->tp_rank = 0, ranks[r]->tp_size = 1;
    }
}

static void grp_rank(llmrt_backend *b, int32_t *rank, int32_t *size)
{
    *rank = b->nccl_comm ? b->tp_rank : 0;
    *size = b->nccl_comm ? b->tp_size : 1;
}

static llmrt_status all_reduce_sum(llmrt_backend *b, float *x, int64_t n, llmrt_error *err)
{
    if (!b->nccl_comm || n == 0)
        return LLMRT_OK;
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    ncclResult_t r = ncclAllReduce(x, x, (size_t)n, ncclFloat, ncclSum,
                                   (ncclComm_t)b->nccl_comm, b->stream);
    return r == ncclSuccess ? LLMRT_OK : nccl_fail(err, r, "ncclAllReduce");
}

static llmrt_status broadcast(llmrt_backend *b, void *buf, size_t bytes, llmrt_error *err)
{
    if (!b->nccl_comm || bytes == 0)
        return LLMRT_OK;
    llmrt_status st = cuda_use(b, err);
    if (st)
        return st;
    ncclResult_t r = ncclBroadcast(buf, buf, bytes, ncclUint8, 0, (ncclComm_t)b->nccl_comm,
                                   b->stream);
    return r == ncclSuccess ? LLMRT_OK : nccl_fail(err, r, "ncclBroadcast");
}

static llmrt_status attach_thread(llmrt_backend *b, llmrt_error *err) { return cuda_use(b, err); }

/* Each pair of visible GPUs: peer access (cudaDeviceCanAccessPeer) and CUDA's P2P performance
 * rank (0 is the fastest link the driver knows: NVLink where there is one; NVML is not asked). */
static void describe_links(llmrt_backend *b, char *buf, size_t n)
{
    int count = 0;
    size_t k = 0;
    buf[0] = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 2) {
        snprintf(buf, n, "%d GPU%s visible: tensor parallel needs 2 or more", count,
                 count == 1 ? "" : "s");
        return;
    }
    for (int i = 0; i < count && k < n; i++)
        for (int j = i + 1; j < count && k < n; j++) {
            int peer = 0, rank = -1, atomics = 0;
            cudaDeviceCanAccessPeer(&peer, i, j);
            if (peer) {
                cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank, i, j);
                cudaDeviceGetP2PAttribute(&atomics, cudaDevP2PAttrNativeAtomicSupported, i, j);
            }
            k += (size_t)snprintf(buf + k, n - k, "%sGPU %d <-> %d: %s", k ? "; " : "", i, j,
                                  peer ? "P2P" : "no P2P (through host memory)");
            if (peer && k < n)
                k += (size_t)snprintf(buf + k, n - k, " (performance rank %d%s)", rank,
                                      atomics ? ", native atomics: NVLink-class" : ", PCIe-class");
        }
    (void)b;
}

static const llmrt_collective_ops collective_ops = {
    .struct_size = sizeof(llmrt_collective_ops),
    .group_init = grp_init,
    .group_free = grp_free,
    .rank = grp_rank,
    .all_reduce_sum = all_reduce_sum,
    .broadcast = broadcast,
    .attach_thread = attach_thread,
    .describe_links = describe_links,
};

const struct llmrt_collective_ops *const cuda_collective_ext = &collective_ops;
#else
const struct llmrt_collective_ops *const cuda_collective_ext = NULL;
#endif
