#!/usr/bin/env bash
# Qwen3-MoE end to end through the llmrt binary, with no download (the model plugin's own
# synthetic checkpoints; CPU backend):
#   1. mkmodel --preset qwen3-moe-tiny, dense and AWQ (sharded): one module per expert as on
#      disk, the router dense, the dense layer's MLP; --config of the preset's own config.json
#      reproduces it byte for byte; the presets are listed with their plugin
#   2. batched with chunked prefill (prefill and decode sharing steps) == each prompt alone, and
#      the same ids under each memory plugin (pageable, pinned, uva), dense and AWQ
#   3. teacher-forced logits agree with greedy generation (forward and forward_argmax)
#   4. chat and tokenize through the model plugin's Qwen3 chat format (a small tokenizer with
#      Qwen3's template): the prompt renders exactly as the dense qwen3 plugin renders it
#   5. serve with the real Qwen3 tokenizer (when tools/fetch-qwen3-tokenizer.sh can get it):
#      /tokenize of messages and a chat completion
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
SERVE_PID=
trap '[[ -n "$SERVE_PID" ]] && kill -KILL $SERVE_PID 2>/dev/null; rm -rf "$tmp"' EXIT
common=(--set runtime.backend=cpu --set "runtime.plugin_dir=$LLMRT_PLUGIN_DIR")
mk() { "$LLMRT" mkmodel -q "$@" > "$tmp/mk.log" 2>&1 || { cat "$tmp/mk.log"; fail "mkmodel $*"; }; }

# ---- 1. synthetic checkpoints ----
mk --preset qwen3-moe-tiny -o "$tmp/tiny"
mk --preset qwen3-moe-tiny --quant awq --shard-mb 0.2 -o "$tmp/awq"
[[ -f "$tmp/awq/model.safetensors.index.json" ]] || fail "the AWQ checkpoint is not sharded"
"$LLMRT" mkmodel --inspect "$tmp/awq" > "$tmp/inspect" || fail "--inspect"
for want in "model.layers.0.mlp.gate.weight F16 \[8, 64\]" \
            "model.layers.2.mlp.experts.7.down_proj.qweight I32 \[32, 8\]" \
            "model.layers.0.mlp.experts.0.gate_proj.scales F16 \[2, 32\]" \
            "model.layers.1.mlp.gate_proj.qweight I32 \[64, 16\]" \
            "model.layers.0.self_attn.q_proj.qweight I32"; do
  grep -q "^$want" "$tmp/inspect" || { grep "layers.0.mlp" "$tmp/inspect" | head; fail "inspect lacks $want"; }
done
grep -q "model.layers.1.mlp.gate.weight" "$tmp/inspect" && fail "the dense layer 1 has a router"
grep -q '"mlp_only_layers": \[' "$tmp/tiny/config.json" || fail "config.json lacks mlp_only_layers"
grep -q '"architectures": \[' "$tmp/tiny/config.json" && grep -q Qwen3MoeForCausalLM "$tmp/tiny/config.json" \
  || fail "config.json architectures"
mk --config "$tmp/tiny/config.json" -o "$tmp/tiny2"
for f in config.json generation_config.json model.safetensors; do
  cmp -s "$tmp/tiny/$f" "$tmp/tiny2/$f" || fail "--config of the preset's config.json: $f differs"
done
"$LLMRT" mkmodel --list-presets > "$tmp/presets" 2>&1 || fail "--list-presets"
for p in qwen3-moe-tiny qwen3-30b-a3b qwen3-235b-a22b; do
  grep -q "^  $p  *(qwen3_moe) " "$tmp/presets" || { cat "$tmp/presets"; fail "--list-presets lacks $p"; }
done
"$LLMRT" mkmodel --preset qwen3-moe-tiny --model-opt experts=4 -o "$tmp/x" > "$tmp/out" 2>&1 && fail "an unknown model option is refused"
grep -q "unknown qwen3_moe option 'experts'" "$tmp/out" || { cat "$tmp/out"; fail "unknown option message"; }
echo "ok: mkmodel presets, AWQ shards, --config round trip"

