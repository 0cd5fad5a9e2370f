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

Run (needs torch, transformers, safetensors; no network):
    python3 tools/make_fixtures.py --out tests/fixtures/models
    python3 tools/make_fixtures.py --out tests/fixtures/models --only fp8   # just the FP8 ones
Exits non-zero on any inconsistency (saved checkpoint does not reproduce the reference,
AWQ packing does not round-trip, greedy ids disagree with the teacher-forced argmax, ...).
"""
import argparse
import array
import copy
import inspect
import json
import os
import shutil
import sys

import torch
import transformers
from safetensors.torch import load_file, save_file
from transformers import Qwen3Config, Qwen3ForCausalLM

VOCAB = 512
HEADS = 4
KV_HEADS = 2
MAX_POS = 256
NEW_TOKENS = 24
PROMPT_LENS = (5, 11, 17)
SIZE_LIMIT = 5.5e6  # bytes for the whole fixtures folder

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


def respell(path, spelling, dtype_name, quant=None):
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
    cfg["architectures"] = ["Qwen3ForCausalLM"]
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


def folder_bytes(root):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(root) for f in fs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="fixtures folder, e.g. tests/fixtures/models")
    ap.add_argument("--seed", type=int, default=20250601)
    ap.add_argument("--only", default=None,
                    help="build only the fixtures whose name contains one of these comma-separated "
                         "words (e.g. fp8, awq); the others are left as they are")
    args = ap.parse_args()
    words = [w for w in (args.only or "").split(",") if w]
    chosen = [fx for fx in FIXTURES if not words or any(w in fx["name"] for w in words)]
    if not chosen:
        fail(f"--only {args.only}: no fixture matches (names: "
             f"{', '.join(fx['name'] for fx in FIXTURES)})")
    torch.manual_seed(args.seed)
    torch.set_num_threads(max(1, min(8, os.cpu_count() or 1)))
    os.makedirs(args.out, exist_ok=True)
    print(f"make_fixtures: torch {torch.__version__}, transformers {transformers.__version__}")
    for i, fx in enumerate(FIXTURES):
        if fx not in chosen:
            continue  # each fixture keeps its own seed (its index), whatever is chosen
        cfg, refs = build(fx, args.out, args.seed + i)
        margins = [m for r in refs for m in r["top2_margin"]]
        size = folder_bytes(os.path.join(args.out, fx["name"]))
        print(f"  {fx['name']:<20} {fx['dtype']:<9} tied={fx['tie']!s:<5} "
              f"awq={fx['group'] or '-':<4} fp8={fx.get('fp8') or '-':<4} shards={fx['shards']} spelling={fx['spelling']}: "
              f"{len(refs)} prompts, logits rms {refs[0]['logits_rms']:.2f}, "
              f"min top-2 margin {min(margins):.3g}, {size / 1e3:.0f} kB")
        print(f"    greedy[0] = {refs[0]['greedy']}")
    total = folder_bytes(args.out)
    print(f"make_fixtures: wrote {args.out} ({total / 1e6:.2f} MB)")
    for fx in chosen:
        with open(os.path.join(args.out, fx["name"], "reference.json")) as f:
            distinct = min(len(set(p["greedy"])) for p in json.load(f)["prompts"])
        if distinct < 4:
            print(f"  warning: {fx['name']}: a greedy continuation has only {distinct} distinct "
                  f"tokens (a weak greedy test)")
    if total > SIZE_LIMIT:
        fail(f"fixtures take {total / 1e6:.2f} MB, more than {SIZE_LIMIT / 1e6:.1f} MB")


if __name__ == "__main__":
    main()
