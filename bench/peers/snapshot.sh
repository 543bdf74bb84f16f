#!/usr/bin/env bash
# The peer snapshots bench/peers/build.sh compiles (--vllm DIR, --sglang DIR): which files, from which
# commits, and a check that DIR holds exactly them. Fetches nothing; bring the files in yourself, e.g.
#   mkdir -p "DIR/$(dirname PATH)"; git -C <peer clone> show COMMIT:PATH > "DIR/PATH"
# for each PATH and COMMIT listed below. The files were read one by one from GitHub (both repositories
# are too large to mirror here); SGLang's common.h and vec.h are older than rope.cpp's commit: the
# versions that could be read, and enough for rope.cpp. Peer code: never commit it.
# vLLM's V1 CPU attention files (cpu_attn.cpp and what it includes, utils.cpp) are one consistent tree:
# vLLM at PR #30329 ("[Feature][CPU Backend]: Optimize ARM vectorization backend", 2026-02-03), taken from
# the mirror of vLLM's history in github.com/red-hat-data-services/vllm-cpu (commit
# e69c990c216c623b1de22f055926602a336f9352 there; git show <it>:PATH). The commits below are
# vllm-project/vllm commits holding the same versions (same size and text, read from GitHub one by one);
# utils.hpp's and utils.cpp's vllm-project/vllm commits were not found, so theirs is the mirror's commit.
# The V1 files build against the cpu_types_x86.hpp above (d89d013); the newer one at e69c990 only adds.
#
# usage: bench/peers/snapshot.sh vllm|sglang DIR     exit 0 when every file is there with its sha256
set -euo pipefail
peer=${1:?usage: snapshot.sh vllm|sglang DIR}
dir=${2:?usage: snapshot.sh vllm|sglang DIR}
# repository, then per file: path, a commit holding this version of it, sha256 of the file
case "$peer" in
  vllm) repo=vllm-project/vllm; files=(
    "csrc/cpu/pos_encoding.cpp 282a70382f61053d4ac1cc7936d3403867fbfd25 5925f86d44c61985b5efb175bd2496b0719675faf6c0e87aa62bee1211b3b819"
    "csrc/cpu/cache.cpp 31e15b833dcbdc56546e6d1fd82129c685f01caa aa0852013db090140a5af424b99ad979f55a161b0cfb65187a80e4779e7c4307"
    "csrc/cpu/cpu_types_x86.hpp d89d013688dcf4de2da58f83c739d0eaa47e2f22 00a9e99738ed56eddd3483f31f477972b6f28e8c93c817794922edb6414dbd22"
    "csrc/cpu/layernorm.cpp 6d336571b7c6f8fc13b6214cecba99fff6ba29ed 49ab97f6478d9f3db0af333d860473f46a375cb2fb54b14fe4b09b4461e9e508"
    "csrc/cpu/sgl-kernels/mla_cache.cpp fe50f6bb3cf7ba00a8cce84f53434c027909d9bd 2baa49e061b225c43013cd89ba99bcf6e72afb525b8aa91157e95325cebc91b4"
    "csrc/cpu/cpu_attn.cpp 6a27a0f383850df06ceccb88e50412af7fe60000 3b485529d8563657dbc9be653863d3afd3ab9cec10878e9f90899cd8421675d9"
    "csrc/cpu/cpu_attn_impl.hpp e7ad92e5308e67c9657fc06f351ff4326848f130 acc2fdfd5351175f46c1893bfd9e354631b7524c05565b7c067c55acf7ec5347"
    "csrc/cpu/cpu_attn_vec.hpp d88f433fb35abfd02ad155b56fefa7489c96265c c3e9fa94901bf8f0457939b6822a322e23d6d73342692dca43a02158b3f3371e"
    "csrc/cpu/cpu_attn_vec16.hpp f0183d3edde5946ea4058591f55462c2472af7b5 71f96b7ccc0fb238f77fdf5d59f385742578bdfa275cbdd50e1c81d0fa8a8b63"
    "csrc/cpu/cpu_arch_macros.h 7a3bde4c9988d419449263a80f79e5d586e872a4 04df69f919efb929eef265a3b26ae18090d7b42860bd6545af1e8a8c02ba1c90"
    "csrc/cpu/utils.hpp e69c990c216c623b1de22f055926602a336f9352 3d6260440c6ff74b74c539eb165890d9e511840fe7e29d46ce3afeb9ccdb9ea9"
    "csrc/cpu/utils.cpp e69c990c216c623b1de22f055926602a336f9352 a3a0e25a3fd0739eb9d1d96008f0e8141c5f0e462b42c4dbdcf5757b9242081f") ;;
  sglang) repo=sgl-project/sglang; files=(
    "sgl-kernel/csrc/cpu/rope.cpp 68663266d5707f417d531c9ea9d1177886235e89 bb04426aa8c38fc21ff41d8a9208ec0de231232bde17bc81e05aca6230ce9243"
    "sgl-kernel/csrc/cpu/common.h 4797b8eb9897d913f7a7fee500174c25f069d365 93c85217671b2a898d64974fbea97a20c9d6ccd9aa74539b3dae6b06b50c9599"
    "sgl-kernel/csrc/cpu/vec.h ec369d8c5ab20a63f2171bd2bc858c74e1ae3e1a 1f271866ba2dcef918639aa49a888d9db1f675bed3e7f3a38ddf09c3572ea045") ;;
  *) echo "snapshot.sh: unknown peer '$peer' (vllm or sglang)" >&2; exit 2 ;;
esac
bad=0
for entry in "${files[@]}"; do
  read -r path commit sum <<< "$entry"
  if [ ! -f "$dir/$path" ]; then
    echo "missing: $dir/$path ($repo $commit:$path)" >&2; bad=1; continue
  fi
  got=$(sha256sum "$dir/$path" | cut -d' ' -f1)
  if [ "$got" != "$sum" ]; then
    echo "differs: $dir/$path (sha256 $got, expected $sum: $repo $commit:$path)" >&2; bad=1
  fi
done
[ $bad -eq 0 ] && echo "$peer snapshot ok: $dir"
exit $bad
