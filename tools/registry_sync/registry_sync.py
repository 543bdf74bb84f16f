#!/usr/bin/env python3
"""The model-family registry checked against the field (docs/MODEL_FAMILIES.md, "Keeping the registry
in sync").

Reads a Hugging Face transformers source tree statically (hf_reader.py: no import of transformers or
torch), and llama.cpp's architecture -> rope type facts (a JSON extracted by extract_llama_rope_types.py),
and compares them with posenc's registry:

- every model_type whose modeling code applies positions must be a registry row (a `_text` / `_thinker` /
  `_text_model` suffix finds the row without it, as the registry does) or be in the leave-out list
  (a TSV, one `model_type<TAB>reason` a line; a pattern with `*` covers a group, with the reason);
- for a listed family, the registry's scheme, pairing and default partial factor must agree with what
  the code says;
- every llama.cpp architecture must be in posenc's GGUF table with the same rope type, or be left out
  (the same TSV, `gguf:<arch><TAB>reason`), and no GGUF row may name an architecture llama.cpp lacks.

Prints the findings, and exits 1 when any is unexplained (2 on a usage error).

  registry_sync.py --transformers WHEEL_OR_TREE --posenc build/posenc --llama-facts FACTS.json
                   --gguf-table src/config/model_families.cpp --leave-out LEAVE_OUT.tsv [--json OUT]
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_reader import read_tree  # noqa: E402

# posenc's scheme names <- the reader's kinds
SCHEME_OF_KIND = {
    "rope": "rope",
    "learned": "learned",
    "sinusoidal": "sinusoidal",
    "alibi": "alibi",
    "t5_bucket": "t5_bucket",
    "relative": "relative",
}


def load_leave_out(path: str) -> list[tuple[str, str]]:
    rows = []
    if not path:
        return rows
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if "\t" not in line:
                raise SystemExit(f"{path}:{n}: expected `name<TAB>reason`")
            name, reason = line.split("\t", 1)
            if not reason.strip():
                raise SystemExit(f"{path}:{n}: {name} has no reason")
            rows.append((name.strip(), reason.strip()))
    return rows


def leave_out_reason(rows, name: str) -> str | None:
    for pat, reason in rows:
        if pat == name or ("*" in pat and fnmatch.fnmatchcase(name, pat)):
            return reason
    return None


def load_registry(posenc: str | None, families_json: str | None) -> list[dict]:
    if families_json:
        with open(families_json, encoding="utf-8") as f:
            return json.load(f)
    out = subprocess.run([posenc, "families", "--json"], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def find_row(rows: dict[str, dict], model_type: str) -> dict | None:
    if model_type in rows:
        return rows[model_type]
    for suffix in ("_text_model", "_text", "_thinker"):
        if model_type.endswith(suffix) and model_type[: -len(suffix)] in rows:
            return rows[model_type[: -len(suffix)]]
    return None


def load_gguf_table(path: str) -> dict[str, str]:
    """posenc's GGUF architecture table. `posenc families --json` prints a row's gguf_rope only for the
    architectures family rows name, not the table, so the table is read from the registry source's
    kGgufArchitectures initializer ({"name", GgmlRopeType::kX})."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"kGgufArchitectures\[\]\s*=\s*\{(.*?)\n\};", text, re.S)
    if not m:
        raise SystemExit(f"{path}: no kGgufArchitectures table")
    table = {}
    for name, rope in re.findall(r'\{\s*"([^"]+)"\s*,\s*GgmlRopeType::k(\w+)\s*\}', m.group(1)):
        table[name] = rope.lower()
    return table


