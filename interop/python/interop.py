"""The Python side of the interop suite: safetensors (NumPy), huggingface_hub
and pyarrow, driven by the Go tests in interop/ with JSON on stdin and
stdout.

    python interop.py save      write the files described on stdin with safetensors.numpy.save_file
    python interop.py load      read the files named on stdin with safe_open and with load_file
    python interop.py split     split tensor lists with split_state_dict_into_shards_factory
    python interop.py parquet   read a Parquet file or directory with pyarrow.parquet.read_table

Tensor bytes travel as base64 of their little-endian bytes.
"""

import base64
import json
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


def main():
    cmd = sys.argv[1]
    req = json.load(sys.stdin)
    resp = {"save": save, "load": load, "split": split, "parquet": parquet}[cmd](req)
    json.dump(resp, sys.stdout)


if __name__ == "__main__":
    main()
