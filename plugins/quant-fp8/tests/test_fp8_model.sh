#!/usr/bin/env bash
# A Qwen3 model through quant-fp8 on backend-cpu, end to end with the real llmrt binary:
# `mkmodel --preset tiny --quant fp8` writes the Qwen3-*-FP8 layout (checked with --inspect);
# its logits (teacher forcing) and greedy ids equal those of the dense twin of the same
# checkpoint (every FP8 weight dequantized to f32 by fp8_ckpt.py, from the format's definition)
# bit for bit — W8A16 on the CPU is dequantize-then-gemm exactly, activations = auto included;
# activations = w8a8 changes the logits by e4m3's activation rounding (more than 1e-3, less than
# 0.2 relative) and nothing else; a bad [quant.fp8] value exits non-zero naming the key.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
for p in quant-fp8 model-qwen3 backend-cpu; do
  [[ -f "$LLMRT_PLUGIN_DIR/$p.so" ]] || { echo "SKIP: $p.so is not built"; exit 77; }
done
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
common=(--set runtime.backend=cpu --set "runtime.plugin_dir=$LLMRT_PLUGIN_DIR")

"$LLMRT" mkmodel -q --preset tiny --quant fp8 -o "$tmp/fp8" > "$tmp/mk.out" 2>&1 || { cat "$tmp/mk.out"; fail "mkmodel --quant fp8"; }
"$LLMRT" mkmodel --inspect "$tmp/fp8" > "$tmp/inspect.txt" 2>&1 || { cat "$tmp/inspect.txt"; fail "mkmodel --inspect"; }
has() { grep -q "^$1 " "$tmp/inspect.txt" || { cat "$tmp/inspect.txt"; fail "inspect lacks: $1"; }; }
has "model.layers.0.self_attn.q_proj.weight F8_E4M3 \[128, 64\]"
has "model.layers.0.self_attn.q_proj.weight_scale_inv F32 \[1, 1\]"
has "model.layers.1.mlp.down_proj.weight F8_E4M3 \[64, 128\]"
has "model.layers.1.mlp.down_proj.weight_scale_inv F32 \[1, 1\]"
has "model.embed_tokens.weight BF16 \[512, 64\]"
has "lm_head.weight BF16 \[512, 64\]"
grep -q '"quant_method": "fp8"' "$tmp/fp8/config.json" || fail "config.json: quant_method"
grep -q '"weight_block_size": \[' "$tmp/fp8/config.json" || fail "config.json: weight_block_size"

python3 "$here/fp8_ckpt.py" dequant "$tmp/fp8" "$tmp/dense" || fail "fp8_ckpt.py dequant"
ids=3,17,255,1,99,400,12,7,300,44,5,81,160,2,9,77
logits() { # dir out [--set ...]
  local dir=$1 out=$2; shift 2
  "$LLMRT" logits "${common[@]}" "$@" --model "$dir" --ids "$ids" --out "$out" 2> "$tmp/err" \
    || { cat "$tmp/err"; fail "llmrt logits --model $dir $*"; }
}
logits "$tmp/fp8" "$tmp/fp8.f32"
logits "$tmp/fp8" "$tmp/fp8_w8a16.f32" --set quant.fp8.activations=w8a16
logits "$tmp/fp8" "$tmp/fp8_w8a8.f32" --set quant.fp8.activations=w8a8
logits "$tmp/dense" "$tmp/dense.f32"
cmp -s "$tmp/fp8.f32" "$tmp/dense.f32" || {
  python3 "$here/fp8_ckpt.py" compare "$tmp/fp8.f32" "$tmp/dense.f32" 0; fail "FP8 (auto) logits differ from the dense twin's"; }
cmp -s "$tmp/fp8_w8a16.f32" "$tmp/dense.f32" || fail "FP8 (w8a16) logits differ from the dense twin's"
echo "ok: logits through quant-fp8 equal the dense twin's bit for bit"
cmp -s "$tmp/fp8_w8a8.f32" "$tmp/dense.f32" && fail "activations = w8a8 gave the W8A16 logits"
python3 "$here/fp8_ckpt.py" compare "$tmp/fp8_w8a8.f32" "$tmp/dense.f32" 0.2 || fail "w8a8 logits too far from w8a16"
python3 "$here/fp8_ckpt.py" compare "$tmp/fp8_w8a8.f32" "$tmp/dense.f32" 1e-3 > /dev/null && fail "w8a8 logits suspiciously close to w8a16"
echo "ok: activations = w8a8 differs by the activation rounding only"

gen() { # dir [--set ...]
  local dir=$1; shift
  "$LLMRT" generate "${common[@]}" "$@" --model "$dir" --prompt-ids "$ids" --max-tokens 12 \
    --temperature 0 --ignore-eos --print-ids 2> "$tmp/err" | tail -n 1 || true
}
a=$(gen "$tmp/fp8"); b=$(gen "$tmp/dense")
[[ -n "$a" && "$a" == "$b" ]] || { cat "$tmp/err"; fail "greedy ids: fp8 [$a] vs dense [$b]"; }
echo "ok: greedy ids equal the dense twin's: $a"

if "$LLMRT" logits "${common[@]}" --set quant.fp8.activations=w4 --model "$tmp/fp8" --ids "$ids" \
     --out "$tmp/x.f32" 2> "$tmp/err"; then
  fail "activations = w4 was accepted"
fi
grep -q "activations" "$tmp/err" && grep -q "w4" "$tmp/err" || { cat "$tmp/err"; fail "the refusal does not name the key and value"; }
echo "ok: $(head -n 1 "$tmp/err")"
