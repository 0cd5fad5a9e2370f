#!/usr/bin/env bash
# GPU call "F" (2026-12-02, second session): Nsight Compute on the AWQ batch kernel (new and
# the replaced one, gate_up and down at 32 rows: where its warps stall), then the CPU backend
# against llama.cpp on the GPU machine's 16-core CPU (tools/cpu-bench.sh at 16 threads, then 2),
# llama.cpp built here from .device/llamacpp-cpu-src.tgz (the d32676d snapshot, CPU parts only:
# CMakeLists.txt cmake/ src/ include/ common/ vendor/ LICENSE, ggml/ without the other backends'
# folders, tools/llama-bench and tools/quantize under a tools/CMakeLists.txt naming just those
# two; 2.7 MB as tar.gz).
set -uo pipefail
DEADLINE=${DEADLINE:-570}; source "$(dirname "$0")/prelude.sh"
say "gpu $(nvidia-smi --query-gpu=name --format=csv,noheader) cpu $(lscpu | grep 'Model name' | tr -s ' ' | cut -d: -f2) commit $LLMRT_BENCH_COMMIT"
# 0. llama.cpp builds in the background while the GPU is profiled (the profile is not timed)
mkdir -p /tmp/lcp && tar -C /tmp/lcp -xzf .device/llamacpp-cpu-src.tgz
( cd /tmp/lcp/llama.cpp && cmake -B b -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_CUDA=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF > /tmp/lcp/cmake.log 2>&1 &&
  cmake --build b -j12 --target llama-bench llama-quantize > /tmp/lcp/build.log 2>&1; echo $? > /tmp/lcp/rc ) &
bpid=$!
# 1. where the batch kernel's warps stall
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
mkdir -p /tmp/oldplug && cp build-gpu/lib/llmrt/plugins/*.so /tmp/oldplug/ && gunzip -c .device/old/quant-awq.so.gz > /tmp/oldplug/quant-awq.so
for v in new old; do
  for f in "gate_up fused n=32" "down_proj n=32"; do
    tag=$v-$(echo "$f" | cut -d' ' -f1)
    env $([[ $v == old ]] && echo LLMRT_PLUGIN_DIR=/tmp/oldplug) timeout 60 "$NCU" --clock-control none \
      -k regex:awq_mma_kernel --launch-skip 3 --launch-count 1 --set full \
      build-gpu/bin/llmrt-cuda-bench --batch --filter "$f" --reps 3 > "$L/ncu-$tag.txt" 2>&1
    say "ncu $tag exit $?: $(grep -E '^ +(Duration|DRAM Throughput|L2 Cache Throughput|L1/TEX Cache Throughput|Compute \(SM\) Throughput|Achieved Occupancy|Registers Per Thread|Issue Slots Busy|No Eligible|Warp Cycles Per Issued)' "$L/ncu-$tag.txt" | tr -s ' ' | tr '\n' ';' | cut -c1-800)"
  done
done
# 2. the CPU bench (llama.cpp must be built by now)
wait $bpid
say "llama.cpp build rc $(cat /tmp/lcp/rc 2>/dev/null): $(tail -2 /tmp/lcp/build.log | tr '\n' ' ' | cut -c1-200)"
LB=/tmp/lcp/llama.cpp/b/bin
if [[ -x $LB/llama-bench ]]; then
  for th in 16 8 2; do
    (( $(left) < 100 )) && { say "SKIP threads $th (time)"; continue; }
    if [[ $th == 16 ]]; then
      timeout 60 build-gpu/bin/bench_cpu_bandwidth 16 > "$L/bw.txt" 2>&1
      say "bandwidth (1..16 threads): $(tr -s ' ' < "$L/bw.txt" | tr '\n' ';' | cut -c1-600)"
    fi
    rounds=$([[ $th == 16 ]] && echo 2 || echo 1)
    LLAMA_BIN=$LB LLMRT=$PWD/build-gpu/bin/llmrt MODELS=/tmp/cpu-models ROUNDS=$rounds \
      timeout $(( $(left) - 10 )) tools/cpu-bench.sh "$L/cpu-$th" $th > "$L/cpu-$th.txt" 2>&1
    say "cpu-bench $th threads exit $?:"; tail -16 "$L/cpu-$th.txt" | tee -a "$L/summary.txt"
  done
fi
say "end"
