#!/usr/bin/env bash
# The SGLang snapshot bench/peers/build.sh compiles (--sglang DIR): which files, from which commits, and a
# check that DIR holds exactly them. Fetches nothing; bring the files in yourself, for example
#   for f in sgl-kernel/csrc/cpu/rope.cpp sgl-kernel/csrc/cpu/common.h sgl-kernel/csrc/cpu/vec.h; do
#     mkdir -p "DIR/$(dirname $f)"; git -C <sglang clone> show <commit>:$f > "DIR/$f"; done
# (each file at the commit listed below; the three were read one by one from github.com/sgl-project/sglang,
# whose repository is too large to mirror here; common.h and vec.h are older versions than rope.cpp's
# commit holds: the versions that could be read, and enough for rope.cpp). Peer code: never commit it.
#
# usage: bench/peers/sglang_snapshot.sh DIR      exit 0 when every file is there with its sha256
set -euo pipefail
dir=${1:?usage: sglang_snapshot.sh DIR}
# path  commit (an SGLang commit holding this version of the file)  sha256 of the file
files=(
  "sgl-kernel/csrc/cpu/rope.cpp 68663266d5707f417d531c9ea9d1177886235e89 bb04426aa8c38fc21ff41d8a9208ec0de231232bde17bc81e05aca6230ce9243"
  "sgl-kernel/csrc/cpu/common.h 4797b8eb9897d913f7a7fee500174c25f069d365 93c85217671b2a898d64974fbea97a20c9d6ccd9aa74539b3dae6b06b50c9599"
  "sgl-kernel/csrc/cpu/vec.h ec369d8c5ab20a63f2171bd2bc858c74e1ae3e1a 1f271866ba2dcef918639aa49a888d9db1f675bed3e7f3a38ddf09c3572ea045"
)
bad=0
for entry in "${files[@]}"; do
  read -r path commit sum <<< "$entry"
  if [ ! -f "$dir/$path" ]; then
    echo "missing: $dir/$path (sgl-project/sglang $commit:$path)" >&2; bad=1; continue
  fi
  got=$(sha256sum "$dir/$path" | cut -d' ' -f1)
  if [ "$got" != "$sum" ]; then
    echo "differs: $dir/$path (sha256 $got, expected $sum: sgl-project/sglang $commit:$path)" >&2; bad=1
  fi
done
[ $bad -eq 0 ] && echo "sglang snapshot ok: $dir"
exit $bad
