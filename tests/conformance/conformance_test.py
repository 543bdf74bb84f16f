#!/usr/bin/env python3
"""Conformance of `posenc inspect --json` with the references, over real published configs.

    conformance_test.py POSENC [--corpus DIR] [--min-records N] [-v]

For every record under DIR/configs (a published config.json, see README.md) it runs `posenc inspect
--json` and checks, against what the family's modeling code does (the record's `expect`) and against
hf_reference.py (Hugging Face's formulas in torch): the scheme, the pair layout, the rotary window, the
layers without RoPE, every pair's frequency (relative error <= FREQ_RTOL) and the attention scaling, at
the config's own length and at a short one (dynamic and LongRoPE scalings differ there), and the same
again for each layer type the config declares. Every record under DIR/gguf (a published GGUF file's
metadata) is written as a GGUF file and checked against ggml_reference.py the same way. It prints one
line per record and a summary, and exits 1 when any record fails or there are fewer than N records.
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import hf_reference  # noqa: E402

FREQ_RTOL = 1e-6  # float32 pow in torch against posenc's double: a few float32 ulps
SCALE_RTOL = 1e-6
SHORT_SEQ = 1024


def run_inspect(posenc, path, *args):
    r = subprocess.run([posenc, "inspect", "--json", path, *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError(f"posenc inspect {' '.join(args)} exited {r.returncode}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def rel(a, b):
    return abs(a - b) / max(abs(b), 1e-300)


class Record:
    def __init__(self, path):
        self.path = path
        self.name = os.path.splitext(os.path.basename(path))[0]
        with open(path) as f:
            self.data = json.load(f)
        self.errors = []
        self.worst = 0.0

    def check(self, cond, what):
        if not cond:
            self.errors.append(what)
        return cond


def compare_freqs(rec, got, ref, where):
    # Proportional RoPE (Gemma 4) keeps pairs that never turn: the reference holds them as exact zeros,
    # posenc as regime "unrotated" with frequency 0; compare every pair then.
    if any(f == 0 for f in ref.inv_freq):
        rotated = list(got["pairs"])
    else:
        rotated = [p for p in got["pairs"] if p.get("regime") != "unrotated"]
    if not rec.check(len(rotated) == len(ref.inv_freq),
                     f"{where}: {len(rotated)} rotated pairs, reference {len(ref.inv_freq)}"):
        return
    bad = []
    for i, (p, f) in enumerate(zip(rotated, ref.inv_freq)):
        if f == 0:  # a pair that must not turn: exactly 0
            if p["frequency"] != 0:
                bad.append(f"pair {i}: {p['frequency']:.9g} vs 0 (unrotated)")
            continue
        e = rel(p["frequency"], f)
        rec.worst = max(rec.worst, e)
        if e > FREQ_RTOL:
            bad.append(f"pair {i}: {p['frequency']:.9g} vs {f:.9g}")
    rec.check(not bad, f"{where}: {len(bad)} frequencies off (" + "; ".join(bad[:3]) + ")")
    rec.check(rel(got["attention_scaling"], ref.attention_factor) <= SCALE_RTOL,
              f"{where}: attention_scaling {got['attention_scaling']} vs {ref.attention_factor}")


def check_common(rec, got, expect):
    scheme = expect.get("scheme")
    rec.check(got.get("scheme") == scheme, f"scheme {got.get('scheme')!r}, expected {scheme!r}")
    if scheme != "rope" or got.get("scheme") != "rope":
        return False
    for key in ("layout", "rotary_dim", "rotary_start"):
        if key in expect:
            rec.check(got.get(key) == expect[key], f"{key} {got.get(key)!r}, expected {expect[key]!r}")
    want = sorted(expect.get("nope_layers", []))
    if "layers" in got and "rope" in got["layers"]:
        nope = [i for i, r in enumerate(got["layers"]["rope"]) if not r]
        rec.check(nope == want, f"layers without RoPE {nope}, expected {want}")
    else:  # no per-layer table: only a record expecting every layer to rotate can pass
        rec.check(not want, f"no per-layer table in posenc's output; expected layers without RoPE {want}")
    return True


def check_layers(rec, got, st):
    """posenc's per-layer table against the family's code (hf_reference.structure): which layers have
    attention, which rotate, each layer's parameter set and head size."""
    layers = got.get("layers")
    n = len(st.types)
    if not rec.check(isinstance(layers, dict), f"no per-layer table in posenc's output; the family has {n} layers"):
        return
    for key, want in (("attention", st.attention), ("rope", st.rope)):
        have = layers.get(key)
        if rec.check(isinstance(have, list), f"layers.{key} missing"):
            diff = [i for i, (a, b) in enumerate(zip(have, want)) if bool(a) != bool(b)]
            rec.check(len(have) == n and not diff,
                      f"layers.{key}: {len(have)} layers, differs at {diff[:8]} (reference {want[:12]}...)")
    if st.rope and any(st.rope) and any(h for h in st.head_dim):
        have = layers.get("head_dim")
        if isinstance(have, list):
            diff = [i for i, (a, b, r) in enumerate(zip(have, st.head_dim, st.rope)) if r and a != b]
            rec.check(not diff, f"layers.head_dim differs at {diff[:8]}: {[have[i] for i in diff[:4]]} vs "
                                f"{[st.head_dim[i] for i in diff[:4]]}")
        else:  # one head size for the whole model: it must be every rotating layer's
            want = {h for h, r in zip(st.head_dim, st.rope) if r}
            rec.check(len(want) == 1, f"no layers.head_dim, but the reference has head sizes {sorted(want)}")
    if any(k is not None for k in st.keys):
        names = layers.get("rope_keys") or []
        idx = layers.get("rope_key") or []
        have = [names[i] if isinstance(i, int) and 0 <= i < len(names) else None for i in idx]
        want = [k if r else None for k, r in zip(st.keys, st.rope)]
        have = [k if r else None for k, r in zip(have, st.rope)] if len(have) == n else have
        diff = [i for i, (a, b) in enumerate(zip(have, want)) if a != b]
        rec.check(len(have) == n and not diff,
                  f"layers.rope_key: parameter sets differ at {diff[:8]} ({have[:6]} vs {want[:6]})")


