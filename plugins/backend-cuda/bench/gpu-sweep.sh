#!/usr/bin/env bash
# gpu-sweep.sh — one GPU-machine call for the CUDA performance work (backend-cuda NOTES.md):
# the CUDA tests, the kernel bench with its tuning sweep and prefill rows, batch-1 decode ITL
# per memory plugin at contexts 128 and 2048, the same with each optimisation switched off
# (fused ops, programmatic dependent launch, the new AWQ GEMV), steady-state prefill TTFT, and
# a short Nsight Compute look at the AWQ GEMV. Ends with a short table; logs go to
# $OUT/sweep-logs.tar.gz.
#
# Run from the repository root on the GPU machine after scripts/gpu-pack.sh here (the device
# call carries .device), e.g.:  plugins/backend-cuda/bench/gpu-sweep.sh tests bench gen ncu
# Steps: tests bench gen ttft load ncu nsys timeline (default: all); quick variants:
#   qtests (the CUDA op/AWQ/generate tests only), qbench (AWQ rows and their sweep only).
# Serving (issue 22; not in the default set): batch (llmrt-cuda-bench --batch: the AWQ batch
#   kernel, tensor-core prefill attention, batch decode attention, each against the kernel it
#   replaced), serve (llmrt bench --json into $OUT/bench-*.json: load mode at concurrency
#   8/32/64/128/256 with 128-token prompts and 256 output tokens, TTFT of a 2048-token prompt,
#   batch-1 ITL at ctx 128), timeline32 (the timeline step at batch 32).
# GEN_VARIANTS: the switched-off variants the gen step also runs (default: fuse-off pdl-off;
# also head-off = model.qwen3.greedy_head=off, sx0 = AWQ without x in shared memory,
# awq:K=V,... = --set quant.awq.tune=K=V,..., cuda:K=V,... = --set backend.cuda.tune=K=V,...,
# env:VAR=v+VAR=v = those environment variables, e.g. env:LLMRT_BACKEND_CUDA_PDL=off).
set -uo pipefail
cd "$(dirname "$0")/../../.."
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
L=$(mktemp -d)
steps=("$@")
[[ ${#steps[@]} -eq 0 ]] && steps=(tests bench gen ttft load ncu nsys timeline)
want() { local s; for s in "${steps[@]}"; do [[ $s == "$1" ]] && return 0; done; return 1; }
summary=()
row() { summary+=("$(printf '%-36s %s' "$1" "$2")"); echo "${summary[-1]}"; save; }
# logs so far into $OUT after every row: a call stopped at its time limit still returns them
save() { tar -C "$L" -czf "$OUT/sweep-logs.tar.gz" . 2>/dev/null; }
t0=$(date +%s)
finish() {
  save
  echo
  echo "==== gpu-sweep summary ($(( $(date +%s) - t0 )) s) ===="
  printf '%s\n' "${summary[@]}"
}
trap finish EXIT

# ---- the build where its ctest files expect it (as scripts/gpu-check.sh does) ----
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
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader > "$L/nvidia-smi.txt" 2>&1
row "gpu" "$(head -1 "$L/nvidia-smi.txt")"
row "commit" "$(cat .device/COMMIT 2>/dev/null || echo unknown)"

tests_re='backend-cuda|generate_cuda|batch_invariance_cuda|memory-.*\.cuda|integration\.(logits|bench|generate)$|model-qwen3|quant-awq'
want qtests && tests_re='backend-cuda\.ops|quant-awq\.cuda|generate_cuda|batch_invariance_cuda|integration\.generate$'
if want tests || want qtests; then
  timeout 130 ctest --test-dir build-gpu -j6 --output-on-failure -R "$tests_re" \
    > "$L/ctest.log" 2>&1
  row "ctest (cuda set)" "$(grep -E 'tests passed|tests failed' "$L/ctest.log" | tail -1)"
  grep -E '\*\*\*(Failed|Exception|Timeout)' "$L/ctest.log" | head -8 | sed 's/^/    /'
  grep -E '^/.*:[0-9]+:[EF]:' "$L/ctest.log" | head -6 | cut -c1-200 | sed 's/^/    /'
  # a failing CUDA test again without programmatic dependent launch: is PDL the cause?
  # (the CUDA unit tests read LLMRT_BACKEND_CUDA_PDL as the host does)
  if grep -qE '(backend-cuda\.ops|quant-awq\.cuda).*\*\*\*Failed|generate_cuda.*\*\*\*Failed' "$L/ctest.log"; then
    LLMRT_BACKEND_CUDA_PDL=off timeout 120 ctest --test-dir build-gpu -j4 --output-on-failure \
      -R 'backend-cuda\.ops|quant-awq\.cuda|generate_cuda' > "$L/ctest-nopdl.log" 2>&1
    row "  same, LLMRT_BACKEND_CUDA_PDL=off" "$(grep -E 'tests passed|tests failed' "$L/ctest-nopdl.log" | tail -1)"
  fi
fi

model8b=${LLMRT_8B_DIR:-/tmp/qwen3-8b-awq}
if want bench || want qbench || want gen || want ttft || want load || want ncu || want nsys || want timeline || want batch || want serve || want timeline32; then
  if [[ ! -f $model8b/config.json ]]; then
    timeout 60 "$llmrt" mkmodel --preset qwen3-8b --quant awq --group-size 128 --seed 1 -o "$model8b" \
      > "$L/mkmodel.log" 2>&1
  fi
fi

if want bench && [[ -x build-gpu/bin/llmrt-cuda-bench ]]; then
  timeout 120 build-gpu/bin/llmrt-cuda-bench --sweep --reps 20 > "$L/kernels.txt" 2>&1
  row "kernel bench" "exit $? (kernels.txt)"
  timeout 30 build-gpu/bin/llmrt-cuda-bench --prefill --filter "attention prefill" --reps 5 \
    > "$L/kernels-prefill.txt" 2>&1
  grep -E '^attention prefill' "$L/kernels-prefill.txt" | tr -s ' ' | sed 's/^/    /'
  grep -A40 'separate kernels' "$L/kernels.txt" | grep -E 'total' | sed 's/^ */    separate: /'
  grep -A40 'fused kernels' "$L/kernels.txt" | grep -E 'total' | sed 's/^ */    fused:    /'
fi
if want qbench && [[ -x build-gpu/bin/llmrt-cuda-bench ]]; then
  timeout 70 build-gpu/bin/llmrt-cuda-bench --filter awq --sweep --reps 20 > "$L/kernels-awq.txt" 2>&1
  row "kernel bench (awq)" "exit $? (kernels-awq.txt)"
  grep -E '^awq .*n=1 ' "$L/kernels-awq.txt" | grep -vE '\[' | tr -s ' ' | cut -d' ' -f1-7 | sed 's/^/    /'
fi

gen() { # name ctx [VAR=value ...]: ITL of 256 tokens after a ctx-token prompt; $EXTRA: --set ...
  local name=$1 ctx=$2; shift 2
  env "$@" timeout 20 "$llmrt" generate --model "$model8b" --set cache.kv_tokens=16384 ${EXTRA:-} \
    --prompt-ids "$(seq -s, 1 "$ctx")" --max-tokens 256 --ignore-eos --print-ids \
    > "$L/gen-$name.txt" 2> "$L/gen-$name.log"
  row "decode $name" "$(grep -oE 'prefill [0-9.]+ tok/s \| decode [0-9.]+ tok/s \| ITL p50 [0-9.]+ ms' "$L/gen-$name.log" | tail -1)"
}
if want gen && [[ -f $model8b/config.json ]]; then
  for mem in pageable pinned uva; do
    for ctx in 128 2048; do
      gen "$mem-$ctx" "$ctx" LLMRT_MEMORY=$mem
    done
  done
  vs=()
  for v in ${GEN_VARIANTS:-fuse-off pdl-off}; do
    case $v in
      fuse-off) EXTRA="--set model.qwen3.fuse=off" gen pinned-128-$v 128 LLMRT_MEMORY=pinned ;;
      head-off) EXTRA="--set model.qwen3.greedy_head=off" gen pinned-128-$v 128 LLMRT_MEMORY=pinned ;;
      pdl-off) EXTRA="--set backend.cuda.pdl=off" gen pinned-128-$v 128 LLMRT_MEMORY=pinned ;;
      sx0) EXTRA="--set quant.awq.tune=sx=0" gen pinned-128-$v 128 LLMRT_MEMORY=pinned ;;
      awq:*) EXTRA="--set quant.awq.tune=${v#awq:}" gen pinned-128-$v 128 LLMRT_MEMORY=pinned ;;
      cuda:*) EXTRA="--set backend.cuda.tune=${v#cuda:}" gen pinned-128-$v 128 LLMRT_MEMORY=pinned ;;
      env:*) IFS=+ read -r -a kv <<< "${v#env:}"; gen pinned-128-$v 128 LLMRT_MEMORY=pinned "${kv[@]}" ;;
      *) continue ;;
    esac
    vs+=("pinned-128-$v")
  done
  # every variant and memory path should decode the same greedy tokens as the default (a
  # different summation order may flip a near-tie on this random model: informational)
  for v in "${vs[@]}" pageable-128 uva-128; do
    cmp -s "$L/gen-$v.txt" "$L/gen-pinned-128.txt" && r=same || r=DIFFERENT
    row "  tokens $v vs pinned-128" "$r"
  done
