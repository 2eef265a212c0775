#!/usr/bin/env python3
"""Prints the tensor digests of digest_test.go's vectors, computed from the
definition in docs/format.md with Python's hashlib and struct alone:
python3 testdata/digests/vectors.py"""
import hashlib
import struct


def field(b):
    return struct.pack("<Q", len(b)) + b


def digest(name, dtype, shape, data):
    m = field(b"safetensors-tensor-digest/v1") + field(name.encode()) + field(dtype.encode())
    m += struct.pack("<Q", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape)
    return hashlib.sha256(m + data).hexdigest()


print(digest("w", "F32", [2], bytes(range(1, 9))))
print(digest("emb.weight", "BF16", [2, 3], bytes(range(12))))
print(digest("s", "I8", [], b"\x7f"))
print(digest("", "F64", [0, 4], b""))
print(digest("é\"/x", "U8", [3], b"abc"))
