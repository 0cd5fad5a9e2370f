#!/usr/bin/env bash
# run.sh — the main job: build llmrt, check the machine, make the embedded default model
# (a tiny synthetic Qwen3 checkpoint, written by `llmrt mkmodel`) if absent, and generate
# from it. Extra arguments go to `llmrt generate`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh build
llmrt=build/bin/llmrt
$llmrt plugins
$llmrt doctor --pin-cap-gb 1 || true
model=models/tiny
if [[ ! -f $model/config.json ]]; then
  $llmrt mkmodel --preset tiny --quant none --seed 1 -o $model
fi
$llmrt generate --model $model --prompt-ids 1,2,3,4,5,6,7,8 --max-tokens 32 --print-ids "$@"
