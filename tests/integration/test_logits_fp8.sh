#!/usr/bin/env bash
# llmrt's FP8 paths against transformers: for every FP8 fixture in tests/fixtures/models
# (qwen3-fp8-*, written by tools/make_fixtures.py --only fp8 where torch exists), both
# references: reference.json (W8A16: float32 transformers on the dequantized weights) with
# [quant.fp8] activations = w8a16, and reference_w8a8.json (activations quantized per token per
# 128 inputs to e4m3 before each quantized linear) with activations = w8a8 — each reference
# names its setting under "llmrt_set", logits_check.py applies it. Logits row by row within the
# tolerance of the semantics, greedy ids (teacher forcing and `llmrt generate`) equal while the
# reference's margin is clear. Then the check that can only pass if the two references differ:
# W8A8 logits against the W8A16 reference fail at 1e-3.
#
# Tolerances (relative error per row, ||llmrt - ref|| / ||ref||; f32 KV cache):
#   cpu  W8A16  1e-4: the weights are exact in f32 on both sides and activations stay f32, so
#               only summation order and libm differ (as for the dense fixtures).
#        W8A8   1e-1 per row, median 5e-3, greedy margins judged at 5e-3: both sides quantize
#               the same way, but an activation within ~1e-6 of an e4m3 rounding boundary can
#               round the other way (one code, ~6% of that input), which moves the rows it
#               reaches by up to ~1e-2; most rows agree far better. (W8A8 against the W8A16
#               reference is ~3e-2 everywhere: the median tells the semantics apart.) That
#               wide margin leaves about a third of these small models' greedy rows unclear,
#               so a W8A8 fixture needs only as many clear rows as unclear ones (not twice).
#   cuda W8A16  1e-2 per row, median 3e-3: activations are rounded to f16 in the tensor-core
#               kernels (and weights to f16 above 32 rows); W8A8 as on the CPU.
# LLMRT_LOGITS_BACKEND=cuda runs it on the CUDA backend.
set -uo pipefail
fixtures="$LLMRT_SOURCE_DIR/tests/fixtures/models"
dirs=()
for d in "$fixtures"/qwen3-fp8-*/; do
  [[ -f "$d/reference.json" && -f "$d/reference_w8a8.json" ]] && dirs+=("${d%/}")
done
if [[ ${#dirs[@]} -eq 0 ]]; then
  echo "SKIP: no FP8 fixtures (tests/fixtures/models/qwen3-fp8-*) yet; generate them where torch"
  echo "      and transformers exist: python3 tools/make_fixtures.py --out tests/fixtures/models --only fp8"
  exit 77
fi
[[ -f "$LLMRT_PLUGIN_DIR/quant-fp8.so" ]] || { echo "SKIP: quant-fp8.so is not built"; exit 77; }
backend=${LLMRT_LOGITS_BACKEND:-cpu}
if [[ $backend == cpu ]]; then
  w16=(--tol 1e-4)
  w8=(--tol 1e-1 --median-tol 5e-3 --margin-tol 5e-3)
else
  w16=(--tol 1e-2 --median-tol 3e-3 --margin-tol 3e-3)
  w8=(--tol 1e-1 --median-tol 5e-3 --margin-tol 5e-3)
fi
w8+=(--min-clear-ratio 1)
check=(python3 "$LLMRT_SOURCE_DIR/tests/integration/logits_check.py" --llmrt "$LLMRT"
       --backend "$backend" --set cache.dtype=f32)
# the CPU's tolerances are those of backend-cpu's exact path (its fast paths round x to bf16
# in the prefill GEMMs)
[[ $backend == cpu ]] && check+=(--set backend.cpu.simd=exact)
"${check[@]}" --reference reference.json "${w16[@]}" "${dirs[@]}" || exit 1
"${check[@]}" --reference reference_w8a8.json "${w8[@]}" "${dirs[@]}" || exit 1
for d in "${dirs[@]}"; do
  if "${check[@]}" --reference reference.json --set quant.fp8.activations=w8a8 --tol 1e-3 \
       --no-generate "$d" > /dev/null 2>&1; then
    echo "FAIL: $(basename "$d"): W8A8 logits match the W8A16 reference to 1e-3: the references"
    echo "      (or the activations setting) do not tell the semantics apart"
    exit 1
  fi
done
echo "ok: FP8 fixtures on $backend: W8A16 and W8A8 each match their reference, and not the other's"
