#!/usr/bin/env python3
"""fp8_ckpt.py — the dense twin of a block-scaled FP8 checkpoint, for test_fp8_model.sh.
Stdlib only (no torch, no numpy: runs in CI).

    fp8_ckpt.py dequant SRC DST   DST = SRC with every F8_E4M3 weight replaced by the F32
                                  weight e4m3 * weight_scale_inv[row / 128][col / 128] (the
                                  scale tensors dropped, quantization_config removed)
    fp8_ckpt.py compare A B TOL   A, B: float32 files; exit 0 when ||a - b|| / ||b|| <= TOL,
                                  print the relative error

The product is formed in double (exact: 4 significant bits times 24) and rounded once to
f32, which is what an f32 multiply gives: the weights the model then sees are exactly what
quant-fp8's linear_dequant computes.
"""
import array
import json
import math
import os
import shutil
import struct
import sys


def e4m3(b):
    if b & 0x7F == 0x7F:
        return float("nan")
    e, m = (b >> 3) & 15, b & 7
    v = m * 2.0 ** -9 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
    return -v if b & 0x80 else v


E4M3 = [e4m3(b) for b in range(256)]


def read(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    header.pop("__metadata__", None)
    out = {}
    for name, e in header.items():
        b0, b1 = e["data_offsets"]
        out[name] = (e["dtype"], e["shape"], data[b0:b1])
    return out


def write(path, tensors):
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        dtype, shape, blob = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def scales_of(dtype, blob):
    if dtype == "F32":
        return array.array("f", blob).tolist()
    if dtype == "BF16":
        return [struct.unpack("<f", struct.pack("<I", h << 16))[0]
                for h in array.array("H", blob)]
    raise SystemExit(f"unexpected scale dtype {dtype}")


def dequant(src, dst):
    os.makedirs(dst, exist_ok=True)
    files = [f for f in os.listdir(src) if f.endswith(".safetensors")]
    if len(files) != 1:
        raise SystemExit(f"{src}: expected one .safetensors file, found {files}")
    t = read(os.path.join(src, files[0]))
    out = {}
    for name, (dtype, shape, blob) in t.items():
        if name.endswith(".weight_scale_inv"):
            continue
        if dtype != "F8_E4M3":
            out[name] = (dtype, shape, blob)
            continue
        rows, cols = shape
        sdt, sshape, sblob = t[name + "_scale_inv"]
        kb = (cols + 127) // 128
        if sshape != [(rows + 127) // 128, kb]:
            raise SystemExit(f"{name}: scale shape {sshape}")
        s = scales_of(sdt, sblob)
        w = array.array("f", bytes(4 * rows * cols))
        for r in range(rows):
            srow = s[(r // 128) * kb:(r // 128 + 1) * kb]
            base = r * cols
            for c in range(cols):
                w[base + c] = E4M3[blob[base + c]] * srow[c // 128]  # rounded once to f32
        out[name] = ("F32", shape, w.tobytes())
    write(os.path.join(dst, "model.safetensors"), out)
    with open(os.path.join(src, "config.json")) as f:
        cfg = json.load(f)
    cfg.pop("quantization_config", None)
    with open(os.path.join(dst, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    for extra in ("generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        if os.path.exists(os.path.join(src, extra)):
            shutil.copy(os.path.join(src, extra), os.path.join(dst, extra))


def compare(a, b, tol):
    x = array.array("f", open(a, "rb").read())
    y = array.array("f", open(b, "rb").read())
    if len(x) != len(y):
        raise SystemExit(f"{a}: {len(x)} floats, {b}: {len(y)}")
    num = sum((p - q) ** 2 for p, q in zip(x, y))
    den = sum(q * q for q in y)
    rel = math.sqrt(num / den) if den else math.sqrt(num)
    print(f"relative error {rel:.3g}")
    return 0 if rel <= float(tol) else 1


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "dequant":
        dequant(sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) == 5 and sys.argv[1] == "compare":
        return compare(sys.argv[2], sys.argv[3], sys.argv[4])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
