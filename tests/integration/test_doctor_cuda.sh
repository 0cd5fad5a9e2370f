#!/usr/bin/env bash
# `llmrt doctor` on the CUDA backend (skipped, exit 77, without a device or the cuda plugin):
# host-to-device bandwidth from pageable, pinned and mapped host memory, one line each with a
# positive GB/s at 64 MiB and 1 MiB, and what CPU weight offload costs per token at the
# configured plugin's bandwidth — for --offload-gb against a model (whole layers of it), and
# a layer's cost when nothing is offloaded.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
[[ -f "$LLMRT_PLUGIN_DIR/backend-cuda.so" ]] || { echo "skip: backend-cuda.so not built"; exit 77; }
command -v nvidia-smi > /dev/null && nvidia-smi -L 2>/dev/null | grep -q GPU || { echo "skip: no CUDA device"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
export LLMRT_SYSTEM_CONFIG=
dir="$LLMRT_SOURCE_DIR/tests/fixtures/models/qwen3-f32-sharded"
common=(--pin-cap-gb 0.25 --set runtime.backend=cuda --set "runtime.plugin_dir=$LLMRT_PLUGIN_DIR")

"$LLMRT" doctor "${common[@]}" --model "$dir" --offload-gb 1e5 > "$tmp/out" 2>&1; rc=$?
[[ $rc -le 1 ]] || { cat "$tmp/out"; fail "doctor exited $rc"; }
for kind in pageable pinned mapped; do
  line=$(grep -E "^\[ok  \] bus +h2d $kind: [0-9.]+ GB/s \(64 MiB\), [0-9.]+ GB/s \(1 MiB\); best of [0-9]+" "$tmp/out") ||
    { cat "$tmp/out"; fail "no h2d $kind line"; }
  for g in $(sed -E 's/.*h2d [a-z]+: ([0-9.]+) GB\/s \(64 MiB\), ([0-9.]+) GB\/s.*/\1 \2/' <<< "$line"); do
    awk -v g="$g" 'BEGIN { exit !(g > 0) }' || fail "h2d $kind: $g GB/s is not positive: $line"
  done
done
[[ $(grep -c ' h2d [a-z]*: ' "$tmp/out") -eq 3 ]] || { cat "$tmp/out"; fail "not three h2d lines"; }
grep -q 'has no meaning' "$tmp/out" && { cat "$tmp/out"; fail "'no meaning' on the cuda backend"; }

# every layer of the fixture offloaded, at pinned's bandwidth (memory.plugin's default)
cost=$(grep -E '^\[info\] offload cost +--offload-gb = 100000: ([0-9]+) of \1 layers \([0-9.]+ GB, checkpoint bytes\) over the bus each forward: [0-9.]+ ms per token at [0-9.]+ GB/s \(h2d pinned, memory.plugin = pinned\)' "$tmp/out") ||
  { cat "$tmp/out"; fail "no offload cost line for every layer at pinned's bandwidth"; }
grep -Eq 'every plugin: pageable [0-9.]+ ms, pinned [0-9.]+ ms, uva [0-9.]+ ms$' <<< "$cost" || fail "not every plugin's cost: $cost"

# uva: the mapped figure; nothing offloaded: one layer's cost
"$LLMRT" doctor "${common[@]}" --model "$dir" --set memory.plugin=uva > "$tmp/out" 2>&1
grep -Eq '^\[info\] offload cost +memory.cpu_offload_gb = 0: nothing offloaded; each layer offloaded would move [0-9.]+ GB over the bus each forward: [0-9.]+ ms per token at [0-9.]+ GB/s \(h2d mapped, memory.plugin = uva\)' "$tmp/out" ||
  { cat "$tmp/out"; fail "no per-layer cost at uva's bandwidth"; }
echo "ok: doctor measures h2d bandwidth and prices the offload"
