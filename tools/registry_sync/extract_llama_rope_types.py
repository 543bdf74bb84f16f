#!/usr/bin/env python3
"""Extract llama.cpp's architecture -> rope type facts from a llama.cpp source snapshot.

Reads `llama_model_rope_type` (src/llama-model.cpp: a switch of `case LLM_ARCH_X:` labels falling
through to `return LLAMA_ROPE_TYPE_Y;`) and `LLM_ARCH_NAMES` (src/llama-arch.cpp: `{ LLM_ARCH_X, "name" }`),
and writes the facts only, as JSON: {"source", "commit", "architectures": {name: rope}}. A case whose
return depends on the model (`use_mrope() ? MROPE : NORM`) is written "mrope|norm": the 1-D form last.

  extract_llama_rope_types.py --model-cpp llama-model.cpp --arch-cpp llama-arch.cpp
                              --commit SHA --source URL > llama_cpp_rope_types.json
"""

from __future__ import annotations

import argparse
import json
import re
import sys


def rope_switch(text: str) -> dict[str, str]:
    m = re.search(r"llama_rope_type\s+llama_model_rope_type\s*\([^)]*\)\s*\{(.*?)\n\}", text, re.S)
    if not m:
        raise SystemExit("no llama_model_rope_type in the model source")
    body = re.sub(r"//[^\n]*", "", m.group(1))
    out: dict[str, str] = {}
    pending: list[str] = []
    for tok in re.finditer(r"case\s+(LLM_ARCH_\w+)\s*:|return\s+([^;]+);", body):
        if tok.group(1):
            pending.append(tok.group(1))
            continue
        ret = tok.group(2)
        types = re.findall(r"LLAMA_ROPE_TYPE_(\w+)", ret)
        if not types:
            pending = []
            continue
        value = "|".join(t.lower() for t in types)
        for arch in pending:
            out[arch] = value
        pending = []
    out.pop("LLM_ARCH_UNKNOWN", None)
    return out


def arch_names(text: str) -> dict[str, str]:
    m = re.search(r"LLM_ARCH_NAMES\s*=\s*\{(.*?)\n\};", text, re.S)
    if not m:
        raise SystemExit("no LLM_ARCH_NAMES in the arch source")
    return dict(re.findall(r"\{\s*(LLM_ARCH_\w+)\s*,\s*\"([^\"]+)\"\s*\}", m.group(1)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model-cpp", required=True)
    ap.add_argument("--arch-cpp", required=True)
    ap.add_argument("--commit", required=True)
    ap.add_argument("--source", default="https://github.com/ggml-org/llama.cpp")
    a = ap.parse_args(argv)
    with open(a.model_cpp, encoding="utf-8") as f:
        switch = rope_switch(f.read())
    with open(a.arch_cpp, encoding="utf-8") as f:
        names = arch_names(f.read())
    unnamed = sorted(set(switch) - set(names))
    if unnamed:
        raise SystemExit(f"no name for {', '.join(unnamed)}")
    archs = {names[k]: v for k, v in switch.items()}
    not_in_switch = sorted(names[k] for k in set(names) - set(switch) if k != "LLM_ARCH_UNKNOWN")
    json.dump(
        {
            "source": a.source,
            "commit": a.commit,
            "files": "src/llama-model.cpp (llama_model_rope_type), src/llama-arch.cpp (LLM_ARCH_NAMES)",
            "note": "facts only: general.architecture -> rope type; 'a|b': the model decides (M-RoPE when "
            "the GGUF has rope sections, else b)",
            "architectures": dict(sorted(archs.items())),
            "named_but_not_in_switch": not_in_switch,
        },
        sys.stdout,
        indent=1,
    )
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
