#!/usr/bin/env python3
"""make_fixtures.py — tiny Qwen3 checkpoints and transformers float32 references for llmrt.

Why: llmrt's correctness reference is transformers. This script builds five tiny Qwen3
checkpoints in the exact Hugging Face layout (random weights, fixed seed), runs transformers
on them in float32 (eager attention, on the CPU so no TF32 or GPU kernel choices creep in),
and writes what the tests compare against:

  <out>/<name>/config.json, *.safetensors (+ model.safetensors.index.json when sharded)
  <out>/<name>/reference.json   prompts, greedy continuations, per-position argmax and
                                top-2 margin of the teacher-forced logits
  <out>/<name>/reference_<k>.f32  raw float32 little-endian logits [n, vocab] of prompt k
                                followed by its greedy continuation (teacher forcing)

Fixtures: bf16 dense tied, fp16 dense untied, AWQ group 32, AWQ group 128 (fp16 dense
parts, decoder linears packed here in AutoAWQ's GEMM layout; the reference runs on exactly
the dequantized weights), an f32 checkpoint split into shards with an index, and two
block-scaled FP8 checkpoints in the Qwen3-*-FP8 layout (weight float8_e4m3fn [out, in],
weight_scale_inv [ceil(out/128), ceil(in/128)] in F32 for one and BF16 for the other; hidden
128 / intermediate 320 and hidden 192, so blocks are partial in rows and inputs). Configs use
both spellings seen in the wild: transformers 5's dtype / rope_parameters, and the released
checkpoints' torch_dtype / rope_theta.

FP8 fixtures carry two references of the same prompts: reference.json is W8A16 (float32
transformers on the dequantized weights), reference_w8a8.json (with reference_w8a8_<k>.f32)
W8A8 — forward pre-hooks quantize each quantized linear's input per token per 128 inputs to
e4m3 (scale = amax / 448, as the checkpoint's "dynamic" activation_scheme and vLLM do), with
its own greedy continuations. Each says under "llmrt_set" which [quant.fp8] setting of llmrt
implements its semantics (tests/integration/logits_check.py applies it).

Qwen3-MoE fixtures (qwen3-moe-*, Qwen3MoeForCausalLM): bf16 and AWQ, 4 to 16 experts, top-k
1 to 4, norm_topk_prob on and off, a dense layer through mlp_only_layers or
decoder_sparse_step, sharded and not. They are written in the on-disk layout of the released
checkpoints — one module per expert, mlp.experts.E.{gate,up,down}_proj, the router mlp.gate —
whatever layout transformers keeps in memory (recent versions fuse the experts into
experts.gate_up_proj / experts.down_proj): the weights are made here per expert, put into the
in-memory model in its own layout, and the saved folder is reloaded with from_pretrained
(no missing or unexpected keys allowed) and must give the same logits. An independent
float64 forward written here (qwen3_moe_reference) must agree with transformers too; it also
gives each row's router margin (the smallest gap, over the sparse layers, between the K-th
and the (K+1)-th router logit), recorded in reference.json, and a fixture is made again with
the next seed until every margin is >= MOE_MIN_MARGIN, so that f32 rounding cannot flip a
routing decision in the CPU test.

Run (needs torch, transformers, safetensors; no network):
    python3 tools/make_fixtures.py --out tests/fixtures/models
    python3 tools/make_fixtures.py --out tests/fixtures/models --only fp8   # just the FP8 ones
    python3 tools/make_fixtures.py --out tests/fixtures/models --only moe   # just qwen3-moe-*
Exits non-zero on any inconsistency (saved checkpoint does not reproduce the reference,
AWQ packing does not round-trip, greedy ids disagree with the teacher-forced argmax, ...).
"""
import argparse
import array
import copy
import inspect
import json
import math
import os
import shutil
import sys

import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import Qwen3Config, Qwen3ForCausalLM

try:
    from transformers import Qwen3MoeConfig, Qwen3MoeForCausalLM
except ImportError:  # transformers before 4.51: the dense fixtures still build
    Qwen3MoeConfig = Qwen3MoeForCausalLM = None

VOCAB = 512
HEADS = 4
KV_HEADS = 2
MAX_POS = 256
NEW_TOKENS = 24
PROMPT_LENS = (5, 11, 17)
SIZE_LIMIT = 9e6  # bytes for the whole fixtures folder (dense ~3.1 MB, MoE ~3 MB)
MOE_MIN_MARGIN = 1e-3  # smallest router-logit gap at the top-k boundary a MoE fixture may have
MOE_TRIES = 64         # seeds tried per MoE fixture for that

# AutoAWQ GEMM packing (awq/modules/linear/gemm.py, WQLinear_GEMM.from_linear): eight 4-bit
# values per int32; nibble k (bits 4k..4k+3) of packed column c holds column 8c + ORDER[k].
# vLLM unpacks with the inverse, AWQ_REVERSE_ORDER. Same order as plugins/quant-awq/awq_pack.h.
AWQ_ORDER = (0, 2, 4, 6, 1, 3, 5, 7)
AWQ_REVERSE_ORDER = (0, 4, 1, 5, 2, 6, 3, 7)

FIXTURES = [
    # name, storage dtype, tied, hidden, intermediate, layers, head_dim, awq group, shards, spelling, rope theta
    # Tied: the input token's own embedding dominates the logits (greedy just repeats it)
    # unless the layers' outputs outweigh it in the residual stream: out_scale 3 does that.
    dict(name="qwen3-bf16-tied", dtype="bfloat16", tie=True, hidden=64, inter=128, layers=2,
         head_dim=32, group=None, shards=1, spelling="new", theta=1000000.0, out_scale=3.0),
    dict(name="qwen3-f16-untied", dtype="float16", tie=False, hidden=64, inter=128, layers=3,
         head_dim=32, group=None, shards=1, spelling="old", theta=10000.0),
    dict(name="qwen3-awq-g32", dtype="float16", tie=False, hidden=64, inter=128, layers=2,
         head_dim=32, group=32, shards=1, spelling="old", theta=1000000.0),
    dict(name="qwen3-awq-g128", dtype="float16", tie=False, hidden=128, inter=256, layers=2,
         head_dim=64, group=128, shards=1, spelling="new", theta=1000000.0),
    dict(name="qwen3-f32-sharded", dtype="float32", tie=False, hidden=64, inter=128, layers=2,
         head_dim=32, group=None, shards=3, spelling="old", theta=1000000.0),
    # FP8 (fp8 = the scale dtype): vocab 256 keeps them small (SIZE_LIMIT).
    dict(name="qwen3-fp8-h128", dtype="bfloat16", tie=False, hidden=128, inter=320, layers=2,
         head_dim=64, group=None, fp8="F32", shards=1, spelling="new", theta=1000000.0,
         vocab=256),
    dict(name="qwen3-fp8-h192", dtype="bfloat16", tie=True, hidden=192, inter=320, layers=2,
         head_dim=64, group=None, fp8="BF16", shards=1, spelling="old", theta=1000000.0,
         vocab=256, out_scale=3.0, skip=["lm_head"]),
]
FP8_BLOCK = 128
FP8_MAX = 448.0

