/* cpu_simd.c — which kernel path the CPU backend runs: feature detection, the names of
 * [backend.cpu] simd, and what each name needs from the CPU.
 *
 * Why: the same binary runs on every x86-64 (no -march), so every vector kernel is compiled
 * for its instruction set with a target attribute and picked here at run time. The paths:
 *
 *   baseline  exact: the reference arithmetic (f32, one fixed order of operations) with the
 *             vectors every x86-64 has (SSE2; NEON on arm64): the bits the others are checked
 *             against.
 *   exact     exact: the same bits as baseline, with the widest vectors this CPU has (AVX-512
 *             or AVX2 clones of the same arithmetic). The reference the CUDA kernels and the
 *             numerical tests compare with.
 *   avx2      fast: AVX2 + FMA + F16C. AWQ runs int8 dot products (activations quantized per
 *             32 inputs) on vpmaddubsw; prefill-sized dense GEMMs run FMA register tiles
 *             (cpu_gemm_fma.c, also on avx512 and amx).
 *   avx512    fast: AVX-512 F/BW/VL/VNNI (AWQ's int8 dot products on vpdpbusd).
 *   amx       fast: avx512, and the prefill GEMMs of bf16 weights on AMX-BF16 tiles (x rounded
 *             to bf16).
 *   auto      the fastest path of this CPU: amx > avx512 > avx2 > baseline.
 *
 * The fast paths are within documented bounds of the exact one (cpu_gemm.c, quant-awq's
 * awq_cpu.c); which rows share a call may then change a row's last bits. The exact paths give
 * the same bits whatever the thread count, batch or CPU. */
#include "cpu_internal.h"

#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define CPU_X86 1
#endif

static const char *const names[] = {
    [CPU_SIMD_BASELINE] = "baseline", [CPU_SIMD_EXACT] = "exact", [CPU_SIMD_AVX2] = "avx2",
    [CPU_SIMD_AVX512] = "avx512",     [CPU_SIMD_AMX] = "amx",
};

const char *cpu_simd_name(cpu_simd s)
{
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "baseline";
}

#ifdef CPU_X86
/* AMX tile data is off by default for a Linux process: ask for it (once per process; the
 * answer does not change). */
static int amx_permitted(void)
{
#define ARCH_GET_XCOMP_PERM 0x1022
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18
    unsigned long bits = 0;
    if (syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &bits) == 0 &&
        (bits & (1ul << XFEATURE_XTILEDATA)))
        return 1;
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}
#endif

/* The widest exact ISA and the best fast path this CPU (and build) supports. */
static void detect(cpu_isa *isa, cpu_simd *best)
{
    *isa = CPU_ISA_BASE;
    *best = CPU_SIMD_BASELINE;
#ifdef CPU_X86
    unsigned a, b, c, d;
    /* the builtins also check that the OS saves the ymm / zmm registers */
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
    int avx512 = avx2 && __builtin_cpu_supports("avx512f") &&
                 __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl");
    int vnni = avx512 && __builtin_cpu_supports("avx512vnni");
    if (avx2)
        *isa = CPU_ISA_AVX2, *best = CPU_SIMD_AVX2;
    if (avx512)
        *isa = CPU_ISA_AVX512;
    if (vnni)
        *best = CPU_SIMD_AVX512;
    /* AMX-TILE (CPUID.7.0:EDX bit 24) and AMX-BF16 (bit 22), and the OS grants tile data */
    if (vnni && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 24)) &&
        (d & (1u << 22)) && amx_permitted())
        *best = CPU_SIMD_AMX;
#endif
}

cpu_isa cpu_isa_detect(void)
{
    cpu_isa isa;
    cpu_simd best;
    detect(&isa, &best);
    return isa;
}

cpu_simd cpu_simd_detect(void)
{
    cpu_isa isa;
    cpu_simd best;
    detect(&isa, &best);
    return best;
}

int cpu_has_avx512bf16(void)
{
#ifdef CPU_X86
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bf16");
#else
    return 0;
#endif
}

cpu_isa cpu_simd_isa(cpu_simd s)
{
    switch (s) {
    case CPU_SIMD_BASELINE: return CPU_ISA_BASE;
    case CPU_SIMD_AVX2: return CPU_ISA_AVX2;
    case CPU_SIMD_AVX512:
    case CPU_SIMD_AMX: return CPU_ISA_AVX512;
    default: return cpu_isa_detect();
    }
}

int cpu_simd_parse(const char *val, cpu_simd *out, const char **why)
{
    cpu_simd best = cpu_simd_detect();
    *why = NULL;
    if (strcmp(val, "auto") == 0) {
        *out = best;
        return 0;
    }
    for (int s = 0; s < (int)(sizeof names / sizeof names[0]); s++) {
        if (strcmp(val, names[s]) != 0)
            continue;
        /* the fast paths are ordered: a CPU with one has every one below it */
        if (s >= CPU_SIMD_AVX2 && s > (int)best) {
            *why = s == CPU_SIMD_AVX2     ? "this CPU has no AVX2 + FMA + F16C"
                   : s == CPU_SIMD_AVX512 ? "this CPU has no AVX-512 F/BW/VL/VNNI"
                                          : "this CPU has no AMX-BF16 (or the OS refuses tile data)";
            return -2;
        }
        *out = (cpu_simd)s;
        return 0;
    }
    *why = "expected auto, amx, avx512, avx2, exact or baseline";
    return -1;
}
