#!/usr/bin/env bash
# The verdict of llmrt bench means what it says, on the CPU backend:
#  - A/A: the same config run as A and B. Ten short runs (fixed seeds, random order); the 95%
#    interval should exclude 0 in about 1 run in 20, so at least 7 of 10 must say "no
#    significant difference" in ITL (fails by chance well under 1% of the time even if the
#    true false-positive rate were 10%).
#  - A genuinely slower B: the same shapes with twice the layers (twice the work per token;
#    a different model, so --allow-diff). Every run must call B slower in ITL and TTFT.
#    (CPU threads 1 against 2 is not used: on a shared, loaded machine a 2-thread pool can be
#    slower than 1 thread, so its sign is not a property of llmrt.)
# Both configs pin one CPU thread so the comparison does not depend on how busy the machine is.
set -uo pipefail
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; [[ -f "$tmp/out" ]] && tail -30 "$tmp/out"; exit 1; }

# A small Qwen3 (about 5M parameters): decode is ~1 ms per token, long enough that timer and
# scheduler noise does not dominate, short enough for many runs.
model() { # model DIR LAYERS
  cat > "$tmp/$1.json" <<EOF
{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 256,
 "intermediate_size": 768, "num_hidden_layers": $2, "num_attention_heads": 4,
 "num_key_value_heads": 2, "head_dim": 64, "vocab_size": 4096, "max_position_embeddings": 1024,
 "rms_norm_eps": 1e-6, "rope_theta": 1000000.0, "tie_word_embeddings": false,
 "torch_dtype": "bfloat16", "bos_token_id": 4094, "eos_token_id": 4095, "hidden_act": "silu"}
EOF
  "$LLMRT" mkmodel --config "$tmp/$1.json" -o "$tmp/$1" -q || fail "mkmodel $1"
  printf '[model]\npath = %s\n[backend.cpu]\nthreads = 1\n[cache]\nkv_tokens = 1024\n' "$1" > "$tmp/$1.ini"
}
model base 4
model deep 8
run=(--input-len 16 --output-len 16 --warmup 1 --rounds 4 --requests 4 --order random)

quiet=0
for seed in 1 2 3 4 5 6 7 8 9 10; do
  "$LLMRT" bench -c "$tmp/base.ini" -c "$tmp/base.ini" "${run[@]}" --seed "$seed" > "$tmp/out" 2>&1 \
    || fail "A/A run $seed"
  line=$(grep -E "^  (no significant difference between base#2 and base|base#2 is [0-9.]+% (faster|slower) than base) in ITL" "$tmp/out") \
    || fail "A/A run $seed has no ITL verdict"
  echo "A/A seed $seed: $line"
  [[ $line == *"no significant difference"* ]] && quiet=$((quiet + 1))
done
[[ $quiet -ge 7 ]] || fail "A/A: only $quiet of 10 runs found no significant difference (expected >= 7)"

for seed in 1 2; do
  "$LLMRT" bench -c "$tmp/base.ini" -c "$tmp/deep.ini" "${run[@]}" --seed "$seed" --allow-diff \
    > "$tmp/out" 2>&1 || fail "A/B run $seed"
  grep -q "model differs: base runs" "$tmp/out" || fail "the model difference is reported"
  for m in ITL TTFT; do
    line=$(grep -E "^  deep is [0-9.]+% slower than base in $m \[[0-9.]+%, [0-9.]+%\]$" "$tmp/out") \
      || fail "A/B run $seed: twice the layers not found slower in $m"
    echo "A/B seed $seed: $line"
  done
done
echo "ok: bench A/A and A/B verdicts"