def compare_hf(families, registry_rows, leave_out):
    rows = {r["model_type"]: r for r in registry_rows}
    missing, disagree, explained, covered, towers, no_positions = [], [], [], [], [], []
    for fam in families:
        c, m = fam.config, fam.modeling
        if c.tower:
            towers.append(c.model_type)
            continue
        kinds = dict(m.kinds) if m else {}
        pairings = sorted(set(m.pairings)) if m else []
        detail = {
            "model_type": c.model_type,
            "kinds": sorted(kinds),
            "evidence": {k: v[:4] for k, v in kinds.items()},
            "pairing": pairings,
            "pairing_evidence": m.pairing_evidence[:6] if m else [],
            "indexer_pairing": m.indexer_pairings if m else [],
            "default_partial_rotary_factor": c.default_partial_rotary_factor,
            "layer_types": c.layer_types,
            "rope_defaults": c.rope_defaults,
            "off_switch_keys": c.off_switch_keys,
            "position_keys": c.position_keys,
            "config": f"{c.config_file}: {c.config_class}",
            "modeling": m.modeling_file if m else "",
            "text_config": c.has_text_config,
            "wraps_text_config": bool(m and m.wraps_text_config),
            "tower_kinds": sorted(m.tower_kinds) if m else [],
            "causal_lm": bool(m and m.causal_lm),
            # MLA: the rotary dims are qk_rope_head_dim after qk_nope_head_dim, the back of the head
            "mla_back_window": "qk_nope_head_dim" in c.position_keys and "qk_rope_head_dim" in c.position_keys,
        }
        row = find_row(rows, c.model_type)
        if not kinds:
            # nothing in the text model applies positions: a registry row must not say it does
            if row and row["scheme"] not in ("none",) and not (c.has_text_config or (m and m.wraps_text_config)):
                if not m:
                    continue
                reason = leave_out_reason(leave_out, f"{c.model_type}:scheme")
                item = dict(detail, field="scheme", registry=row["scheme"], code="none found")
                (explained if reason else disagree).append(dict(item, reason=reason) if reason else item)
            else:
                no_positions.append(detail)
            continue
        if row is None:
            reason = leave_out_reason(leave_out, c.model_type)
            if reason:
                explained.append(dict(detail, reason=reason))
            else:
                missing.append(detail)
            continue
        covered.append(c.model_type)
        problems = []
        scheme = row["scheme"]
        code_schemes = {SCHEME_OF_KIND[k] for k in kinds}
        if scheme == "none":
            problems.append(("scheme", "none", "/".join(sorted(code_schemes))))
        elif scheme not in code_schemes and not (scheme == "alibi" and row.get("alibi_hidden_size")):
            if not (row.get("remote_code")):
                problems.append(("scheme", scheme, "/".join(sorted(code_schemes))))
        if scheme == "rope" and "rope" in kinds and pairings and row.get("pairing") not in pairings:
            problems.append(("pairing", row.get("pairing"), "/".join(pairings)))
        if scheme == "rope" and "rope" in kinds and detail["mla_back_window"] and row.get("window") != "back":
            problems.append(("window", row.get("window"), "back (qk_nope_head_dim, qk_rope_head_dim)"))
        if scheme == "rope" and "rope" in kinds:
            reg_partial = row.get("default_partial_rotary_factor") if row.get("window") == "front" else None
            code_partial = c.default_partial_rotary_factor
            if code_partial is not None and abs(code_partial - 1.0) < 1e-12:
                code_partial = None
            if code_partial is not None and row.get("window") == "back":
                pass  # MLA: the factor is qk_rope_head_dim's share, the window is the back
            elif (reg_partial is None) != (code_partial is None) or (
                reg_partial is not None and abs(reg_partial - code_partial) > 1e-9
            ):
                problems.append(("default_partial_rotary_factor", reg_partial, code_partial))
        for fld, reg, code in problems:
            item = dict(detail, field=fld, registry=reg, code=code)
            reason = leave_out_reason(leave_out, f"{c.model_type}:{fld}")
            if reason:
                explained.append(dict(item, reason=reason))
            else:
                disagree.append(item)
    return {
        "missing": missing,
        "disagree": disagree,
        "explained": explained,
        "covered": sorted(set(covered)),
        "towers": sorted(set(towers)),
        "no_positions": no_positions,
    }


def compare_gguf(llama: dict, table: dict[str, str], leave_out):
    missing, disagree, extra, explained = [], [], [], []
    for arch, rope in sorted(llama["architectures"].items()):
        ours = table.get(arch)
        reason = leave_out_reason(leave_out, f"gguf:{arch}")
        if ours is None:
            item = {"architecture": arch, "llama_cpp": rope, "posenc": None}
            (explained if reason else missing).append(dict(item, reason=reason) if reason else item)
        elif ours != rope.split("|")[-1] and ours not in rope.split("|"):
            item = {"architecture": arch, "llama_cpp": rope, "posenc": ours}
            (explained if reason else disagree).append(dict(item, reason=reason) if reason else item)
    for arch in sorted(table):
        if arch not in llama["architectures"]:
            reason = leave_out_reason(leave_out, f"gguf:{arch}")
            item = {"architecture": arch, "llama_cpp": None, "posenc": table[arch]}
            (explained if reason else extra).append(dict(item, reason=reason) if reason else item)
    return {"missing": missing, "disagree": disagree, "not_in_llama_cpp": extra, "explained": explained}


