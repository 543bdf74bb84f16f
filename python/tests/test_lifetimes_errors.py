"""Lifetimes (posenc holds no Python object past a call; arrays from a model keep its file mapped)
and the mapping of posenc's errors to Python exceptions, with the C++ message."""
import gc
import json
import subprocess
import weakref

import numpy as np
import pytest
import torch

import posenc
from conftest import DATA, need

CONFIG = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "max_position_embeddings": 512, "rope_theta": 10000.0}


def test_view_outlives_its_array():
    """A view whose array was deleted still owns the memory (numpy's base, torch's storage); posenc
    writes through it."""
    rope = posenc.Rope(CONFIG)
    base = np.random.default_rng(1).standard_normal((6, 8, 64)).astype(np.float32)
    want = rope.apply(base[:, ::2].copy(), np.arange(6))
    view = base[:, ::2]
    del base
    gc.collect()
    rope.apply(view, np.arange(6))
    assert np.array_equal(view, want)
    t = torch.from_numpy(np.random.default_rng(2).standard_normal((1, 5, 4, 64)).astype(np.float32))
    want_t = rope.apply(t.transpose(1, 2).contiguous(), np.arange(5))
    tv = t.transpose(1, 2)
    del t
    gc.collect()
    assert torch.equal(rope.apply(tv, np.arange(5)), want_t)


def test_posenc_keeps_no_reference():
    rope = posenc.Rope(CONFIG)
    x = np.zeros((3, 4, 64), np.float32)
    out = np.zeros_like(x)
    rope.apply(x, np.arange(3), out=out)
    rx, rout = weakref.ref(x), weakref.ref(out)
    del x, out
    gc.collect()
    assert rx() is None and rout() is None


def test_table_outlives_its_model():
    """The token table is a view into the mapped file; closing (deleting) the Model while the array is
    in use keeps the mapping alive until the array goes."""
    path = need(DATA / "models" / "stories260K" / "stories260K.bin", "stories260K model")
    m = posenc.Model(path)
    table = m.token_embedding()
    assert not table.flags.writeable and not table.flags.owndata
    want = np.array(table, copy=True)
    ids = np.array([1, 403, 511, 0])
    rows = m.embed(ids)
    del m
    gc.collect()
    np.zeros(1 << 20)  # churn the allocator
    assert np.array_equal(table, want)
    assert np.array_equal(table[ids], rows)


def test_rope_table_outlives_scheme():
    scheme = posenc.load_scheme(CONFIG)
    rope = posenc.Rope(scheme)
    del scheme
    gc.collect()
    x = np.ones((2, 4, 64), np.float32)
    rope.apply(x, [0, 1])
    assert np.array_equal(x[0], np.ones((4, 64), np.float32))


# ---- errors -------------------------------------------------------------------------------------


def _cli_message(cli, path):
    r = subprocess.run([cli, "inspect", str(path)], capture_output=True, text=True, check=False)
    assert r.returncode == 2
    line = r.stderr.strip().splitlines()[-1]
    return line.split(": ", 3)[-1]  # "posenc inspect: error: <code>: <message>"


def test_errors_map_to_python_with_the_same_message(cli, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "rope_theta": -5}))
    unknown = tmp_path / "unknown.json"
    unknown.write_text(json.dumps({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4,
                                   "rope_scaling": {"rope_type": "wibble", "factor": 2}}))
    corrupt = tmp_path / "bad.gguf"
    corrupt.write_bytes(b"GGUF\x03\x00\x00\x00junk")
    cases = [(tmp_path / "missing.json", OSError), (bad, ValueError), (unknown, NotImplementedError),
             (corrupt, OSError)]
    for path, exc in cases:
        with pytest.raises(exc) as info:
            posenc.load_scheme(path)
        assert str(info.value) == _cli_message(cli, path), path


def test_value_errors_name_the_key():
    with pytest.raises(ValueError, match=r"key 'rope_theta' is -5"):
        posenc.Rope({"model_type": "llama", "hidden_size": 64, "num_attention_heads": 4, "rope_theta": -5})
    with pytest.raises(ValueError, match=r"precision 'fast'"):
        posenc.Rope(CONFIG, precision="fast")
    with pytest.raises(ValueError, match=r"the scheme is alibi, not rope"):
        posenc.Rope({"model_type": "bloom", "n_head": 4, "hidden_size": 64})
    with pytest.raises(ValueError, match=r"token id 512 at index 1 is outside the vocabulary \[0, 512\)"):
        posenc.Model(need(DATA / "models" / "stories260K" / "stories260K.bin", "stories260K")).embed([0, 512])
    with pytest.raises(OSError, match=r"no tensor named 'nope'"):
        posenc.Model(DATA / "models" / "stories260K" / "stories260K.bin").tensor("nope")


