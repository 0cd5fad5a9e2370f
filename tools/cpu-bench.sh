#!/usr/bin/env bash
# cpu-bench.sh — llmrt's CPU backend and llama.cpp side by side: the same machine, the same
# minutes, the same shapes (Qwen3-0.6B, random weights), runs interleaved so load changes hit
# both alike.
#
#   LLAMA_BIN=DIR tools/cpu-bench.sh OUT_DIR [threads]
#
# LLAMA_BIN holds llama.cpp's llama-bench and llama-quantize, built from its source elsewhere
# (this script does not build it). MODELS (default /tmp/llmrt-cpu-models) receives the
# checkpoints when absent: `llmrt mkmodel --preset qwen3-0.6b` (bf16) and `--quant awq` (g128,
# f16 dense parts), the bf16 one as GGUF (tools/safetensors_to_gguf.py), and llama-quantize's
# Q4_0 of it twice: its default (Q6_K output/embedding) and with --token-embedding-type f16
# --output-tensor-type f16 (the bytes per token of the AWQ checkpoint, whose tied head is f16).
# ROUNDS (default 3) rounds of: llmrt bench on bf16, llama-bench on bf16, llmrt bench on AWQ,
# llama-bench on both Q4_0 files. llmrt bench runs two configs, model.qwen3.greedy_head = auto
# (its default: greedy steps take the argmax through the int8 screen, the ids of the full
# logits) and off (every logit, as llama-bench computes them): --input-len 128 --output-len 64,
# 3 requests after 1 warm-up. llama-bench: -p 128 -n 64 -r 3.
# Writes OUT_DIR/llmrt-<model>-r<k>.json (llmrt bench --json), OUT_DIR/llama-<model>-r<k>.json
# (llama-bench -o json), OUT_DIR/load.log (the load average around every run), and prints
# tools/cpu_bench_summary.py's table.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: LLAMA_BIN=DIR tools/cpu-bench.sh OUT_DIR [threads]}
threads=${2:-2}
llama=${LLAMA_BIN:?set LLAMA_BIN to the folder with llama-bench and llama-quantize}
models=${MODELS:-/tmp/llmrt-cpu-models}
rounds=${ROUNDS:-3}
llmrt=${LLMRT:-$PWD/build/bin/llmrt}
mkdir -p "$out" "$models"

# ---- checkpoints ----
[[ -f $models/q06-bf16/config.json ]] ||
  "$llmrt" mkmodel --preset qwen3-0.6b -q -o "$models/q06-bf16"
[[ -f $models/q06-awq/config.json ]] ||
  "$llmrt" mkmodel --preset qwen3-0.6b --quant awq -q -o "$models/q06-awq"
[[ -f $models/q06-bf16.gguf ]] ||
  python3 tools/safetensors_to_gguf.py "$models/q06-bf16" "$models/q06-bf16.gguf"
[[ -f $models/q06-q4_0.gguf ]] ||
  "$llama/llama-quantize" "$models/q06-bf16.gguf" "$models/q06-q4_0.gguf" Q4_0 > /dev/null 2>&1
[[ -f $models/q06-q4_0-f16head.gguf ]] ||
  "$llama/llama-quantize" --token-embedding-type f16 --output-tensor-type f16 \
    "$models/q06-bf16.gguf" "$models/q06-q4_0-f16head.gguf" Q4_0 > /dev/null 2>&1

# ---- configs: greedy_head auto (the default) and off, same everything else ----
for m in q06-bf16 q06-awq; do
  for gh in auto off; do
    printf '[model]\npath = %s\n[runtime]\nbackend = cpu\n[backend.cpu]\nthreads = %s\n[cache]\nkv_tokens = 2048\n[model.qwen3]\ngreedy_head = %s\n' \
      "$models/$m" "$threads" "$gh" > "$out/$m-head-$gh.ini"
  done
done

load() { echo "$(date -u +%H:%M:%S) $1 loadavg $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/load.log"; }
llmrt_run() { # model round
  load "llmrt $1 r$2 start"
  "$llmrt" bench -c "$out/$1-head-auto.ini" -c "$out/$1-head-off.ini" --allow-diff \
    --input-len 128 --output-len 64 --rounds 1 --requests 3 --warmup 1 \
    --json "$out/llmrt-$1-r$2.json" > "$out/llmrt-$1-r$2.txt" 2>&1
  load "llmrt $1 r$2 end"
}
llama_run() { # model round
  load "llama $1 r$2 start"
  "$llama/llama-bench" -m "$models/$1.gguf" -t "$threads" -p 128 -n 64 -r 3 -o json \
    > "$out/llama-$1-r$2.json" 2> "$out/llama-$1-r$2.log"
  load "llama $1 r$2 end"
}
for ((k = 0; k < rounds; k++)); do
  llmrt_run q06-bf16 $k
  llama_run q06-bf16 $k
  llmrt_run q06-awq $k
  llama_run q06-q4_0 $k
  llama_run q06-q4_0-f16head $k
done

python3 tools/cpu_bench_summary.py "$out"
