#!/usr/bin/env bash
# `llmrt mkmodel` end to end: the tiny preset and a sharded AWQ model re-open with llmrt's
# reader (`mkmodel --inspect`) with the expected tensors, dtypes and shapes; same seed gives
# identical bytes, another seed different ones, and the bytes of the reference hashes;
# --config reproduces a preset from its own config.json; the presets come from the model
# plugins; usage errors exit 2, what a plugin refuses exits 1 naming the file, key or linear.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

mk() { "$LLMRT" mkmodel -q "$@" > "$tmp/mk.out" 2>&1 || { cat "$tmp/mk.out"; fail "mkmodel $*"; }; }
inspect() { "$LLMRT" mkmodel --inspect "$1" > "$2" 2> "$tmp/inspect.err" || { cat "$tmp/inspect.err"; fail "inspect $1"; }; }
has() { grep -qxF "$2" "$1" || { grep -F "${2%% *}" "$1"; fail "$1 lacks line: $2"; }; }

# ---- tiny, dense bf16, untied: one file, HF names and shapes (head_dim 32 != 64/4) ----
mk --preset tiny -o "$tmp/tiny"
for f in config.json generation_config.json model.safetensors; do
  [[ -f "$tmp/tiny/$f" ]] || fail "tiny: no $f"
done
[[ ! -e "$tmp/tiny/model.safetensors.index.json" ]] || fail "tiny must not be sharded"
inspect "$tmp/tiny" "$tmp/tiny.txt"
[[ $(grep -vc '^#' "$tmp/tiny.txt") -eq 25 ]] || fail "tiny: expected 25 tensors, got $(grep -vc '^#' "$tmp/tiny.txt")"
has "$tmp/tiny.txt" "model.embed_tokens.weight BF16 [512, 64] model.safetensors"
has "$tmp/tiny.txt" "lm_head.weight BF16 [512, 64] model.safetensors"
has "$tmp/tiny.txt" "model.norm.weight BF16 [64] model.safetensors"
for i in 0 1; do
  p="model.layers.$i"
  has "$tmp/tiny.txt" "$p.input_layernorm.weight BF16 [64] model.safetensors"
  has "$tmp/tiny.txt" "$p.post_attention_layernorm.weight BF16 [64] model.safetensors"
  has "$tmp/tiny.txt" "$p.self_attn.q_proj.weight BF16 [128, 64] model.safetensors"
  has "$tmp/tiny.txt" "$p.self_attn.k_proj.weight BF16 [64, 64] model.safetensors"
  has "$tmp/tiny.txt" "$p.self_attn.v_proj.weight BF16 [64, 64] model.safetensors"
  has "$tmp/tiny.txt" "$p.self_attn.o_proj.weight BF16 [64, 128] model.safetensors"
  has "$tmp/tiny.txt" "$p.self_attn.q_norm.weight BF16 [32] model.safetensors"
  has "$tmp/tiny.txt" "$p.self_attn.k_norm.weight BF16 [32] model.safetensors"
  has "$tmp/tiny.txt" "$p.mlp.gate_proj.weight BF16 [128, 64] model.safetensors"
  has "$tmp/tiny.txt" "$p.mlp.up_proj.weight BF16 [128, 64] model.safetensors"
  has "$tmp/tiny.txt" "$p.mlp.down_proj.weight BF16 [64, 128] model.safetensors"
done
grep -q '"architectures": \[' "$tmp/tiny/config.json" || fail "config.json architectures"
grep -q '"Qwen3ForCausalLM"' "$tmp/tiny/config.json" || fail "config.json architecture name"
grep -q '"model_type": "qwen3"' "$tmp/tiny/config.json" || fail "config.json model_type"
grep -q '"torch_dtype": "bfloat16"' "$tmp/tiny/config.json" || fail "config.json torch_dtype"
grep -q '"head_dim": 32' "$tmp/tiny/config.json" || fail "config.json head_dim"
grep -q '"tie_word_embeddings": false' "$tmp/tiny/config.json" || fail "config.json tie"
grep -q quantization_config "$tmp/tiny/config.json" && fail "dense config.json has quantization_config"