def check_sites(posenc, rec, path, got, st, cfg):
    """Every RoPE site of the family under every parameter set its layers use: the window, the pairing and
    every frequency, through `posenc inspect --layer L --site S` for the first layer L of each set."""
    firsts = {}
    for i, (k, r) in enumerate(zip(st.keys, st.rope)):
        if r and k not in firsts:
            firsts[k] = i
    names = sorted(st.sites)
    if names:
        rec.check(sorted(got.get("sites", [])) == names, f"sites {got.get('sites')}, reference {names}")
    if st.indexer_layers and not all(st.indexer_layers):
        # A layer that reuses the previous layer's top-k has no indexer site (GLM-5.2).
        shared = st.indexer_layers.index(False)
        g = run_inspect(posenc, path, "--layer", str(shared))
        rec.check("indexer" not in g.get("sites", []), f"layer {shared} (shared indexer): sites {g.get('sites')}")
        if firsts:
            firsts = {k: (l if st.indexer_layers[l] else st.indexer_layers.index(True)) for k, l in firsts.items()}
    for key, layer in firsts.items():
        for site in names or [None]:
            args = ["--layer", str(layer)] + (["--site", site] if site else [])
            g = run_inspect(posenc, path, *args)
            where = f"layer {layer} ({key or 'default set'})" + (f", site {site}" if site else "")
            if site and site in rec.data["expect"].get("sites", {}):  # the record's own reading of the code
                for field, want in rec.data["expect"]["sites"][site].items():
                    rec.check(g.get(field) == want, f"{where}: {field} {g.get(field)!r}, the record says {want!r}")
            if site:
                s = st.site(site, key)
                for field, want in (("head_dim", s.head_dim), ("rotary_dim", s.rotary_dim),
                                    ("rotary_start", s.rotary_start), ("layout", s.layout or rec.data["expect"].get("layout"))):
                    rec.check(g.get(field) == want, f"{where}: {field} {g.get(field)!r}, reference {want!r}")
            ref = hf_reference.site_freqs(cfg, st, site, key, g.get("seq_len"))
            compare_freqs(rec, g, ref, where)