# Qwen3-MoE: name, dtype, tied, hidden, dense intermediate, moe_intermediate, layers, head_dim,
# experts, top-k, norm_topk_prob, mlp_only_layers, decoder_sparse_step, awq group (None: dense),
# the AWQ fixture's dense linears (modules_to_not_convert), shards, spelling, rope theta.
MOE_FIXTURES = [
    dict(name="qwen3-moe-bf16-e8k2", dtype="bfloat16", tie=False, hidden=64, inter=128,
         moe_inter=32, layers=3, head_dim=32, experts=8, top_k=2, norm_topk=True, mlp_only=[1],
         sparse_step=1, group=None, shards=1, spelling="old", theta=1000000.0),
    dict(name="qwen3-moe-bf16-e16k4-tied", dtype="bfloat16", tie=True, hidden=64, inter=96,
         moe_inter=16, layers=2, head_dim=32, experts=16, top_k=4, norm_topk=False, mlp_only=[],
         sparse_step=1, group=None, shards=2, spelling="new", theta=10000.0, out_scale=3.0),
    dict(name="qwen3-moe-awq-g32-e8k2", dtype="float16", tie=False, hidden=64, inter=128,
         moe_inter=64, layers=3, head_dim=32, experts=8, top_k=2, norm_topk=True, mlp_only=[0],
         sparse_step=1, group=32, shards=1, spelling="old", theta=1000000.0,
         not_converted=["model.layers.2.mlp.experts.5.gate_proj",
                        "model.layers.2.mlp.experts.5.up_proj",
                        "model.layers.2.mlp.experts.5.down_proj"]),
    dict(name="qwen3-moe-awq-g128-e4k1", dtype="float16", tie=False, hidden=128, inter=256,
         moe_inter=128, layers=2, head_dim=64, experts=4, top_k=1, norm_topk=False, mlp_only=[],
         sparse_step=2, group=128, shards=1, spelling="new", theta=1000000.0, not_converted=[]),
]

DTYPES = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
LINEARS = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
           "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")


def fail(msg):
    print(f"make_fixtures: FAILED: {msg}", file=sys.stderr)
    sys.exit(1)


def vocab_of(fx):
    return fx.get("vocab", VOCAB)


def make_config(fx):
    kw = dict(vocab_size=vocab_of(fx), hidden_size=fx["hidden"], intermediate_size=fx["inter"],
              num_hidden_layers=fx["layers"], num_attention_heads=HEADS,
              num_key_value_heads=KV_HEADS, head_dim=fx["head_dim"],
              max_position_embeddings=MAX_POS, rms_norm_eps=1e-6,
              tie_word_embeddings=fx["tie"], attention_bias=False, use_sliding_window=False,
              bos_token_id=None, eos_token_id=None, pad_token_id=None)
    # transformers 5 takes rope_parameters; 4.x took rope_theta.
    try:
        new_api = "rope_parameters" in inspect.signature(Qwen3Config.__init__).parameters
    except (TypeError, ValueError):
        new_api = False
    new_api = new_api or "rope_parameters" in getattr(Qwen3Config, "__dataclass_fields__", {})
    if new_api:
        kw["rope_parameters"] = {"rope_type": "default", "rope_theta": fx["theta"]}
    else:
        kw["rope_theta"] = fx["theta"]
    config = Qwen3Config(**kw)
    config.architectures = ["Qwen3ForCausalLM"]
    rp = getattr(config, "rope_parameters", None)
    theta = rp.get("rope_theta") if isinstance(rp, dict) else getattr(config, "rope_theta", None)
    if theta is None or abs(float(theta) - fx["theta"]) > 1e-6 * fx["theta"]:
        fail(f"{fx['name']}: Qwen3Config did not take rope theta {fx['theta']} (got {theta})")
    if config.head_dim != fx["head_dim"] or config.num_key_value_heads != KV_HEADS:
        fail(f"{fx['name']}: Qwen3Config did not take head_dim / num_key_value_heads")
    return config


def eager(model):
    try:
        model.set_attn_implementation("eager")
    except Exception:  # older transformers
        model.config._attn_implementation = "eager"
    return model


def init_weights(model, fx, gen):
    """Random weights with a healthy logit spread: embeddings and lm_head rows of norm ~3
    (logits std ~3), linears ~N(0, 1/in) (o_proj and down_proj times out_scale), norms
    1 + N(0, 0.1). Rounded to the storage dtype
    so the float32 reference runs on exactly the stored values."""
    store = DTYPES[fx["dtype"]]
    h = fx["hidden"]
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                v = 1.0 + 0.1 * torch.randn(p.shape, generator=gen)
            elif "embed_tokens" in name or name == "lm_head.weight":
                v = torch.randn(p.shape, generator=gen) * (3.0 / h ** 0.5)
            elif p.dim() == 2:
                v = torch.randn(p.shape, generator=gen) / p.shape[1] ** 0.5
                if name.endswith(("o_proj.weight", "down_proj.weight")):
                    v = v * fx.get("out_scale", 1.0)
            else:
                fail(f"unexpected parameter {name} {tuple(p.shape)}")
            p.copy_(v.to(store).to(torch.float32))


