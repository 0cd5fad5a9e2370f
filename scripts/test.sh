#!/usr/bin/env bash
# test.sh — the test job (CI runs exactly this): install missing packages, build, run every
# test through ctest, then build again with AddressSanitizer + UndefinedBehaviorSanitizer and
# run the tests once more, then the threaded parts (the pool, the engine's threads,
# tensor-parallel ranks) under ThreadSanitizer. GPU tests exit 77
# (skipped) where no CUDA device is visible.
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=${LLMRT_JOBS:-$(nproc)}

echo "== build (release) =="
scripts/build.sh build
echo "== tests (release) =="
ctest --test-dir build --output-on-failure -j"$jobs"

if [[ "${LLMRT_SKIP_SANITIZE:-0}" != 1 ]]; then
  echo "== build (ASan+UBSan, CPU only) =="
  LLMRT_CUDA=OFF scripts/build.sh build-asan -DLLMRT_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug
  echo "== tests (ASan+UBSan) =="
  # Leak checking stays on; dlopen'ed plugins are never unloaded by design (see registry.c).
  # integration.bench_ab is left to the release run: it checks the statistics of timings
  # (A/A runs conclusive, a planted 5% slowdown found), which a sanitized step — several
  # times longer, beside another sanitized test — drowns in noise (CI: 1 and 6 of 12 A/A
  # runs conclusive, most planted runs inconclusive); bench's code runs under ASan in
  # integration.bench and bench_json.
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    ctest --test-dir build-asan --output-on-failure -j"$jobs" -E "${LLMRT_ASAN_EXCLUDE:-^integration\.bench_ab$}"
fi
if [[ "${LLMRT_SKIP_TSAN:-0}" != 1 ]]; then
  echo "== build (ThreadSanitizer, CPU only) =="
  LLMRT_CUDA=OFF scripts/build.sh build-tsan -DLLMRT_TSAN=ON -DCMAKE_BUILD_TYPE=Debug
  echo "== tests (ThreadSanitizer: the thread pool, the engine's threads, batched generation, tensor-parallel ranks) =="
  TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    ctest --test-dir build-tsan --output-on-failure -j"$jobs" \
      -R '^(backend-cpu\.|unit\.engine_threads|unit\.engine$|integration\.generate$|integration\.tensor_parallel$)'
fi
echo "== all tests passed =="
