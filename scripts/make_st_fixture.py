#!/usr/bin/env python3
"""make_st_fixture.py - writes tests/fixtures/python_written.safetensors, a small safetensors
file made by another program (Python's standard library only: struct + json), for the reader's
specs. Unlike idxlab's writer it leaves the header unpadded, escapes non-ASCII text as \\uXXXX
(a surrogate pair included), puts spaces after separators, and lays a 5-byte U8 tensor first so
the F32 tensor after it sits at a misaligned offset. The expected values are restated in
tests/c/test_safetensors.c and tests/safetensors_spec.lua: change all three together.

Run from the checkout: python3 scripts/make_st_fixture.py
"""
import json
import os
import struct


def bf16_bytes(values):
    # the upper half of each float32: exact for these values
    return b"".join(struct.pack("<f", v)[2:] for v in values)


def main():
    tensors = [  # (name, dtype, shape, raw bytes), in data order
        ("bytes.u8", "U8", [5], bytes([0, 1, 127, 200, 255])),
        ("weights", "F32", [2, 3], struct.pack("<6f", 1.5, -2.25, 3.0, 0.0, 1e-3, -65504.0)),
        ("h\u00e9ad/\U0001F600", "BF16", [4], bf16_bytes([1.0, -2.5, 0.5, 384.0])),
        ("ks", "I32", [3], struct.pack("<3i", -7, 0, 2147483647)),
        ("f16", "F16", [2, 2], struct.pack("<4e", 0.5, -1.0, 65504.0, 2.0 ** -14)),
        ("codes", "F8_E4M3", [3], bytes([0x38, 0xB8, 0x7E])),  # 1.0, -1.0, 448
        ("empty", "F32", [0, 4], b""),
        ("scalar", "I32", [], struct.pack("<i", 42)),
    ]
    header = {"__metadata__": {"format": "pt", "note": "caf\u00e9 \u2713 \"quoted\"\n"}}
    data = b""
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape,
                        "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header).encode("ascii")  # ensure_ascii: \u escapes, ", " and ": "
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    out = os.path.join(root, "tests", "fixtures", "python_written.safetensors")
    with open(out, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        f.write(data)
    print("wrote %s (%d-byte header, %d data bytes)" % (out, len(text), len(data)))


if __name__ == "__main__":
    main()
