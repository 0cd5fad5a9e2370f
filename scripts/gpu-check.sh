#!/usr/bin/env bash
# gpu-check.sh — everything llmrt runs on the GPU machine, in one call, ending with a short
# table. Run from the repository root there, after scripts/gpu-pack.sh here (the device call
# carries .device). Steps (default: all that apply):
#   fixtures  tools/make_fixtures.py → $FIXTAR (transformers references)
#   tokref    HF tokenizers reference ids / chat renders / encode speed (when the scripts exist)
#   tests     every ctest test (GPU tests run for real here; others as a sanity check)
#   bench     8B-shaped AWQ checkpoint (llmrt mkmodel, if absent), kernel and decode benchmarks
#   ab        llmrt bench A/B of pageable vs pinned vs uva (latency and load modes), plot
#   serve     llmrt serve under load (tools/serve-bench.sh) on the 8B-shaped model
# Logs go to $OUT (files come back to the development machine).
set -uo pipefail
cd "$(dirname "$0")/.."
# The device returns at most 8 files from $OUT: logs are written to $L and packed into
# $OUT/gpu-logs.tar.gz at the end; fixtures and reference sets travel as tar files.
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
L=$(mktemp -d)
steps=("$@")
[[ ${#steps[@]} -eq 0 ]] && steps=(fixtures tokref tests bench ab serve)
want() { local s; for s in "${steps[@]}"; do [[ $s == "$1" ]] && return 0; done; return 1; }
summary=()
row() { summary+=("$(printf '%-34s %s' "$1" "$2")"); save; }
# Pack the logs after every step, so a run stopped at its time limit still returns them.
save() { printf '%s\n' "${summary[@]}" > "$L/summary.txt"; tar -C "$L" -czf "$OUT/gpu-logs.tar.gz" . 2>/dev/null; }
t0=$(date +%s)

# ---- place the build where its ctest files expect it ----
if [[ -d .device/build-gpu ]]; then
  [[ -e build-gpu ]] || ln -s .device/build-gpu build-gpu
  src=$(cat build-gpu/SOURCE_DIR)
  if [[ "$src" != "$PWD" && ! -e "$src" ]]; then
    mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"
  fi
fi
export LD_LIBRARY_PATH=$PWD/build-gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
# bench reports name the packed build's commit (this copy's git metadata may be older)
[[ -f .device/COMMIT ]] && export LLMRT_BENCH_COMMIT=$(cat .device/COMMIT)
llmrt=$PWD/build-gpu/bin/llmrt
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv \
  > "$L/nvidia-smi.txt" 2>&1
row "gpu" "$(tail -1 "$L/nvidia-smi.txt")"
commit=$(cat .device/COMMIT 2>/dev/null || git rev-parse --short HEAD 2>/dev/null || echo unknown)
row "commit" "$commit"

if [[ -x $llmrt ]]; then
  "$llmrt" plugins > "$L/plugins.txt" 2>&1
  "$llmrt" doctor --pin-cap-gb 8 > "$L/doctor.txt" 2>&1
  row "doctor" "exit $? ($(grep -c '^\[ok' "$L/doctor.txt") ok); $(grep '^recommendation' "$L/doctor.txt" | cut -c1-60)"
  grep 'pinned memory' "$L/doctor.txt" | head -1 | cut -c1-110 | sed 's/^/    /'
fi

# ---- transformers references ----
if want fixtures && [[ -f tools/make_fixtures.py ]]; then
  rm -rf "$L/fixtures"
  if PYTHONUNBUFFERED=1 python3 tools/make_fixtures.py --out "$L/fixtures" > "$L/fixtures.log" 2>&1; then
    tar -C "$L" -cf "$OUT/fixtures.tar" fixtures && rm -rf "$L/fixtures"
    row "fixtures" "ok ($(du -h "$OUT/fixtures.tar" | cut -f1))"
  else
    row "fixtures" "FAILED (see fixtures.log): $(tail -1 "$L/fixtures.log" | cut -c1-80)"
  fi
fi
if want tokref && [[ -d .cache/qwen3-tokenizer ]]; then
  # HF tokenizers + transformers re-derive every tokenizer fixture (exit 1 on any difference),
  # write the HF-only reference cases, and time HF encoding on the benchmark text.
  if python3 tools/make_tokenizer_refs.py --tokenizer .cache/qwen3-tokenizer --check --write-hf \
       --out "$OUT/qwen3_hf_refs.json" > "$L/tokref.log" 2>&1; then
    row "tokenizer vs HF" "ok: $(tail -1 "$L/tokref.log" | cut -c1-70)"
  else
    row "tokenizer vs HF" "FAILED: $(tail -1 "$L/tokref.log" | cut -c1-70)"
  fi
  TOKENIZER=.cache/qwen3-tokenizer tools/tokenizer-bench.sh "$llmrt" > "$L/tokbench.txt" 2>&1
  row "tokenizer bench" "$(grep -iE 'MB/s' "$L/tokbench.txt" | tr '\n' ' ' | cut -c1-100)"
fi

# ---- tests ----
if want tests && [[ -d build-gpu ]]; then
  # sdk_install needs the build tree's CMake export files, which do not travel.
  ctest --test-dir build-gpu --output-on-failure -j8 -E "integration.(sdk_install|embed)" > "$L/ctest.log" 2>&1
  row "ctest (all)" "$(grep -E 'tests passed|tests failed' "$L/ctest.log" | tail -1)"
  grep -E '\*\*\*(Failed|Exception|Timeout)' "$L/ctest.log" | head -12 | sed 's/^/    /'
  ctest --test-dir build-gpu -N -R 'cuda|gpu' 2>/dev/null | grep -c 'Test *#' | xargs -I{} echo "    {} GPU tests (names matching cuda|gpu)"
  grep -E 'cuda|gpu' "$L/ctest.log" | grep -E 'Skipped' | head -5 | sed 's/^/    skipped: /'
fi

# ---- benchmarks ----
model8b=${LLMRT_8B_DIR:-/tmp/qwen3-8b-awq}
if want bench || want ab || want serve; then
  if [[ ! -f $model8b/config.json ]]; then
    "$llmrt" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -o "$model8b" > "$L/mkmodel.log" 2>&1
    row "mkmodel qwen3-8b awq" "exit $?: $(tail -1 "$L/mkmodel.log" | cut -c1-80)"
  fi
fi
if want bench; then
  if [[ -x build-gpu/bin/llmrt-cuda-bench ]]; then
    build-gpu/bin/llmrt-cuda-bench > "$L/kernels.txt" 2>&1
    row "kernel bench" "exit $? (kernels.txt)"
    tail -25 "$L/kernels.txt" | sed 's/^/    /'
  fi
  for mem in pageable pinned uva; do
    for ctx in 128 2048; do
      "$llmrt" generate --model "$model8b" --set memory.plugin=$mem --set cache.kv_tokens=16384 \
        --prompt-ids "$(seq -s, 1 $ctx)" --max-tokens 256 --ignore-eos --print-ids \
        > "$L/gen-$mem-$ctx.txt" 2> "$L/gen-$mem-$ctx.log"
      row "decode $mem ctx=$ctx" "$(grep -iE 'ITL|decode' "$L/gen-$mem-$ctx.log" | tail -1 | cut -c1-90)"
    done
  done
fi
if want ab && [[ -f conf/pinned.ini ]]; then
  # latency mode: one request at a time, configs in randomized blocks
  "$llmrt" bench --model "$model8b" -c conf/pageable.ini -c conf/pinned.ini -c conf/uva.ini \
    --input-len 128 --output-len 128 --rounds 3 --requests 5 --order random \
    --json "$L/ab-latency.json" --plot "$L/bench-ab-latency.png" > "$L/ab-latency.txt" 2>&1
  row "bench A/B latency" "exit $? (ab-latency.txt)"
  grep -E 'faster|slower|no significant' "$L/ab-latency.txt" | head -6 | sed 's/^/    /'
  # load mode: batches submitted together at each concurrency level
  "$llmrt" bench --model "$model8b" -c conf/pageable.ini -c conf/pinned.ini -c conf/uva.ini \
    --input-len 128 --output-len 128 --concurrency 1,2,4,8,16,32 --rounds 1 --requests 5 \
    --warmup 1 --order random \
    --json "$L/ab-load.json" --plot "$L/bench-ab-load.png" > "$L/ab-load.txt" 2>&1
  row "bench A/B load" "exit $? (ab-load.txt)"
fi
if want serve && [[ -x tools/serve-bench.sh && -d .cache/qwen3-tokenizer ]]; then
  # the OpenAI server under load: requests/s and output tok/s at 1, 8 and 32 clients
  OUT="$L/serve" MAX_TOKENS=128 CONCURRENCY=1,8,32 TOKENIZER=.cache/qwen3-tokenizer \
    tools/serve-bench.sh "$llmrt" "$model8b" conf/pinned.ini > "$L/serve-bench.txt" 2>&1
  row "serve bench (pinned)" "exit $? (serve-bench.txt)"
  tail -6 "$L/serve-bench.txt" | sed 's/^/    /'
fi

for f in bench-ab-latency.png bench-ab-load.png; do [[ -f $L/$f ]] && cp "$L/$f" "$OUT/"; done
tar -C "$L" -czf "$OUT/gpu-logs.tar.gz" .
echo
echo "==== gpu-check summary ($(( $(date +%s) - t0 )) s) ===="
printf '%s\n' "${summary[@]}"
