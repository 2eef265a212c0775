"""The reference's get_slice on many selections, for the Go tests in
interop/ (slices_test.go), with JSON on stdin and stdout, in one process:

    python slices.py < request.json

The request names safetensors files and cases, each a tensor of one of
them and a Python index: a list of items, each {"int": n}, {"slice":
[start, stop, step]} (null for an omitted part) or "...". The answer has,
for each case, either the selection (its shape and bytes, base64) or the
exception that safe_open(path, framework="numpy").get_slice(name)[index]
raised (its type and message).

get_slice gives its selection to NumPy, which has no F4, F8 or BF16 and
would decode the bytes: this script stands in for the numpy module, so
that the reference's own bytes and shape come back for every dtype it can
hand over (all but F6_E2M3 and F6_E3M2, which it refuses to hand over,
"Dtype not understood", only after its slicing has accepted the index).
"""

import base64
import json
import sys
import types


class Captured:
    """What the reference hands to numpy.frombuffer or numpy.zeros."""

    def __init__(self, data):
        self.data = bytes(data)
        self.shape = None

    def reshape(self, shape):
        self.shape = [int(d) for d in shape]
        return self

    def byteswap(self, inplace=False):
        # On a big-endian host the reference swaps to native order; the
        # file's little-endian bytes are what the Go side returns.
        return self


def frombuffer(buffer=None, dtype=None):
    return Captured(buffer)


def zeros(shape, dtype=None):
    return Captured(b"").reshape(shape)


fake = types.ModuleType("numpy")
fake.frombuffer = frombuffer
fake.zeros = zeros
fake.dtype = lambda name: name
for name in ["float64", "float32", "float16", "uint64", "int64", "uint32", "int32", "uint16", "int16",
             "uint8", "int8", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
             "float8_e8m0fnu", "float4_e2m1fn_x2", "complex64"]:
    setattr(fake, name, name)
sys.modules["numpy"] = fake

from safetensors import safe_open  # noqa: E402  (after the stand-in)


def item(it):
    if it == "...":
        return Ellipsis
    if "int" in it:
        return it["int"]
    return slice(*it["slice"])


def main():
    req = json.load(sys.stdin)
    files = [safe_open(path, framework="numpy") for path in req["files"]]
    out = []
    for case in req["cases"]:
        index = tuple(item(it) for it in case["index"])
        try:
            got = files[case["file"]].get_slice(case["tensor"])[index]
            out.append({"shape": got.shape, "data": base64.b64encode(got.data).decode()})
        except BaseException as e:  # a Rust panic is a BaseException
            out.append({"error": type(e).__name__, "message": str(e)})
    json.dump({"results": out}, sys.stdout)


if __name__ == "__main__":
    main()