def fmt_family(d) -> str:
    parts = [f"kinds={'/'.join(d['kinds']) or '-'}"]
    if d["pairing"]:
        parts.append(f"pairing={'/'.join(d['pairing'])}")
    if d.get("indexer_pairing"):
        parts.append(f"indexer_pairing={'/'.join(d['indexer_pairing'])}")
    if d["default_partial_rotary_factor"] is not None:
        parts.append(f"default_partial={d['default_partial_rotary_factor']:g}")
    if d["layer_types"]:
        parts.append(f"layer_types={','.join(d['layer_types'])}")
    if d.get("rope_defaults"):
        per_type = [f"{lt}:{','.join(f'{k}={v}' for k, v in sorted(kv.items()))}"
                    for lt, kv in sorted(d["rope_defaults"].items())]
        parts.append("rope_defaults=" + ";".join(per_type))
    if d["off_switch_keys"]:
        parts.append(f"switch_keys={','.join(d['off_switch_keys'])}")
    if d.get("mla_back_window"):
        parts.append("window=back(MLA)")
    if d["text_config"]:
        parts.append("text_config")
    parts.append(f"source={d['modeling'] or d['config']}")
    return " ".join(parts)


def print_rows(groups) -> None:
    """Prints one line a finding: groups of (tag, findings, line for one finding), in order."""
    for tag, findings, line in groups:
        for d in findings:
            print(tag + line(d))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--transformers", required=True, help="transformers wheel (.whl) or source tree")
    ap.add_argument("--posenc", help="the posenc CLI (runs `posenc families --json`)")
    ap.add_argument("--families-json", help="`posenc families --json` output, instead of --posenc")
    ap.add_argument("--llama-facts", help="llama.cpp architecture -> rope type facts (JSON)")
    ap.add_argument("--gguf-table", help="posenc's registry source holding kGgufArchitectures")
    ap.add_argument("--leave-out", help="TSV of what posenc leaves out, with reasons")
    ap.add_argument("--json", help="write the full findings here")
    ap.add_argument("--strict-wrappers", action="store_true",
                    help="count wrapper model_types (text_config) the registry lacks as unexplained")
    ap.add_argument("--verbose", action="store_true", help="also list the explained and covered families")
    a = ap.parse_args(argv)
    if not a.posenc and not a.families_json:
        ap.error("one of --posenc / --families-json is needed")

    leave_out = load_leave_out(a.leave_out)
    registry = load_registry(a.posenc, a.families_json)
    families = read_tree(a.transformers)
    hf = compare_hf(families, registry, leave_out)

    gguf = None
    if a.llama_facts:
        with open(a.llama_facts, encoding="utf-8") as f:
            llama = json.load(f)
        if not a.gguf_table:
            ap.error("--llama-facts needs --gguf-table")
        gguf = compare_gguf(llama, load_gguf_table(a.gguf_table), leave_out)
        # the registry's rows agree with the table they name (what `families --json` does print)
        table = load_gguf_table(a.gguf_table)
        for r in registry:
            arch, rope = r.get("gguf_architecture"), r.get("gguf_rope")
            if arch and rope and table.get(arch) not in (None, rope):
                gguf["disagree"].append({"architecture": arch, "llama_cpp": table.get(arch), "posenc": rope,
                                         "note": f"families --json row {r['model_type']} vs table"})

    unused = [p for p, _ in leave_out if not p.startswith("#") and not _pattern_used(p, families, hf, gguf)]

    print(f"transformers: {os.path.basename(a.transformers)}: {len(families)} model_types read "
          f"({len(hf['towers'])} tower / component sub-configs skipped)")
    print(f"registry: {len(registry)} rows; families applying positions: {len(hf['covered'])} covered, "
          f"{len(hf['explained'])} left out with a reason, {len(hf['missing'])} missing, "
          f"{len(hf['disagree'])} disagreeing")
    print_rows((("MISSING   ", hf["missing"], lambda d: f"{d['model_type']}: {fmt_family(d)}"),
                ("DISAGREE  ", hf["disagree"],
                 lambda d: f"{d['model_type']}: {d['field']}: registry {d['registry']}, code {d['code']} "
                           f"({fmt_family(d)})")))
    # wrappers: no positions of their own, the language model from text_config; posenc refuses a config
    # whose wrapper model_type it does not list (docs: "other wrappers are refused until listed")
    rows = {r["model_type"]: r for r in registry}
    wrappers = [d for d in hf["no_positions"] if (d["text_config"] or d["wraps_text_config"])
                and find_row(rows, d["model_type"]) is None]
    for d in wrappers:
        print(f"WRAPPER   {d['model_type']}: language model from text_config, not listed "
              f"({'fails' if a.strict_wrappers else 'not counted'}; {d['config']})")
    # decoders (a *ForCausalLM class) whose code applies no positions, that the registry lacks: a row
    # with scheme none would answer them instead of refusing (not counted: nothing is applied wrongly)
    for d in hf["no_positions"]:
        if d["causal_lm"] and d not in wrappers and find_row(rows, d["model_type"]) is None:
            print(f"NOPOS     {d['model_type']}: a decoder applying no positions, not listed "
                  f"(not counted; layer_types={','.join(d['layer_types']) or '-'}; {d['modeling'] or d['config']})")
    # in-library rows whose model_type this release does not declare (renamed, removed, or a spelling of
    # a config that predates the release): not counted, worth a look
    declared = {f.config.model_type for f in families}
    for r in registry:
        mt = r["model_type"]
        if not r.get("remote_code") and mt not in declared and not any(
                mt + sfx in declared for sfx in ("_text", "_text_model")):
            print(f"NOT IN RELEASE  {mt}: an in-library row whose model_type no configuration file of this "
                  f"release declares (not counted)")
    if a.strict_wrappers:
        bad_wrappers = len(wrappers)
    else:
        bad_wrappers = 0
    if a.verbose:
        for d in hf["explained"]:
            print(f"LEFT OUT  {d['model_type']}{':' + d['field'] if 'field' in d else ''}: {d['reason']}")
    bad = len(hf["missing"]) + len(hf["disagree"]) + bad_wrappers
    if gguf is not None:
        print(f"llama.cpp {llama.get('commit', '?')[:12]}: {len(llama['architectures'])} architectures; "
              f"{len(gguf['missing'])} missing from posenc's GGUF table, {len(gguf['disagree'])} disagreeing, "
              f"{len(gguf['not_in_llama_cpp'])} not in llama.cpp, {len(gguf['explained'])} left out with a reason")
        print_rows((("GGUF MISSING   ", gguf["missing"],
                     lambda g: f"{g['architecture']}: llama.cpp {g['llama_cpp']}"),
                    ("GGUF DISAGREE  ", gguf["disagree"],
                     lambda g: f"{g['architecture']}: llama.cpp {g['llama_cpp']}, posenc {g['posenc']}"
                               + (f" ({g['note']})" if g.get("note") else "")),
                    ("GGUF UNKNOWN   ", gguf["not_in_llama_cpp"],
                     lambda g: f"{g['architecture']}: in posenc's table ({g['posenc']}), not in llama.cpp")))
        bad += len(gguf["missing"]) + len(gguf["disagree"]) + len(gguf["not_in_llama_cpp"])
    for p in unused:
        print(f"STALE     leave-out entry {p} matches nothing")
    bad += len(unused)
    if a.json:
        with open(a.json, "w", encoding="utf-8") as f:
            json.dump({"hf": hf, "gguf": gguf, "stale_leave_out": unused}, f, indent=1, default=str)
    print("OK: nothing unexplained" if bad == 0 else f"FAIL: {bad} unexplained")
    return 1 if bad else 0


def _pattern_used(pat: str, families, hf, gguf) -> bool:
    """A leave-out entry that matches nothing is stale (the family was added, or left the field)."""
    if pat.startswith("gguf:"):
        if gguf is None:
            return True
        return any(leave_out_match(pat, "gguf:" + g["architecture"]) for g in gguf["explained"])
    return any(leave_out_match(pat, d["model_type"] + (":" + d["field"] if "field" in d else ""))
               for d in hf["explained"])


def leave_out_match(pat: str, name: str) -> bool:
    return pat == name or ("*" in pat and fnmatch.fnmatchcase(name, pat))


if __name__ == "__main__":
    sys.exit(main())
