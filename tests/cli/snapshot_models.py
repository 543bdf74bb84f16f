#!/usr/bin/env python3
"""Snapshot of the CLI's read-only output on real models and golden configs, for before/after diffs.

    tests/cli/snapshot_models.py POSENC OUTDIR [--data DIR]
    tests/cli/snapshot_models.py --compare BASE_POSENC NEW_POSENC [--data DIR]

The first form runs `inspect` (text and --json, with and without --allow-default-base),
`embed --rope-check` (and with --positions, which prints how the model's positions are applied),
`detect-layout` and `rope --config` on every model file under DIR/models (GGUF, llama2.c .bin,
safetensors, folders with a config.json), on Hugging Face folders built here (Llama-shaped; Gemma- and
Llama-shaped with head_dim != hidden_size / num_attention_heads; Llama without rope_theta), and `inspect` / `rope --config`
on every golden case's config; it writes one file per command (exit status, stdout, stderr, the
md5 of any array written). The second form snapshots two binaries and prints `diff -r` of the
results (exit 1 when they differ). Needs only the Python standard library.
"""
import argparse
import hashlib
import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

WORK = os.path.join(tempfile.gettempdir(), "posenc_snapshot_inputs")


def write_npy(path, dtype, shape, values):
    """A NumPy 1.0 .npy file ('<f4' or '<i8'), C order."""
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
        dtype, "".join(f"{d}, " for d in shape) if len(shape) != 1 else f"{shape[0]},")
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    fmt = {"<f4": "f", "<i8": "q"}[dtype]
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack("<%d%s" % (len(values), fmt), *values))


def write_safetensors(path, tensors):
    """tensors: list of (name, shape, float list) stored as F32."""
    header, data = {}, b""
    for name, shape, values in tensors:
        raw = struct.pack("<%df" % len(values), *values)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(header)
    text += " " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text.encode() + data)


def llama_folder(path, config, d_model, heads, kv_heads, head_dim, ffn, vocab, layers):
    """A tiny Llama-shaped Hugging Face folder (deterministic weights) with the given config."""
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f)
    seed = [12345]

    def vals(n):
        out = []
        for _ in range(n):
            seed[0] = (seed[0] * 1103515245 + 12345) % (1 << 31)
            out.append((seed[0] / (1 << 31) - 0.5) * 0.2)
        return out

    t = [("model.embed_tokens.weight", [vocab, d_model], vals(vocab * d_model)),
         ("model.norm.weight", [d_model], [1.0] * d_model)]
    q, kv = heads * head_dim, kv_heads * head_dim
    for l in range(layers):
        p = f"model.layers.{l}."
        t += [(p + "input_layernorm.weight", [d_model], [1.0] * d_model),
              (p + "post_attention_layernorm.weight", [d_model], [1.0] * d_model),
              (p + "self_attn.q_proj.weight", [q, d_model], vals(q * d_model)),
              (p + "self_attn.k_proj.weight", [kv, d_model], vals(kv * d_model)),
              (p + "self_attn.v_proj.weight", [kv, d_model], vals(kv * d_model)),
              (p + "self_attn.o_proj.weight", [d_model, q], vals(d_model * q)),
              (p + "mlp.gate_proj.weight", [ffn, d_model], vals(ffn * d_model)),
              (p + "mlp.up_proj.weight", [ffn, d_model], vals(ffn * d_model)),
              (p + "mlp.down_proj.weight", [d_model, ffn], vals(d_model * ffn))]
    write_safetensors(os.path.join(path, "model.safetensors"), t)


def prepare_inputs(data):
    """Inputs shared by both runs (same paths, so outputs that name them agree)."""
    if os.path.isdir(WORK):
        shutil.rmtree(WORK)
    os.makedirs(WORK)
    write_npy(os.path.join(WORK, "pos3.npy"), "<i8", [3], [0, 1, 7])
    for hd in (4, 8, 64, 96, 128, 256):
        write_npy(os.path.join(WORK, f"x_h{hd}.npy"), "<f4", [3, 2, hd],
                  [((i * 37) % 101) / 50.0 - 1.0 for i in range(3 * 2 * hd)])
    base = {"model_type": "llama", "hidden_size": 16, "num_attention_heads": 2, "num_key_value_heads": 1,
            "num_hidden_layers": 1, "intermediate_size": 24, "vocab_size": 32, "max_position_embeddings": 64,
            "rms_norm_eps": 1e-5, "rope_theta": 10000.0}
    llama_folder(os.path.join(WORK, "hf_llama"), base, 16, 2, 1, 8, 24, 32, 1)
    gemma = dict(base, model_type="gemma", head_dim=16, rope_theta=10000.0)
    llama_folder(os.path.join(WORK, "hf_gemma_heads"), gemma, 16, 2, 1, 16, 24, 32, 1)
    llama_folder(os.path.join(WORK, "hf_llama_head_dim"), dict(base, head_dim=16), 16, 2, 1, 16, 24, 32, 1)
    no_theta = dict(base)
    del no_theta["rope_theta"]
    llama_folder(os.path.join(WORK, "hf_llama_default_theta"), no_theta, 16, 2, 1, 8, 24, 32, 1)
    # Golden configs as config.json files (the model family added where the config does not name it,
    # as tests/cli/inspect_test.cpp does).
    golden = []
    for family in ("hf", "ggml"):
        root = os.path.join(data, "golden", family)
        for case in sorted(os.listdir(root)) if os.path.isdir(root) else []:
            cj = os.path.join(root, case, "case.json")
            if not os.path.exists(cj):
                continue
            c = json.load(open(cj))
            cfg = dict(c.get("config", {}))
            if family == "hf" and "model_type" not in cfg and "hf_model_type" in c:
                cfg["model_type"] = c["hf_model_type"]
            path = os.path.join(WORK, f"{family}_{case}.json")
            json.dump(cfg, open(path, "w"))
            golden.append((f"{family}_{case}", path, cj, os.path.join(root, case), c))
    return golden


