#!/usr/bin/env python3
"""The umbrella header include/posenc/posenc.hpp includes every public header.

Lists include/posenc/<layer>/*.hpp and checks that posenc.hpp has an `#include "posenc/<layer>/x.hpp"`
line for each one (and none for a header that does not exist). Headers that need a private dependency
of the library are left out of the umbrella on purpose and named in OPT_OUT with the reason; a consumer
includes them directly. Prints one line per problem and exits 1 if there is any.
"""
import os
import re
import sys

# header -> why the umbrella does not include it
OPT_OUT = {
    "posenc/io/json_read.hpp": "includes <nlohmann/json.hpp>, a private dependency of the library",
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"(posenc/[^"]+)"', re.M)


def main(root):
    inc = os.path.join(root, "include")
    public = set()
    for dirpath, _, names in os.walk(os.path.join(inc, "posenc")):
        for n in names:
            if n.endswith(".hpp"):
                rel = os.path.relpath(os.path.join(dirpath, n), inc).replace(os.sep, "/")
                if rel != "posenc/posenc.hpp":
                    public.add(rel)
    with open(os.path.join(inc, "posenc", "posenc.hpp")) as f:
        included = set(INCLUDE.findall(f.read()))
    problems = []
    for h in sorted(public - included - set(OPT_OUT)):
        problems.append(f"include/posenc/posenc.hpp: does not include public header {h}")
    for h in sorted(included - public):
        problems.append(f"include/posenc/posenc.hpp: includes {h}, which is not a public header")
    for h in sorted(set(OPT_OUT) & included):
        problems.append(f"include/posenc/posenc.hpp: includes {h}, listed as left out ({OPT_OUT[h]})")
    for h in sorted(set(OPT_OUT) - public):
        problems.append(f"check_umbrella.py: OPT_OUT names {h}, which does not exist")
    for p in problems:
        print(p)
    if not problems:
        print(f"umbrella includes all {len(public) - len(OPT_OUT)} public headers "
              f"({len(OPT_OUT)} left out by name)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "."))
