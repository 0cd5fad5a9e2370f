#!/usr/bin/env python3
"""step-timeline.py — where one decode step's time goes (batch 1, or a batch), from a kernel trace.

Why: llmrt-cuda-bench times each kernel back to back; inside the step's chain a kernel's start
overlaps its predecessor's tail (programmatic dependent launch) and waits on it, so the
in-situ numbers differ. This reads a kernel trace CSV ("Start (ns)", "Duration (ns)", "Name":
what bench/cupti_trace.c writes, or `nsys stats -r cuda_gpu_trace -f csv` of a run made with
`nsys profile --cuda-graph-trace=node`) and, over the last STEPS decode steps (a step ends with
its argmax/sample kernel or argmax_head's finish), prints per kernel kind: launches per step, mean duration, and the
step time it accounts for (end of the kernel minus end of the kernel before it, so the rows add
up to the step time: a kernel that finishes inside its predecessor's shadow costs nothing).

usage: step-timeline.py trace.csv [STEPS] [--kernels]
  --kernels  then per kernel (the demangled name, template arguments kept): launches per step
             and the median duration — with a trace taken under [backend.cuda] pdl = off, each
             kernel's own time, where the kind table's shares are the chain's
"""
import csv
import re
import subprocess
import sys
from collections import OrderedDict

AWQ_ROLES = ["awq qkv", "awq o_proj", "awq gate_up", "awq down"]


def kind(name):
    n = name.lower()
    if "fp8_gemv" in n:  # the template arguments (NT, KW, W8A8, GLU) tell linears apart
        m = re.search(r"<([^>]*)>", name)
        args = m.group(1).replace(" ", "") if m else ",".join(re.findall(r"L[ib](\d+)E", name))
        if args:
            return "fp8 gemv <%s>" % args
    for key, label in (("ah_screen", "argmax_head screen"), ("ah_select", "argmax_head select"),
                       ("ah_finish", "argmax_head finish"), ("ah_norms", "argmax_head norms"),
                       ("ah_lower", "argmax_head lower bounds"),
                       ("awq_mma_reduce", "awq split-K reduce"), ("awq_mma", "awq"),
                       ("awq_gemv", "awq"), ("awq_cuda_gr", "awq grouped (experts)"),
                       ("moe_cuda", "moe (routing, combine)"),
                       ("fp8_gemv", "fp8 gemv"), ("fp8_", "fp8 (gemm, activation quantize)"),
                       ("attn_decode_batch", "attention (batch)"),
                       ("attn_prefill_mma", "attention prefill (mma)"),
                       ("pfm_merge", "attention prefill (merge)"), ("attn_", "attention"),
                       ("add_rmsnorm", "add_rmsnorm"), ("qk_norm", "qk_norm_rope_store"),
                       ("swiglu", "swiglu"), ("gemv", "lm_head gemv"), ("argmax", "argmax"),
                       ("sample", "sample"), ("embedding", "embedding"), ("rmsnorm", "rmsnorm"),
                       ("cast_kernel", "gemm cast"), ("gemm", "lm_head gemm (cuBLAS)"),
                       ("cutlass", "lm_head gemm (cuBLAS)")):
        if key in n:
            return label
    if n.startswith("memcpy"):  # cupti_trace.c: "memcpy HtoD 512 B" -> "memcpy HtoD"
        return " ".join(name.split()[:2])
    return name[:40]


def read_trace(path):
    """The trace's kernels (memsets left out) as (start ns, end ns, name), by start."""
    with open(path, newline="") as f:
        lines = f.read().splitlines()
    head = next(i for i, l in enumerate(lines) if "Start" in l and "Duration" in l and "Name" in l)
    rows = list(csv.DictReader(lines[head:]))
    col_start = next(c for c in rows[0] if c.startswith("Start"))
    col_dur = next(c for c in rows[0] if c.startswith("Duration"))
    ks = []
    for r in rows:
        name = r.get("Name", "")
        if not name or "memset" in name.lower():
            continue
        s = int(float(r[col_start]))
        ks.append((s, s + int(float(r[col_dur])), name))
    ks.sort()
    return ks


def main():
    args = [a for a in sys.argv[1:] if a != "--kernels"]
    by_kernel = len(args) < len(sys.argv) - 1
    path = args[0]
    steps_wanted = int(args[1]) if len(args) > 1 else 8
    ks = read_trace(path)
    ends = [i for i, k in enumerate(ks)
            if kind(k[2]) in ("argmax", "sample", "argmax_head finish")]
    if len(ends) < 3:
        sys.exit("step-timeline: fewer than 3 decode steps in %s" % path)
    ends = ends[-(steps_wanted + 1):]
    per = OrderedDict()
    walls = []
    for a, b in zip(ends, ends[1:]):
        walls.append((ks[b][1] - ks[a][1]) / 1e3)
        prev_end = ks[a][1]
        awq_i = 0
        for s, e, name in ks[a + 1:b + 1]:
            k = kind(name)
            if k == "awq":
                k = AWQ_ROLES[awq_i % 4]
                awq_i += 1
            d = per.setdefault(k, [0, 0.0, 0.0])
            d[0] += 1
            d[1] += (e - s) / 1e3
            d[2] += max(0, e - prev_end) / 1e3
            prev_end = max(prev_end, e)
    n = len(walls)
    walls.sort()
    print("decode steps: %d, step time p50 %.1f us (min %.1f, max %.1f)"
          % (n, walls[n // 2], walls[0], walls[-1]))
    print("%-22s %9s %12s %14s %14s" % ("kernel", "per step", "mean us", "busy us/step",
                                        "step us share"))
    tot_busy = tot_share = 0.0
    for k, (cnt, dur, share) in sorted(per.items(), key=lambda kv: -kv[1][2]):
        print("%-22s %9.0f %12.2f %14.1f %14.1f" % (k, cnt / n, dur / cnt, dur / n, share / n))
        tot_busy += dur / n
        tot_share += share / n
    print("%-22s %9s %12s %14.1f %14.1f" % ("total", "", "", tot_busy, tot_share))
    if by_kernel:
        print_kernels(ks[ends[0] + 1:ends[-1] + 1], n)


def print_kernels(ks, n):
    """Per kernel of the steps' launches ks: launches per step, median and total duration."""
    durs = OrderedDict()
    for s, e, name in ks:
        durs.setdefault(name, []).append((e - s) / 1e3)
    names = list(durs)
    try:
        out = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True,
                             text=True, check=True).stdout.split("\n")
    except (OSError, subprocess.CalledProcessError):
        out = names
    print("%-64s %7s %10s %10s" % ("kernel", "/step", "median us", "us/step"))
    for name, shown in sorted(zip(names, out), key=lambda p: -sum(durs[p[0]])):
        v = sorted(durs[name])
        shown = re.sub(r"\(.*", "", shown.replace("(anonymous namespace)::", ""))
        print("%-64.64s %7.1f %10.2f %10.1f" % (shown, len(v) / n, v[len(v) // 2], sum(v) / n))


if __name__ == "__main__":
    main()