# ---- determinism: same seed -> same bytes (any thread count); other seed -> other bytes ----
mk --preset tiny --threads 1 -o "$tmp/tiny1"
mk --preset tiny --seed 1 -o "$tmp/tiny_s1"
cmp -s "$tmp/tiny/model.safetensors" "$tmp/tiny1/model.safetensors" || fail "same seed, different bytes"
cmp -s "$tmp/tiny/config.json" "$tmp/tiny1/config.json" || fail "same options, different config.json"
cmp -s "$tmp/tiny/model.safetensors" "$tmp/tiny_s1/model.safetensors" && fail "seeds 0 and 1 wrote the same bytes"

# ---- AWQ g32, tied, sharded by a small --shard-mb: index + shards, AutoAWQ gemm layout ----
mk --preset tiny --quant awq --group-size 32 --tie --shard-mb 0.05 --seed 7 -o "$tmp/awq"
[[ -f "$tmp/awq/model.safetensors.index.json" ]] || fail "awq: no index"
[[ ! -e "$tmp/awq/model.safetensors" ]] || fail "awq: sharded output also has model.safetensors"
shards=("$tmp/awq"/model-*-of-*.safetensors); nshards=${#shards[@]}
[[ $nshards -ge 3 ]] || fail "awq: expected >= 3 shards, got $nshards"
[[ -f "$tmp/awq/model-00001-of-$(printf %05d "$nshards").safetensors" ]] || fail "awq: shard names"
inspect "$tmp/awq" "$tmp/awq.txt"
[[ $(grep -vc '^#' "$tmp/awq.txt") -eq $((2 + 2 * (4 + 7 * 3))) ]] || fail "awq: tensor count"
grep -q '^lm_head.weight ' "$tmp/awq.txt" && fail "awq --tie still has lm_head.weight"
grep -q '^model.embed_tokens.weight F16 \[512, 64\] model-0000' "$tmp/awq.txt" || fail "awq: embed is not F16"
grep -q '^model.layers.1.self_attn.q_norm.weight F16 \[32\] ' "$tmp/awq.txt" || fail "awq: q_norm"
# qweight [in, out/8], qzeros [in/32, out/8], scales [in/32, out]
grep -q '^model.layers.0.self_attn.q_proj.qweight I32 \[64, 16\] ' "$tmp/awq.txt" || fail "awq: q_proj.qweight"
grep -q '^model.layers.0.self_attn.q_proj.qzeros I32 \[2, 16\] ' "$tmp/awq.txt" || fail "awq: q_proj.qzeros"
grep -q '^model.layers.0.self_attn.q_proj.scales F16 \[2, 128\] ' "$tmp/awq.txt" || fail "awq: q_proj.scales"
grep -q '^model.layers.1.mlp.down_proj.qweight I32 \[128, 8\] ' "$tmp/awq.txt" || fail "awq: down_proj.qweight"
grep -q '^model.layers.1.mlp.down_proj.qzeros I32 \[4, 8\] ' "$tmp/awq.txt" || fail "awq: down_proj.qzeros"
grep -q '^model.layers.1.mlp.down_proj.scales F16 \[4, 64\] ' "$tmp/awq.txt" || fail "awq: down_proj.scales"
grep -q '\.weight I32\|proj.weight ' "$tmp/awq.txt" && fail "awq: a decoder linear kept a dense weight"
# every tensor the index lists is where the index says (the reader checks; count them here)
[[ $(grep -c '"model\.\|"lm_head' "$tmp/awq/model.safetensors.index.json") -eq $(grep -vc '^#' "$tmp/awq.txt") ]] \
  || fail "awq: index and shards list different tensor counts"
grep -q '"quant_method": "awq"' "$tmp/awq/config.json" || fail "awq: quant_method"
grep -q '"group_size": 32' "$tmp/awq/config.json" || fail "awq: group_size"
grep -q '"version": "gemm"' "$tmp/awq/config.json" || fail "awq: version"
grep -q '"zero_point": true' "$tmp/awq/config.json" || fail "awq: zero_point"
grep -q '"modules_to_not_convert": null' "$tmp/awq/config.json" || fail "awq: modules_to_not_convert"
grep -q '"torch_dtype": "float16"' "$tmp/awq/config.json" || fail "awq: torch_dtype"
# the same model, sharded differently, holds the same tensor bytes: compare via a 2nd run
mk --preset tiny --quant awq --group-size 32 --tie --shard-mb 0.05 --seed 7 --threads 3 -o "$tmp/awq2"
for f in "$tmp/awq"/model-*.safetensors; do
  cmp -s "$f" "$tmp/awq2/$(basename "$f")" || fail "awq: $(basename "$f") differs between runs"
done

# ---- re-running into the same folder unsharded removes the old shards and index ----
mk --preset tiny --quant awq --group-size 32 --tie --seed 7 -o "$tmp/awq"
[[ ! -e "$tmp/awq/model.safetensors.index.json" ]] || fail "stale index left behind"
ls "$tmp/awq"/model-*.safetensors > /dev/null 2>&1 && fail "stale shards left behind"
inspect "$tmp/awq" "$tmp/awq_one.txt"

# ---- --config: a preset's own config.json reproduces it exactly ----
mk --config "$tmp/tiny/config.json" -o "$tmp/from_cfg"
cmp -s "$tmp/tiny/config.json" "$tmp/from_cfg/config.json" || fail "--config changed config.json"
cmp -s "$tmp/tiny/model.safetensors" "$tmp/from_cfg/model.safetensors" || fail "--config changed the weights"
mk --config "$tmp/tiny/config.json" --dtype f16 --no-tie -o "$tmp/from_cfg16"
grep -q '"torch_dtype": "float16"' "$tmp/from_cfg16/config.json" || fail "--dtype f16 not applied"

# ---- a tied model that still carries lm_head.weight ----
mk --preset tiny --tie --tied-lm-head -o "$tmp/tied_head"
inspect "$tmp/tied_head" "$tmp/tied_head.txt"
has "$tmp/tied_head.txt" "lm_head.weight BF16 [512, 64] model.safetensors"
grep -q '"tie_word_embeddings": true' "$tmp/tied_head/config.json" || fail "--tie not in config.json"

# ---- AWQ without a group size: the largest that divides every in_features (tiny: 64) ----
mk --preset tiny --quant awq -o "$tmp/awq_auto"
grep -q '"group_size": 64' "$tmp/awq_auto/config.json" || fail "awq without --group-size: not 64"

# ---- the presets come from the model plugins ----
"$LLMRT" mkmodel --list-presets > "$tmp/presets.txt" 2>&1 || fail "--list-presets"
for p in tiny qwen3-0.6b qwen3-8b; do
  grep -q "^  $p  *(qwen3) " "$tmp/presets.txt" || { cat "$tmp/presets.txt"; fail "--list-presets lacks $p"; }
done

# ---- the bytes of tests/fixtures/mkmodel-tiny.sha256 (written by mkmodel before the plugins
#      described checkpoints: the same seed gives the same files, whoever writes them) ----
ref=$tmp/ref; mkdir -p "$ref"
mk --preset tiny --seed 1 -o "$ref/tiny"
mk --preset tiny --seed 3 --dtype f32 --tie --tied-lm-head -o "$ref/tiny-f32"
mk --preset tiny --seed 1 --quant awq --group-size 32 -o "$ref/tiny-awq"
mk --preset tiny --seed 2 --shard-mb 0.1 -o "$ref/tiny-shard"
mk --preset tiny --seed 2 --dtype f16 --quant awq --group-size 64 --shard-mb 0.05 -o "$ref/tiny-awq-shard"
(cd "$ref" && sha256sum --quiet -c "$LLMRT_SOURCE_DIR/tests/fixtures/mkmodel-tiny.sha256") \
  || fail "mkmodel's bytes differ from tests/fixtures/mkmodel-tiny.sha256"

# ---- progress: a summary on stderr unless -q ----
"$LLMRT" mkmodel --preset tiny -o "$tmp/loud" > "$tmp/loud.out" 2>&1 || fail "mkmodel without -q"
grep -q "writing: done: .* 25 tensors" "$tmp/loud.out" || { cat "$tmp/loud.out"; fail "no progress summary"; }
grep -q "wrote $tmp/loud: 25 tensors" "$tmp/loud.out" || { cat "$tmp/loud.out"; fail "no final line"; }

# ---- usage errors exit 2; bad inputs exit 1 and name the file ----
expect_rc() { local want=$1 pat=$2; shift 2
  "$LLMRT" mkmodel "$@" > "$tmp/err.out" 2>&1; local rc=$?
  [[ $rc -eq $want ]] || { cat "$tmp/err.out"; fail "mkmodel $* exited $rc, expected $want"; }
  grep -qF -- "$pat" "$tmp/err.out" || { cat "$tmp/err.out"; fail "mkmodel $*: message lacks '$pat'"; }
}
expect_rc 2 "give exactly one of --preset NAME or --config FILE" -o "$tmp/x"
expect_rc 2 "give exactly one of --preset NAME or --config FILE" --preset tiny --config "$tmp/tiny/config.json" -o "$tmp/x"
expect_rc 2 "missing -o DIR" --preset tiny
expect_rc 2 "unknown preset 'qwen3-70b'" --preset qwen3-70b -o "$tmp/x"
expect_rc 2 "--quant gptq: no quant plugin of that name (available: awq" --preset tiny --quant gptq -o "$tmp/x"
expect_rc 2 "--dtype 'fp8'" --preset tiny --dtype fp8 -o "$tmp/x"
expect_rc 2 "--shard-mb '-1'" --preset tiny --shard-mb -1 -o "$tmp/x"
expect_rc 2 "--group-size 'abc'" --preset tiny --group-size abc -o "$tmp/x"
expect_rc 2 "--group-size goes with --quant" --preset tiny --group-size 32 -o "$tmp/x"
expect_rc 2 "--quant-opt 'x': expected KEY=VALUE" --preset tiny --quant awq --quant-opt x -o "$tmp/x"
# what the plugins refuse: the quant format (AWQ) and the architecture (qwen3)
expect_rc 1 "AWQ checkpoints are float16" --preset tiny --quant awq --dtype bf16 -o "$tmp/x"
expect_rc 1 "--tied-lm-head is for tied models" --preset tiny --tied-lm-head -o "$tmp/x"
expect_rc 1 "AWQ group_size '48' is not supported" --preset tiny --quant awq --group-size 48 -o "$tmp/x"
expect_rc 1 "AWQ group size 128 does not divide model.layers.0.self_attn.q_proj's in_features 64" \
  --preset tiny --quant awq --group-size 128 -o "$tmp/x"
expect_rc 1 "unknown AWQ option 'bits'" --preset tiny --quant awq --quant-opt bits=8 -o "$tmp/x"
expect_rc 1 "unknown qwen3 option 'says'" --preset tiny --model-opt says=hi -o "$tmp/x"
printf '{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 8,
 "hidden_size": 8, "intermediate_size": 8, "num_hidden_layers": 1, "num_attention_heads": 1}\n' > "$tmp/llama.json"
expect_rc 1 'architectures ["LlamaForCausalLM"] is not supported' --config "$tmp/llama.json" -o "$tmp/x"
printf '{"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3"}\n' > "$tmp/short.json"
expect_rc 1 'short.json: config.json: required key "vocab_size" is missing' --config "$tmp/short.json" -o "$tmp/x"
expect_rc 1 "nope.json: cannot open" --config "$tmp/nope.json" -o "$tmp/x"
# --inspect on a damaged checkpoint: the reader's message names the file and tensor
cp -r "$tmp/tiny" "$tmp/cut"
truncate -s -100 "$tmp/cut/model.safetensors"
expect_rc 1 "model.safetensors: tensor '" --inspect "$tmp/cut"
expect_rc 1 "out of range" --inspect "$tmp/cut"
echo "ok: mkmodel"
