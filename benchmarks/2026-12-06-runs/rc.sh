#!/usr/bin/env bash
# GPU-machine call "C" of 2026-12-06 — prepared, never run (no machine started). CPU only
# (issue 28): the CPU backend against llama.cpp on the H200 host's 16-core Xeon at 16 threads,
# tools/cpu-bench.sh with two interleaved rounds.
# llama.cpp d32676d comes prebuilt from the dev machine (.device/llama-bin.tgz: llama-bench,
# llama-quantize and their libraries, GGML_NATIVE=OFF with AVX-512 F/VBMI/VNNI/BF16 and
# AVX-VNNI, AMX off), since building it here would cost minutes of device time. The tarball:
# llama-bench, llama-quantize, libllama-bench-impl.so, libllama-quantize-impl.so,
# libllama-common.so.0, libllama.so.0, libggml{,-base,-cpu}.so.0 and libgomp.so.1, copied with
# `cp -L` from the build into a folder llama-bin, then `tar -czf .device/llama-bin.tgz llama-bin`.
set -uo pipefail
DEADLINE=${DEADLINE:-540}; source "$(dirname "$0")/prelude.sh"
say "cpu $(lscpu | grep 'Model name' | tr -s ' ' | cut -d: -f2) $(nproc) cores, commit $LLMRT_BENCH_COMMIT"
tar -C /tmp -xzf .device/llama-bin.tgz
export LD_LIBRARY_PATH=/tmp/llama-bin:$LD_LIBRARY_PATH
LLMRT=$B LLAMA_BIN=/tmp/llama-bin ROUNDS=${ROUNDS:-2} timeout $(( $(left) - 20 )) \
  tools/cpu-bench.sh "$OUT/cpu16" ${THREADS:-16} > "$L/cpu16.txt" 2>&1
say "cpu-bench exit $?"; tail -16 "$L/cpu16.txt" | tee -a "$L/summary.txt"
say "end"
