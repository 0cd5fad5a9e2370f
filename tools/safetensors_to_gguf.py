#!/usr/bin/env python3
"""safetensors_to_gguf.py — write a dense Qwen3 checkpoint (e.g. from `llmrt mkmodel`) as a
GGUF file for llama.cpp, with the Python standard library only.

Why: to measure llama.cpp side by side on the same shapes and weights where its own
convert_hf_to_gguf.py cannot run (it needs numpy, torch and the tokenizer files). The GGUF
carries no vocabulary (tokenizer.ggml.model = "none", qwen3.vocab_size set), which is enough
for llama-bench (it feeds random token ids). Quantize it with llama.cpp's llama-quantize
(e.g. to Q4_0) for the 4-bit comparison.

    tools/safetensors_to_gguf.py MODEL_DIR OUT.gguf

The 2-D weights keep their dtype (BF16, F16 or F32: the bytes are copied); 1-D tensors (the
norms) are written as F32, as llama.cpp's converter does. Tensor names follow llama.cpp's
qwen3 mapping; q/k need no permutation (qwen3 uses NeoX RoPE in llama.cpp). GGUF layout
(version 3): header, key/value metadata, tensor infos (dims innermost first), data aligned
to 32 bytes.
"""
import json
import os
import re
import struct
import sys

GGUF_MAGIC = 0x46554747
ALIGN = 32
# gguf metadata value types
T_U32, T_F32, T_STRING = 4, 6, 8
# ggml tensor types
GGML = {"F32": 0, "F16": 1, "BF16": 30}
FILE_TYPE = {"F32": 0, "F16": 1, "BF16": 32}  # llama_ftype: ALL_F32, MOSTLY_F16, MOSTLY_BF16


def gstr(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, value):
    out = gstr(key) + struct.pack("<I", vtype)
    if vtype == T_U32:
        return out + struct.pack("<I", value)
    if vtype == T_F32:
        return out + struct.pack("<f", value)
    if vtype == T_STRING:
        return out + gstr(value)
    raise ValueError(vtype)


