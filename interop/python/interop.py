"""The Python side of the interop suite: safetensors (NumPy), huggingface_hub
and pyarrow, driven by the Go tests in interop/ with JSON on stdin and
stdout.

    python interop.py save      write the files described on stdin with safetensors.numpy.save_file
    python interop.py load      read the files named on stdin with safe_open and with load_file
    python interop.py split     split tensor lists with split_state_dict_into_shards_factory
    python interop.py parquet   read a Parquet file or directory with pyarrow.parquet.read_table
    python interop.py digests   the tensor digests of files and sharded checkpoints (docs/format.md)

Tensor bytes travel as base64 of their little-endian bytes.
"""

import base64
import hashlib
import json
import os
import struct
import sys

import numpy as np

# The safetensors dtypes NumPy has, as safetensors.numpy maps them.
NUMPY_DTYPES = {
    "BOOL": np.dtype(bool),
    "U8": np.dtype(np.uint8),
    "I8": np.dtype(np.int8),
    "U16": np.dtype(np.uint16),
    "I16": np.dtype(np.int16),
    "U32": np.dtype(np.uint32),
    "I32": np.dtype(np.int32),
    "U64": np.dtype(np.uint64),
    "I64": np.dtype(np.int64),
    "F16": np.dtype(np.float16),
    "F32": np.dtype(np.float32),
    "F64": np.dtype(np.float64),
    "C64": np.dtype(np.complex64),
}
DTYPE_NAMES = {v: k for k, v in NUMPY_DTYPES.items()}


def array(t):
    """The NumPy array of a tensor given as {dtype, shape, data}."""
    data = base64.b64decode(t["data"])
    dtype = NUMPY_DTYPES[t["dtype"]].newbyteorder("<")
    return np.frombuffer(data, dtype=dtype).reshape(t["shape"]).copy()


def describe(name, arr):
    return {
        "name": name,
        "dtype": DTYPE_NAMES[arr.dtype.newbyteorder("=")],
        "shape": list(arr.shape),
        "data": base64.b64encode(arr.astype(arr.dtype.newbyteorder("<")).tobytes()).decode(),
    }


def save(req):
    from safetensors.numpy import save_file

    for f in req["files"]:
        tensors = {t["name"]: array(t) for t in f["tensors"]}
        save_file(tensors, f["path"], metadata=f["metadata"])
    return {"ok": True}


def load(req):
    from safetensors import safe_open
    from safetensors.numpy import load_file

    out = []
    for path in req["paths"]:
        with safe_open(path, framework="np") as f:
            opened = {
                "metadata": f.metadata(),
                "keys": list(f.keys()),
                "tensors": [describe(k, f.get_tensor(k)) for k in f.keys()],
            }
        loaded = load_file(path)
        out.append(
            {
                "path": path,
                "safe_open": opened,
                "load_file": [describe(k, v) for k, v in sorted(loaded.items())],
            }
        )
    return {"files": out}


def split(req):
    from huggingface_hub import split_state_dict_into_shards_factory

    out = []
    for case in req["cases"]:
        # Only the sizes matter: each tensor is a broadcast view of one
        # element, which reports the size of the whole (nbytes) without
        # holding it. Dtypes NumPy lacks are given as U8 of their bytes.
        state_dict = {}
        for t in case["tensors"]:
            dtype = NUMPY_DTYPES.get(t["dtype"])
            shape = t["shape"]
            if dtype is None:
                dtype, shape = np.dtype(np.uint8), [t["bytes"]]
            state_dict[t["name"]] = np.broadcast_to(np.zeros((), dtype=dtype), shape)
        split = split_state_dict_into_shards_factory(
            state_dict,
            get_storage_size=lambda a: a.nbytes,
            filename_pattern=case["base"] + "{suffix}.safetensors",
            max_shard_size=case["max_shard_size"],
        )
        out.append(
            {
                "is_sharded": split.is_sharded,
                "metadata": split.metadata,
                "filename_to_tensors": split.filename_to_tensors,
                "tensor_to_filename": split.tensor_to_filename,
                "filenames": list(split.filename_to_tensors),
            }
        )
    return {"cases": out}


def parquet(req):
    import pyarrow as pa
    import pyarrow.parquet as pq

    def typename(t):
        # The name of a list's element varies between writers: leave it out.
        if pa.types.is_list(t):
            return "list<" + typename(t.value_type) + ">"
        return str(t)

    table = pq.read_table(req["path"])
    return {
        "schema": [{"name": f.name, "type": typename(f.type)} for f in table.schema],
        "rows": table.to_pylist(),
    }


def tensor_digest(name, dtype, shape, data):
    """The tensor digest of docs/format.md, from its definition alone."""

    def u64(n):
        return struct.pack("<Q", n)

    def field(b):
        return u64(len(b)) + b

    h = hashlib.sha256()
    h.update(field(b"safetensors-tensor-digest/v1") + field(name.encode()) + field(dtype.encode()))
    h.update(u64(len(shape)) + b"".join(u64(d) for d in shape))
    h.update(data)
    return h.hexdigest()


def file_digests(path, names=None):
    """The digests of the tensors of one file (those of names, if given):
    the header read as the format's README describes it, with the standard
    library alone; the bytes of the tensors of a dtype NumPy has are checked
    against what safetensors' safe_open reads."""
    from safetensors import safe_open

    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8 : 8 + n])
    header.pop("__metadata__", None)
    data = raw[8 + n :]
    out = {}
    with safe_open(path, framework="np") as st:
        for name, info in header.items():
            if names is not None and name not in names:
                continue
            b, e = info["data_offsets"]
            blob = data[b:e]
            if info["dtype"] in NUMPY_DTYPES:
                arr = st.get_tensor(name)
                assert list(arr.shape) == info["shape"], name
                assert arr.astype(arr.dtype.newbyteorder("<")).tobytes() == blob, name
            out[name] = tensor_digest(name, info["dtype"], info["shape"], blob)
    return out


def digests(req):
    out = []
    for path in req["paths"]:
        if os.path.isdir(path):
            # A sharded checkpoint: the tensors its index lists.
            with open(os.path.join(path, "model.safetensors.index.json")) as f:
                weight_map = json.load(f)["weight_map"]
            by_file = {}
            for name, fn in weight_map.items():
                by_file.setdefault(fn, set()).add(name)
            d = {}
            for fn, names in sorted(by_file.items()):
                d.update(file_digests(os.path.join(path, fn), names))
        else:
            d = file_digests(path)
        out.append({"path": path, "digests": d})
    return {"models": out}


def main():
    cmd = sys.argv[1]
    req = json.load(sys.stdin)
    resp = {"save": save, "load": load, "split": split, "parquet": parquet, "digests": digests}[cmd](req)
    json.dump(resp, sys.stdout)


if __name__ == "__main__":
    main()
