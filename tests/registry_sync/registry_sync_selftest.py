#!/usr/bin/env python3
"""CTest `registry_sync_selftest`: the registry-sync tool catches what it is for.

Runs tools/registry_sync/registry_sync.py on a synthetic transformers tree (fixture/: toy families
written for this test, not transformers code), a synthetic registry (fixture/families.json), GGUF
table and llama.cpp facts, and checks every finding: a missing family, a wrong pairing, a wrong
default partial factor, an MLA family's window not at the back, a registry RoPE row for code that applies none, a config-only family found
through the auto mapping, a stale leave-out entry, and the GGUF table's missing / disagreeing /
unknown architectures; the reader's facts are checked one by one. Needs no network.

  registry_sync_selftest.py SOURCE_DIR
"""

import json
import os
import subprocess
import sys
import tempfile

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print(f"FAIL: {what}")


def main() -> int:
    source = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
    tool_dir = os.path.join(source, "tools", "registry_sync")
    fx = os.path.join(source, "tests", "registry_sync", "fixture")
    sys.path.insert(0, tool_dir)
    from hf_reader import read_tree  # noqa: E402

    # The reader's facts, family by family.
    fams = {f.config.model_type: f for f in read_tree(os.path.join(fx, "transformers"))}
    check(set(fams) == {"toyhalf", "toyinter", "toyinter_vision", "toyglm", "toymla", "toynope", "toylearned",
                        "toyalias"}, f"model_types read: {sorted(fams)}")
    m = lambda t: fams[t].modeling  # noqa: E731
    check(m("toyhalf").pairings == ["half"], f"toyhalf pairing {m('toyhalf').pairings}")
    check(fams["toyhalf"].config.default_partial_rotary_factor == 0.5, "toyhalf: setdefault partial 0.5")
    check(sorted(m("toyhalf").kinds) == ["rope"], f"toyhalf kinds {sorted(m('toyhalf').kinds)}")
    check("ToyHalfRotaryEmbedding" in m("toyhalf").kinds["rope"], "toyhalf: its *RotaryEmbedding class is evidence")
    check(m("toyinter").pairings == ["interleaved"], f"toyinter pairing (step-2 slice) {m('toyinter').pairings}")
    check(fams["toyinter"].config.layer_types == ["full_attention", "mamba", "sliding_attention"],
          f"toyinter layer_types {fams['toyinter'].config.layer_types}")
    check(fams["toyinter_vision"].config.tower, "toyinter_vision is a tower sub-config")
    check(m("toyglm").pairings == ["interleaved"], f"toyglm pairing (repeat_interleave) {m('toyglm').pairings}")
    check(fams["toyglm"].config.default_partial_rotary_factor == 0.25, "toyglm: class default partial 0.25")
    check(m("toymla").pairings == ["half", "interleaved"], f"toymla pairings (switch) {m('toymla').pairings}")
    check(fams["toymla"].config.off_switch_keys == ["qk_rope_head_dim", "rope_interleave"],
          f"toymla off-switch keys {fams['toymla'].config.off_switch_keys}")
    check("rope" not in m("toynope").kinds, "toynope: a rope function never applied is no RoPE")
    check("learned" in m("toylearned").kinds, "toylearned: nn.Embedding(config.max_position_embeddings)")
    check(m("toyalias") is not None and m("toyalias").pairings == ["interleaved"],
          "toyalias: modeling from the auto-mapped class's directory")

    # The comparison, end to end.
    with tempfile.TemporaryDirectory() as tmp:
        out_json = os.path.join(tmp, "out.json")
        r = subprocess.run(
            [sys.executable, os.path.join(tool_dir, "registry_sync.py"),
             "--transformers", os.path.join(fx, "transformers"),
             "--families-json", os.path.join(fx, "families.json"),
             "--leave-out", os.path.join(fx, "leave_out.tsv"),
             "--llama-facts", os.path.join(fx, "llama_facts.json"),
             "--gguf-table", os.path.join(fx, "gguf_table.cpp"),
             "--json", out_json],
            capture_output=True, text=True)
        print(r.stdout)
        check(r.returncode == 1, f"exit code {r.returncode}, expected 1 (unexplained findings)")
        with open(out_json) as f:
            out = json.load(f)
    hf, gguf = out["hf"], out["gguf"]
    missing = [d["model_type"] for d in hf["missing"]]
    check(missing == ["toyalias"], f"missing {missing}")
    dis = sorted((d["model_type"], d["field"]) for d in hf["disagree"])
    check(dis == [("toyglm", "default_partial_rotary_factor"), ("toyinter", "pairing"), ("toymla", "window"),
                  ("toynope", "scheme")],
          f"disagreements {dis}")
    check([d["model_type"] for d in hf["explained"]] == ["toylearned"], "toylearned left out with its reason")
    check(sorted(hf["covered"]) == ["toyglm", "toyhalf", "toyinter", "toymla"], f"covered {hf['covered']}")
    check(out["stale_leave_out"] == ["toygone"], f"stale {out['stale_leave_out']}")
    check([g["architecture"] for g in gguf["missing"]] == ["toynew"], f"gguf missing {gguf['missing']}")
    check([g["architecture"] for g in gguf["disagree"]] == ["toyglm"], f"gguf disagree {gguf['disagree']}")
    check([g["architecture"] for g in gguf["not_in_llama_cpp"]] == ["toyold"], "gguf toyold not in llama.cpp")
    check([g["architecture"] for g in gguf["explained"]] == ["toyclip"], "gguf toyclip left out")
    check("FAIL: 9 unexplained" in r.stdout, "the summary counts 9 unexplained findings")
    print("OK" if not failures else f"{len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
