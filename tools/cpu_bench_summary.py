#!/usr/bin/env python3
"""cpu_bench_summary.py — the table of a tools/cpu-bench.sh run: per model and tool, the
median over rounds of decode and prefill tokens per second, and llmrt / llama.cpp.

    tools/cpu_bench_summary.py OUT_DIR

llmrt (llmrt bench --json): decode = 1000 / median wall_ms of its decode steps, prefill = 128
prompt tokens / median gpu_busy_ms of its prefill steps (a prefill step's wall_ms counts from
the previous step's end, so it includes the gap between requests, when the other config ran),
for each config (greedy_head auto, off).
llama.cpp (llama-bench -o json): avg_ts of tg64 (decode) and of pp128 (prefill)."""
import glob
import json
import os
import statistics
import sys


def llmrt_figures(path):
    d = json.load(open(path))
    res = {}
    for c in d["configs"]:
        name = c["name"]
        steps = [s for s in d["samples"]["steps"] if s["config"] == name]
        dec = [s["wall_ms"] for s in steps if s["n_prefill_tokens"] == 0]
        pre = [s["gpu_busy_ms"] / s["n_prefill_tokens"] for s in steps if s["n_prefill_tokens"] > 0]
        res[name] = (1000.0 / statistics.median(dec), 1000.0 / statistics.median(pre), c["device"])
    return res, d["environment"]


def llama_figures(path):
    rows = json.load(open(path))
    dec = [r["avg_ts"] for r in rows if r["n_gen"] > 0 and r["n_prompt"] == 0]
    pre = [r["avg_ts"] for r in rows if r["n_prompt"] > 0 and r["n_gen"] == 0]
    return dec[0], pre[0], rows[0]


def main():
    out = sys.argv[1]
    L = {}  # (model, config) -> [(decode, prefill)]
    env = device = None
    for f in sorted(glob.glob(os.path.join(out, "llmrt-*-r*.json"))):
        model = os.path.basename(f)[len("llmrt-"):].rsplit("-r", 1)[0]
        figs, env = llmrt_figures(f)
        for name, (dec, pre, dev) in figs.items():
            L.setdefault((model, name.split("-head-")[-1]), []).append((dec, pre))
            device = dev
    P = {}
    info = None
    for f in sorted(glob.glob(os.path.join(out, "llama-*-r*.json"))):
        model = os.path.basename(f)[len("llama-"):].rsplit("-r", 1)[0]
        dec, pre, info = llama_figures(f)
        P.setdefault(model, []).append((dec, pre))
    med = lambda xs, i: statistics.median(x[i] for x in xs)
    commit = os.environ.get("LLAMA_COMMIT") or info.get("build_commit", "?")
    print(f"llmrt {env['commit']} on {device}; llama.cpp {commit} "
          f"({info.get('backends', 'CPU')}, {info.get('n_threads')} threads), "
          f"{len(next(iter(P.values())))} rounds, medians; {env['date_utc'][:10]}, {env['cpu']}")
    print()
    print("| | llmrt tok/s | llama.cpp tok/s | llmrt / llama.cpp |")
    print("|---|---|---|---|")
    rows = [
        ("decode, 16-bit (bf16)", ("q06-bf16", "auto"), "q06-bf16", 0),
        ("decode, 16-bit (bf16), greedy_head off", ("q06-bf16", "off"), "q06-bf16", 0),
        ("decode, 4-bit: AWQ g128 vs Q4_0 (Q6_K head)", ("q06-awq", "auto"), "q06-q4_0", 0),
        ("decode, 4-bit: AWQ g128 vs Q4_0 (f16 head)", ("q06-awq", "auto"), "q06-q4_0-f16head", 0),
        ("decode, 4-bit, greedy_head off, vs Q4_0 (Q6_K head)", ("q06-awq", "off"), "q06-q4_0", 0),
        ("decode, 4-bit, greedy_head off, vs Q4_0 (f16 head)", ("q06-awq", "off"),
         "q06-q4_0-f16head", 0),
        ("prefill 128, 16-bit", ("q06-bf16", "auto"), "q06-bf16", 1),
        ("prefill 128, 4-bit vs Q4_0 (Q6_K head)", ("q06-awq", "auto"), "q06-q4_0", 1),
        ("prefill 128, 4-bit vs Q4_0 (f16 head)", ("q06-awq", "auto"), "q06-q4_0-f16head", 1),
    ]
    for label, lk, pk, i in rows:
        if lk not in L or pk not in P:
            continue
        a, b = med(L[lk], i), med(P[pk], i)
        print(f"| {label} | {a:.1f} | {b:.1f} | {a / b:.2f} |")
    log = os.path.join(out, "load.log")
    if os.path.exists(log):
        loads = [float(l.split("loadavg ")[1].split()[0]) for l in open(log)]
        print(f"\nload average (1 min) around the runs: {min(loads):.1f} .. {max(loads):.1f}, "
              f"median {statistics.median(loads):.1f}")


if __name__ == "__main__":
    main()
