#!/usr/bin/env python3
"""Proposes model-family registry rows (src/config/model_family_rows.cpp) from registry_sync.py's JSON.

Reads the `missing` families of a registry_sync run (what the static reader found in a transformers
source tree) and prints, for each family whose code it could read completely (one RoPE pairing, no
DSA indexer, no MLA window, no positions of another kind), a C++ row citing the modeling file and the
facts read from it. Everything else is listed as needing a person (or a leave_out.tsv line). A row
is a proposal: read it against the modeling file before committing it.

    python3 tools/registry_sync/propose_rows.py build/registry_sync/registry_sync.json
"""
import json
import sys

KNOWN_LAYER_TYPES = {"full_attention", "sliding_attention", "linear_attention", "conv", "hybrid", "flex_attention",
                     "mamba", "attention", "chunked_attention"}


def cxx(s):
    return json.dumps(s)


def simple(m):
    return (m["kinds"] == ["rope"] and len(m["pairing"]) == 1 and not m["indexer_pairing"]
            and not m["mla_back_window"] and not m.get("wraps_text_config")
            and set(m["layer_types"]) <= KNOWN_LAYER_TYPES
            and all("self." not in json.dumps(v) for v in m["rope_defaults"].values()))


def row(m):
    mt = m["model_type"]
    fields = [f"    {{.model_type = {cxx(mt)},"]
    if m["pairing"] == ["interleaved"]:
        fields.append("     .pairing = RopePairing::kInterleaved,")
    factor = m["default_partial_rotary_factor"]
    if factor is not None and factor != 1.0:
        fields.append("     .window = RotaryWindow::kFrontPartial,")
        fields.append(f"     .default_partial_rotary_factor = {factor},")
    if m["layer_types"]:
        fields.append(f"     .layer_schedule = {cxx('layer_types: ' + ', '.join(sorted(m['layer_types'])))},")
    if m["rope_defaults"]:
        fields.append(f"     .default_rope_parameters = R\"({json.dumps(m['rope_defaults'])})\",")
    what = ", ".join(m["pairing_evidence"]) or "apply_rotary_pos_emb"
    fields.append(f"     .source = {cxx('transformers src/transformers/' + m['modeling'] + ': ' + what)}}},")
    return "\n".join(fields)


def main():
    data = json.load(open(sys.argv[1]))
    missing = data["hf"]["missing"]
    todo = []
    for m in missing:
        if simple(m):
            print(row(m))
        else:
            todo.append(m["model_type"])
    print(f"// needs a person (or a leave_out.tsv line): {', '.join(todo)}", file=sys.stderr)


if __name__ == "__main__":
    main()