fi

if want ttft && [[ -f $model8b/config.json && -f conf/pinned.ini ]]; then
  timeout 40 "$llmrt" bench --model "$model8b" -c conf/pinned.ini --set cache.kv_tokens=16384 \
    --input-len 2048 --output-len 8 --rounds 1 --requests 3 --warmup 1 > "$L/ttft-2048.txt" 2>&1
  row "bench TTFT 2048 (warm)" "$(grep -E 'TTFT p50' "$L/ttft-2048.txt" | head -1 | tr -s ' ')"
  timeout 30 "$llmrt" bench --model "$model8b" -c conf/pinned.ini --set cache.kv_tokens=16384 \
    --input-len 128 --output-len 8 --rounds 1 --requests 3 --warmup 1 > "$L/ttft-128.txt" 2>&1
  row "bench TTFT 128 (warm)" "$(grep -E 'TTFT p50' "$L/ttft-128.txt" | head -1 | tr -s ' ')"
fi

if want load && [[ -f $model8b/config.json && -f conf/pinned.ini ]]; then
  timeout 70 "$llmrt" bench --model "$model8b" -c conf/pinned.ini --set cache.kv_tokens=16384 \
    --input-len 128 --output-len 64 --concurrency 8,32 --rounds 1 --requests 2 --warmup 1 \
    > "$L/load.txt" 2>&1
  row "bench load 8,32 (exit $?)" "$(grep -E 'output tok/s' "$L/load.txt" | head -2 | tr -s ' ' | tr '\n' ' ')"
