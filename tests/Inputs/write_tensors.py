#!/usr/bin/env python3
"""Writes small .npy and .safetensors files for lit tests, and reads .npy
outputs back (read_npy, imported), with the standard library only (the tests
need no NumPy).

  write_tensors.py npy OUT DTYPE SHAPE VALUES
      write_tensors.py npy ids.npy i64 5 0,1,2,3,99
      write_tensors.py npy x.npy f32 2x6x4 =0.5      (every element 0.5)
  write_tensors.py safetensors OUT NAME:DTYPE:SHAPE [...]
      write_tensors.py safetensors w.safetensors w:F32:16x24 b:F32:24
SHAPE is sizes joined by 'x' ('' for a scalar). Safetensors values are 0.5
(floats) or 1 (integers).
"""
import ast
import json
import struct
import sys

NPY_TYPES = {"f32": ("<f4", "f"), "f64": ("<f8", "d"), "i32": ("<i4", "i"), "i64": ("<i8", "q"), "bool": ("|b1", "?")}
SAFETENSORS_TYPES = {"F32": "f", "F64": "d", "F16": "e", "I32": "i", "I64": "q", "BOOL": "?"}


def parse_shape(text):
    return [int(size) for size in text.split("x")] if text else []


def count(shape):
    total = 1
    for size in shape:
        total *= size
    return total


def write_npy(path, dtype, shape_text, values_text):
    descr, code = NPY_TYPES[dtype]
    shape = parse_shape(shape_text)
    parse = float if code in "fd" else int
    if values_text.startswith("="):
        values = [parse(values_text[1:])] * count(shape)
    else:
        values = [parse(v) for v in values_text.split(",")] if values_text else []
    if len(values) != count(shape):
        sys.exit(f"write_tensors.py: {len(values)} values for shape {shape}")
    shape_tuple = "(" + ", ".join(str(size) for size in shape) + ("," if len(shape) == 1 else "") + ")"
    header = "{'descr': '%s', 'fortran_order': False, 'shape': %s, }" % (descr, shape_tuple)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as out:
        out.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        out.write(struct.pack(f"<{len(values)}{code}", *values))


def read_npy(path):
    """The flat values of a .npy file of one of NPY_TYPES (as ein-run writes them)."""
    with open(path, "rb") as f:
        data = f.read()
    length = struct.unpack("<H", data[8:10])[0]
    header = ast.literal_eval(data[10:10 + length].decode())
    code = {descr: code for descr, code in NPY_TYPES.values()}[header["descr"]]
    body = data[10 + length:]
    return struct.unpack(f"<{len(body) // struct.calcsize(code)}{code}", body)


def write_safetensors(path, specs):
    header, data = {}, b""
    for spec in specs:
        name, dtype, shape_text = spec.split(":")
        shape = parse_shape(shape_text)
        code = SAFETENSORS_TYPES[dtype]
        value = 0.5 if code in "fde" else 1
        raw = struct.pack(f"<{count(shape)}{code}", *([value] * count(shape)))
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    encoded = json.dumps(header).encode()
    with open(path, "wb") as out:
        out.write(struct.pack("<Q", len(encoded)) + encoded + data)


if __name__ == "__main__":
    if len(sys.argv) >= 6 and sys.argv[1] == "npy":
        write_npy(*sys.argv[2:6])
    elif len(sys.argv) >= 3 and sys.argv[1] == "safetensors":
        write_safetensors(sys.argv[2], sys.argv[3:])
    else:
        sys.exit(__doc__)
