#!/usr/bin/env bash
# Malformed checkpoints at the model level, through the real binary (`llmrt logits`): a
# missing tensor, shapes that do not match config.json, the wrong dtype for an AWQ tensor,
# an architecture or quantization nothing supports, files that are FIFOs, /dev/zero or too
# large (model folder and plugin folder), config and tokenizer values that would size absurd
# allocations, ids outside the vocabulary, no model.
# Each must exit 1 (no crash) with a message that names what is wrong and where.
# Checkpoints come from `llmrt mkmodel --preset tiny`, edited with python3's stdlib
# (safetensors headers are JSON, so a tensor is renamed or retyped by rewriting the header).
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

"$LLMRT" mkmodel --preset tiny -q -o "$tmp/dense" > "$tmp/log" 2>&1 ||
  { cat "$tmp/log"; echo "SKIP: llmrt mkmodel --preset tiny does not work in this build"; exit 77; }
"$LLMRT" mkmodel --preset tiny --quant awq --group-size 32 -q -o "$tmp/awq" > "$tmp/log" 2>&1 ||
  { cat "$tmp/log"; fail "llmrt mkmodel --quant awq"; }
ids=1,2,3,4,5,6,7

# Both good checkpoints must load and run: the failures below are then due to the edits.
for m in dense awq; do
  "$LLMRT" logits --model "$tmp/$m" --set runtime.backend=cpu --ids $ids --out "$tmp/ok.f32" \
    > "$tmp/out" 2>&1 || { cat "$tmp/out"; fail "unmodified $m checkpoint does not run"; }
done

# Rewrite a safetensors header: rename a tensor (name → new) or change its dtype (name:DTYPE).
edit_header() { # file, python expression applied to dict h
  python3 - "$1" "$2" <<'EOF'
import json, struct, sys
path, expr = sys.argv[1], sys.argv[2]
data = open(path, "rb").read()
n = struct.unpack("<Q", data[:8])[0]
h = json.loads(data[8:8 + n])
exec(expr)
hdr = json.dumps(h, separators=(",", ":")).encode()
hdr += b" " * (-len(hdr) % 8)
open(path, "wb").write(struct.pack("<Q", len(hdr)) + hdr + data[8 + n:])
EOF
}

# copy a checkpoint folder; echo the copy's path
variant() { rm -rf "$tmp/$2"; cp -r "$tmp/$1" "$tmp/$2"; echo "$tmp/$2"; }

# run logits on a folder; must exit 1 (within 60 s: a FIFO must never block) and print every
# given substring
expect_error() { # dir, substrings...
  local dir=$1; shift
  timeout 60 "$LLMRT" logits --model "$dir" --set runtime.backend=cpu --ids $ids --out "$tmp/x.f32" > "$tmp/out" 2>&1
  local rc=$?
  [[ $rc -eq 1 ]] || { cat "$tmp/out"; fail "$(basename "$dir"): exit $rc, expected 1"; }
  for s in "$@"; do
    grep -qF -- "$s" "$tmp/out" || { cat "$tmp/out"; fail "$(basename "$dir"): message lacks '$s'"; }
  done
  echo "ok: $(basename "$dir"): $(grep -m1 error "$tmp/out")"
}

# 1. a tensor the architecture needs is missing
d=$(variant dense missing)
edit_header "$d/model.safetensors" 'h["model.layers.1.mlp.up_proj.renamed"] = h.pop("model.layers.1.mlp.up_proj.weight")'
expect_error "$d" "model.layers.1.mlp.up_proj.weight"

# 2. config.json disagrees with the tensors' shapes
d=$(variant dense shape)
python3 - "$d/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); c["intermediate_size"] = c["intermediate_size"] // 2
json.dump(c, open(sys.argv[1], "w"))
EOF
expect_error "$d" "model.layers.0.mlp.gate_proj.weight" "does not match config.json" "intermediate_size"

d=$(variant dense headdim)
python3 - "$d/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); c["head_dim"] = c["head_dim"] * 2
json.dump(c, open(sys.argv[1], "w"))
EOF
expect_error "$d" "model.layers.0.self_attn.q_proj.weight" "does not match config.json" "head_dim"

# 3. an AWQ tensor in the wrong dtype (same byte size, so the file itself stays valid)
d=$(variant awq awq_scales_bf16)
edit_header "$d/model.safetensors" 'h["model.layers.0.self_attn.k_proj.scales"]["dtype"] = "BF16"'
expect_error "$d" "model.layers.0.self_attn.k_proj.scales" "BF16" "F16"
d=$(variant awq awq_qweight_f32)
edit_header "$d/model.safetensors" 'h["model.layers.1.mlp.down_proj.qweight"]["dtype"] = "F32"'
expect_error "$d" "model.layers.1.mlp.down_proj.qweight" "F32" "I32"

# 4. a dense weight in an integer dtype
d=$(variant dense norm_i16)
edit_header "$d/model.safetensors" 'h["model.norm.weight"]["dtype"] = "I16"'
expect_error "$d" "model.norm.weight" "I16"

# 5. nothing supports the architecture / the quantization
d=$(variant dense llama)
sed -i 's/"Qwen3ForCausalLM"/"LlamaForCausalLM"/' "$d/config.json"
expect_error "$d" "LlamaForCausalLM" "is not supported" "qwen3"
d=$(variant awq awq_bits8)
python3 - "$d/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); c["quantization_config"]["bits"] = 8
json.dump(c, open(sys.argv[1], "w"))
EOF
expect_error "$d" "quantization_config" "awq" "bits"
d=$(variant awq gptq)
python3 - "$d/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1])); c["quantization_config"] = {"quant_method": "gptq", "bits": 4}
json.dump(c, open(sys.argv[1], "w"))
EOF
expect_error "$d" "gptq" "is not supported" "awq"