fi

if want batch && [[ -x build-gpu/bin/llmrt-cuda-bench ]]; then
  timeout 200 build-gpu/bin/llmrt-cuda-bench --batch --filter awq --reps 10 > "$L/kernels-batch-awq.txt" 2>&1
  row "kernel bench --batch (awq)" "exit $? (kernels-batch-awq.txt)"
  grep -E '^awq (qkv fused|gate_up fused|down_proj|o_proj) n=(32|64|256)' "$L/kernels-batch-awq.txt" \
    | tr -s ' ' | cut -d' ' -f1-9 | sed 's/^/    /'
  timeout 120 build-gpu/bin/llmrt-cuda-bench --batch --filter attention --reps 5 > "$L/kernels-batch-att.txt" 2>&1
  row "kernel bench --batch (attention)" "exit $? (kernels-batch-att.txt)"
  grep -E '^attention' "$L/kernels-batch-att.txt" | tr -s ' ' | sed 's/^/    /'
fi

if want serve && [[ -f $model8b/config.json && -f conf/pinned.ini ]]; then
  # llmrt bench --json files for benchmarks/ (dated, with the commit: LLMRT_BENCH_COMMIT)
  d=$(date +%Y-%m-%d)
  timeout 240 "$llmrt" bench --model "$model8b" -c conf/pinned.ini --set cache.kv_tokens=131072 \
    --input-len 128 --output-len 256 --ignore-eos --concurrency 8,32,64,128,256 --rounds 1 \
    --requests 2 --warmup 1 --json "$OUT/bench-$d-load.json" > "$L/serve-load.txt" 2>&1
  row "bench load 8..256 (exit $?)" "bench-$d-load.json"
  grep -E 'tok/s|ITL' "$L/serve-load.txt" | head -12 | tr -s ' ' | sed 's/^/    /'
  timeout 60 "$llmrt" bench --model "$model8b" -c conf/pinned.ini --set cache.kv_tokens=16384 \
    --input-len 2048 --output-len 8 --rounds 1 --requests 5 --warmup 2 \
    --json "$OUT/bench-$d-ttft2048.json" > "$L/serve-ttft.txt" 2>&1
  row "bench TTFT 2048 (exit $?)" "$(grep -E 'TTFT p50' "$L/serve-ttft.txt" | head -1 | tr -s ' ')"
  timeout 60 "$llmrt" bench --model "$model8b" -c conf/pinned.ini --set cache.kv_tokens=16384 \
    --input-len 128 --output-len 256 --rounds 1 --requests 3 --warmup 1 \
    --json "$OUT/bench-$d-itl128.json" > "$L/serve-itl.txt" 2>&1
  row "bench batch-1 ITL ctx 128 (exit $?)" "$(grep -E 'ITL p50' "$L/serve-itl.txt" | head -1 | tr -s ' ')"
