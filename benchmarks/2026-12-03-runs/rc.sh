#!/usr/bin/env bash
# GPU call "C" of 2026-12-03, CPU only: the GPU machine's 16-core Xeon (AVX-512, AMX) with this
# session's CPU kernels (the decode GEMV's prefetch now also on the avx512 kernels, the VNNI
# argmax screen, AWQ's avx512 prefetch, AVX512-BF16 prefill where AMX declines) — first the
# 0.6B bf16 and AWQ models against 0d87ff1's plugins (.device/plug-old.tgz: backend-cpu and
# quant-awq as they were) in one run each at 16 and 2 threads, then llama.cpp d32676d built
# here (.device/lcp-src.tgz) side by side (tools/cpu-bench.sh, 16 threads then 2).
set -uo pipefail
DEADLINE=${DEADLINE:-540}; source "$(dirname "$0")/prelude.sh"
say "cpu $(lscpu | grep 'Model name' | tr -s ' ' | cut -d: -f2) commit $LLMRT_BENCH_COMMIT"
mkdir -p /tmp/lcp && tar -C /tmp/lcp -xzf .device/lcp-src.tgz
( cd /tmp/lcp/src && cmake -B b -G Ninja -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DGGML_CUDA=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_CURL=OFF \
    -DLLAMA_OPENSSL=OFF > /tmp/lcp/cmake.log 2>&1 &&
  nice -n 19 cmake --build b -j6 --target llama-bench llama-quantize > /tmp/lcp/build.log 2>&1; echo $? > /tmp/lcp/rc ) &
bpid=$!
M=/tmp/cpu-models; mkdir -p $M /tmp/plug-old
"$B" mkmodel --preset qwen3-0.6b -q -o $M/q06-bf16 && "$B" mkmodel --preset qwen3-0.6b --quant awq -q -o $M/q06-awq
cp build-gpu/lib/llmrt/plugins/*.so /tmp/plug-old/ && tar -C /tmp/plug-old -xzf .device/plug-old.tgz
for th in 16 2; do
  for m in q06-bf16 q06-awq; do
    printf '[model]\npath = %s\n[runtime]\nbackend = cpu\n[backend.cpu]\nthreads = %s\n[cache]\nkv_tokens = 2048\n' $M/$m $th > "$L/$m-$th-new.ini"
    printf '[model]\npath = %s\n[runtime]\nbackend = cpu\nplugin_dir = /tmp/plug-old\n[backend.cpu]\nthreads = %s\n[cache]\nkv_tokens = 2048\n' $M/$m $th > "$L/$m-$th-old.ini"
    bench cpu-$m-t$th-c 100 -c "$L/$m-$th-old.ini" -c "$L/$m-$th-new.ini" --allow-diff \
      --input-len 128 --output-len 32 --rounds 2 --requests 3 --warmup 1
  done
done
wait $bpid
say "llama.cpp build rc $(cat /tmp/lcp/rc 2>/dev/null): $(tail -1 /tmp/lcp/build.log | cut -c1-200)"
LB=/tmp/lcp/src/b/bin
if [[ -x $LB/llama-bench ]]; then
  for th in 16 2; do
    (( $(left) < 90 )) && { say "SKIP threads $th (time)"; continue; }
    LLAMA_BIN=$LB LLMRT=$PWD/build-gpu/bin/llmrt MODELS=$M ROUNDS=1 \
      timeout $(( $(left) - 10 )) tools/cpu-bench.sh "$OUT/cpu-$th" $th > "$L/cpu-$th.txt" 2>&1
    say "cpu-bench $th threads exit $?:"; tail -16 "$L/cpu-$th.txt" | tee -a "$L/summary.txt"
  done
fi
say "end"
