#!/usr/bin/env python3
"""logits_check.py — compare `llmrt logits` (and `llmrt generate`) with a transformers
reference fixture written by tools/make_fixtures.py. Used by test_logits.sh; stdlib only.

For each prompt of <fixture>/reference.json (or --reference NAME, e.g. the W8A8 reference of an
FP8 fixture; the settings under the reference's "llmrt_set" — which semantics of llmrt it is
the reference of — and every --set are passed to llmrt):
  1. logits: `llmrt logits` over prompt + greedy continuation (teacher forcing) must be
     within --tol of reference_<k>.f32 in relative error, row by row: ||a - b|| / ||b||.
  2. greedy via teacher forcing: at every row whose reference top-2 margin is clear of the
     tolerance, llmrt's argmax must be the reference's greedy token. "Clear" means
     margin > 2 * tol * ||b_row||: with ||a - b|| <= tol * ||b|| no element moves by more
     than tol * ||b||, so the top two cannot swap (--margin-tol replaces tol here, for
     semantics whose error is small on most rows and larger on a few, like W8A8's rounding
     boundaries; --median-tol bounds the median row error too). Rows inside that band are skipped
     (counted and printed); a fixture where most rows are unclear fails, since it would
     test nothing.
  3. greedy through `llmrt generate --print-ids` (when the build has it): the generated ids
     must equal the reference's for as long as every margin so far is clear (after the first
     unclear one, a legitimate tie-break may change the rest of the continuation).
Mixture-of-experts fixtures (reference.json prompts carry "router_margin": per row, the
smallest gap over the sparse layers between the K-th and the (K+1)-th router logit) pick
experts by a discontinuous top-k: where a backend's rounding moves router logits by more than
a row's margin it may take the other expert, and from that row on (the KV cache carries it
forward) the logits legitimately differ. With --router-band B, rows from the first one whose
margin is below B are not compared (counted and printed); 0 (the CPU's default: the fixtures
keep every margin >= 1e-3, far above f32 rounding) compares every row.
Exit 0 when everything matches, 1 with a message naming fixture, prompt and row otherwise.
"""
import argparse
import array
import json
import math
import os
import subprocess
import sys
import tempfile


def read_f32(path, count):
    a = array.array("f")
    with open(path, "rb") as f:
        a.frombytes(f.read())
    if sys.byteorder != "little":
        a.byteswap()
    if len(a) != count:
        raise SystemExit(f"FAIL: {path} has {len(a)} floats, expected {count}")
    return a


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    return p.returncode, p.stdout, p.stderr


def has_generate(llmrt):
    rc, out, err = run([llmrt, "generate", "--help"])
    return rc == 0 and "--prompt-ids" in out + err and "--print-ids" in out + err


