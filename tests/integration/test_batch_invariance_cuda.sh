#!/usr/bin/env bash
# Batched == alone on the CUDA backend (skipped, exit 77, without a CUDA device or the cuda
# plugin): on a random AWQ checkpoint with Qwen3-8B's layer shapes (hidden 4096, q/k/v 6144
# out, gate/up 2 x 12288, 32 heads, 8 KV heads, head_dim 128; 3 layers and a 32k vocabulary to
# stay small), twelve prompts generated together — prefill through the AWQ batch kernel and
# the tensor-core attention, decode at 12 rows through the batch kernel, the batch decode
# attention and argmax_head's gemm screen, inside CUDA graphs — give exactly the greedy ids
# each prompt gives alone (the batch-1 path: the GEMV, the batch-1 attention kernel, the int8
# screen), under every memory plugin, with and without graphs. A random model's top-2 logit
# margins are tiny, so this holds only because every kernel computes a row the same way in
# any batch.
#
# The prompts (5..20 tokens, 12 of them, 150 tokens together) fit one prefill step alone and
# together, below the AWQ batch kernel's 256 rows: a step past that goes through dequant +
# cuBLAS, whose rounding depends on the batch.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
[[ -f "$LLMRT_PLUGIN_DIR/backend-cuda.so" ]] || { echo "skip: backend-cuda.so not built"; exit 77; }
command -v nvidia-smi > /dev/null && nvidia-smi -L 2>/dev/null | grep -q GPU || { echo "skip: no CUDA device"; exit 77; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
cat > "$tmp/config.json" <<'EOF'
{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "vocab_size": 32000,
 "hidden_size": 4096, "intermediate_size": 12288, "num_hidden_layers": 3,
 "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128,
 "max_position_embeddings": 4096, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
 "tie_word_embeddings": false, "torch_dtype": "bfloat16", "bos_token_id": 1,
 "eos_token_id": 2}
EOF
"$LLMRT" mkmodel --config "$tmp/config.json" --quant awq --group-size 128 --seed 5 -q \
  -o "$tmp/model" || fail "mkmodel"
common=(--set runtime.backend=cuda --set "runtime.plugin_dir=$LLMRT_PLUGIN_DIR"
        --set cache.kv_tokens=8192 --model "$tmp/model" --max-tokens 40 --ignore-eos --print-ids)
: > "$tmp/prompts"
for i in $(seq 0 11); do
  n=$(( 5 + (i * 7) % 16 ))
  seq -s, $((i * 13 + 3)) $((i * 13 + 2 + n)) | awk -F, '{for(i=1;i<=NF;i++) $i=($i*7919)%31991+5; print}' OFS=, >> "$tmp/prompts"
done
: > "$tmp/alone"
for i in $(seq 1 12); do
  ids=$("$LLMRT" generate "${common[@]}" --set memory.plugin=pinned \
        --prompt-ids "$(sed -n "${i}p" "$tmp/prompts")" 2> "$tmp/err") || { cat "$tmp/err"; fail "prompt $i alone"; }
  echo "$ids" >> "$tmp/alone"
done
[[ $(wc -l < "$tmp/alone") -eq 12 ]] || fail "alone: $(wc -l < "$tmp/alone") lines, expected 12"
for mem in pageable pinned uva; do
  for graphs in true false; do
    [[ $graphs == false && $mem != pinned ]] && continue
    tag="$mem graphs=$graphs"
    "$LLMRT" generate "${common[@]}" --set memory.plugin=$mem --set scheduler.cuda_graphs=$graphs \
      --prompts-file "$tmp/prompts" --ids > "$tmp/batched" 2> "$tmp/err" \
      || { cat "$tmp/err"; fail "$tag: batched"; }
    for i in $(seq 1 12); do
      a=$(sed -n "${i}p" "$tmp/alone"); b=$(sed -n "${i}p" "$tmp/batched")
      [[ $(wc -w <<< "$a") -eq 40 ]] || fail "prompt $i alone: $(wc -w <<< "$a") tokens, expected 40"
      [[ "$a" == "$b" ]] || fail "$tag: prompt $i batched [$b] != alone [$a]"
    done
    echo "ok: $tag: 12 prompts batched give the ids each gives alone"
  done
done
echo "ok: batch invariance on cuda"