# 6. a truncated shard: the reader's error names the file
d=$(variant dense truncated)
truncate -s -100 "$d/model.safetensors"
expect_error "$d" "model.safetensors"

# 7. files that are not regular files, or larger than their kind may be, and config values
# that would size absurd allocations: refused by name, quickly, never blocking or reading
# until memory runs out
d=$(variant dense fifo_shard)
rm "$d/model.safetensors"; mkfifo "$d/model.safetensors"
expect_error "$d" "$d/model.safetensors: not a regular file (a FIFO)"
d=$(variant dense zero_config)
ln -sf /dev/zero "$d/config.json"
expect_error "$d" "$d/config.json: not a regular file (a character device)"
d=$(variant dense fifo_genconfig)
rm -f "$d/generation_config.json"; mkfifo "$d/generation_config.json"
expect_error "$d" "generation_config.json: not a regular file (a FIFO)"
d=$(variant dense big_config)
python3 - "$d/config.json" <<'EOF2'
import json, sys
c = json.load(open(sys.argv[1])); c["padding"] = "x" * (17 << 20)
json.dump(c, open(sys.argv[1], "w"))
EOF2
expect_error "$d" "$d/config.json:" "MiB is larger than the 16 MiB a config.json may be"
d=$(variant dense layers_1e9)
python3 - "$d/config.json" <<'EOF2'
import json, sys
c = json.load(open(sys.argv[1])); c["num_hidden_layers"] = 1000000000
json.dump(c, open(sys.argv[1], "w"))
EOF2
expect_error "$d" "num_hidden_layers is 1000000000" "model.layers.999999999" "it holds layers 0 to"

# a tokenizer.json whose added-token id would size 1e9-entry tables, and one that is a FIFO
d=$(variant dense tok_id)
cat > "$d/tokenizer.json" <<'EOF2'
{"model": {"type": "BPE", "vocab": {"a": 0, "b": 1}, "merges": []},
 "added_tokens": [{"id": 1000000000, "content": "<|x|>", "special": true}]}
EOF2
timeout 60 "$LLMRT" tokenize --tokenizer "$d" ab > "$tmp/out" 2>&1
rc=$?
[[ $rc -eq 1 ]] && grep -qF "added_tokens[0].id is 1000000000" "$tmp/out" ||
  { cat "$tmp/out"; fail "tokenizer.json with a huge added-token id: exit $rc"; }
echo "ok: tok_id: $(grep -m1 error "$tmp/out")"
rm "$d/tokenizer.json"; mkfifo "$d/tokenizer.json"
timeout 60 "$LLMRT" tokenize --tokenizer "$d" ab > "$tmp/out" 2>&1
rc=$?
[[ $rc -eq 1 ]] && grep -qF "tokenizer.json: not a regular file (a FIFO)" "$tmp/out" ||
  { cat "$tmp/out"; fail "tokenizer.json as a FIFO: exit $rc"; }
echo "ok: tok_fifo: $(grep -m1 error "$tmp/out")"

# a FIFO named x.so in a plugin folder is rejected, and every command still runs
mkdir -p "$tmp/plugins"; mkfifo "$tmp/plugins/x.so"; ln -sf /dev/zero "$tmp/plugins/zero.so"
LLMRT_PLUGIN_PATH="$tmp/plugins" timeout 60 "$LLMRT" plugins > "$tmp/out" 2>&1
rc=$?
[[ $rc -eq 0 ]] && grep -qF "$tmp/plugins/x.so: not a regular file (a FIFO)" "$tmp/out" &&
  grep -qF "$tmp/plugins/zero.so: not a regular file (a character device)" "$tmp/out" ||
  { cat "$tmp/out"; fail "llmrt plugins with a FIFO in the plugin folder: exit $rc"; }
LLMRT_PLUGIN_PATH="$tmp/plugins" timeout 60 "$LLMRT" logits --model "$tmp/dense" \
  --set runtime.backend=cpu --ids $ids --out "$tmp/x.f32" > "$tmp/out" 2>&1 ||
  { cat "$tmp/out"; fail "llmrt logits with a FIFO in the plugin folder: exit $?"; }
echo "ok: FIFO and /dev/zero in the plugin folder rejected, commands still run"

# 8. ids outside the vocabulary, and no model at all
"$LLMRT" logits --model "$tmp/dense" --set runtime.backend=cpu --ids 1,99999 --out "$tmp/x.f32" > "$tmp/out" 2>&1
[[ $? -eq 1 ]] && grep -q "id 99999 (position 1) is outside the vocabulary" "$tmp/out" ||
  { cat "$tmp/out"; fail "out-of-vocabulary id"; }
"$LLMRT" logits --ids 1,2 --out "$tmp/x.f32" > "$tmp/out" 2>&1
[[ $? -eq 1 ]] && grep -q "no model: set model.path or pass --model DIR" "$tmp/out" ||
  { cat "$tmp/out"; fail "no model"; }
"$LLMRT" logits --model "$tmp/dense" --ids 1,x --out "$tmp/x.f32" > "$tmp/out" 2>&1
[[ $? -eq 2 ]] || { cat "$tmp/out"; fail "bad --ids must be a usage error (exit 2)"; }
echo "ok: bad checkpoints"
