/* bench_bw.c — a benchmark command (not a test): the machine's streaming-read bandwidth per
 * thread count, the floor a decode step on the CPU is measured against.
 *
 *   bench_cpu_bandwidth [max_threads] [MiB]
 *
 * For t = 1 .. max_threads (default: the cores this process may use) threads each read a
 * contiguous 1/t of one buffer (default 2048 MiB: larger than any last-level cache, so the
 * reads come from DRAM) with the widest loads the CPU has, summing the words so the loads
 * cannot be dropped; median of 9 passes after one warm-up. Threads are started once per
 * count and meet at a barrier before and after each pass; "GB/s" is bytes / (slowest
 * thread's pass). The buffer is written (faulted in) first by the threads that read it.
 * "cpu %" is the threads' CPU time over the passes / (t x their wall time): below ~95 the run
 * shared its cores with other work. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define BW_X86 1
#endif

#define PASSES 9

static double clock_s(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef uint64_t (*read_fn)(const char *p, size_t bytes);

static uint64_t read_scalar(const char *p, size_t bytes)
{
    const uint64_t *w = (const uint64_t *)p;
    uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (size_t i = 0; i + 4 <= bytes / 8; i += 4)
        s0 += w[i], s1 += w[i + 1], s2 += w[i + 2], s3 += w[i + 3];
    return s0 + s1 + s2 + s3;
}

#ifdef BW_X86
__attribute__((target("avx2"))) static uint64_t read_avx2(const char *p, size_t bytes)
{
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 128 <= bytes; i += 128) {
        a0 = _mm256_add_epi64(a0, _mm256_load_si256((const __m256i *)(p + i)));
        a1 = _mm256_add_epi64(a1, _mm256_load_si256((const __m256i *)(p + i + 32)));
        a2 = _mm256_add_epi64(a2, _mm256_load_si256((const __m256i *)(p + i + 64)));
        a3 = _mm256_add_epi64(a3, _mm256_load_si256((const __m256i *)(p + i + 96)));
    }
    __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
    uint64_t o[4];
    memcpy(o, &s, sizeof o);
    return o[0] + o[1] + o[2] + o[3];
}

__attribute__((target("avx512f"))) static uint64_t read_avx512(const char *p, size_t bytes)
{
    __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, a3 = a0;
    for (size_t i = 0; i + 256 <= bytes; i += 256) {
        a0 = _mm512_add_epi64(a0, _mm512_load_si512((const void *)(p + i)));
        a1 = _mm512_add_epi64(a1, _mm512_load_si512((const void *)(p + i + 64)));
        a2 = _mm512_add_epi64(a2, _mm512_load_si512((const void *)(p + i + 128)));
        a3 = _mm512_add_epi64(a3, _mm512_load_si512((const void *)(p + i + 192)));
    }
    return (uint64_t)_mm512_reduce_add_epi64(
        _mm512_add_epi64(_mm512_add_epi64(a0, a1), _mm512_add_epi64(a2, a3)));
}
#endif

typedef struct {
    pthread_barrier_t *bar;
    char *buf;
    size_t slice;
    read_fn fn;
    int id;
    double t[PASSES + 1];
    double cpu, wall; /* over the passes */
    uint64_t sink;
} worker;

static void *run(void *arg)
{
    worker *w = arg;
    char *p = w->buf + (size_t)w->id * w->slice;
    memset(p, w->id + 1, w->slice); /* first touch by the reader */
    double c0 = clock_s(CLOCK_THREAD_CPUTIME_ID), w0 = clock_s(CLOCK_MONOTONIC);
    for (int pass = 0; pass <= PASSES; pass++) {
        pthread_barrier_wait(w->bar);
        double t0 = clock_s(CLOCK_MONOTONIC);
        w->sink += w->fn(p, w->slice);
        w->t[pass] = clock_s(CLOCK_MONOTONIC) - t0;
        pthread_barrier_wait(w->bar);
    }
    w->cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - c0;
    w->wall = clock_s(CLOCK_MONOTONIC) - w0;
    return NULL;
}

static int usable_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    return 1;
}

int main(int argc, char **argv)
{
    int max_t = argc > 1 ? atoi(argv[1]) : 0;
    size_t mib = argc > 2 ? (size_t)atoll(argv[2]) : 2048;
    if (max_t <= 0)
        max_t = usable_cores();
    size_t bytes = mib << 20;
    read_fn fn = read_scalar;
    const char *isa = "scalar";
#ifdef BW_X86
    if (__builtin_cpu_supports("avx512f"))
        fn = read_avx512, isa = "avx512";
    else if (__builtin_cpu_supports("avx2"))
        fn = read_avx2, isa = "avx2";
#endif
    printf("streaming read: %zu MiB, %s loads, %d usable cores\n", mib, isa, usable_cores());
    printf("%7s %10s %10s %8s\n", "threads", "GB/s", "GB/s/thr", "cpu %");
    for (int t = 1; t <= max_t; t++) {
        char *buf = aligned_alloc(4096, bytes);
        if (!buf) {
            fprintf(stderr, "cannot allocate %zu MiB\n", mib);
            return 1;
        }
        size_t slice = (bytes / (size_t)t) & ~(size_t)4095;
        pthread_barrier_t bar;
        pthread_barrier_init(&bar, NULL, (unsigned)t);
        worker *w = calloc((size_t)t, sizeof *w);
        pthread_t *th = calloc((size_t)t, sizeof *th);
        for (int i = 0; i < t; i++) {
            w[i] = (worker){&bar, buf, slice, fn, i, {0}, 0, 0, 0};
            if (i > 0)
                pthread_create(&th[i], NULL, run, &w[i]);
        }
        run(&w[0]);
        for (int i = 1; i < t; i++)
            pthread_join(th[i], NULL);
        double cpu = 0, wall = 0;
        for (int i = 0; i < t; i++)
            cpu += w[i].cpu, wall += w[i].wall;
        double pass[PASSES];
        for (int k = 0; k < PASSES; k++) {
            pass[k] = 0;
            for (int i = 0; i < t; i++)
                if (w[i].t[k + 1] > pass[k])
                    pass[k] = w[i].t[k + 1];
        }
        qsort(pass, PASSES, sizeof pass[0], cmp_double);
        double gbs = (double)slice * t / pass[PASSES / 2] * 1e-9;
        uint64_t sink = 0;
        for (int i = 0; i < t; i++)
            sink += w[i].sink;
        printf("%7d %10.2f %10.2f %8.0f%s\n", t, gbs, gbs / t, 100.0 * cpu / wall,
               sink == 42 ? " " : "");
        pthread_barrier_destroy(&bar);
        free(w);
        free(th);
        free(buf);
    }
    return 0;
}