def model_paths(data):
    out = []
    root = os.path.join(data, "models")
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        if "config.json" in filenames:
            out.append(dirpath)
        for f in sorted(filenames):
            if f.endswith((".gguf", ".bin", ".safetensors")):
                out.append(os.path.join(dirpath, f))
    for d in ("hf_llama", "hf_gemma_heads", "hf_llama_head_dim", "hf_llama_default_theta"):
        out.append(os.path.join(WORK, d))
        out.append(os.path.join(WORK, d, "model.safetensors"))
    return out


def snapshot(posenc, outdir, data):
    golden = prepare_inputs(data)
    os.makedirs(outdir, exist_ok=True)
    n = [0]

    def run(name, args, array=None):
        if array and os.path.exists(array):
            os.remove(array)
        p = subprocess.run([posenc] + args, capture_output=True, text=True, timeout=300)
        text = f"$ posenc {' '.join(args)}\nexit {p.returncode}\n--- stdout\n{p.stdout}--- stderr\n{p.stderr}"
        if array:
            text += "--- " + (hashlib.md5(open(array, "rb").read()).hexdigest() if os.path.exists(array) else "no array") + "\n"
        with open(os.path.join(outdir, name.replace("/", "_") + ".txt"), "w") as f:
            f.write(text)
        n[0] += 1

    out_npy = os.path.join(WORK, "out.npy")
    pos = os.path.join(WORK, "pos3.npy")
    for m in model_paths(data):
        tag = os.path.relpath(m, data) if m.startswith(data) else os.path.relpath(m, WORK)
        run(f"{tag}.inspect", ["inspect", m])
        run(f"{tag}.inspect_json", ["inspect", m, "--json"])
        run(f"{tag}.inspect_default_base", ["inspect", m, "--allow-default-base", "--seq-len", "100"])
        run(f"{tag}.inspect_default_base_json", ["inspect", m, "--allow-default-base", "--json"])
        run(f"{tag}.embed_rope_check", ["embed", m, "--ids", "1,2,3", "--rope-check", "--output", out_npy], out_npy)
        run(f"{tag}.embed_positions", ["embed", m, "--ids", "1,2,3", "--positions", pos, "--output", out_npy], out_npy)
        run(f"{tag}.detect_layout", ["detect-layout", m, "--tokens", "1,5,9,3,2,7,11,4", "--quiet"])
        for hd in (4, 8, 16, 96):
            x = os.path.join(WORK, f"x_h{hd}.npy") if hd != 16 else os.path.join(WORK, "x_h8.npy")
            run(f"{tag}.rope_config_h{hd}", ["rope", "--config", m, "--positions", pos, "--input", x,
                                             "--output", out_npy], out_npy)
    for tag, cfg, case_json, case_dir, c in golden:
        run(f"golden_{tag}.inspect_json", ["inspect", cfg, "--json"])
        run(f"golden_{tag}.inspect", ["inspect", cfg, "--seq-len", "4096"])
        files = c.get("files", {})
        if "positions" in files and "input" in files:
            for which, conf in (("config", cfg), ("case", case_json)):
                for prec in ("reference", "exact"):
                    run(f"golden_{tag}.rope_{which}_{prec}",
                        ["rope", "--config", conf, "--positions", os.path.join(case_dir, files["positions"]),
                         "--input", os.path.join(case_dir, files["input"]), "--output", out_npy,
                         "--precision", prec], out_npy)
    return n[0]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--compare", action="store_true")
    ap.add_argument("a")
    ap.add_argument("b")
    default_data = os.environ.get("POSENC_DATA_DIR", os.path.join(os.path.dirname(__file__), "../../../shared"))
    ap.add_argument("--data", default=default_data)
    o = ap.parse_args()
    data = os.path.abspath(o.data)
    if not o.compare:
        print(f"{snapshot(os.path.abspath(o.a), o.b, data)} commands snapshotted in {o.b}")
        return 0
    tmp = tempfile.mkdtemp(prefix="posenc_snapshot_")
    for label, binary in (("base", o.a), ("new", o.b)):
        print(f"{label}: {snapshot(os.path.abspath(binary), os.path.join(tmp, label), data)} commands")
    d = subprocess.run(["diff", "-r", os.path.join(tmp, "base"), os.path.join(tmp, "new")], capture_output=True, text=True)
    sys.stdout.write(d.stdout)
    print("snapshots in", tmp, "identical" if d.returncode == 0 else "DIFFER")
    return d.returncode


if __name__ == "__main__":
    sys.exit(main())
