#!/usr/bin/env python3
"""logits_check.py — compare `llmrt logits` (and `llmrt generate`) with a transformers
reference fixture written by tools/make_fixtures.py. Used by test_logits.sh; stdlib only.

For each prompt of <fixture>/reference.json:
  1. logits: `llmrt logits` over prompt + greedy continuation (teacher forcing) must be
     within --tol of reference_<k>.f32 in relative error, row by row: ||a - b|| / ||b||.
  2. greedy via teacher forcing: at every row whose reference top-2 margin is clear of the
     tolerance, llmrt's argmax must be the reference's greedy token. "Clear" means
     margin > 2 * tol * ||b_row||: with ||a - b|| <= tol * ||b|| no element moves by more
     than tol * ||b||, so the top two cannot swap. Rows inside that band are skipped
     (counted and printed); a fixture where most rows are unclear fails, since it would
     test nothing.
  3. greedy through `llmrt generate --print-ids` (when the build has it): the generated ids
     must equal the reference's for as long as every margin so far is clear (after the first
     unclear one, a legitimate tie-break may change the rest of the continuation).
--no-greedy checks 1 only: for a tolerance so wide that few margins are clear of it (the CPU
backend's fast kernels). --set passes a setting to every llmrt run.
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


def check_fixture(llmrt, fixture, tol, backend, extra_sets, use_generate, greedy, tmp):
    name = os.path.basename(fixture.rstrip("/"))
    with open(os.path.join(fixture, "reference.json")) as f:
        ref = json.load(f)
    sets = ["--set", f"runtime.backend={backend}"]
    for kv in extra_sets:
        sets += ["--set", kv]
    worst, checked, unclear, gen_checked = 0.0, 0, 0, 0
    for k, p in enumerate(ref["prompts"]):
        ids, prompt, cont = p["ids"], p["prompt"], p["greedy"]
        rows, vocab = p["rows"], p["vocab"]
        out = os.path.join(tmp, f"{name}_{k}.f32")
        rc, _, err = run([llmrt, "logits", "--model", fixture, *sets,
                          "--ids", ",".join(map(str, ids)), "--out", out])
        if rc != 0:
            raise SystemExit(f"FAIL: {name} prompt {k}: llmrt logits exited {rc}:\n{err}")
        a = read_f32(out, rows * vocab)
        b = read_f32(os.path.join(fixture, p["logits_file"]), rows * vocab)
        first_unclear = None
        for r in range(rows):
            ar, br = a[r * vocab:(r + 1) * vocab], b[r * vocab:(r + 1) * vocab]
            nb = math.sqrt(sum(x * x for x in br))
            e = math.sqrt(sum((x - y) ** 2 for x, y in zip(ar, br))) / (nb or 1.0)
            worst = max(worst, e)
            if not e <= tol:
                raise SystemExit(f"FAIL: {name} prompt {k} row {r}: relative error {e:.3g} "
                                 f"> tolerance {tol:g}")
            i = r - (len(prompt) - 1)  # index into the greedy continuation
            if greedy and 0 <= i < len(cont):
                if p["top2_margin"][r] > 2 * tol * nb:
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
        if use_generate:
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
    if greedy and (checked < 2 * unclear or checked == 0):
        raise SystemExit(f"FAIL: {name}: only {checked} greedy rows are clear of the tolerance "
                         f"({unclear} unclear); the fixture tests too little")
    settings = " ".join(extra_sets)
    if not greedy:
        print(f"ok: {name} ({settings or 'defaults'}): {len(ref['prompts'])} prompts, max relative "
              f"error {worst:.3g} (tolerance {tol:g}); greedy not checked")
        return
    print(f"ok: {name} ({settings or 'defaults'}): {len(ref['prompts'])} prompts, max relative "
          f"error {worst:.3g} (tolerance {tol:g}); greedy rows checked {checked}, skipped as "
          f"unclear {unclear}; "
          + (f"generate agreed on {gen_checked} tokens" if use_generate else "generate not checked"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--llmrt", required=True)
    ap.add_argument("--tol", type=float, required=True)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VAL",
                    help="a setting passed to every llmrt run (repeatable)")
    ap.add_argument("--no-generate", action="store_true")
    ap.add_argument("--no-greedy", action="store_true",
                    help="check the logits' relative error only (a tolerance too wide for the "
                         "greedy ids to be decided by it)")
    ap.add_argument("fixtures", nargs="+")
    args = ap.parse_args()
    use_generate = not args.no_generate and not args.no_greedy and has_generate(args.llmrt)
    if not use_generate and not args.no_greedy:
        print("note: `llmrt generate --prompt-ids ... --print-ids` not available or disabled: "
              "greedy checked through teacher-forced logits only")
    with tempfile.TemporaryDirectory() as tmp:
        for fx in args.fixtures:
            check_fixture(args.llmrt, fx, args.tol, args.backend, args.set, use_generate,
                          not args.no_greedy, tmp)


if __name__ == "__main__":
    main()