def check_fixture(llmrt, fixture, tol, backend, use_generate, tmp, reference="reference.json",
                  extra_sets=(), median_tol=None, margin_tol=None, router_band=0.0):
    name = os.path.basename(fixture.rstrip("/"))
    with open(os.path.join(fixture, reference)) as f:
        ref = json.load(f)
    if reference != "reference.json":
        name += f" ({reference})"
    sets = ["--set", f"runtime.backend={backend}"]
    for kv in list(ref.get("llmrt_set", [])) + list(extra_sets):
        sets += ["--set", kv]
    margin_tol = tol if margin_tol is None else margin_tol
    worst, checked, unclear, gen_checked, routed_out, compared = 0.0, 0, 0, 0, 0, 0
    row_errors = []
    for k, p in enumerate(ref["prompts"]):
        ids, prompt, cont = p["ids"], p["prompt"], p["greedy"]
        rows, vocab = p["rows"], p["vocab"]
        margins = p.get("router_margin")
        if router_band > 0 and margins:  # rows from the first routing near-tie on are not compared
            near = [r for r in range(rows) if margins[r] < router_band]
            if near:
                routed_out += rows - near[0]
                rows = near[0]
                cont = cont[:max(0, rows - (len(prompt) - 1))]
        compared += rows
        out = os.path.join(tmp, f"{name}_{k}.f32")
        rc, _, err = run([llmrt, "logits", "--model", fixture, *sets,
                          "--ids", ",".join(map(str, ids)), "--out", out])
        if rc != 0:
            raise SystemExit(f"FAIL: {name} prompt {k}: llmrt logits exited {rc}:\n{err}")
        a = read_f32(out, p["rows"] * vocab)
        b = read_f32(os.path.join(fixture, p["logits_file"]), p["rows"] * vocab)
        first_unclear = None
        for r in range(rows):
            ar, br = a[r * vocab:(r + 1) * vocab], b[r * vocab:(r + 1) * vocab]
            nb = math.sqrt(sum(x * x for x in br))
            e = math.sqrt(sum((x - y) ** 2 for x, y in zip(ar, br))) / (nb or 1.0)
            worst = max(worst, e)
            row_errors.append(e)
            if not e <= tol:
                raise SystemExit(f"FAIL: {name} prompt {k} row {r}: relative error {e:.3g} "
                                 f"> tolerance {tol:g}")
            i = r - (len(prompt) - 1)  # index into the greedy continuation
            if 0 <= i < len(cont):
                if p["top2_margin"][r] > 2 * margin_tol * nb:
                    got = max(range(vocab), key=lambda j: ar[j])
                    if got != cont[i]:
                        raise SystemExit(f"FAIL: {name} prompt {k} row {r}: llmrt argmax {got}, "
                                         f"reference greedy {cont[i]} (margin "
                                         f"{p['top2_margin'][r]:.3g})")
                    checked += 1
                else:
                    unclear += 1
                    if first_unclear is None:
                        first_unclear = i
        if use_generate and cont:
            n_clear = len(cont) if first_unclear is None else first_unclear
            rc, so, err = run([llmrt, "generate", "--model", fixture, *sets,
                               "--prompt-ids", ",".join(map(str, prompt)),
                               "--max-tokens", str(len(cont)), "--temperature", "0",
                               "--ignore-eos", "--print-ids"])
            if rc != 0:
                raise SystemExit(f"FAIL: {name} prompt {k}: llmrt generate exited {rc}:\n{err}")
            lines = [l for l in so.splitlines() if l.strip()]
            try:
                gen = [int(x) for x in lines[-1].split()] if lines else []
            except ValueError:
                raise SystemExit(f"FAIL: {name} prompt {k}: --print-ids output is not ids: "
                                 f"{lines[-1]!r}")
            if gen[:n_clear] != cont[:n_clear]:
                raise SystemExit(f"FAIL: {name} prompt {k}: llmrt generate gave {gen}, reference "
                                 f"{cont} (must agree on the first {n_clear} tokens)")
            gen_checked += n_clear
    row_errors.sort()
    median = row_errors[len(row_errors) // 2] if row_errors else 0.0
    if median_tol is not None and not median <= median_tol:
        raise SystemExit(f"FAIL: {name}: median relative error {median:.3g} > {median_tol:g}")
    if routed_out and compared == 0:
        raise SystemExit(f"FAIL: {name}: every row lies after a routing near-tie (router band "
                         f"{router_band:g}): nothing compared")
    if (checked < 2 * unclear or checked == 0) and not routed_out:
        raise SystemExit(f"FAIL: {name}: only {checked} greedy rows are clear of the tolerance "
                         f"({unclear} unclear); the fixture tests too little")
    print(f"ok: {name}: {len(ref['prompts'])} prompts, max relative error {worst:.3g} "
          f"(tolerance {tol:g}), median {median:.3g}"
          + (f" (tolerance {median_tol:g})" if median_tol is not None else "")
          + f"; greedy rows checked {checked}, skipped as unclear {unclear}; "
          + (f"rows after a routing near-tie not compared: {routed_out}; " if routed_out else "")
          + (f"generate agreed on {gen_checked} tokens" if use_generate else "generate not checked"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llmrt", required=True)
    ap.add_argument("--tol", type=float, required=True)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--no-generate", action="store_true")
    ap.add_argument("--reference", default="reference.json",
                    help="the reference file of each fixture (default reference.json)")
    ap.add_argument("--set", action="append", default=[], dest="sets",
                    help="SECTION.KEY=VAL passed to llmrt (repeatable)")
    ap.add_argument("--median-tol", type=float, default=None,
                    help="the median row error must also be within this")
    ap.add_argument("--margin-tol", type=float, default=None,
                    help="rows are clear for the greedy checks when margin > 2 * this * ||row|| "
                         "(default: --tol)")
    ap.add_argument("--router-band", type=float, default=0.0,
                    help="MoE fixtures: compare rows only before the first router margin below this")
    ap.add_argument("fixtures", nargs="+")
    args = ap.parse_args()
    use_generate = not args.no_generate and has_generate(args.llmrt)
    if not use_generate:
        print("note: `llmrt generate --prompt-ids ... --print-ids` not available or disabled: "
              "greedy checked through teacher-forced logits only")
    with tempfile.TemporaryDirectory() as tmp:
        for fx in args.fixtures:
            check_fixture(args.llmrt, fx, args.tol, args.backend, use_generate, tmp,
                          args.reference, args.sets, args.median_tol, args.margin_tol,
                          args.router_band)


if __name__ == "__main__":
    main()
