"""An independent implementation of the quant package's two int8 rules.

    python reference.py IN.safetensors OUT.safetensors

For each 2-D F32, F16 or BF16 tensor NAME of IN, OUT gets

    NAME.channel.q, NAME.channel.scale   compressed-tensors' rule, per output channel
    NAME.tensor.q,  NAME.tensor.scale    compressed-tensors' rule, per tensor
    NAME.validator.q, NAME.validator.scale  the validator's rule (F32 scale, shape [1])

computed with NumPy, and ml_dtypes for BF16, whose arithmetic (like NumPy's
for float16) computes each operation in float32 and rounds the result to the
dtype, as PyTorch does on a CPU. It shares no code with the Go package: the
interop module's Go test runs it and compares the results bit for bit.
"""

import json
import struct
import sys

import ml_dtypes
import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": ml_dtypes.bfloat16, "I8": np.int8}
NAMES = {np.dtype(v): k for k, v in DTYPES.items()}


def read(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    header.pop("__metadata__", None)
    base = 8 + n
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        if info["dtype"] not in DTYPES:
            continue
        arr = np.frombuffer(data[base + begin : base + end], dtype=DTYPES[info["dtype"]])
        out[name] = arr.reshape(info["shape"])
    return out


def write(path, tensors):
    header, chunks, off = {}, [], 0
    for name in sorted(tensors):
        arr = np.ascontiguousarray(tensors[name])
        raw = arr.tobytes()
        header[name] = {"dtype": NAMES[arr.dtype], "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def compressed(w, per_channel):
    """compressed-tensors 0.20.0: calculate_qparams, then _quantize."""
    dt = w.dtype
    if per_channel:
        lo, hi = w.min(axis=1, keepdims=True), w.max(axis=1, keepdims=True)
    else:
        lo, hi = w.min().reshape(1), w.max().reshape(1)
    zero = np.zeros_like(lo)
    lo, hi = np.minimum(lo, zero), np.maximum(hi, zero)
    m = np.maximum(np.abs(lo), np.abs(hi))
    scale = (m / (dt.type(255) / dt.type(2))).astype(dt)
    eps = ml_dtypes.finfo(dt).eps
    scale = np.where(scale == 0, dt.type(eps), scale).astype(dt)
    scaled = (w / scale).astype(dt)
    clamped = np.clip(scaled.astype(np.float32), -128, 127).astype(dt)
    q = np.rint(clamped.astype(np.float64)).astype(np.int8)  # half to even, exact
    return q, scale


def validator(x):
    """max_abs = max|x|; q = round_half_away(clamp(x * (127 / max_abs))); scale = max_abs / 127."""
    x = x.astype(np.float32)
    max_abs = np.max(np.abs(x)) if x.size else np.float32(0)
    if max_abs == 0:
        return np.zeros(x.shape, np.int8), np.zeros(1, np.float32)
    factor = np.float32(127) / np.float32(max_abs)
    v = np.clip(x * factor, np.float32(-128), np.float32(127)).astype(np.float64)
    q = (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int8)
    return q, np.array([np.float32(max_abs) / np.float32(127)], np.float32)


def main():
    src, dst = sys.argv[1:3]
    out = {}
    for name, w in read(src).items():
        if w.ndim != 2 or w.dtype == np.int8:
            continue
        with np.errstate(over="ignore"):
            for label, per_channel in [("channel", True), ("tensor", False)]:
                q, scale = compressed(w, per_channel)
                out[f"{name}.{label}.q"], out[f"{name}.{label}.scale"] = q, scale
            out[f"{name}.validator.q"], out[f"{name}.validator.scale"] = validator(w)
    write(dst, out)


if __name__ == "__main__":
    main()