fi

if want timeline32 && [[ -f $model8b/config.json && -f build-gpu/lib/libllmrt-cupti-trace.so ]]; then
  # a traced decode step at batch 32: 32 prompts of 128 tokens decoded together
  for i in $(seq 1 32); do seq -s, $((i * 100)) $((i * 100 + 127)); done > "$L/prompts32"
  env LLMRT_MEMORY=pinned ${TIMELINE_ENV:-} LLMRT_CUPTI_TRACE="$L/step32.csv" \
    LD_PRELOAD="$PWD/build-gpu/lib/libllmrt-cupti-trace.so" timeout 90 "$llmrt" generate \
    --model "$model8b" --set cache.kv_tokens=16384 --prompts-file "$L/prompts32" --ids \
    --max-tokens 64 --ignore-eos --print-ids > "$L/step32-gen.txt" 2>&1
  python3 plugins/backend-cuda/bench/step-timeline.py "$L/step32.csv" 16 > "$L/step32-timeline.txt" 2>&1
  row "step timeline batch 32 (exit $?)" "$(grep -oE 'decode [0-9.]+ tok/s' "$L/step32-gen.txt" | tail -1)"
  sed 's/^/    /' "$L/step32-timeline.txt"
  gzip -f "$L/step32.csv"
fi

if want ncu; then
  so=build-gpu/lib/llmrt/plugins/quant-awq.so
  if command -v cuobjdump > /dev/null; then
    cuobjdump -sass "$so" 2>/dev/null | grep -cE 'LDG\.E\.(128|EL\.128|CONSTANT\.128)|LDG.*128' > "$L/sass-ldg128.txt"
    row "quant-awq.so 16-byte loads (SASS)" "$(cat "$L/sass-ldg128.txt")"
  fi
  if command -v ncu > /dev/null && [[ -x build-gpu/bin/llmrt-cuda-bench ]]; then
    timeout 50 ncu --clock-control none -k regex:awq_gemv --launch-skip 10 --launch-count 1 \
      --section SpeedOfLight --section Occupancy --section WarpStateStats --section LaunchStats \
      build-gpu/bin/llmrt-cuda-bench --filter "gate_up fused" --reps 3 > "$L/ncu-gate_up.txt" 2>&1
    row "ncu awq gate_up" "exit $? (ncu-gate_up.txt)"
    grep -E 'DRAM Throughput|Memory Throughput|Achieved Occupancy|Registers Per|Duration' \
      "$L/ncu-gate_up.txt" | head -8 | tr -s ' ' | sed 's/^/    /'
  fi
fi

if want nsys && command -v nsys > /dev/null && [[ -f $model8b/config.json ]]; then
  # where a cold process spends its time (load, first prefill): CUDA API and kernel sums
  timeout 60 nsys profile --force-overwrite true -o "$L/cold" --stats=true \
    "$llmrt" generate --model "$model8b" --set cache.kv_tokens=16384 \
    --prompt-ids "$(seq -s, 1 128)" --max-tokens 4 --ignore-eos > "$L/nsys-cold.txt" 2>&1
  row "nsys cold generate" "exit $? (nsys-cold.txt)"
  rm -f "$L"/cold.nsys-rep "$L"/cold.sqlite
fi

if want timeline && [[ -f $model8b/config.json && -f build-gpu/lib/libllmrt-cupti-trace.so ]]; then
  # the decode step in situ: every graph node traced with CUPTI (bench/cupti_trace.c; the GPU
  # machine has no Nsight Systems), then per kernel kind what it costs the step
  # (TIMELINE_ENV: extra VAR=value for the run, e.g. LLMRT_QUANT_AWQ_TUNE=...)
  env LLMRT_MEMORY=pinned ${TIMELINE_ENV:-} LLMRT_CUPTI_TRACE="$L/step.csv" \
    LD_PRELOAD="$PWD/build-gpu/lib/libllmrt-cupti-trace.so" timeout 60 "$llmrt" generate \
    --model "$model8b" --set cache.kv_tokens=16384 --prompt-ids "$(seq -s, 1 128)" \
    --max-tokens 64 --ignore-eos > "$L/step-gen.txt" 2>&1
  python3 plugins/backend-cuda/bench/step-timeline.py "$L/step.csv" 16 > "$L/step-timeline.txt" 2>&1
  row "step timeline (exit $?)" "$(grep -oE 'ITL p50 [0-9.]+ ms' "$L/step-gen.txt" | tail -1) traced"
  sed 's/^/    /' "$L/step-timeline.txt"
  gzip -f "$L/step.csv"
fi