# ---- 2. batched == alone, every memory plugin ----
: > "$tmp/prompts"
for i in $(seq 0 9); do
  n=$(( (i * 37) % 90 + 1 ))
  seq -s, $((i * 5 + 1)) $((i * 5 + n)) | awk -F, '{for(i=1;i<=NF;i++) $i=($i*7919)%509; print}' OFS=, >> "$tmp/prompts"
done
for model in tiny awq; do
  for mem in pageable pinned uva; do
    "$LLMRT" generate "${common[@]}" --set memory.plugin=$mem --set scheduler.max_num_batched_tokens=64 \
      --set scheduler.max_num_seqs=4 --model "$tmp/$model" --prompts-file "$tmp/prompts" --ids \
      --max-tokens 24 --ignore-eos --print-ids > "$tmp/batched_$mem" 2> "$tmp/err" \
      || { cat "$tmp/err"; fail "$model batched ($mem)"; }
    [[ $(wc -l < "$tmp/batched_$mem") -eq 10 ]] || fail "$model ($mem): 10 lines expected"
  done
  cmp -s "$tmp/batched_pageable" "$tmp/batched_pinned" && cmp -s "$tmp/batched_pageable" "$tmp/batched_uva" \
    || fail "$model: pageable, pinned and uva gave different ids"
  for i in $(seq 1 10); do
    alone=$("$LLMRT" generate "${common[@]}" --model "$tmp/$model" --prompt-ids "$(sed -n "${i}p" "$tmp/prompts")" \
            --max-tokens 24 --ignore-eos --print-ids 2>/dev/null)
    [[ "$(sed -n "${i}p" "$tmp/batched_pageable")" == "$alone" ]] \
      || fail "$model prompt $i: batched [$(sed -n "${i}p" "$tmp/batched_pageable")] != alone [$alone]"
  done
  echo "ok: $model: batched with chunked prefill == alone; identical ids on pageable / pinned / uva"
done

# ---- 3. teacher-forced logits agree with greedy generation ----
prompt=3,14,15,92,65,35
gen=$("$LLMRT" generate "${common[@]}" --model "$tmp/tiny" --prompt-ids $prompt --max-tokens 10 \
      --ignore-eos --print-ids 2>/dev/null) || fail "generate"
"$LLMRT" logits "${common[@]}" --model "$tmp/tiny" --ids "$prompt,${gen// /,}" --out "$tmp/logits.f32" \
  2> "$tmp/err" || { cat "$tmp/err"; fail "llmrt logits"; }
python3 - "$tmp/logits.f32" "$prompt" "$gen" <<'PY' || fail "logits argmax != generated ids"
import array, sys
a = array.array("f"); a.frombytes(open(sys.argv[1], "rb").read())
prompt = sys.argv[2].split(","); gen = [int(x) for x in sys.argv[3].split()]
V = 512
rows = len(a) // V
assert rows == len(prompt) + len(gen), (rows, len(prompt), len(gen))
for i, g in enumerate(gen):
    r = len(prompt) - 1 + i
    row = a[r * V:(r + 1) * V]
    best = max(range(V), key=lambda j: row[j])
    assert best == g, f"row {r}: argmax {best}, generated {g}"
PY
echo "ok: teacher-forced logits agree with greedy generation"

# ---- 4. chat and tokenize through the plugin's chat format ----
python3 - "$tmp/tiny" "$LLMRT_SOURCE_DIR/tests/fixtures/tokenizer/qwen3_chat_template.jinja" <<'PY'
import json, sys
bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
m = dict(zip(bs, map(chr, cs)))
vocab = {m[32 + i]: i for i in range(95)}
vocab[m[10]] = 95
added = [(96, "<|endoftext|>", True), (97, "<|im_start|>", True), (98, "<|im_end|>", True),
         (99, "<think>", False), (100, "</think>", False)]
json.dump({"version": "1.0",
           "added_tokens": [{"id": i, "content": c, "single_word": False, "lstrip": False,
                             "rstrip": False, "normalized": False, "special": s} for i, c, s in added],
           "normalizer": None, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False,
           "trim_offsets": True, "use_regex": False}, "post_processor": None,
           "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                     "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                     "vocab": vocab, "merges": []}},
          open(sys.argv[1] + "/tokenizer.json", "w"), ensure_ascii=False)