def check_config(posenc, rec, tmp):
    cfg = rec.data["config"]
    path = os.path.join(tmp, rec.name + ".json")
    with open(path, "w") as f:
        json.dump(cfg, f)
    expect = rec.data.get("expect", {})
    if "error" in expect:
        # A config the references refuse too (the record's `why` says so): posenc must refuse it, naming
        # what is wrong, and read it when the layout is stated.
        r = subprocess.run([posenc, "inspect", "--json", path], capture_output=True, text=True)
        rec.check(r.returncode == 2 and expect["error"] in r.stderr,
                  f"expected a refusal naming {expect['error']!r}, got exit {r.returncode}: {r.stderr.strip()}")
        if "layout" in expect:
            got = run_inspect(posenc, path, "--assume-layout", expect["layout"])
            rec.check(got.get("layout") == expect["layout"], f"layout {got.get('layout')!r} with --assume-layout")
        return
    got = run_inspect(posenc, path)
    st = hf_reference.structure(cfg) if hf_reference.has_structure(cfg) else None
    if st is not None:
        # The reference's own reading must agree with the record's (read from the modeling code by hand).
        rec.check(("none" if st.none else "rope") == expect.get("scheme"),
                  f"hf_reference says {'none' if st.none else 'rope'}, the record {expect.get('scheme')!r}")
        check_layers(rec, got, st)
    rope = check_common(rec, got, expect)
    if not rope:
        return
    if st is not None:
        check_sites(posenc, rec, path, got, st, cfg)
        return
    types = hf_reference.layer_types(cfg)
    for lt in types or [None]:
        args = ["--layer-type", lt] if lt else []
        tag = f"layer type {lt}" if lt else "default"
        for seq in (None, SHORT_SEQ):
            extra = args + (["--seq-len", str(seq)] if seq else [])
            g = got if not extra else run_inspect(posenc, path, *extra)
            ref = hf_reference.freqs(cfg, lt, seq if seq else g.get("seq_len"))
            compare_freqs(rec, g, ref, f"{tag}, seq_len {g.get('seq_len')}")


def check_gguf(posenc, rec, tmp):
    import ggml_reference
    import gguf_write

    path = os.path.join(tmp, rec.name + ".gguf")
    gguf_write.write_gguf(path, rec.data["kv"])
    got = run_inspect(posenc, path)
    if not check_common(rec, got, rec.data.get("expect", {})):
        return
    for seq in (None, SHORT_SEQ):
        g = got if seq is None else run_inspect(posenc, path, "--seq-len", str(seq))
        ref = ggml_reference.freqs(rec.data["kv"])
        compare_freqs(rec, g, ref, f"seq_len {g.get('seq_len')}")


def check_reference_2026(d, n, case):
    """hf_reference.structure / site_freqs against one 2026 golden case (FORMAT.md's newest section): the
    per-layer roles (layer_schedule, layer_attention, layer_head_dim, layer_rope_key), the site's window and
    pairing, inv_freq bit for bit and the attention scaling. Returns the failures."""
    import numpy as np

    cfg = dict(case["config"])
    cfg.setdefault("model_type", case.get("hf_model_type"))
    out = []
    st = hf_reference.structure(cfg)
    key = case.get("rope_parameters_key") or case.get("layer_type")
    for role, got in (("layer_schedule", st.rope), ("layer_attention", st.attention), ("layer_head_dim", st.head_dim),
                      ("layer_rope_key", [case.get("rope_keys", []).index(k) if k in case.get("rope_keys", []) else -1
                                          for k in st.keys])):
        p = os.path.join(d, role + ".npy")
        if os.path.exists(p) and np.load(p).tolist() != list(got):
            out.append(f"{n}: reference {role} {list(got)[:8]}... differs from transformers' {np.load(p).tolist()[:8]}...")
    p = os.path.join(d, "inv_freq.npy")
    if not os.path.exists(p):
        return out
    site = case.get("rotary_site")
    if site:
        s = st.site(site, key)
        want = (case["head_dim"], case["rotary_dim"], case.get("rotary_offset", 0), case["layout"])
        if (s.head_dim, s.rotary_dim, s.rotary_start, s.layout or case["layout"]) != want:
            out.append(f"{n}: reference site {site} {s} differs from the case's {want}")
    seq = int(np.load(os.path.join(d, "positions.npy")).max()) + 1
    ref = hf_reference.site_freqs(cfg, st, site or ("attention" if st.sites else None), key, seq)
    got = np.array(ref.inv_freq, dtype=np.float32)
    want = np.load(p).reshape(-1).astype(np.float32)
    if got.shape != want.shape or not np.array_equal(got, want):
        out.append(f"{n}: reference inv_freq differs from transformers' ({got[:3]} vs {want[:3]})")
    scale = case.get("attention_scaling", case.get("attention_factor"))
    if scale is not None and rel(ref.attention_factor, scale) > SCALE_RTOL:
        out.append(f"{n}: reference attention scaling {ref.attention_factor} vs transformers' {scale}")
    return out


