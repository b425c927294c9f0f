#!/usr/bin/env python3
"""Writes fixture.safetensors, the file tests/training/test_safetensors.cpp reads, with nothing but
json and struct: a writer independent of loom's. Run from this directory to regenerate it:

    python3 make_fixture.py

The tensors are listed in the header in another order than their bytes lie in the data, as a
writer may do; F16 and BF16 values are written as raw bit patterns, whose values the test states.
"""
import json
import struct

# name -> (dtype, shape, bytes), in the order their bytes are laid out in the data.
tensors = [
    ("gpt.layers.0.self_attn.q.W", "F32", [2, 3],
     struct.pack("<6f", 1.0, -2.0, 0.5, 3.25, -0.125, 1024.0)),
    ("double.b", "F64", [3], struct.pack("<3d", 0.1, -1e300, 2.5)),
    ("half", "F16", [5], struct.pack("<5H", 0x3C00, 0xC000, 0x3555, 0x0001, 0x7BFF)),
    ("brain", "BF16", [2, 2], struct.pack("<4H", 0x3FC0, 0xC040, 0x3F80, 0x4049)),
    ("scalar", "F32", [], struct.pack("<f", 7.0)),
    ("empty", "F32", [0, 4], b""),
]

header = {"__metadata__": {"format": "pt", "note": "caf\u00e9"}}
offset = 0
for name, dtype, shape, data in tensors:
    header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
    offset += len(data)

# Keys sorted: the header's order is no longer the data's.
text = json.dumps(header, sort_keys=True, ensure_ascii=False).encode("utf-8")
text += b" " * (-len(text) % 8)  # padded with spaces to a multiple of 8 bytes, as the reference writer does
with open("fixture.safetensors", "wb") as out:
    out.write(struct.pack("<Q", len(text)))
    out.write(text)
    for _, _, _, data in tensors:
        out.write(data)