json.dump({"chat_template": open(sys.argv[2]).read(), "eos_token": "<|im_end|>"},
          open(sys.argv[1] + "/tokenizer_config.json", "w"))
PY
printf '[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi there"}]' > "$tmp/msgs.json"
"$LLMRT" tokenize --model "$tmp/tiny" --chat "$tmp/msgs.json" --text > "$tmp/moe.txt" 2> "$tmp/err" \
  || { cat "$tmp/err"; fail "tokenize --chat with the qwen3_moe model"; }
printf '<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n\n' > "$tmp/want.txt"
cmp -s "$tmp/moe.txt" "$tmp/want.txt" || { diff "$tmp/moe.txt" "$tmp/want.txt"; fail "the Qwen3 chat prompt"; }
# a dense Qwen3 folder with the same tokenizer renders the same text: one renderer, shared
mk --preset tiny -o "$tmp/dense"
cp "$tmp/tiny/tokenizer.json" "$tmp/tiny/tokenizer_config.json" "$tmp/dense/"
"$LLMRT" tokenize --model "$tmp/dense" --chat "$tmp/msgs.json" --text > "$tmp/dense.txt" 2> "$tmp/err" \
  || { cat "$tmp/err"; fail "tokenize --chat with the dense qwen3 model"; }
cmp -s "$tmp/moe.txt" "$tmp/dense.txt" || fail "qwen3 and qwen3_moe render differently"
printf 'Hi there\nAnd now?\n' |
  "$LLMRT" chat "${common[@]}" --model "$tmp/tiny" --max-tokens 6 --seed 3 > "$tmp/out" 2> "$tmp/err" \
  || { cat "$tmp/err"; fail "chat exited $?"; }
[[ $(grep -c '^\[[0-9]* prompt tokens, [0-9]* generated' "$tmp/err") -eq 2 ]] || { cat "$tmp/err"; fail "two chat replies"; }
echo "ok: chat and tokenize through the Qwen3 chat format"

# ---- 5. serve with the real Qwen3 tokenizer ----
if ! tok=$("$LLMRT_SOURCE_DIR/tools/fetch-qwen3-tokenizer.sh" 2> "$tmp/fetch.err"); then
  echo "note: the Qwen3 tokenizer could not be fetched: serve not checked"; cat "$tmp/fetch.err"
  echo "ok: moe"; exit 0
fi
. "$LLMRT_SOURCE_DIR/tests/serve/lib.sh"
node -e '
  const fs = require("fs");
  const c = JSON.parse(fs.readFileSync(process.argv[1], "utf8"));
  Object.assign(c, {vocab_size: 151936, bos_token_id: 151643, eos_token_id: 151645,
                    tie_word_embeddings: true, max_position_embeddings: 4096});
  fs.writeFileSync(process.argv[2], JSON.stringify(c, null, 1));
' "$tmp/tiny/config.json" "$tmp/serve-config.json" || fail "writing the serve config"
mk --config "$tmp/serve-config.json" -o "$tmp/served"
cp "$tok/tokenizer.json" "$tok/tokenizer_config.json" "$tmp/served/" || fail "copying the tokenizer"
serve_start moe "$tmp/served" --set cache.max_model_len=1024
o=$tmp/o.json
msgs='[{"role": "user", "content": "Hi there"}]'
[[ $(post /tokenize "{\"messages\": $msgs}" $o) == 200 ]] || fail "/tokenize messages"
check $o 'j.tokens[0] === 151644 && j.count > 5' "chat /tokenize starts with <|im_start|>"
[[ $(post /v1/chat/completions "{\"model\": \"served\", \"messages\": $msgs, \"max_tokens\": 5, \"temperature\": 0}" $o) == 200 ]] \
  || { cat $o; fail "/v1/chat/completions"; }
check $o 'j.object === "chat.completion" && j.usage.completion_tokens === 5 && typeof j.choices[0].message.content === "string"' \
  "a chat completion"
serve_stop
SERVE_PID=
echo "ok: serve with the real Qwen3 tokenizer"
echo "ok: moe"