def test_unknown_model_type_raises_until_the_layout_is_stated(tmp_path):
    """A model_type posenc's registry lacks raises ValueError naming it and the option; assume_layout
    states the layout (from a dict and from a config.json path), and a bad value is refused."""
    cfg = {"model_type": "my_new_lm", "hidden_size": 512, "num_attention_heads": 8, "rope_theta": 10000.0}
    with pytest.raises(ValueError, match="'my_new_lm'.*assume_layout"):
        posenc.load_scheme(cfg)
    assert posenc.load_scheme(cfg, assume_layout="interleaved").pairing == "interleaved"
    assert posenc.load_scheme(cfg, assume_layout="half").pairing == "half"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    with pytest.raises(ValueError, match="my_new_lm"):
        posenc.load_scheme(path)
    assert posenc.load_scheme(path, assume_layout="interleaved").pairing == "interleaved"
    with pytest.raises(ValueError, match="assume_layout 'diagonal'"):
        posenc.load_scheme(cfg, assume_layout="diagonal")
    # A known family ignores it.
    llama = dict(cfg, model_type="llama")
    assert posenc.load_scheme(llama, assume_layout="interleaved").pairing == "half"


def test_config_dict_values_that_are_not_json():
    """numpy numbers in a config dict are numbers; any other value, or a key that is not a string,
    is a ValueError naming its key path (json.dumps' TypeError named neither)."""
    base = {"model_type": "llama", "hidden_size": 256, "num_attention_heads": 4, "rope_theta": 10000.0}
    r = posenc.Rope({**base, "hidden_size": np.int64(256), "rope_theta": np.float32(500000.0)})
    assert r.scheme.base == 500000.0 and r.scheme.head_dim == 64
    with pytest.raises(ValueError, match=r"^config: rope_scaling\.factor: object is not a JSON value"):
        posenc.Rope({**base, "rope_scaling": {"rope_type": "linear", "factor": object()}})
    with pytest.raises(ValueError, match=r"^config: rope_scaling\.short_factor\[1\]: complex is not a JSON value"):
        posenc.Rope({**base, "rope_scaling": {"rope_type": "longrope", "short_factor": [1.0, 2j]}})
    with pytest.raises(ValueError, match=r"^config: key 7 in the top level is not a string"):
        posenc.Rope({**base, 7: 1})
    with pytest.raises(ValueError, match=r"^params: freq_factors: set is not a JSON value"):
        posenc.Scheme.from_ggml({"n_dims": 64, "mode": 0, "freq_base": 10000.0, "freq_factors": {1.0}}, 64)


def test_numpy_calls_never_import_torch():
    """The README's one-liner and the other apply-style calls on numpy arrays leave torch unimported
    (its import cost seconds of a one-line script)."""
    import subprocess
    import sys
    code = ("import sys, numpy as np, posenc\n"
            "r = posenc.Rope({'model_type': 'llama', 'hidden_size': 512, 'num_attention_heads': 8, 'num_key_value_heads': 2, 'rope_theta': 1e4,"
            " 'max_position_embeddings': 64})\n"
            "q = np.ones((4, 8, 64), np.float32); k = np.ones((4, 2, 64), np.float32)\n"
            "r.apply(q, np.arange(4)); r.apply_qk(q, k, np.arange(4)); r.cos_sin([1, 2])\n"
            "kc = np.zeros((8, 2, 64), np.float32); vc = np.zeros_like(kc)\n"
            "r.apply_kv_cache(q, k, k.copy(), np.arange(4), np.arange(4), kc, vc)\n"
            "c = np.ones((1, 4, 64), np.float32)\n"
            "posenc.hf.drop_in(r)(q[None].transpose(0, 2, 1, 3), k[None].transpose(0, 2, 1, 3), c, c)\n"
            "print('torch' in sys.modules)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "False", r.stdout + r.stderr
