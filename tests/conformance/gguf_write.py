"""Write a GGUF v3 file from a conformance record's key/values (standard library only).

    write_gguf(path, kv, tensors=None)

kv: a list of [key, type, value] as in tests/conformance/gguf/*.json, type one of
    u8 i8 u16 i16 u32 i32 u64 i64 f32 f64 bool str, or "arr:<type>" with a list value.
tensors: optional list of (name, shape, values) f32 tensors (shape in ggml order, ne[0] first;
    values a flat list of floats, or None for zeros). Without it the file holds no tensors.

The layout follows the GGUF spec (ggml docs/gguf.md): magic "GGUF", version 3, u64 tensor
count, u64 kv count, the key/values, the tensor infos, then padding to general.alignment
(default 32) before the tensor data, each tensor's data aligned likewise.
"""

import struct

GGUF_MAGIC = b"GGUF"
GGUF_VERSION = 3
GGML_TYPE_F32 = 0

# gguf_type ids (ggml/include/gguf.h)
TYPE_IDS = {
    "u8": 0, "i8": 1, "u16": 2, "i16": 3, "u32": 4, "i32": 5, "f32": 6, "bool": 7,
    "str": 8, "arr": 9, "u64": 10, "i64": 11, "f64": 12,
}
SCALAR_FMT = {
    "u8": "<B", "i8": "<b", "u16": "<H", "i16": "<h", "u32": "<I", "i32": "<i",
    "f32": "<f", "bool": "<?", "u64": "<Q", "i64": "<q", "f64": "<d",
}


def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _scalar(t, v):
    if t == "str":
        return _str(v)
    if t not in SCALAR_FMT:
        raise ValueError("unknown GGUF type %r" % t)
    if t == "bool":
        v = bool(v)
    elif t in ("f32", "f64"):
        v = float(v)
    else:
        v = int(v)
    return struct.pack(SCALAR_FMT[t], v)


def _value(t, v):
    if t.startswith("arr:"):
        et = t[4:]
        if et not in TYPE_IDS or et == "arr":
            raise ValueError("unknown GGUF array element type %r" % et)
        out = struct.pack("<IQ", TYPE_IDS[et], len(v))
        return out + b"".join(_scalar(et, x) for x in v)
    return _scalar(t, v)


def _type_id(t):
    return TYPE_IDS["arr"] if t.startswith("arr:") else TYPE_IDS[t]


def _pad(n, align):
    return (align - n % align) % align


def encode_gguf(kv, tensors=None):
    tensors = list(tensors or [])
    align = 32
    for key, t, v in kv:
        if key == "general.alignment":
            align = int(v)
    out = bytearray()
    out += GGUF_MAGIC
    out += struct.pack("<IQQ", GGUF_VERSION, len(tensors), len(kv))
    for key, t, v in kv:
        out += _str(key)
        out += struct.pack("<I", _type_id(t))
        out += _value(t, v)
    datas = []
    offset = 0
    for name, shape, values in tensors:
        n = 1
        for d in shape:
            n *= int(d)
        if values is None:
            values = [0.0] * n
        if len(values) != n:
            raise ValueError("tensor %s: %d values for shape %r" % (name, len(values), shape))
        data = struct.pack("<%df" % n, *values)
        out += _str(name)
        out += struct.pack("<I", len(shape))
        out += b"".join(struct.pack("<Q", int(d)) for d in shape)
        out += struct.pack("<IQ", GGML_TYPE_F32, offset)
        datas.append(data)
        offset += len(data) + _pad(len(data), align)
    if tensors:
        out += b"\0" * _pad(len(out), align)
        for data in datas:
            out += data
            out += b"\0" * _pad(len(data), align)
    return bytes(out)


def write_gguf(path, kv, tensors=None):
    with open(path, "wb") as f:
        f.write(encode_gguf(kv, tensors))


if __name__ == "__main__":
    import json
    import sys

    if len(sys.argv) != 3:
        sys.exit("usage: gguf_write.py RECORD.json OUT.gguf")
    with open(sys.argv[1]) as f:
        rec = json.load(f)
    write_gguf(sys.argv[2], rec["kv"])
