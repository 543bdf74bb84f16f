#!/usr/bin/env bash
# The vLLM snapshot bench/peers/build.sh compiles (--vllm DIR): which files, from which commits, and a
# check that DIR holds exactly them. Fetches nothing; bring the files in yourself, for example
#   for f in csrc/cpu/pos_encoding.cpp csrc/cpu/cache.cpp csrc/cpu/cpu_types_x86.hpp; do
#     mkdir -p "DIR/$(dirname $f)"; git -C <vllm clone> show <commit>:$f > "DIR/$f"; done
# (each file at the commit listed below; the three were read one by one from github.com/vllm-project/vllm,
# whose repository is too large to mirror here). Peer code: never commit it.
#
# usage: bench/peers/vllm_snapshot.sh DIR      exit 0 when every file is there with its sha256
set -euo pipefail
dir=${1:?usage: vllm_snapshot.sh DIR}
# path  commit (a vLLM commit holding this version of the file)  sha256 of the file
files=(
  "csrc/cpu/pos_encoding.cpp 282a70382f61053d4ac1cc7936d3403867fbfd25 5925f86d44c61985b5efb175bd2496b0719675faf6c0e87aa62bee1211b3b819"
  "csrc/cpu/cache.cpp 31e15b833dcbdc56546e6d1fd82129c685f01caa aa0852013db090140a5af424b99ad979f55a161b0cfb65187a80e4779e7c4307"
  "csrc/cpu/cpu_types_x86.hpp d89d013688dcf4de2da58f83c739d0eaa47e2f22 00a9e99738ed56eddd3483f31f477972b6f28e8c93c817794922edb6414dbd22"
)
bad=0
for entry in "${files[@]}"; do
  read -r path commit sum <<< "$entry"
  if [ ! -f "$dir/$path" ]; then
    echo "missing: $dir/$path (vllm-project/vllm $commit:$path)" >&2; bad=1; continue
  fi
  got=$(sha256sum "$dir/$path" | cut -d' ' -f1)
  if [ "$got" != "$sum" ]; then
    echo "differs: $dir/$path (sha256 $got, expected $sum: vllm-project/vllm $commit:$path)" >&2; bad=1
  fi
done
[ $bad -eq 0 ] && echo "vllm snapshot ok: $dir"
exit $bad
