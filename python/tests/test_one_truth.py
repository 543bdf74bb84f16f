"""Python states no fact about a scheme that the library does not give it: the scaling names and the
keys each scaling reads live in the C++ table (RopeScalings(), read through _posenc.scaling_rows and
Scheme.scaling_params / frequencies_depend_on_seq_len); the package's code holds no literal naming a
scaling, and no list of two or more of a scaling's keys. (plot.py builds example configs as a user
writes them, which name scalings as data, not as facts about them: it is left out.) And the facts Python
shows are the library's: Scheme's repr lists exactly the parameters `posenc inspect --json` lists."""
import ast
import json
import pathlib
import subprocess

import pytest

import posenc
from posenc import _posenc

PACKAGE = pathlib.Path(posenc.__file__).resolve().parent
SOURCES = sorted(p for p in PACKAGE.glob("*.py") if p.name != "plot.py")


def _literals(tree):
    """String constants that are not docstrings, and the tuples/lists/sets of them (with line numbers)."""
    doc_ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                doc_ids.add(id(first.value))
    strings, groups = [], []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in doc_ids:
            strings.append((node.lineno, node.value))
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            vals = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            groups.append((node.lineno, vals))
        if isinstance(node, ast.Dict):
            vals = [k.value for k in node.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
            groups.append((node.lineno, vals))
    return strings, groups


def test_the_package_names_no_scaling_and_lists_no_scaling_keys():
    rows = _posenc.scaling_rows()
    names = {n for n, _ in rows if n != "none"}
    keys = {k for _, ks in rows for k in ks}
    assert {"linear", "dynamic", "yarn", "llama3", "longrope"} <= names and "factor" in keys  # the table is read
    found = []
    for path in SOURCES:
        strings, groups = _literals(ast.parse(path.read_text()))
        found += [f"{path.name}:{line}: scaling name {s!r}" for line, s in strings if s in names]
        found += [f"{path.name}:{line}: a list of scaling keys {sorted(set(g) & keys)}" for line, g in groups
                  if len(set(g) & keys) >= 2]
    assert not found, "Python states facts the library gives: " + "; ".join(found)


def test_the_guard_catches_a_hand_list():
    """The check above finds what it looks for: the old hand-written lists, pasted into a source."""
    rows = _posenc.scaling_rows()
    names = {n for n, _ in rows if n != "none"}
    keys = {k for _, ks in rows for k in ks}
    strings, groups = _literals(ast.parse('X = {"yarn": ("beta_fast", "beta_slow")}\nd = s in ("dynamic", "longrope")\n'))
    assert {s for _, s in strings} & names == {"yarn", "dynamic", "longrope"}
    assert any(len(set(g) & keys) >= 2 for _, g in groups)


CONFIGS = {
    "yarn": {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072, "rope_theta": 1e6,
             "rope_scaling": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}},
    "llama3": {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 131072, "rope_theta": 5e5,
               "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 8192}},
    "dynamic": {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 4096, "rope_theta": 1e4,
                "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}},
    "plain": {"model_type": "llama", "hidden_size": 4096, "num_attention_heads": 32, "max_position_embeddings": 4096, "rope_theta": 1e4},
}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_scheme_facts_are_inspects(name, cli, tmp_path):
    cfg = tmp_path / "config.json"
    cfg.write_text(json.dumps(CONFIGS[name]))
    r = subprocess.run([cli, "inspect", str(cfg), "--json"], capture_output=True, text=True, check=True)
    want = json.loads(r.stdout)
    s = posenc.load_scheme(CONFIGS[name])
    assert s.scaling["type"] == want["scaling"]
    assert dict(s.scaling_params) == want["scaling_params"], (s.scaling_params, want["scaling_params"])
    assert s.frequencies_depend_on_seq_len == (name == "dynamic")
    for k, v in s.scaling_params:
        assert f"  {k}: {v}" in repr(s)


@pytest.mark.parametrize("name", sorted(CONFIGS) + ["mrope"])
def test_scheme_pairs_are_inspects(name, cli, tmp_path):
    """Scheme.pairs() is `posenc inspect --json`'s pair table (the library's DescribeRopePairs), M-RoPE's
    per-pair component included."""
    cfg = dict(CONFIGS.get(name) or json.loads(
        (pathlib.Path(__file__).resolve().parents[2] / "tests/fuzz/corpus/config/qwen25vl_mrope.json").read_text()))
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    want = json.loads(subprocess.run([cli, "inspect", str(path), "--json"], capture_output=True, text=True,
                                     check=True).stdout)
    got = posenc.load_scheme(cfg).pairs(want["seq_len"])
    assert got == want["pairs"]
    assert (name == "mrope") == ("component" in got[0])
