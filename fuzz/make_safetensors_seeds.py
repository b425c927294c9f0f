#!/usr/bin/env python3
"""Writes the seeds of fuzz_safetensors into corpus/safetensors/ (run from fuzz/): small safetensors
files, valid ones and hostile ones, written with json and struct only. Each seed's first byte is the
target's switch: 1 parses the rest in memory, 0 reads it from a file.

    python3 make_safetensors_seeds.py
"""
import json
import os
import struct


def file_of(header, data=b""):
    text = header if isinstance(header, bytes) else json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


def entry(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


w = struct.pack("<6f", 1, 2, 3, 4, 5, 6)
b = struct.pack("<2d", 0.5, -0.5)
model = {"__metadata__": {"format": "pt"}, "b": entry("F64", [2], 0, 16), "w": entry("F32", [3, 2], 16, 40)}
halves = struct.pack("<4H", 0x3C00, 0x7C00, 0x7E00, 0x0001) + struct.pack("<4H", 0x3FC0, 0xC040, 0xFF80, 0x7FC0)

seeds = {
    "model": file_of(model, b + w),
    "model_from_file": file_of(model, b + w),
    "half_and_bfloat": file_of({"h": entry("F16", [4], 0, 8), "w": entry("BF16", [3, 2], 8, 20),
                                "s": entry("F32", [], 20, 24), "e": entry("F32", [0, 5], 24, 24)},
                               halves + struct.pack("<2H", 0x3F80, 0x4049) + struct.pack("<f", 7)),
    "nan_values": file_of({"b": entry("F64", [2], 0, 16), "w": entry("F32", [3, 2], 16, 40)},
                          b + struct.pack("<6f", 1, 2, float("nan"), 4, float("inf"), 6)),
    "shape_mismatch": file_of({"b": entry("F64", [2], 0, 16), "w": entry("F32", [2, 3], 16, 40)}, b + w),
    "overlap": file_of({"b": entry("F64", [2], 0, 16), "w": entry("F32", [3, 2], 8, 32)}, b + w[:16]),
    "hole": file_of({"b": entry("F64", [2], 0, 16), "w": entry("F32", [3, 2], 20, 44)}, b + b"\0" * 4 + w),
    "product_overflow": file_of({"w": entry("F32", [4294967296, 4294967296, 2], 0, 0)}),
    "zero_dim_huge_strides": file_of({"w": entry("F32", [0, 4611686018427387904, 4], 0, 0)}),
    "deep": file_of(b'{"w":{"shape":[[[[[[[[1]]]]]]]]}}'),
    "duplicate_key": file_of(b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{}}', w[:4]),
    "header_past_end": struct.pack("<Q", 4096) + b"{}",
    "not_utf8": file_of(b'{"w\xff":{}}'),
    "integer_dtype": file_of({"w": entry("I64", [2], 0, 16)}, b),
    "fractional_offsets": file_of(b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4.0]}}', w[:4]),
    "nul_after_header": file_of(b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}\0garbage', w[:4]),
    "text_after_header": file_of(b'{"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}} {}', w[:4]),
    "f64_beyond_float": file_of({"b": entry("F64", [2], 0, 16), "w": entry("F64", [3, 2], 16, 64)},
                                b + struct.pack("<6d", 1, 2, 1e39, 4, -3.5e38, 6)),
}
os.makedirs("corpus/safetensors", exist_ok=True)
for name, data in seeds.items():
    with open(os.path.join("corpus/safetensors", name), "wb") as out:
        out.write(bytes([0 if name.endswith("from_file") else 1]) + data)