def read_safetensors(model_dir):
    """[(name, dtype, shape, path, offset, nbytes)] over every shard."""
    files = sorted(f for f in os.listdir(model_dir) if f.endswith(".safetensors"))
    if not files:
        sys.exit(f"{model_dir}: no .safetensors files")
    tensors = []
    for f in files:
        path = os.path.join(model_dir, f)
        with open(path, "rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(n))
        for name, info in header.items():
            if name == "__metadata__":
                continue
            a, b = info["data_offsets"]
            tensors.append((name, info["dtype"], info["shape"], path, 8 + n + a, b - a))
    return tensors


def gguf_name(hf):
    fixed = {
        "model.embed_tokens.weight": "token_embd.weight",
        "model.norm.weight": "output_norm.weight",
        "lm_head.weight": "output.weight",
    }
    if hf in fixed:
        return fixed[hf]
    m = re.fullmatch(r"model\.layers\.(\d+)\.(.+)", hf)
    if not m:
        sys.exit(f"unexpected tensor {hf}")
    layer, rest = m.groups()
    table = {
        "input_layernorm.weight": "attn_norm.weight",
        "post_attention_layernorm.weight": "ffn_norm.weight",
        "self_attn.q_proj.weight": "attn_q.weight",
        "self_attn.k_proj.weight": "attn_k.weight",
        "self_attn.v_proj.weight": "attn_v.weight",
        "self_attn.o_proj.weight": "attn_output.weight",
        "self_attn.q_norm.weight": "attn_q_norm.weight",
        "self_attn.k_norm.weight": "attn_k_norm.weight",
        "mlp.gate_proj.weight": "ffn_gate.weight",
        "mlp.up_proj.weight": "ffn_up.weight",
        "mlp.down_proj.weight": "ffn_down.weight",
    }
    if rest not in table:
        sys.exit(f"unexpected tensor {hf} (quantized checkpoints are not converted)")
    return f"blk.{layer}.{table[rest]}"


def to_f32(raw, dtype):
    if dtype == "F32":
        return raw
    n = len(raw) // 2
    h = struct.unpack(f"<{n}H", raw)
    if dtype == "BF16":
        return struct.pack(f"<{n}I", *[v << 16 for v in h])
    return struct.pack(f"<{n}f", *[struct.unpack("<e", struct.pack("<H", v))[0] for v in h])


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[2])
    model_dir, out_path = sys.argv[1], sys.argv[2]
    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    if "quantization_config" in cfg:
        sys.exit(f"{model_dir} is quantized; convert the dense model and use llama-quantize")
    tensors = read_safetensors(model_dir)
    dtypes = {t[1] for t in tensors if len(t[2]) == 2}
    if len(dtypes) != 1 or next(iter(dtypes)) not in GGML:
        sys.exit(f"2-D weights must share one dtype of F32/F16/BF16, found {sorted(dtypes)}")
    wdt = next(iter(dtypes))
    hd = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    meta = [
        kv("general.architecture", T_STRING, "qwen3"),
        kv("general.name", T_STRING, os.path.basename(os.path.normpath(model_dir))),
        kv("general.file_type", T_U32, FILE_TYPE[wdt]),
        kv("general.alignment", T_U32, ALIGN),
        kv("qwen3.context_length", T_U32, cfg.get("max_position_embeddings", 40960)),
        kv("qwen3.embedding_length", T_U32, cfg["hidden_size"]),
        kv("qwen3.block_count", T_U32, cfg["num_hidden_layers"]),
        kv("qwen3.feed_forward_length", T_U32, cfg["intermediate_size"]),
        kv("qwen3.attention.head_count", T_U32, cfg["num_attention_heads"]),
        kv("qwen3.attention.head_count_kv", T_U32, cfg["num_key_value_heads"]),
        kv("qwen3.attention.key_length", T_U32, hd),
        kv("qwen3.attention.value_length", T_U32, hd),
        kv("qwen3.rope.freq_base", T_F32, float(cfg.get("rope_theta", 1e6))),
        kv("qwen3.attention.layer_norm_rms_epsilon", T_F32, float(cfg.get("rms_norm_eps", 1e-6))),
        kv("qwen3.vocab_size", T_U32, cfg["vocab_size"]),
        kv("tokenizer.ggml.model", T_STRING, "none"),
    ]
    tied = cfg.get("tie_word_embeddings", False)
    plan = []  # (gguf name, ggml type, dims innermost first, source, bytes out)
    for name, dt, shape, path, off, nbytes in tensors:
        if tied and name == "lm_head.weight":
            continue  # llama.cpp reuses token_embd
        if dt not in GGML:
            sys.exit(f"{name}: dtype {dt} is not F32/F16/BF16")
        one_d = len(shape) == 1
        ttype = GGML["F32"] if one_d else GGML[dt]
        size = nbytes * 2 if one_d and dt != "F32" else nbytes
        plan.append((gguf_name(name), ttype, list(reversed(shape)), (path, off, nbytes, dt, one_d), size))
    plan.sort(key=lambda p: p[0])
    infos, offset = [], 0
    for gname, ttype, dims, _, size in plan:
        infos.append(gstr(gname) + struct.pack("<I", len(dims)) +
                     b"".join(struct.pack("<Q", d) for d in dims) + struct.pack("<IQ", ttype, offset))
        offset += (size + ALIGN - 1) // ALIGN * ALIGN
    with open(out_path, "wb") as out:
        out.write(struct.pack("<IIQQ", GGUF_MAGIC, 3, len(plan), len(meta)))
        for m in meta:
            out.write(m)
        for i in infos:
            out.write(i)
        out.write(b"\0" * (-out.tell() % ALIGN))
        for gname, ttype, dims, (path, off, nbytes, dt, one_d), size in plan:
            with open(path, "rb") as src:
                src.seek(off)
                if one_d:
                    out.write(to_f32(src.read(nbytes), dt))
                else:
                    left = nbytes
                    while left:
                        chunk = src.read(min(left, 64 << 20))
                        out.write(chunk)
                        left -= len(chunk)
            out.write(b"\0" * (-size % ALIGN))
    print(f"{out_path}: {len(plan)} tensors, {wdt} weights, {offset / 1e9:.2f} GB")


if __name__ == "__main__":
    main()
