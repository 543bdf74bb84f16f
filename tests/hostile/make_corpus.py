#!/usr/bin/python3
"""Writes tests/hostile/corpus/: small hostile input files, one per class of issue 15 that posenc's
readers, writers and command boundary refuse, and cases.json, the commands hostile_cli_test runs on
them. Run with /usr/bin/python3 (no third-party modules); the output is committed and is
deterministic, so re-running it must leave `git status` clean.

Each case: "args" for the posenc CLI, where {F} is the case's corpus file ("file", default the
case's name), {C} the corpus folder (the test runs on a fresh copy of it and checks afterwards that
no file of it changed), {DIR} a fresh temporary folder and {OUT} a path inside it; "expect": substrings the one-line stderr must contain (the file and the
key/value at fault). Every case must end in exit 2 within 1 GiB and 60 s (hostile_cli_test).
Special files (a directory, a FIFO, a link to /dev/zero) cannot be committed: the test makes them
and its cases are listed in the test itself."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")


def npy(header, data=b"", major=1):
    h = header.encode("latin-1")
    if major == 1:
        return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(h)) + h + data
    return b"\x93NUMPY" + bytes([major, 0]) + struct.pack("<I", len(h)) + h + data


def gstr(s):
    b = s if isinstance(s, bytes) else s.encode()
    return struct.pack("<Q", len(b)) + b


def gguf(kvs=b"", n_kv=0, tensors=b"", n_tensors=0, version=3):
    return b"GGUF" + struct.pack("<IQQ", version, n_tensors, n_kv) + kvs + tensors


def kv_u32(key, v):
    return gstr(key) + struct.pack("<II", 4, v)


def kv_str(key, v):
    return gstr(key) + struct.pack("<I", 8) + gstr(v)


def safetensors(header, data=b""):
    h = header.encode() if isinstance(header, str) else header
    return struct.pack("<Q", len(h)) + h + data


def llama2c(fields, payload=b""):
    return struct.pack("<7i", *fields) + payload


F32_OK = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 4), }"
cases = []


def case(name, file, args, expect):
    cases.append({"name": name, "file": file, "args": args, "expect": expect})


def add(name, content, args, expect):
    os.makedirs(OUT, exist_ok=True)
    path = os.path.join(OUT, name)
    with open(path, "wb") as f:
        f.write(content)
    if args is None:
        return  # a file the test's own cases use
    cases.append({"name": name, "args": args, "expect": expect})


EMBED = ["embed", "{F}", "--ids", "0", "--output", "{OUT}"]
INSPECT = ["inspect", "{F}"]

# --- .npy: allocation before validation, duplicate keys, messages
add("npy_key_twice.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'shape': (4,), }\n", b"\0" * 32),
    EMBED, ["npy_key_twice.npy", "'shape' is given twice"])
add("npy_huge_shape.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1099511627776, 1024), }\n", b"\0" * 64),
    EMBED, ["npy_huge_shape.npy", "truncated", "1099511627776"])
add("npy_overflow_shape.npy",
    npy("{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 4294967296), }\n"),
    EMBED, ["npy_overflow_shape.npy", "overflows"])
add("npy_dim_past_int64.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999, 1), }\n"),
    EMBED, ["npy_dim_past_int64.npy", "'99999999999999999999' is not an integer"])
add("npy_many_dims.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (" + "1, " * 100 + "), }\n", b"\0" * 4),
    EMBED, ["npy_many_dims.npy", "more than 64 dimensions"])
add("npy_ansi_descr.npy", npy("{'descr': '<f4\x1b[2J\x1b[31m\nX" + "y" * 5000 + "', 'fortran_order': False, 'shape': (2,), }\n"),
    EMBED, ["npy_ansi_descr.npy", "\\x1b[2J\\x1b[31m\\nXyyy", "bytes in all"])
add("npy_header_past_end.npy", b"\x93NUMPY\x02\x00" + struct.pack("<I", 0xFFFFFFF0) + b"{",
    EMBED, ["npy_header_past_end.npy", "runs past the end"])

# --- GGUF: counts and lengths against the bytes that remain, keys escaped
add("gguf_kv_count_2e60.gguf", gguf(n_kv=1 << 60), INSPECT, ["gguf_kv_count_2e60.gguf", "1152921504606846976 metadata pairs"])
add("gguf_tensor_count_2e40.gguf", gguf(n_tensors=1 << 40), INSPECT,
    ["gguf_tensor_count_2e40.gguf", "1099511627776 tensors"])
add("gguf_string_len_2e62.gguf", gguf(struct.pack("<Q", 1 << 62) + b"key" + b"\0" * 16, n_kv=1), INSPECT,
    ["gguf_string_len_2e62.gguf", "string length 4611686018427387904"])
add("gguf_array_count_2e61.gguf",
    gguf(gstr("tokenizer.ggml.scores") + struct.pack("<IIQ", 9, 6, 1 << 61) + b"\0" * 16, n_kv=1), INSPECT,
    ["gguf_array_count_2e61.gguf", "tokenizer.ggml.scores", "claims 2305843009213693952 elements"])
add("gguf_string_array_count.gguf",
    gguf(gstr("tokenizer.ggml.tokens") + struct.pack("<IIQ", 9, 8, 10 ** 12) + gstr("a"), n_kv=1), INSPECT,
    ["gguf_string_array_count.gguf", "claims 1000000000000 strings"])
add("gguf_key_ansi.gguf", gguf(kv_u32(b"evil\x1b[2J\n\x00key", 1) + kv_u32(b"evil\x1b[2J\n\x00key", 1), n_kv=2),
    INSPECT, ["gguf_key_ansi.gguf", "duplicate metadata key #1 'evil\\x1b[2J\\n\\0key'"])
add("gguf_key_bad_utf8.gguf", gguf(kv_u32(b"bad\xc3\x28\xff", 1), n_kv=1), INSPECT,
    ["gguf_key_bad_utf8.gguf", "'bad\\xc3(\\xff' is not valid UTF-8"])
add("gguf_long_key.gguf", gguf(kv_u32(b"k" * 20000, 1) + kv_u32(b"k" * 20000, 1), n_kv=2), INSPECT,
    ["gguf_long_key.gguf", "(20000 bytes in all)"])
add("gguf_dims_overflow.gguf",
    gguf(tensors=gstr("t") + struct.pack("<IQQIQ", 2, 1 << 32, 1 << 32, 0, 0), n_tensors=1) + b"\0" * 64, INSPECT,
    ["gguf_dims_overflow.gguf", "product past INT64_MAX"])
add("gguf_dim_2e63.gguf", gguf(tensors=gstr("t") + struct.pack("<IQIQ", 1, 1 << 63, 0, 0), n_tensors=1) + b"\0" * 64,
    INSPECT, ["gguf_dim_2e63.gguf", "9223372036854775808 is past INT64_MAX"])

# --- safetensors: nesting bounded before parsing, no recursive dump into messages, sizes checked
deep = "[" * 30000 + "]" * 30000
add("st_deep_shape.safetensors",
    safetensors('{"w":{"dtype":"F32","shape":' + deep + ',"data_offsets":[0,4]}}', b"\0" * 4),
    EMBED, ["st_deep_shape.safetensors", "nested deeper than 8 levels at byte"])
add("st_many_dims.safetensors",
    safetensors('{"w":{"dtype":"F32","shape":[' + ",".join(["1"] * 5000) + '],"data_offsets":[0,4]}}', b"\0" * 4),
    EMBED, ["st_many_dims.safetensors", "has 5000 dims (at most 64)"])
add("st_dtype_ansi.safetensors",
    safetensors('{"w":{"dtype":"F\\u001b[2J\\n' + "z" * 20000 + '","shape":[1],"data_offsets":[0,4]}}', b"\0" * 4),
    EMBED, ["st_dtype_ansi.safetensors", "unknown dtype 'F\\x1b[2J\\nzzz", "bytes in all"])
add("st_header_size_2e40.safetensors", struct.pack("<Q", 1 << 40) + b"{}", EMBED,
    ["st_header_size_2e40.safetensors", "header size 1099511627776 runs past the end"])
add("st_shape_overflow.safetensors",
    safetensors('{"w":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,4]}}', b"\0" * 4),
    EMBED, ["st_shape_overflow.safetensors", "element count overflows"])
add("st_shape_2e64.safetensors",
    safetensors('{"w":{"dtype":"F32","shape":[18446744073709551616],"data_offsets":[0,4]}}', b"\0" * 4),
    EMBED, ["st_shape_2e64.safetensors", "not a non-negative integer"])
add("st_nan_json.safetensors", safetensors('{"w":{"dtype":"F32","shape":[NaN],"data_offsets":[0,4]}}', b"\0" * 4),
    EMBED, ["st_nan_json.safetensors", "not valid JSON at byte 30", "NaN is not JSON"])

# --- llama2.c: header sizes with checked products against the file
add("llama2c_overflow.bin", llama2c([1 << 30, 1 << 30, 1 << 30, 1 << 20, 1 << 20, 10, 4]), EMBED,
    ["llama2c_overflow.bin", "overflow"])
add("llama2c_huge.bin", llama2c([4096, 11008, 1000000, 32, 32, 32000, 4096]), EMBED,
    ["llama2c_huge.bin", "implies", "truncated"])

# --- outputs: refused before anything is written (the command's own inputs, names too long)
# table.npy is also the valid table the test's special-file cases read ids next to.
add("table.npy", npy(F32_OK + " " * 3 + "\n", b"\0" * 32), None, None)
add("table_long_out.npy", npy(F32_OK + " " * 3 + "\n", b"\0" * 32),
    ["embed", "{F}", "--ids", "0", "--output", "{DIR}/" + "n" * 300 + ".npy"], ["File name too long"])

# A valid llama2.c checkpoint (dim 8, hidden 16, 1 layer, 2 heads, 1 kv head, vocab 10, seq 4):
# convert-layout may not write over its input.
floats = 10 * 8 + 8 + 64 + 32 + 32 + 64 + 8 + 3 * 128 + 8 + 2 * 4 * 2
add("tiny_llama2c.bin", llama2c([8, 16, 1, 2, 1, 10, 4], struct.pack("<%df" % floats, *[0.25] * floats)),
    ["convert-layout", "--from", "interleaved", "--to", "half", "{F}", "{F}"], ["is the input", "tiny_llama2c.bin"])

# Outputs that are inputs: embed over its table, rope over its config, positions or input.
rope_cfg = b'{"model_type": "llama", "hidden_size": 16, "num_attention_heads": 2, "rope_theta": 10000.0}'
add("rope_config.json", rope_cfg, None, None)
add("rope_pos.npy", npy("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }" + " " * 5 + "\n",
                        struct.pack("<3q", 0, 1, 2)), None, None)
add("rope_x.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2, 8), }" + " " * 1 + "\n",
                      b"\0" * (3 * 2 * 8 * 4)), None, None)
case("embed_output_is_model", "table.npy", ["embed", "{F}", "--ids", "0", "--output", "{F}"],
     ["is the input", "table.npy"])
ROPE = ["rope", "--config", "{C}/rope_config.json", "--positions", "{C}/rope_pos.npy", "--input", "{C}/rope_x.npy",
        "--output"]
for target in ("rope_config.json", "rope_pos.npy", "rope_x.npy"):
    case("rope_output_is_" + target.split("_")[1].split(".")[0], target, ROPE + ["{F}"], ["is the input", target])

# --- config JSON (issue 15 items 5 and 7): non-JSON literals Python writes, values valid in float64 but
# not in the float32 they are used in. (100,000-deep nesting, a FIFO and a /dev/zero link as config are
# made at test time by hostile_cli_test: DeepAndSpecialConfigs.)
CFG = '{"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "max_position_embeddings": 4096, '
add("cfg_nan_theta.json", (CFG + '"rope_theta": NaN}').encode(), INSPECT,
    ["cfg_nan_theta.json", "not valid JSON at byte", "NaN is not JSON"])
add("cfg_infinity_theta.json", (CFG + '"rope_theta": -Infinity}').encode(), INSPECT,
    ["cfg_infinity_theta.json", "not valid JSON at byte", "-Infinity is not JSON"])
YARN = '"rope_scaling": {"rope_type": "yarn", "factor": 4, "original_max_position_embeddings": 1024, '
add("cfg_yarn_attention_1e300.json", (CFG + YARN + '"attention_factor": 1e300}}').encode(), INSPECT,
    ["cfg_yarn_attention_1e300.json", "'attention_factor' = 1e+300", "outside float32"])
add("cfg_yarn_attention_1e-300.json", (CFG + YARN + '"attention_factor": 1e-300}}').encode(), INSPECT,
    ["cfg_yarn_attention_1e-300.json", "'attention_factor' = 1e-300", "outside float32"])
add("cfg_yarn_mscale_-1e308.json", (CFG + YARN + '"mscale": -1e308, "mscale_all_dim": 1}}').encode(), INSPECT,
    ["cfg_yarn_mscale_-1e308.json", "'mscale' = -1e+308", "outside float32"])
add("cfg_theta_nested_deep.json", (CFG + '"rope_theta": ' + "[" * 40 + "]" * 40 + "}").encode(), INSPECT,
    ["cfg_theta_nested_deep.json", "nested deeper than 32 levels", "'rope_theta'"])
add("cfg_theta_array.json", (CFG + '"rope_theta": [[[1, 2], 3], {"a": [4]}, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38]}').encode(),
    INSPECT, ["cfg_theta_array.json", "'rope_theta' is [[...2],{...1},5,6", "expected a number"])

add("cfg_yarn_combined_scale.json", (CFG + YARN + '"mscale": 3e38, "mscale_all_dim": -7.2134752044}}').encode(),
    INSPECT, ["cfg_yarn_combined_scale.json", "attention_scaling 6.69", "not a nonzero float32"])
add("cfg_qk_nope_2e63.json",
    (CFG + '"qk_rope_head_dim": 64, "qk_nope_head_dim": 9223372036854775807, "rope_theta": 10000}').encode(), INSPECT,
    ["cfg_qk_nope_2e63.json", "'qk_nope_head_dim' = 9223372036854775807 plus qk_rope_head_dim = 64 overflows"])
add("cfg_max_position_negative.json", CFG.replace("4096", "-1").encode()[:-2] + b'}', INSPECT,
    ["cfg_max_position_negative.json", "'max_position_embeddings' is -1, must be >= 0"])

add("cfg_window_pattern_bad.json", (CFG + '"num_hidden_layers": 4, "sliding_window": 8, "sliding_window_pattern": "LL\\u001bG"}').encode(),
    INSPECT, ["cfg_window_pattern_bad.json", "'sliding_window_pattern' is", "a string of L (sliding) and G (global)"])
# A layer count sizes the per-layer table (EXAONE 4's "LLLG" pattern, LFM2's full_attn_idxs): 3e8
# layers in 150 bytes took 11 GB and a minute before the bound.
add("cfg_layers_3e8_pattern.json",
    (CFG + '"num_hidden_layers": 300000000, "sliding_window": 8, "sliding_window_pattern": "LLLG"}').encode(),
    INSPECT, ["cfg_layers_3e8_pattern.json", "'num_hidden_layers' is 300000000, must be in [1, 65536]"])
add("cfg_layers_3e8_idxs.json", (CFG + '"num_hidden_layers": 300000000, "full_attn_idxs": [1]}').encode(), INSPECT,
    ["cfg_layers_3e8_idxs.json", "'num_hidden_layers' is 300000000"])
add("cfg_layer_type_undeclared.json", (CFG + '"layer_types": ["sliding_attention", "full_attention"]}').encode(),
    INSPECT + ["--layer-type", "chunked_attention"], ["cfg_layer_type_undeclared.json", "is not one of the config's layer_types"])
# --layer / --layer-type / --site / --accept-key: one declaration (AddLayerSelection) for inspect, rope and
# check; names are tokens (a control byte is refused before any file is read), layers bounded.
add("flags_layer_type_escape.txt", b"", INSPECT + ["--layer-type", "chunked\x1b[2J"],
    ["--layer-type", "has characters other than letters"])
add("flags_site_empty.txt", b"", ["check", "--model", "{F}", "--inv-freq", "{F}", "--site", ""], ["--site: '' is empty"])
add("flags_layer_negative.txt", b"", ["rope", "--config", "{F}", "--layer", "-1"], ["--layer: '-1' is negative"])
add("flags_accept_key_empty.txt", b"", INSPECT + ["--accept-key", ""], ["--accept-key: '' is empty"])

# --- flags: strict integers, sizes bounded before allocating, patterns bounded
add("flags_negative_heads.txt", b"", ["convert-layout", "--from", "half", "--to", "interleaved", "--heads", "-3", "{F}",
                                       "{OUT}"], ["--heads: '-3' is negative"])
add("flags_tokens_2e40.txt", b"", ["bench", "rerotate", "--tokens", "1099511627776"],
    ["--tokens: '1099511627776' is past the largest accepted value"])
add("flags_filter_deep.txt", b"", ["bench", "--filter", "(" * 1000 + ")" * 1000], ["--filter", "2000 bytes"])
add("flags_evict_mib_9000.txt", b"", ["bench", "--evict-mib", "9000", "--filter", "rope_decode"],
    ["--evict-mib: '9000' is past the largest accepted value 8192"])

# --- GGUF float keys: llama.cpp reads them in float32; a float64 value that overflows or flushes there
# is refused quoting the file's value (before: 1e-300 narrowed to 0 = "no scaling"). Counts from
# metadata checked against the tensors the file holds before anything is sized by them.
def kv_f32(key, v):
    return gstr(key) + struct.pack("<If", 6, v)


def kv_f64(key, v):
    return gstr(key) + struct.pack("<Id", 12, v)


def gguf_model(kvs, tensors=()):
    """A GGUF v3 file: metadata pairs, then F32 tensors (name, shape, values) at 32-byte alignment."""
    info, data = b"", b""
    for name, shape, values in tensors:
        info += gstr(name) + struct.pack("<I", len(shape)) + struct.pack("<%dQ" % len(shape), *shape)
        info += struct.pack("<IQ", 0, len(data))
        data += struct.pack("<%df" % len(values), *values)
        data += b"\0" * (-len(data) % 32)
    head = gguf(b"".join(kvs), n_kv=len(kvs), tensors=info, n_tensors=len(tensors))
    return head + b"\0" * (-len(head) % 32) + data


LLAMA_KV = [kv_str("general.architecture", "llama"), kv_u32("llama.embedding_length", 8),
            kv_u32("llama.attention.head_count", 2), kv_u32("llama.context_length", 64),
            kv_f32("llama.rope.freq_base", 10000.0)]
for key, value in (("rope.scaling.factor", 1e-300), ("rope.freq_base", 1e300), ("rope.scaling.attn_factor", 1e300)):
    kvs = [kv for kv in LLAMA_KV if b"freq_base" not in kv or key != "rope.freq_base"]
    if key != "rope.freq_base":
        kvs.append(kv_str("llama.rope.scaling.type", "yarn" if "attn" in key else "linear"))
    if "attn" in key:
        kvs.append(kv_f32("llama.rope.scaling.factor", 4.0))
    kvs.append(kv_f64("llama." + key, value))
    name = "gguf_f64_" + key.split(".")[-1] + ".gguf"
    add(name, gguf_model(kvs), INSPECT, [name, "'llama.%s' = %s" % (key, "1e-300" if value < 1 else "1e+300"),
                                         "outside float32"])
EMB = ("token_embd.weight", (8, 10), [0.5] * 80)  # ggml's order: [d_model, vocab]
DETECT = ["detect-layout", "{F}", "--tokens", "1,2,3"]
add("gguf_block_count_2e32.gguf", gguf_model(LLAMA_KV + [kv_u32("llama.block_count", 0xFFFFFFFF)], [EMB]), DETECT,
    ["gguf_block_count_2e32.gguf", "4294967295 layers", "the file has 1"])
add("gguf_rms_eps_1e300.gguf",
    gguf_model(LLAMA_KV + [kv_u32("llama.block_count", 1), kv_f64("llama.attention.layer_norm_rms_epsilon", 1e300)],
               [EMB] + [("pad%d" % i, (1,), [0.0]) for i in range(9)]), DETECT, ["gguf_rms_eps_1e300.gguf", "rms_norm_eps 1e+300", "within float32"])
# A llama2.c checkpoint whose weights are NaN: no "give more tokens" advice from NaN losses.
add("llama2c_nan_weights.bin", llama2c([8, 16, 1, 2, 1, 10, 4], struct.pack("<%df" % floats, *[float("nan")] * floats)),
    DETECT, ["llama2c_nan_weights.bin", "gives loss nan", "weights hold NaN"])
# Real-valued flags: decimal only, finite, in range; id lists strict (no saturation to INT64_MAX).
add("flags_z_nan.txt", b"", ["detect-layout", "{C}/tiny_llama2c.bin", "--tokens", "1,2", "--z", "nan"],
    ["--z: 'nan' is not a decimal number"])
add("flags_margin_1e999.txt", b"", ["detect-layout", "{C}/tiny_llama2c.bin", "--tokens", "1,2", "--min-margin", "1e999"],
    ["--min-margin: '1e999' is out of range"])
add("flags_multiplier_1e39.txt", b"", ["embed", "{C}/table.npy", "--ids", "0", "--multiplier", "1e39", "--output",
                                       "{OUT}"], ["--multiplier: '1e39' is past the largest accepted value"])
add("flags_tokens_2e64.txt", b"", ["detect-layout", "{C}/tiny_llama2c.bin", "--tokens", "1,18446744073709551616"],
    ["--tokens item 1 '18446744073709551616' is past the largest accepted value"])
add("embed_id_past_vocab.txt", b"", ["embed", "{C}/table.npy", "--ids", "0,7", "--output", "{OUT}"],
    ["table.npy", "token id 7 at index 1"])

# --- issue 32: one typed reader for config values. A key of the wrong JSON type is an error naming the
# key and the type expected, never "absent"; integers are bounded (2^64-1 is not read as -1); floats
# are checked to the float32 a computation uses them in; derived lengths do not overflow.
ROPE_CFG = ["rope", "--config", "{F}", "--positions", "{C}/rope_pos.npy", "--input", "{C}/rope_x.npy", "--output",
            "{OUT}"]
HEAD = '"hidden_size": 16, "num_attention_heads": 2, "rope_theta": 10000.0'
for tag, value in (("list", '["gptj"]'), ("int", "5"), ("null", "null"), ("object", '{"gptj": 1}')):
    name = "cfg_model_type_%s.json" % tag
    add(name, ('{"model_type": %s, %s}' % (value, HEAD)).encode(), ROPE_CFG,
        [name, "key 'model_type' is", "expected a string"])
add("cfg_chatglm_pe2d_string.json",
    b'{"model_type": "chatglm", "hidden_size": 16, "num_attention_heads": 2, "kv_channels": 8, '
    b'"seq_length": 64, "position_encoding_2d": "true"}', INSPECT,
    ["cfg_chatglm_pe2d_string.json", "key 'position_encoding_2d' is \"true\"", "expected true, false or a number"])
add("cfg_dbrx_attn_config_string.json",
    b'{"model_type": "dbrx", "d_model": 16, "n_heads": 2, "max_seq_len": 64, "attn_config": "{\\"rope_theta\\": 5e5}"}',
    INSPECT, ["cfg_dbrx_attn_config_string.json", "key 'attn_config' is", "expected an object"])
add("cfg_gemma4_rope_type_number.json",
    b'{"model_type": "gemma4_text", "hidden_size": 64, "num_attention_heads": 2, "rope_parameters": '
    b'{"full_attention": {"rope_type": 8.0, "rope_theta": 1000000.0}}}',
    INSPECT, ["cfg_gemma4_rope_type_number.json", "key 'rope_type' is 8.0", "expected a string"])
add("cfg_dynamic_base_overflow.json",
    b'{"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "max_position_embeddings": 2048, '
    b'"rope_theta": 1e305, "rope_scaling": {"type": "dynamic", "factor": 2.0}}',
    INSPECT, ["cfg_dynamic_base_overflow.json", "dynamic scaling at seq_len 2147483648",
              "rope_theta 1e+305 * 2097151^(64/62) = inf"])
add("cfg_max_positions_2e64.json", (CFG + '"rope_theta": 10000.0, "num_hidden_layers": 18446744073709551615}').encode(),
    INSPECT, ["cfg_max_positions_2e64.json", "'num_hidden_layers' is 18446744073709551615"])
add("ggml_config_string.json", b'{"n_dims": 8, "mode": 0, "freq_base": 10000.0, "config": "n_dims=8"}', ROPE_CFG,
    ["ggml_config_string.json", "key 'config' is", "expected an object"])
add("ggml_n_dims_2e64.json", b'{"n_dims": 18446744073709551615, "mode": 0, "freq_base": 10000.0}', ROPE_CFG,
    ["ggml_n_dims_2e64.json", "'n_dims' is 18446744073709551615"])
GGML = '{"n_dims": 8, "mode": 0, "freq_base": 10000.0, "n_ctx_orig": 4096, '
for value in ("1e20", "1e200", "3e38"):
    name = "ggml_ext_factor_%s.json" % value
    add(name, (GGML + '"ext_factor": %s}' % value).encode(), ROPE_CFG,
        [name, "'ext_factor'", "cancels pair" if value != "1e200" else "outside float32"])
for key, value in (("freq_base", "1e39"), ("freq_scale", "1e-46"), ("beta_fast", "-1e300"), ("attn_factor", "1e39")):
    name = "ggml_%s_%s.json" % (key, value)
    body = GGML.replace('"freq_base": 10000.0, ', "") + '"%s": %s%s}' % (
        key, value, "" if key == "freq_base" else ', "freq_base": 10000.0')
    add(name, body.encode(), ROPE_CFG, [name, "'%s'" % key, "float32"])
L4 = ('{"model_type": "llama4_text", "hidden_size": 16, "num_attention_heads": 2, "num_hidden_layers": 4, '
      '"rope_theta": 500000.0, "max_position_embeddings": 64, ')
for key, value in (("attn_scale", "1e39"), ("floor_scale", "1e-40"), ("attn_scale", "1e300")):
    name = "cfg_llama4_%s_%s.json" % (key, value)
    add(name, (L4 + '"%s": %s}' % (key, value)).encode(), INSPECT, [name, "'%s'" % key, "float32"])

# One message builder: a value echoed is capped (about 200 bytes, with its length), the reason is kept,
# the line stays under 1 KB (hostile_cli_test checks every case's line length).
add("cfg_mrope_section_600k.json",
    ('{"model_type": "qwen2_vl", %s, "rope_scaling": {"type": "mrope", "mrope_section": [%s]}}'
     % (HEAD, ", ".join(["-1"] * 30000))).encode(), INSPECT, ["cfg_mrope_section_600k.json", "mrope_section"])
add("cfg_model_type_100k.json", ('{"model_type": "%s\\n\\u001b[2J", %s}' % ("m" * 100000, HEAD)).encode(), INSPECT,
    ["cfg_model_type_100k.json", "bytes in all"])
add("flags_layout_100k.txt", b"", ROPE + ["{OUT}", "--layout", "h" * 100000], ["--layout"])

# Overflow: lengths and positions of 2^63-1 (max(position) + 1 saturates; the position is refused as itself).
add("rope_pos_2e63.npy", npy("{'descr': '<i8', 'fortran_order': False, 'shape': (3,), }" + " " * 5 + "\n",
                             struct.pack("<3q", 0, 1, 2**63 - 1)),
    ["rope", "--config", "{C}/rope_config.json", "--positions", "{F}", "--input", "{C}/rope_x.npy", "--output",
     "{OUT}"], ["9223372036854775807"])
def kv_i32(key, v):
    return gstr(key) + struct.pack("<Ii", 5, v)


for key in ("context_length", "rope.scaling.original_context_length", "attention.key_length"):
    kvs = [kv for kv in LLAMA_KV if b"context_length" not in kv or key != "context_length"] + [kv_i32("llama." + key, -5)]
    name = "gguf_negative_%s.gguf" % key.split(".")[-1]
    add(name, gguf_model(kvs), INSPECT, [name, "'llama.%s' = -5 must be >= 0" % key])
# --layer-type on a file whose format has one set of RoPE parameters: refused, not ignored.
add("gguf_layer_type.gguf", gguf_model(LLAMA_KV), INSPECT + ["--layer-type", "sliding_attention"],
    ["gguf_layer_type.gguf", "layer type 'sliding_attention' asked for", "no per-layer-type RoPE parameters"])
case("llama2c_layer_type", "tiny_llama2c.bin", INSPECT + ["--layer-type", "full_attention"],
     ["tiny_llama2c.bin", "layer type 'full_attention' asked for"])

# The library's refusals of a layer selection that the config does not have (hf_config: SelectLayer,
# SelectSite, CheckPositionalKeys): each names the file and what was asked.
LAYERS = (CFG + '"num_hidden_layers": 4, "rope_theta": 10000.0, '
          '"layer_types": ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]}')
add("cfg_layer_past_end.json", LAYERS.encode(), INSPECT + ["--layer", "4"],
    ["cfg_layer_past_end.json", "layer 4 is outside [0, 4)"])
add("cfg_layer_vs_type.json", LAYERS.encode(), INSPECT + ["--layer", "0", "--layer-type", "full_attention"],
    ["cfg_layer_vs_type.json", "layer 0 is 'sliding_attention', not the layer type 'full_attention'"])
add("cfg_site_unknown.json", LAYERS.encode(), INSPECT + ["--site", "indexer"],
    ["cfg_site_unknown.json", "site 'indexer' is not one of llama's RoPE sites"])

os.makedirs(OUT, exist_ok=True)
with open(os.path.join(HERE, "cases.json"), "w") as f:
    json.dump(cases, f, indent=1, ensure_ascii=True)
    f.write("\n")
assert all(os.path.exists(os.path.join(OUT, c.get("file", c["name"]))) for c in cases)
total = sum(os.path.getsize(os.path.join(OUT, n)) for n in os.listdir(OUT))
print(f"{len(cases)} cases, {len(os.listdir(OUT))} files, {total} bytes")
