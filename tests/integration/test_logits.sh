#!/usr/bin/env bash
# llmrt against transformers: for every fixture in tests/fixtures/models (written by
# tools/make_fixtures.py on a machine with torch), `llmrt logits` must match the reference
# logits, and greedy ids must match the reference's greedy continuation (through teacher-
# forced argmax, and through `llmrt generate --print-ids` once that exists) wherever the
# reference's top-2 margin is clear of the tolerance. The comparison is logits_check.py.
#
# Tolerance (relative error per position, ||llmrt - ref|| / ||ref||): 1e-4 on the CPU
# backend. Why: both sides compute in float32 on identical weight values (bf16/f16 values
# widened exactly; AWQ weights (q - z) * s are exact in f32), the CPU KV cache is f32, so
# they differ only in summation order (blocked gemm, online softmax) and libm — about 1e-6
# in practice. 1e-4 leaves two orders of magnitude of headroom, while a real mistake (a RoPE
# variant, a missing norm, a wrong GQA head mapping, a wrong AWQ nibble order) is >= 1e-2.
# On another backend set LLMRT_LOGITS_BACKEND (e.g. cuda) and LLMRT_LOGITS_TOL (a bf16/f16
# KV cache and reduced-precision kernels need ~2e-2).
set -uo pipefail
fixtures="$LLMRT_SOURCE_DIR/tests/fixtures/models"
dirs=()
for d in "$fixtures"/*/; do
  # Qwen3-MoE fixtures: test_moe_logits.sh (routing near-ties need its router band off the CPU)
  [[ "$(basename "$d")" == qwen3-moe-* ]] && continue
  [[ -f "$d/reference.json" ]] && dirs+=("${d%/}")
done
if [[ ${#dirs[@]} -eq 0 ]]; then
  echo "SKIP: no reference fixtures in tests/fixtures/models yet; generate them where torch and"
  echo "      transformers exist: python3 tools/make_fixtures.py --out tests/fixtures/models"
  exit 77
fi
backend=${LLMRT_LOGITS_BACKEND:-cpu}
tol=${LLMRT_LOGITS_TOL:-1e-4}
exec python3 "$LLMRT_SOURCE_DIR/tests/integration/logits_check.py" --llmrt "$LLMRT" \
  --backend "$backend" --tol "$tol" "${dirs[@]}"
