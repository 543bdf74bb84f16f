#!/usr/bin/env python3
"""Writes the layout converter's seed corpus (corpus/convert/): one mode byte (see FuzzConvert in
fuzz_parsers.hpp) followed by a small model file that converts cleanly. Run from this folder."""
import json
import struct

def gguf(path, mode):
    # GGUF v3: llama, 2 heads (1 kv) of 8, q F32 [4 x 16], k F16 [4 x 8], fused qkv Q8_0 [32 x 32].
    def s(x):
        b = x.encode()
        return struct.pack('<Q', len(b)) + b
    kvs = [('general.architecture', 8, s('llama'))]
    for k, v in [('attention.head_count', 2), ('attention.head_count_kv', 1), ('embedding_length', 16),
                 ('attention.key_length', 8), ('rope.dimension_count', 8)]:
        kvs.append(('llama.' + k, 4, struct.pack('<I', v)))
    kvs.append(('llama.rope.freq_base', 6, struct.pack('<f', 10000.0)))
    q = b''.join(struct.pack('<f', r + c / 8) for r in range(16) for c in range(4))
    k = b''.join(struct.pack('<e', r + c / 8) for r in range(8) for c in range(4))
    qkv = b''.join(struct.pack('<e', 0.01 * (r + 1)) + bytes((r + i) % 127 for i in range(32)) for r in range(32))
    tensors = [('blk.0.attn_q.weight', [4, 16], 0, q), ('blk.0.attn_k.weight', [4, 8], 1, k),
               ('blk.0.attn_qkv.weight', [32, 32], 8, qkv)]
    head = b'GGUF' + struct.pack('<IQQ', 3, len(tensors), len(kvs))
    for key, t, v in kvs:
        head += s(key) + struct.pack('<I', t) + v
    data, offs = b'', []
    for name, dims, t, raw in tensors:
        data += b'\0' * (-len(data) % 32)
        offs.append(len(data))
        data += raw
    for (name, dims, t, raw), off in zip(tensors, offs):
        head += s(name) + struct.pack('<I', len(dims)) + b''.join(struct.pack('<Q', d) for d in dims)
        head += struct.pack('<IQ', t, off)
    head += b'\0' * (-len(head) % 32)
    open(path, 'wb').write(bytes([mode]) + head + data)

def safetensors(path, mode):
    # 2 heads of 8 (mode 2: from the options): q_proj F32 [16, 2], k_proj F16 [16, 2], qkv_proj bias BF16 [40].
    tensors = [('model.layers.0.self_attn.q_proj.weight', 'F32', [16, 2], b''.join(struct.pack('<f', i) for i in range(32))),
               ('model.layers.0.self_attn.k_proj.weight', 'F16', [16, 2], b''.join(struct.pack('<e', i) for i in range(32))),
               ('model.layers.1.self_attn.qkv_proj.bias', 'BF16', [40], b''.join(struct.pack('<f', i)[2:] for i in range(40)))]
    header, data = {}, b''
    for name, dt, shape, raw in tensors:
        header[name] = {'dtype': dt, 'shape': shape, 'data_offsets': [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(header).encode()
    h += b' ' * (-len(h) % 8)
    open(path, 'wb').write(bytes([mode]) + struct.pack('<Q', len(h)) + h + data)

gguf('corpus/convert/gguf_llama_q8_qkv', 0)              # interleaved -> half, heads from metadata
safetensors('corpus/convert/safetensors_q_k_qkv', 2 | 1)  # half -> interleaved, 2 heads of 8
# llama2.c: the reader's seed (dim 8, 2 heads, 1 kv head), both directions, heads from the header.
llama2c = open('corpus/llama2c/shared.bin', 'rb').read()
open('corpus/convert/llama2c_shared', 'wb').write(bytes([0]) + llama2c)
open('corpus/convert/llama2c_shared_from_half', 'wb').write(bytes([1]) + llama2c)
