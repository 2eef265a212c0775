#!/usr/bin/env python3
"""Rebuilds the folders recorded in layouts.jsonl.gz, as the Go tests do: text files
verbatim, safetensors files as their verbatim header followed by zero bytes,
symlinks as recorded, anything else as zero bytes of the recorded size.

    python rebuild.py OUT [NAME ...]
"""
import gzip
import json
import os
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def rebuild(rec, root):
    links = []
    for rel, e in rec["files"].items():
        path = os.path.join(root, *rel.split("/"))
        os.makedirs(os.path.dirname(path), exist_ok=True)
        if "link" in e:
            links.append((e["link"], path))
        elif "json" in e:
            with open(path, "wb") as f:
                f.write(e["json"].encode("utf-8"))
        elif "safetensors" in e:
            h = e["safetensors"]["header"].encode("utf-8")
            with open(path, "wb") as f:
                f.write(struct.pack("<Q", len(h)) + h)
                f.truncate(e["safetensors"]["size"])
        else:
            with open(path, "wb") as f:
                f.truncate(e["other"])
    for target, path in links:
        os.symlink(target, path)


def main():
    out, names = sys.argv[1], set(sys.argv[2:])
    for line in gzip.open(os.path.join(HERE, "layouts.jsonl.gz")):
        rec = json.loads(line)
        if not names or rec["name"] in names:
            rebuild(rec, os.path.join(out, rec["name"]))


if __name__ == "__main__":
    main()
