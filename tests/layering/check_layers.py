#!/usr/bin/env python3
"""posenc's layering check: every include points down the layer list, never up.

Layers, lowest first (docs/ARCHITECTURE.md has the table):
    core -> math -> kernels -> io -> config -> model -> bench -> tools
A file's layer is its folder: include/posenc/<layer>/ and src/<layer>/ for the library, bench/ for the
benchmark support, tools/, python/ and examples/ for programs (tools/golden is the golden-case library they share). A file may include public headers
("posenc/<layer>/x.hpp") of its own layer or lower, private headers ("<layer>/x.hpp" under src/) of its own
layer or lower from inside the library only, and the umbrella "posenc/posenc.hpp" from bench and tools only.
Every library source src/<layer>/[<family>/]x.cpp is named after its header (include/posenc/<layer>/x.hpp,
src/<layer>/x.hpp, x.hpp in its own folder, or x without a _ref suffix); src/kernels/ has one folder per
kernel family (rope/, kv_cache/, embedding/, simd/), and a file's layer is still the folder under src/. Prints one line per violation and exits 1 if there is any.

--inject FILE:HEADER adds an include to FILE before checking (the suite uses it to show that an upward
include is caught).
"""
import argparse
import os
import re
import sys

LAYERS = ["core", "math", "kernels", "io", "config", "model", "bench", "tools"]
RANK = {name: i for i, name in enumerate(LAYERS)}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_of(rel):
    parts = rel.split("/")
    if parts[0] == "include" and len(parts) >= 3 and parts[1] == "posenc":
        return parts[2] if len(parts) > 3 else None  # include/posenc/x.hpp: only the umbrella
    if parts[0] == "src" and len(parts) >= 3:
        return parts[1]
    if parts[0] == "bench":
        return "bench"
    if parts[0] in ("tools", "examples", "python"):
        return "tools"
    return None


def sources(root):
    for top in ("include", "src", "bench", "tools", "examples", "python"):
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for n in sorted(names):
                if n.endswith((".hpp", ".cpp", ".h", ".cc")):
                    yield os.path.relpath(os.path.join(dirpath, n), root).replace(os.sep, "/")


def check(root, injected):
    errors = []
    files = sorted(sources(root))
    for rel in files:
        layer = layer_of(rel)
        if rel == "include/posenc/posenc.hpp":
            continue
        if layer is None or layer not in RANK:
            errors.append(f"{rel}: not in a layer folder (one of {', '.join(LAYERS[:6])})")
            continue
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
            text = f.read()
        includes = INCLUDE.findall(text) + injected.get(rel, [])
        in_library = rel.startswith(("src/", "include/"))
        for inc in includes:
            parts = inc.split("/")
            if ".." in parts:
                errors.append(f"{rel}: includes {inc} by a relative path")
                continue
            if inc == "posenc/posenc.hpp":
                if RANK[layer] < RANK["bench"]:
                    errors.append(f"{rel}: includes the umbrella posenc/posenc.hpp from {layer}")
                continue
            if parts[0] == "posenc":
                target = parts[1] if len(parts) == 3 else None
                if target not in RANK or RANK[target] > RANK["model"]:
                    errors.append(f"{rel}: includes {inc}, which is in no library layer")
                elif not os.path.exists(os.path.join(root, "include", inc)):
                    errors.append(f"{rel}: includes {inc}, which does not exist")
                elif RANK[target] > RANK[layer]:
                    errors.append(f"{rel}: includes {inc} ({target}) from {layer}, a lower layer")
                continue
            if parts[0] in RANK and os.path.exists(os.path.join(root, "src", inc)):
                target = parts[0]
                if not in_library:
                    errors.append(f"{rel}: includes the library's private header src/{inc}")
                elif RANK[target] > RANK[layer]:
                    errors.append(f"{rel}: includes {inc} ({target}) from {layer}, a lower layer")
                continue
            # Same-folder includes of programs and bench ("commands.hpp", "roofline.hpp").
            if not in_library and os.path.exists(os.path.join(root, os.path.dirname(rel), inc)):
                continue
            if not in_library and layer == "tools" and any(
                    os.path.exists(os.path.join(root, lib, inc)) for lib in ("bench", "tools/golden")):
                continue  # tools use the bench support and golden libraries (bench_cases.hpp, golden_case.hpp)
            errors.append(f"{rel}: includes \"{inc}\", which is not a header posenc knows")
        if rel.startswith("src/") and rel.endswith(".cpp"):
            stem = os.path.basename(rel)[:-4]
            base = stem[:-4] if stem.endswith("_ref") else stem
            if not any(os.path.exists(os.path.join(root, p)) for p in (
                    f"include/posenc/{layer}/{base}.hpp", f"src/{layer}/{base}.hpp",
                    f"{os.path.dirname(rel)}/{base}.hpp")):
                errors.append(f"{rel}: no header include/posenc/{layer}/{base}.hpp it is named after")
    return errors, len(files)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", help="the source tree")
    ap.add_argument("--inject", action="append", default=[], metavar="FILE:HEADER")
    args = ap.parse_args()
    injected = {}
    for spec in args.inject:
        file, _, header = spec.partition(":")
        injected.setdefault(file, []).append(header)
    errors, n = check(args.root, injected)
    for e in errors:
        print(e)
    print(f"layering: {n} files, {len(errors)} violations")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