def check_reference_against_golden(golden):
    """hf_reference.py itself against Hugging Face's own inv_freq and attention scaling, as the golden cases
    recorded them (DIR/golden/hf/*/inv_freq.npy, written by transformers): the reference is only a
    reference if it gives those numbers. Returns (cases checked, failures)."""
    import numpy as np

    hf = os.path.join(golden, "hf")
    checked, failures = 0, []
    for n in sorted(os.listdir(hf)):
        p = os.path.join(hf, n, "inv_freq.npy")
        if not os.path.exists(p):
            continue
        with open(os.path.join(hf, n, "case.json")) as f:
            case = json.load(f)
        if any(k in case for k in ("rotary_site", "rope_keys", "rotary_offset")) or case.get("scheme") == "nope":
            checked += 1
            failures += check_reference_2026(os.path.join(hf, n), n, case)
            continue
        cfg = dict(case["config"])
        cfg.setdefault("model_type", case.get("hf_model_type"))
        if "max_position_embeddings" not in cfg and "n_positions" not in cfg:
            continue  # vision encoders: no config of a language model
        seq = int(np.load(os.path.join(hf, n, "positions.npy")).max()) + 1
        want = np.load(p).reshape(-1)
        ref = hf_reference.freqs(cfg, case.get("layer_type"), seq)
        got = np.array(ref.inv_freq, dtype=np.float32)
        checked += 1
        if got.shape != want.shape or not np.array_equal(got, want.astype(np.float32)):
            failures.append(f"{n}: reference inv_freq differs from transformers' ({got[:3]} vs {want[:3]})")
        scale = case.get("attention_scaling", case.get("attention_factor"))
        if scale is not None and rel(ref.attention_factor, scale) > SCALE_RTOL:
            failures.append(f"{n}: reference attention scaling {ref.attention_factor} vs transformers' {scale}")
    return checked, failures


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("posenc")
    ap.add_argument("--corpus", default=HERE)
    ap.add_argument("--min-records", type=int, default=60)
    ap.add_argument("--golden", help="golden data dir (POSENC_DATA_DIR/golden): check hf_reference.py against it")
    ap.add_argument("-v", action="store_true")
    a = ap.parse_args()

    ref_failed = 0
    if a.golden:
        if not os.path.isdir(os.path.join(a.golden, "hf")):
            print(f"conformance: no golden data at {a.golden}/hf: hf_reference.py is not checked against transformers")
            if os.environ.get("POSENC_REQUIRE_DATA") == "1":
                return 1
        else:
            checked, failures = check_reference_against_golden(a.golden)
            for f in failures:
                print(f"FAIL reference {f}")
            ref_failed = len(failures)
            print(f"conformance: hf_reference.py equals transformers' inv_freq bit for bit on {checked - ref_failed} "
                  f"of {checked} golden cases")

    records = []
    for sub, fn in (("configs", check_config), ("gguf", check_gguf)):
        d = os.path.join(a.corpus, sub)
        if os.path.isdir(d):
            records += [(Record(os.path.join(d, n)), fn) for n in sorted(os.listdir(d)) if n.endswith(".json")]
    failed = 0
    families = set()
    with tempfile.TemporaryDirectory() as tmp:
        for rec, fn in records:
            try:
                fn(a.posenc, rec, tmp)
            except Exception as e:  # a refusal or a reference error is this record's failure, not the run's
                rec.errors.append(f"{type(e).__name__}: {e}")
            families.add(rec.name.split("__")[0])
            ok = not rec.errors
            failed += not ok
            line = f"{'PASS' if ok else 'FAIL'} {os.path.basename(os.path.dirname(rec.path))}/{rec.name}"
            if ok and a.v:
                line += f"  (worst frequency error {rec.worst:.2e})"
            print(line)
            for e in rec.errors:
                print(f"    {e}")
    worst = max((r.worst for r, _ in records), default=0.0)
    print(f"conformance: {len(records) - failed} passed, {failed} failed, {len(records)} records, "
          f"{len(families)} families; worst frequency error {worst:.2e} (limit {FREQ_RTOL:.0e})")
    if len(records) < a.min_records:
        print(f"conformance: only {len(records)} records, at least {a.min_records} required")
        return 1
    return 1 if failed or ref_failed else 0


if __name__ == "__main__":
    sys.exit(main())