def pack_awq(m):
    """ints 0..15 [R, C] -> int32 [R, C/8] in AutoAWQ GEMM order."""
    m = m.to(torch.int64)
    r, c = m.shape
    out = torch.zeros(r, c // 8, dtype=torch.int64)
    for k in range(8):
        out |= m[:, AWQ_ORDER[k]::8] << (4 * k)
    out = torch.where(out >= 2 ** 31, out - 2 ** 32, out)  # two's complement int32
    return out.to(torch.int32)


def unpack_awq(p):
    """The inverse, written the way vLLM does it (nibbles 0..7, then AWQ_REVERSE_ORDER)."""
    p = p.to(torch.int64) & 0xFFFFFFFF
    nib = torch.stack([(p >> (4 * k)) & 15 for k in range(8)], dim=-1)  # [R, C/8, 8]
    cols = nib[:, :, list(AWQ_REVERSE_ORDER)]
    return cols.reshape(p.shape[0], p.shape[1] * 8)


def dequant_awq(qweight, qzeros, scales, group):
    """AutoAWQ GEMM tensors -> float32 weight [out, in]: w = (q - z) * s (exact in f32)."""
    q = unpack_awq(qweight).to(torch.float32)          # [in, out]
    z = unpack_awq(qzeros).to(torch.float32)           # [in/group, out]
    s = scales.to(torch.float32)                       # [in/group, out]
    z = z.repeat_interleave(group, dim=0)
    s = s.repeat_interleave(group, dim=0)
    return ((q - z) * s).t().contiguous()


def quantize_linears(model, fx, gen):
    """Replace each decoder linear's weight by random AWQ 4-bit values; return the packed
    tensors by name. The model then holds exactly the dequantized weights."""
    g = fx["group"]
    tensors = {}
    with torch.no_grad():
        for i in range(fx["layers"]):
            for lin in LINEARS:
                prefix = f"model.layers.{i}.{lin}"
                w = model.get_parameter(prefix + ".weight")
                out_f, in_f = w.shape
                if in_f % g or out_f % 8:
                    fail(f"{prefix}: [{out_f}, {in_f}] does not fit group {g} / 8-column packing")
                q = torch.randint(0, 16, (in_f, out_f), generator=gen)
                z = torch.randint(0, 16, (in_f // g, out_f), generator=gen)
                # E[(q - z)^2] ~ 42.5 for uniform q, z: scale so w ~ N(0, 1/in) in magnitude
                s = (torch.rand(in_f // g, out_f, generator=gen) * 0.5 + 0.75) / (in_f ** 0.5 * 6.5)
                s = s.to(torch.float16)
                qweight, qzeros = pack_awq(q), pack_awq(z)
                if not torch.equal(unpack_awq(qweight), q) or not torch.equal(unpack_awq(qzeros), z):
                    fail(f"{prefix}: AWQ packing does not round-trip")
                w.copy_(dequant_awq(qweight, qzeros, s, g))
                tensors[prefix + ".qweight"] = qweight
                tensors[prefix + ".qzeros"] = qzeros
                tensors[prefix + ".scales"] = s
    return tensors


def quantize_fp8(w, scale_dtype):
    """A block quantizer as the FP8 checkpoints' authors run it: per 128x128 block,
    s = amax / 448 (stored in scale_dtype), codes = e4m3(w / s). Returns the codes
    (float8_e4m3fn [out, in]), the scales as stored, and the dequantized weight
    codes * s in float32 — what the reference model then holds."""
    out_f, in_f = w.shape
    rb, kb = -(-out_f // FP8_BLOCK), -(-in_f // FP8_BLOCK)
    codes = torch.empty(out_f, in_f, dtype=torch.float8_e4m3fn)
    scales = torch.empty(rb, kb, dtype=torch.float32)
    deq = torch.empty(out_f, in_f, dtype=torch.float32)
    for i in range(rb):
        for j in range(kb):
            rs, cs = slice(i * FP8_BLOCK, (i + 1) * FP8_BLOCK), slice(j * FP8_BLOCK, (j + 1) * FP8_BLOCK)
            blk = w[rs, cs].to(torch.float32)
            s = (blk.abs().max().clamp(min=1e-12) / FP8_MAX).to(scale_dtype).to(torch.float32)
            q = (blk / s).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn)
            codes[rs, cs] = q
            scales[i, j] = s
            deq[rs, cs] = q.to(torch.float32) * s
    return codes, scales.to(scale_dtype), deq


def dequant_fp8(codes, scales):
    """The stored tensors -> float32 weight: codes * scale of their 128x128 block."""
    s = scales.to(torch.float32)
    s = s.repeat_interleave(FP8_BLOCK, dim=0)[: codes.shape[0]]
    s = s.repeat_interleave(FP8_BLOCK, dim=1)[:, : codes.shape[1]]
    return codes.to(torch.float32) * s


def quantize_fp8_linears(model, fx):
    """Replace each decoder linear's weight by its FP8 quantization; return the stored tensors
    by name (prefix.weight as float8_e4m3fn, prefix.weight_scale_inv). The model then holds
    exactly the dequantized weights."""
    scale_dtype = {"F32": torch.float32, "BF16": torch.bfloat16}[fx["fp8"]]
    tensors = {}
    with torch.no_grad():
        for i in range(fx["layers"]):
            for lin in LINEARS:
                prefix = f"model.layers.{i}.{lin}"
                w = model.get_parameter(prefix + ".weight")
                codes, scales, deq = quantize_fp8(w.data, scale_dtype)
                if not torch.equal(dequant_fp8(codes, scales), deq):
                    fail(f"{prefix}: FP8 dequantization does not reproduce the quantizer's")
                w.copy_(deq)
                tensors[prefix + ".weight"] = codes.contiguous()
                tensors[prefix + ".weight_scale_inv"] = scales.contiguous()
    return tensors


def act_quant_fp8(x):
    """The "dynamic" activation scheme: each token's inputs, per group of 128 (the last may be
    shorter), scaled by s = max(amax, 1e-10) / 448 and rounded to e4m3; returns xq * s in
    float32 (the linear then computes sum((xq * s) * w), the W8A8 product)."""
    shape = x.shape
    x2 = x.reshape(-1, shape[-1]).to(torch.float32)
    out = torch.empty_like(x2)
    for j in range(0, shape[-1], FP8_BLOCK):
        g = x2[:, j:j + FP8_BLOCK]
        s = g.abs().amax(dim=1, keepdim=True).clamp(min=1e-10) / FP8_MAX
        q = (g / s).clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).to(torch.float32)
        out[:, j:j + FP8_BLOCK] = q * s
    return out.reshape(shape).to(x.dtype)


def install_w8a8_hooks(model, fx):
    """Forward pre-hooks that quantize every quantized linear's input (act_quant_fp8)."""
    handles = []
    for i in range(fx["layers"]):
        for lin in LINEARS:
            m = model.get_submodule(f"model.layers.{i}.{lin}")
            handles.append(m.register_forward_pre_hook(lambda mod, args: (act_quant_fp8(args[0]),)
                                                       + tuple(args[1:])))
    return handles


def respell(path, spelling, dtype_name, quant=None, arch="Qwen3ForCausalLM"):
    """Rewrite config.json in one spelling: 'new' = dtype + rope_parameters (transformers 5),
    'old' = torch_dtype + rope_theta (released Qwen3 checkpoints)."""
    with open(path) as f:
        cfg = json.load(f)
    theta = None
    rp = cfg.pop("rope_parameters", None)
    if isinstance(rp, dict):
        theta = rp.get("rope_theta")
    if cfg.get("rope_theta") is not None:
        theta = cfg.pop("rope_theta")
    cfg.pop("rope_scaling", None)
    cfg.pop("dtype", None)
    cfg.pop("torch_dtype", None)
    if theta is None:
        fail(f"{path}: no rope_theta written by transformers")
    if spelling == "new":
        cfg["dtype"] = dtype_name
        cfg["rope_parameters"] = {"rope_theta": theta, "rope_type": "default"}
    else:
        cfg["torch_dtype"] = dtype_name
        cfg["rope_theta"] = theta
        cfg["rope_scaling"] = None
    cfg["architectures"] = [arch]
    if quant:
        cfg["quantization_config"] = quant
    with open(path, "w") as f:
        json.dump(cfg, f, indent=2, sort_keys=True)
        f.write("\n")
    return cfg


def save_shards(state, folder, n):
    """Split a state dict into n safetensors shards + model.safetensors.index.json (HF layout)."""
    names = sorted(state)
    total = sum(t.numel() * t.element_size() for t in state.values())
    per = total / n
    shards, cur, acc = [], [], 0
    for name in names:
        cur.append(name)
        acc += state[name].numel() * state[name].element_size()
        if acc >= per * (len(shards) + 1) and len(shards) < n - 1:
            shards.append(cur)
            cur = []
    shards.append(cur)
    if len(shards) < 2 or any(not s for s in shards):
        fail(f"sharding produced {len(shards)} shards")
    weight_map = {}
    for k, group in enumerate(shards):
        fname = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
        save_file({name: state[name].contiguous() for name in group}, os.path.join(folder, fname),
                  metadata={"format": "pt"})
        for name in group:
            weight_map[name] = fname
    with open(os.path.join(folder, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2,
                  sort_keys=True)
        f.write("\n")


@torch.no_grad()
def logits_of(model, ids):
    out = model(input_ids=torch.tensor([ids], dtype=torch.long), use_cache=False)
    return out.logits[0].to(torch.float32)


@torch.no_grad()
def greedy(model, prompt, n):
    ids = list(prompt)
    for _ in range(n):
        ids.append(int(torch.argmax(logits_of(model, ids)[-1])))
    return ids[len(prompt):]


def write_f32(path, t):
    a = array.array("f", t.flatten().tolist())
    if sys.byteorder != "little":
        a.byteswap()
    with open(path, "wb") as f:
        a.tofile(f)


def build(fx, out_root, seed):
    name = fx["name"]
    folder = os.path.join(out_root, name)
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    gen = torch.Generator().manual_seed(seed)
    config = make_config(fx)
    model = eager(Qwen3ForCausalLM(config)).float().eval()
    if fx["tie"]:
        model.tie_weights()
        if model.lm_head.weight.data_ptr() != model.model.embed_tokens.weight.data_ptr():
            fail(f"{name}: tie_word_embeddings=True but lm_head is not the input embedding")
    init_weights(model, fx, gen)

    store = DTYPES[fx["dtype"]]
    quant = None
    if fx["group"]:
        qtensors = quantize_linears(model, fx, gen)
        quant = {"quant_method": "awq", "bits": 4, "group_size": fx["group"], "zero_point": True,
                 "version": "gemm", "modules_to_not_convert": None}
        quantized = set(qtensors_prefixes(qtensors))
        state = {}
        for k, v in model.state_dict().items():
            if k in quantized:
                continue  # the dense weight of a quantized linear is not stored
            if fx["tie"] and k == "lm_head.weight":
                continue
            state[k] = v.to(store).contiguous()
        state.update(qtensors)
        save_file(state, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
        model.config.save_pretrained(folder)
    elif fx.get("fp8"):
        qtensors = quantize_fp8_linears(model, fx)
        quant = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                 "weight_block_size": [FP8_BLOCK, FP8_BLOCK]}
        if fx.get("skip"):
            quant["modules_to_not_convert"] = fx["skip"]
        state = {}
        for k, v in model.state_dict().items():
            if k in qtensors:
                continue  # the dense weight of a quantized linear is stored as codes + scales
            if fx["tie"] and k == "lm_head.weight":
                continue
            state[k] = v.to(store).contiguous()
        state.update(qtensors)
        save_file(state, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
        model.config.save_pretrained(folder)
    elif fx["shards"] > 1:
        state = {k: v.to(store).contiguous() for k, v in model.state_dict().items()
                 if not (fx["tie"] and k == "lm_head.weight")}
        save_shards(state, folder, fx["shards"])
        model.config.save_pretrained(folder)
    else:
        copy.deepcopy(model).to(store).save_pretrained(folder)

    # Prompts: random ids, then greedy continuations and teacher-forced logits.
    prompts = [torch.randint(0, vocab_of(fx), (n,), generator=gen).tolist() for n in PROMPT_LENS]
    refs = references(model, fx, prompts, folder, "reference", slack=1e-4)

    # Check the files as transformers wrote them, then rewrite config.json in the fixture's
    # spelling (and add quantization_config): a pure key rename, which llmrt must read either way.
    verify_saved(fx, folder, model, refs)
    cfg = respell(os.path.join(folder, "config.json"), fx["spelling"], fx["dtype"], quant)
    if not fx["group"] and not fx.get("fp8"):
        try:
            verify_saved(fx, folder, model, refs[:1], quiet=True)
        except Exception as e:  # informational: llmrt reads both spellings regardless
            print(f"  note: transformers {transformers.__version__} could not reload {name} "
                  f"with the {fx['spelling']} spelling ({e})")

    meta = dict(fixture=name, architecture="Qwen3ForCausalLM", dtype=fx["dtype"],
                tie_word_embeddings=fx["tie"], quant=quant, shards=fx["shards"],
                config_spelling=fx["spelling"], seed=seed, new_tokens=NEW_TOKENS,
                reference=dict(framework="transformers", transformers=transformers.__version__,
                               torch=torch.__version__, precision="float32", device="cpu",
                               attention="eager"),
                logits_layout="float32 little-endian [rows, vocab]; row i predicts ids[i+1]",
                prompts=refs)
    if fx.get("fp8"):
        meta["semantics"] = ("W8A16: float32 transformers on the dequantized weights "
                             "(e4m3 codes * block scale), activations unquantized")
        meta["llmrt_set"] = ["quant.fp8.activations=w8a16"]
    with open(os.path.join(folder, "reference.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    if fx.get("fp8"):
        handles = install_w8a8_hooks(model, fx)
        # e4m3 rounding turns the last-bit differences between a greedy run and the teacher-
        # forced one into visible ones now and then: tolerate disagreements below 0.05
        refs8 = references(model, fx, prompts, folder, "reference_w8a8", slack=0.05)
        for h in handles:
            h.remove()
        changed = sum(a != b for r, q in zip(refs, refs8) for a, b in zip(r["greedy"], q["greedy"]))
        print(f"    W8A8: {changed} of {len(prompts) * NEW_TOKENS} greedy tokens differ from W8A16")
        meta8 = dict(meta, prompts=refs8, llmrt_set=["quant.fp8.activations=w8a8"],
                     semantics=("W8A8: the dequantized weights, each quantized linear's input "
                                "quantized per token per 128 inputs to e4m3 (scale = amax / 448; "
                                "forward pre-hooks), float32 otherwise"))
        with open(os.path.join(folder, "reference_w8a8.json"), "w") as f:
            json.dump(meta8, f, indent=1)
            f.write("\n")
    return cfg, refs


def references(model, fx, prompts, folder, stem, slack):
    """Greedy continuations and teacher-forced logits of each prompt, written to
    <stem>_<k>.f32; returns the reference.json entries. A greedy token that is not the
    teacher-forced argmax is an error unless the top-2 margin there is below `slack`."""
    name = fx["name"]
    refs = []
    for k, prompt in enumerate(prompts):
        cont = greedy(model, prompt, NEW_TOKENS)
        ids = prompt + cont
        full = logits_of(model, ids)
        top2 = torch.topk(full, 2, dim=-1)
        margins = (top2.values[:, 0] - top2.values[:, 1]).tolist()
        argmax = top2.indices[:, 0].tolist()
        for i, tok in enumerate(cont):
            row = len(prompt) - 1 + i
            if argmax[row] != tok and margins[row] > slack:
                fail(f"{name} prompt {k}: greedy token {i} = {tok} but teacher-forced argmax "
                     f"= {argmax[row]} (margin {margins[row]:.3g})")
        if not torch.isfinite(full).all():
            fail(f"{name} prompt {k}: non-finite logits")
        write_f32(os.path.join(folder, f"{stem}_{k}.f32"), full)
        refs.append(dict(prompt=prompt, greedy=cont, ids=ids, rows=len(ids), vocab=vocab_of(fx),
                         logits_file=f"{stem}_{k}.f32", argmax=argmax,
                         top2_margin=[round(m, 6) for m in margins],
                         logits_rms=round(float(full.pow(2).mean().sqrt()), 6)))
    return refs


def qtensors_prefixes(qtensors):
    return sorted({k.rsplit(".", 1)[0] + ".weight" for k in qtensors})


class Mismatch(Exception):
    pass


def verify_saved(fx, folder, model, refs, quiet=False):
    """The files on disk must reproduce the reference logits (quiet: raise instead of exit)."""
    name = fx["name"]
    if fx["group"] or fx.get("fp8"):
        # No AWQ / FP8 kernels here: rebuild a float model from the saved tensors, dequantized.
        state = {}
        for fn in sorted(os.listdir(folder)):
            if fn.endswith(".safetensors"):
                state.update(load_file(os.path.join(folder, fn)))
        dense = {}
        for k, v in state.items():
            if k.endswith(".qweight"):
                p = k[: -len(".qweight")]
                dense[p + ".weight"] = dequant_awq(v, state[p + ".qzeros"], state[p + ".scales"],
                                                   fx["group"])
            elif v.dtype == torch.float8_e4m3fn:
                s_name = k + "_scale_inv"
                want = {"F32": torch.float32, "BF16": torch.bfloat16}[fx["fp8"]]
                if s_name not in state or state[s_name].dtype != want:
                    fail(f"{name}: {k} has no {s_name} of dtype {want}")
                dense[k] = dequant_fp8(v, state[s_name])
            elif k.endswith(".weight_scale_inv"):
                continue
            elif not (k.endswith(".qzeros") or k.endswith(".scales")):
                dense[k] = v.to(torch.float32)
        check = eager(Qwen3ForCausalLM(make_config(fx))).float().eval()
        missing, unexpected = check.load_state_dict(dense, strict=False)
        missing = [m for m in missing if not (fx["tie"] and m == "lm_head.weight")]
        if missing or unexpected:
            fail(f"{name}: saved tensors do not match the model: missing {missing}, "
                 f"unexpected {unexpected}")
    else:
        check = Qwen3ForCausalLM.from_pretrained(folder, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    for k, r in enumerate(refs):
        a = logits_of(check, r["ids"])
        b = logits_of(model, r["ids"])
        if not torch.allclose(a, b, rtol=1e-5, atol=1e-5):
            msg = (f"{name} prompt {k}: the saved checkpoint gives different logits "
                   f"(max abs diff {float((a - b).abs().max()):.3g})")
            if quiet:
                raise Mismatch(msg)
            fail(msg)


# ---------------------------------------------------------------------------- Qwen3-MoE

def moe_is_sparse(fx, l):
    return l not in fx["mlp_only"] and fx["experts"] > 0 and (l + 1) % fx["sparse_step"] == 0


def make_moe_config(fx):
    if Qwen3MoeConfig is None:
        fail(f"transformers {transformers.__version__} has no Qwen3MoeForCausalLM (4.51 or newer)")
    kw = dict(vocab_size=VOCAB, hidden_size=fx["hidden"], intermediate_size=fx["inter"],
              moe_intermediate_size=fx["moe_inter"], num_hidden_layers=fx["layers"],
              num_attention_heads=HEADS, num_key_value_heads=KV_HEADS, head_dim=fx["head_dim"],
              num_experts=fx["experts"], num_experts_per_tok=fx["top_k"],
              norm_topk_prob=fx["norm_topk"], mlp_only_layers=list(fx["mlp_only"]),
              decoder_sparse_step=fx["sparse_step"], max_position_embeddings=MAX_POS,
              rms_norm_eps=1e-6, tie_word_embeddings=fx["tie"], attention_bias=False,
              use_sliding_window=False, output_router_logits=False, router_aux_loss_coef=0.001,
              bos_token_id=None, eos_token_id=None, pad_token_id=None)
    try:
        new_api = "rope_parameters" in inspect.signature(Qwen3MoeConfig.__init__).parameters
    except (TypeError, ValueError):
        new_api = False
    new_api = new_api or "rope_parameters" in getattr(Qwen3MoeConfig, "__dataclass_fields__", {})
    if new_api:
        kw["rope_parameters"] = {"rope_type": "default", "rope_theta": fx["theta"]}
    else:
        kw["rope_theta"] = fx["theta"]
    config = Qwen3MoeConfig(**kw)
    config.architectures = ["Qwen3MoeForCausalLM"]
    for key, want in (("num_experts", fx["experts"]), ("num_experts_per_tok", fx["top_k"]),
                      ("moe_intermediate_size", fx["moe_inter"]),
                      ("decoder_sparse_step", fx["sparse_step"]),
                      ("norm_topk_prob", fx["norm_topk"]), ("head_dim", fx["head_dim"])):
        if getattr(config, key) != want:
            fail(f"{fx['name']}: Qwen3MoeConfig did not take {key} = {want}")
    if list(config.mlp_only_layers) != list(fx["mlp_only"]):
        fail(f"{fx['name']}: Qwen3MoeConfig did not take mlp_only_layers")
    return config


def moe_linears(fx):
    """(prefix, out, in) of every linear the quant format may store, in state-dict order."""
    h, q, kv = fx["hidden"], HEADS * fx["head_dim"], KV_HEADS * fx["head_dim"]
    out = []
    for l in range(fx["layers"]):
        p = f"model.layers.{l}"
        out += [(f"{p}.self_attn.q_proj", q, h), (f"{p}.self_attn.k_proj", kv, h),
                (f"{p}.self_attn.v_proj", kv, h), (f"{p}.self_attn.o_proj", h, q)]
        if moe_is_sparse(fx, l):
            i = fx["moe_inter"]
            for e in range(fx["experts"]):
                out += [(f"{p}.mlp.experts.{e}.gate_proj", i, h),
                        (f"{p}.mlp.experts.{e}.up_proj", i, h),
                        (f"{p}.mlp.experts.{e}.down_proj", h, i)]
        else:
            i = fx["inter"]
            out += [(f"{p}.mlp.gate_proj", i, h), (f"{p}.mlp.up_proj", i, h),
                    (f"{p}.mlp.down_proj", h, i)]
    return out


def moe_make_weights(fx, gen):
    """The checkpoint as the released Qwen3-MoE ones hold it on disk, one module per expert:
    dense float32 weights (exactly representable in the storage dtype, AWQ-quantized linears
    exactly their dequantized values) and the AWQ tensors of the quantized linears."""
    store = DTYPES[fx["dtype"]]
    h = fx["hidden"]

    def rounded(t):
        return t.to(store).to(torch.float32)

    w = {"model.embed_tokens.weight": rounded(torch.randn(VOCAB, h, generator=gen) * (3.0 / h ** 0.5))}
    quantized = {}
    not_converted = set(fx.get("not_converted") or [])
    linears = {p: (o, i) for p, o, i in moe_linears(fx)}
    for l in range(fx["layers"]):
        p = f"model.layers.{l}"
        names = [n for n in linears if n.startswith(p + ".")]
        for n in names:
            o, i = linears[n]
            v = torch.randn(o, i, generator=gen) / i ** 0.5
            if n.endswith(("o_proj", "down_proj")):
                v = v * fx.get("out_scale", 1.0)
            w[n + ".weight"] = rounded(v)
        for n in ("self_attn.q_norm", "self_attn.k_norm"):
            w[f"{p}.{n}.weight"] = rounded(1.0 + 0.1 * torch.randn(fx["head_dim"], generator=gen))
        for n in ("input_layernorm", "post_attention_layernorm"):
            w[f"{p}.{n}.weight"] = rounded(1.0 + 0.1 * torch.randn(h, generator=gen))
        if moe_is_sparse(fx, l):
            # router logits of std ~2 on the normed hidden state: routing spread over experts
            w[f"{p}.mlp.gate.weight"] = rounded(torch.randn(fx["experts"], h, generator=gen) * (2.0 / h ** 0.5))
    w["model.norm.weight"] = rounded(1.0 + 0.1 * torch.randn(h, generator=gen))
    if not fx["tie"]:
        w["lm_head.weight"] = rounded(torch.randn(VOCAB, h, generator=gen) * (3.0 / h ** 0.5))
    if fx["group"]:
        g = fx["group"]
        for n, (o, i) in linears.items():
            if n in not_converted:
                continue
            if i % g or o % 8:
                fail(f"{fx['name']}: {n}: [{o}, {i}] does not fit group {g} / 8-column packing")
            q = torch.randint(0, 16, (i, o), generator=gen)
            z = torch.randint(0, 16, (i // g, o), generator=gen)
            sc = ((torch.rand(i // g, o, generator=gen) * 0.5 + 0.75) / (i ** 0.5 * 6.5)).to(torch.float16)
            if n.endswith(("o_proj", "down_proj")):
                sc = (sc.to(torch.float32) * fx.get("out_scale", 1.0)).to(torch.float16)
            qw, qz = pack_awq(q), pack_awq(z)
            if not torch.equal(unpack_awq(qw), q) or not torch.equal(unpack_awq(qz), z):
                fail(f"{n}: AWQ packing does not round-trip")
            w[n + ".weight"] = dequant_awq(qw, qz, sc, g)
            quantized[n] = (qw, qz, sc)
    return w, quantized


def moe_disk_state(fx, w, quantized):
    """The tensors to save: the storage dtype, AWQ tensors in place of quantized weights."""
    store = DTYPES[fx["dtype"]]
    state = {}
    for k, v in w.items():
        prefix = k[: -len(".weight")]
        if prefix in quantized:
            qw, qz, sc = quantized[prefix]
            state[prefix + ".qweight"], state[prefix + ".qzeros"], state[prefix + ".scales"] = qw, qz, sc
        else:
            state[k] = v.to(store).contiguous()
    return state


def moe_load_into(model, fx, w):
    """Put the per-expert weights into the in-memory model, in whatever layout it keeps:
    per-expert modules, or experts fused as [E, 2I, H] gate|up and [E, H, I] down."""
    params = dict(model.named_parameters())
    target = {}
    for l in range(fx["layers"]):
        p = f"model.layers.{l}.mlp.experts"
        if not moe_is_sparse(fx, l) or f"{p}.0.gate_proj.weight" in params:
            continue
        E, I, H = fx["experts"], fx["moe_inter"], fx["hidden"]
        gu = torch.stack([torch.cat([w[f"{p}.{e}.gate_proj.weight"], w[f"{p}.{e}.up_proj.weight"]])
                          for e in range(E)])                       # [E, 2I, H]
        dn = torch.stack([w[f"{p}.{e}.down_proj.weight"] for e in range(E)])  # [E, H, I]
        fused = {f"{p}.gate_up_proj": gu, f"{p}.down_proj": dn}
        for name, t in fused.items():
            if name not in params:
                fail(f"{fx['name']}: the in-memory model has neither {p}.0.gate_proj nor {name}: "
                     f"an expert layout this script does not know")
            shape = tuple(params[name].shape)
            if shape == tuple(t.shape):
                target[name] = t
            elif shape == tuple(t.transpose(1, 2).shape):
                target[name] = t.transpose(1, 2).contiguous()
            else:
                fail(f"{fx['name']}: {name} is {shape} in memory, expected {tuple(t.shape)}")
    for k, v in w.items():
        if k.startswith("model.layers.") and ".mlp.experts." in k and k not in params:
            continue  # fused above
        target[k] = v
    missing = [n for n in params if n not in target and not (fx["tie"] and n == "lm_head.weight")]
    unknown = [n for n in target if n not in params]
    if missing or unknown:
        fail(f"{fx['name']}: weights do not match the model: missing {missing}, unknown {unknown}")
    with torch.no_grad():
        for n, t in target.items():
            params[n].copy_(t.to(params[n].dtype))
    if fx["tie"]:
        model.tie_weights()


def rope64(x, pos, theta):
    d = x.shape[-1]
    inv = theta ** (-torch.arange(0, d // 2, dtype=torch.float64) * 2.0 / d)
    ang = pos[:, None].to(torch.float64) * inv[None, :]            # [T, d/2]
    c, s_ = torch.cos(ang)[:, None, :], torch.sin(ang)[:, None, :]  # [T, 1, d/2]
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * c - x2 * s_, x2 * c + x1 * s_], dim=-1)


def rms64(x, w, eps=1e-6):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


@torch.no_grad()
def qwen3_moe_reference(fx, w, ids):
    """Qwen3-MoE written from its definition in float64, on the per-expert weights:
    logits [T, vocab] and each row's router margin (the smallest gap over the sparse layers
    between its K-th and (K+1)-th router logit; inf without sparse layers or with K = E)."""
    W = {k: v.to(torch.float64) for k, v in w.items()}
    T, D = len(ids), fx["head_dim"]
    pos = torch.arange(T)
    x = W["model.embed_tokens.weight"][torch.tensor(ids)]
    margin = torch.full((T,), float("inf"), dtype=torch.float64)
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(fx["layers"]):
        p = f"model.layers.{l}"
        xn = rms64(x, W[f"{p}.input_layernorm.weight"])
        q = (xn @ W[f"{p}.self_attn.q_proj.weight"].T).view(T, HEADS, D)
        k = (xn @ W[f"{p}.self_attn.k_proj.weight"].T).view(T, KV_HEADS, D)
        v = (xn @ W[f"{p}.self_attn.v_proj.weight"].T).view(T, KV_HEADS, D)
        q = rope64(rms64(q, W[f"{p}.self_attn.q_norm.weight"]), pos, fx["theta"])
        k = rope64(rms64(k, W[f"{p}.self_attn.k_norm.weight"]), pos, fx["theta"])
        rep = HEADS // KV_HEADS
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        att = torch.einsum("thd,shd->hts", q, k) / D ** 0.5
        att = att.masked_fill(~causal[None], float("-inf")).softmax(-1)
        o = torch.einsum("hts,shd->thd", att, v).reshape(T, HEADS * D)
        x = x + o @ W[f"{p}.self_attn.o_proj.weight"].T
        xn = rms64(x, W[f"{p}.post_attention_layernorm.weight"])

        def mlp(prefix, h_):
            g = h_ @ W[f"{prefix}.gate_proj.weight"].T
            u = h_ @ W[f"{prefix}.up_proj.weight"].T
            return (torch.nn.functional.silu(g) * u) @ W[f"{prefix}.down_proj.weight"].T

        if moe_is_sparse(fx, l):
            E, K = fx["experts"], fx["top_k"]
            logits_r = xn @ W[f"{p}.mlp.gate.weight"].T                 # [T, E]
            prob = logits_r.softmax(-1)
            top = torch.sort(logits_r, dim=-1, descending=True, stable=True)
            chosen = top.indices[:, :K]
            if K < E:
                margin = torch.minimum(margin, top.values[:, K - 1] - top.values[:, K])
            wt = prob.gather(1, chosen)
            if fx["norm_topk"]:
                wt = wt / wt.sum(-1, keepdim=True)
            out = torch.zeros_like(x)
            for t in range(T):
                for j in range(K):
                    out[t] += wt[t, j] * mlp(f"{p}.mlp.experts.{int(chosen[t, j])}", xn[t:t + 1])[0]
            x = x + out
        else:
            x = x + mlp(f"{p}.mlp", xn)
    xn = rms64(x, W["model.norm.weight"])
    head = W["model.embed_tokens.weight"] if fx["tie"] else W["lm_head.weight"]
    return (xn @ head.T).to(torch.float32), margin.tolist()


def moe_save(fx, folder, state, config):
    if fx["shards"] > 1:
        save_shards(state, folder, fx["shards"])
    else:
        save_file(state, os.path.join(folder, "model.safetensors"), metadata={"format": "pt"})
    config.save_pretrained(folder)


def moe_verify_saved(fx, folder, model, w, refs, config):
    """The saved on-disk layout reloads in transformers (a dense copy of it for AWQ: no AWQ
    kernels here) with no missing or unexpected keys, and gives the in-memory model's logits."""
    name = fx["name"]
    check_dir = folder
    tmpdir = None
    if fx["group"]:
        tmpdir = folder + ".dense-check"
        shutil.rmtree(tmpdir, ignore_errors=True)
        os.makedirs(tmpdir)
        dense = {k: v.to(torch.float32).contiguous() for k, v in w.items()
                 if not (fx["tie"] and k == "lm_head.weight")}
        save_file(dense, os.path.join(tmpdir, "model.safetensors"), metadata={"format": "pt"})
        config.save_pretrained(tmpdir)
        check_dir = tmpdir
    try:
        check, info = Qwen3MoeForCausalLM.from_pretrained(check_dir, dtype=torch.float32,
                                                          attn_implementation="eager",
                                                          output_loading_info=True)
    except TypeError:  # transformers 4.x: torch_dtype
        check, info = Qwen3MoeForCausalLM.from_pretrained(check_dir, torch_dtype=torch.float32,
                                                          attn_implementation="eager",
                                                          output_loading_info=True)
    check = eager(check).float().eval()
    bad = {k: v for k, v in info.items() if k in ("missing_keys", "unexpected_keys",
                                                  "mismatched_keys") and v}
    if fx["tie"] and bad.get("missing_keys"):
        bad["missing_keys"] = [m for m in bad["missing_keys"] if m != "lm_head.weight"]
        if not bad["missing_keys"]:
            del bad["missing_keys"]
    if bad:
        fail(f"{name}: transformers reloading the on-disk layout reports {bad}")
    for k, r in enumerate(refs):
        a, b = logits_of(check, r["ids"]), logits_of(model, r["ids"])
        if not torch.allclose(a, b, rtol=1e-5, atol=1e-5):
            fail(f"{name} prompt {k}: the saved checkpoint gives different logits (max abs diff "
                 f"{float((a - b).abs().max()):.3g})")
    if tmpdir:
        shutil.rmtree(tmpdir, ignore_errors=True)


def build_moe_once(fx, out_root, seed):
    """One attempt with this seed; None when some router margin is below MOE_MIN_MARGIN."""
    name = fx["name"]
    folder = os.path.join(out_root, name)
    gen = torch.Generator().manual_seed(seed)
    config = make_moe_config(fx)
    model = eager(Qwen3MoeForCausalLM(config)).float().eval()
    w, quantized = moe_make_weights(fx, gen)
    moe_load_into(model, fx, dict(w))
    prompts = [torch.randint(0, VOCAB, (n,), generator=gen).tolist() for n in PROMPT_LENS]
    refs = []
    for k, prompt in enumerate(prompts):
        cont = greedy(model, prompt, NEW_TOKENS)
        ids = prompt + cont
        full = logits_of(model, ids)
        mine, margin = qwen3_moe_reference(fx, w, ids)
        err = float(((mine - full).norm(dim=-1) / full.norm(dim=-1)).max())
        if err > 1e-4:
            fail(f"{name} prompt {k}: transformers and the float64 reference differ by {err:.3g} "
                 f"(relative, per row): the weights did not reach the model as meant")
        if min(margin) < MOE_MIN_MARGIN:
            return None
        top2 = torch.topk(full, 2, dim=-1)
        margins = (top2.values[:, 0] - top2.values[:, 1]).tolist()
        argmax = top2.indices[:, 0].tolist()
        for i, tok in enumerate(cont):
            row = len(prompt) - 1 + i
            if argmax[row] != tok and margins[row] > 1e-4:
                fail(f"{name} prompt {k}: greedy token {i} = {tok} but teacher-forced argmax "
                     f"= {argmax[row]} (margin {margins[row]:.3g})")
        if not torch.isfinite(full).all():
            fail(f"{name} prompt {k}: non-finite logits")
        refs.append(dict(prompt=prompt, greedy=cont, ids=ids, rows=len(ids), vocab=VOCAB,
                         logits_file=f"reference_{k}.f32", argmax=argmax,
                         top2_margin=[round(m, 6) for m in margins],
                         router_margin=[round(m, 6) if math.isfinite(m) else 1e9 for m in margin],
                         logits_rms=round(float(full.pow(2).mean().sqrt()), 6), _logits=full))
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    for r in refs:
        write_f32(os.path.join(folder, r["logits_file"]), r.pop("_logits"))
    quant = None
    if fx["group"]:
        quant = {"quant_method": "awq", "bits": 4, "group_size": fx["group"], "zero_point": True,
                 "version": "gemm", "modules_to_not_convert": fx.get("not_converted") or None}
    moe_save(fx, folder, moe_disk_state(fx, w, quantized), model.config)
    moe_verify_saved(fx, folder, model, w, refs, model.config)
    cfg = respell(os.path.join(folder, "config.json"), fx["spelling"], fx["dtype"], quant,
                  arch="Qwen3MoeForCausalLM")
    meta = dict(fixture=name, architecture="Qwen3MoeForCausalLM", dtype=fx["dtype"],
                tie_word_embeddings=fx["tie"], quant=quant, shards=fx["shards"],
                config_spelling=fx["spelling"], seed=seed, new_tokens=NEW_TOKENS,
                experts=fx["experts"], top_k=fx["top_k"], norm_topk_prob=fx["norm_topk"],
                mlp_only_layers=fx["mlp_only"], decoder_sparse_step=fx["sparse_step"],
                layout="one module per expert (mlp.experts.E.{gate,up,down}_proj), as on disk",
                min_router_margin=round(min(m for r in refs for m in r["router_margin"]), 6),
                reference=dict(framework="transformers", transformers=transformers.__version__,
                               torch=torch.__version__, precision="float32", device="cpu",
                               attention="eager", checked_against="float64 forward in "
                               "make_fixtures.py (qwen3_moe_reference)"),
                logits_layout="float32 little-endian [rows, vocab]; row i predicts ids[i+1]",
                prompts=refs)
    with open(os.path.join(folder, "reference.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    return cfg, refs


def build_moe(fx, out_root, seed):
    for t in range(MOE_TRIES):
        got = build_moe_once(fx, out_root, seed + 1000 * t)
        if got:
            return got
    fail(f"{fx['name']}: no seed of {MOE_TRIES} gave router margins >= {MOE_MIN_MARGIN}")



def folder_bytes(root):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="fixtures folder, e.g. tests/fixtures/models")
    ap.add_argument("--seed", type=int, default=20250601)
    ap.add_argument("--only", default=None,
                    help="build only the fixtures whose name contains one of these comma-separated "
                         "words (e.g. fp8, awq, moe); the others are left as they are")
    args = ap.parse_args()
    words = [w for w in (args.only or "").split(",") if w]
    every = FIXTURES + MOE_FIXTURES
    chosen = [fx for fx in every if not words or any(w in fx["name"] for w in words)]
    if not chosen:
        fail(f"--only {args.only}: no fixture matches (names: "
             f"{', '.join(fx['name'] for fx in every)})")
    torch.manual_seed(args.seed)
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    os.makedirs(args.out, exist_ok=True)
    print(f"make_fixtures: torch {torch.__version__}, transformers {transformers.__version__}")
    # each fixture keeps its own seed (dense: its index; MoE: 100 + its index), whatever is chosen
    todo = [(fx, build, args.seed + i) for i, fx in enumerate(FIXTURES) if fx in chosen]
    todo += [(fx, build_moe, args.seed + 100 + i) for i, fx in enumerate(MOE_FIXTURES)
             if fx in chosen]
    for fx, builder, seed in todo:
        cfg, refs = builder(fx, args.out, seed)
        margins = [m for r in refs for m in r["top2_margin"]]
        size = folder_bytes(os.path.join(args.out, fx["name"]))
        moe = f" experts={fx['experts']} top_k={fx['top_k']}" if "experts" in fx else ""
        print(f"  {fx['name']:<26} {fx['dtype']:<9} tied={fx['tie']!s:<5} "
              f"awq={fx['group'] or '-':<4} fp8={fx.get('fp8') or '-':<4} shards={fx['shards']} "
              f"spelling={fx['spelling']}{moe}: "
              f"{len(refs)} prompts, logits rms {refs[0]['logits_rms']:.2f}, "
              f"min top-2 margin {min(margins):.3g}, {size / 1e3:.0f} kB")
        print(f"    greedy[0] = {refs[0]['greedy']}")
    total = folder_bytes(args.out)
    print(f"make_fixtures: wrote {args.out} ({total / 1e6:.2f} MB)")
    for fx, _, _ in todo:
        with open(os.path.join(args.out, fx["name"], "reference.json")) as f:
            distinct = min(len(set(p["greedy"])) for p in json.load(f)["prompts"])
        if distinct < 4:
            print(f"  warning: {fx['name']}: a greedy continuation has only {distinct} distinct "
                  f"tokens (a weak greedy test)")
    if total > SIZE_LIMIT:
        fail(f"fixtures take {total / 1e6:.2f} MB, more than {SIZE_LIMIT / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
