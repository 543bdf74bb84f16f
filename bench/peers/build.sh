#!/usr/bin/env bash
# Builds bench/peers' side_by_side harness against snapshots of the peers' sources (README.md here).
# Fetches nothing: every snapshot is a folder brought in beforehand, for example
#   git clone --depth 1 https://github.com/ggml-org/ggml /tmp/peers/ggml
# (or, in this workspace, the fetch tool and `git --git-dir=<mirror> archive HEAD <paths> | tar -x -C <dir>`).
#
# usage: bench/peers/build.sh --posenc-build BUILD --out DIR [--ggml GGML_DIR] [--vllm VLLM_DIR]
#                              [--sglang SGLANG_DIR] [--torch TORCH_DIR] [-j N]
#   BUILD  a posenc CMake build folder (Release); its `posenc` library target is built if missing
#   DIR    scratch folder for the peers' builds and the harness binary (DIR/side_by_side)
#   VLLM_DIR, SGLANG_DIR  the files snapshot.sh lists; TORCH_DIR: a PyTorch install with include/ and lib/
#          (default: Debian's python3-torch, /usr/lib/python3/dist-packages/torch)
# Peer code and anything built from it stay in DIR: never commit them.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
posenc_build="" out="" ggml="" vllm="" sglang="" torch=/usr/lib/python3/dist-packages/torch jobs=2
while [ $# -gt 0 ]; do
  case "$1" in
    --posenc-build) posenc_build=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --ggml) ggml=$2; shift 2 ;;
    --vllm) vllm=$2; shift 2 ;;
    --sglang) sglang=$2; shift 2 ;;
    --torch) torch=$2; shift 2 ;;
    -j) jobs=$2; shift 2 ;;
    -h|--help) sed -n 2,13p "$0"; exit 0 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
  esac
done
if [ -z "$posenc_build" ] || [ -z "$out" ]; then sed -n 2,13p "$0" >&2; exit 2; fi
if [ -z "$ggml$vllm$sglang" ]; then echo "name a peer's snapshot (--ggml, --vllm, --sglang)" >&2; exit 2; fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

cmake --build "$posenc_build" -j "$jobs" --target posenc
lib="$posenc_build/libposenc.a"
[ -f "$lib" ] || { echo "no $lib: is $posenc_build a posenc build folder?" >&2; exit 1; }

cxx=${CXX:-g++}
common=(-std=c++20 -O3 -DNDEBUG -I"$root/include" -I"$here")
defs=() objs=() libs=()

if [ -n "$ggml" ]; then
  [ -f "$ggml/include/ggml.h" ] || { echo "$ggml: no include/ggml.h (a ggml-org/ggml snapshot?)" >&2; exit 1; }
  # ggml's CPU backend as llama.cpp builds it for the machine it runs on (GGML_NATIVE, OpenMP);
  # llamafile's sgemm and the weight repacking are off: neither runs in these graphs.
  cmake -S "$ggml" -B "$out/ggml-build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DGGML_NATIVE=ON -DGGML_OPENMP=ON -DGGML_LLAMAFILE=OFF -DGGML_CPU_REPACK=OFF \
    -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF > "$out/ggml-cmake.log"
  cmake --build "$out/ggml-build" -j "$jobs" --target ggml ggml-cpu ggml-base
  "$cxx" "${common[@]}" -fopenmp -I"$ggml/include" -c "$here/peer_ggml.cpp" -o "$out/peer_ggml.o"
  defs+=(-DSBS_WITH_GGML)
  objs+=("$out/peer_ggml.o")
  libs+=("$out/ggml-build/src/libggml.a" "$out/ggml-build/src/libggml-cpu.a" "$out/ggml-build/src/libggml-base.a")
fi

tinc=(-I"$torch/include" -I"$torch/include/torch/csrc/api/include")
tlib=$torch/lib
[ -f "$tlib/libtorch_cpu.so" ] || tlib=/usr/lib/x86_64-linux-gnu
if [ -n "$vllm$sglang" ]; then
  [ -f "$torch/include/ATen/ATen.h" ] || { echo "$torch: no include/ATen/ATen.h (--torch)" >&2; exit 1; }
  libs+=(-L"$tlib" -Wl,-rpath,"$tlib" -ltorch_cpu -lc10)
fi
if [ -n "$vllm" ]; then
  "$here/snapshot.sh" vllm "$vllm"
  # vLLM's CPU files as its CMake builds them for an AVX512 host (-march=native here; OpenMP), against
  # PyTorch's C++ API. vllm_shim/ holds our stand-in for vLLM's cpu_types.hpp (it only includes the
  # x86 header).
  vflags=(-O3 -DNDEBUG -march=native -fopenmp -Wno-deprecated-declarations -I"$here/vllm_shim" -I"$vllm/csrc/cpu" "${tinc[@]}")
  mkdir -p "$out/vllm"
  for f in pos_encoding cache layernorm; do
    "$cxx" -std=c++17 "${vflags[@]}" -c "$vllm/csrc/cpu/$f.cpp" -o "$out/vllm/$f.o"
  done
  # sgl-kernels/mla_cache.cpp (vLLM's CPU MLA cache writer) against our vllm_shim/sgl common.h / vec.h
  # (its own folder's are not in the snapshot); sleef.h for ATen's AVX512 headers on AMX hosts.
  sinc=()
  [ -f /usr/include/x86_64-linux-gnu/sleef.h ] && sinc=(-I/usr/include/x86_64-linux-gnu)
  "$cxx" -std=c++17 -O3 -DNDEBUG -march=native -fopenmp -Wno-deprecated-declarations -I"$here/vllm_shim/sgl" \
    "${tinc[@]}" "${sinc[@]}" -c "$vllm/csrc/cpu/sgl-kernels/mla_cache.cpp" -o "$out/vllm/mla_cache.o"
  # V1's CPU attention backend: cpu_attn.cpp (cpu_attn_reshape_and_cache; AttentionImpl<VEC / VEC16>, no AMX
  # without CPU_CAPABILITY_AMXBF16, which vLLM's CMake defines only on AMX hosts) and utils.cpp (ScratchPadManager,
  # which cpu_attn.cpp's attention entry points use), against the same cpu_types_x86.hpp. csrc/ for its
  # "cpu/..." includes; our vllm_shim/cpu/cpu_types.hpp and vllm_shim/ATen/cpu/Utils.h (at::cpu::L2_cache_size,
  # PyTorch 2.x) in front; <optional> force-included (PyTorch 2.x's c10 headers include it, 1.13's do not);
  # VLLM_NUMA_DISABLED as vLLM's CMake sets it without libnuma (init_cpu_threads_env is not used here).
  "$cxx" -std=c++17 "${vflags[@]}" -I"$vllm/csrc" -include optional -c "$vllm/csrc/cpu/cpu_attn.cpp" \
    -o "$out/vllm/cpu_attn.o"
  "$cxx" -std=c++17 "${vflags[@]}" -I"$vllm/csrc" -DVLLM_NUMA_DISABLED -c "$vllm/csrc/cpu/utils.cpp" -o "$out/vllm/utils.o"
  "$cxx" "${common[@]}" -fopenmp -Wno-deprecated-declarations "${tinc[@]}" -c "$here/peer_vllm.cpp" -o "$out/peer_vllm.o"
  # cpu_attn.cpp's TORCH_CHECK_EQ / _LE are glog's CHECK_EQ / _LE in a libtorch built with glog (Debian's).
  grep -q "^#define C10_USE_GLOG" "$torch/include/c10/macros/cmake_macros.h" 2>/dev/null && libs+=(-lglog)
  defs+=(-DSBS_WITH_VLLM)
  objs+=("$out/peer_vllm.o" "$out/vllm/pos_encoding.o" "$out/vllm/cache.o" "$out/vllm/layernorm.o" "$out/vllm/mla_cache.o"
    "$out/vllm/cpu_attn.o" "$out/vllm/utils.o")
fi
if [ -n "$sglang" ]; then
  "$here/snapshot.sh" sglang "$sglang"
  # SGLang's rope.cpp as its sgl-kernel CMake builds it (-march=native on an AVX512-BF16/AMX host,
  # OpenMP). sglang_shim/torch113_compat.h (ours) supplies what it takes from PyTorch 2.x; ATen's
  # AVX512 vector headers want sleef.h (Debian: libsleef-dev).
  sinc=()
  [ -f /usr/include/x86_64-linux-gnu/sleef.h ] && sinc=(-I/usr/include/x86_64-linux-gnu)
  mkdir -p "$out/sglang"
  "$cxx" -std=c++17 -O3 -DNDEBUG -march=native -fopenmp -Wno-deprecated-declarations \
    -include "$here/sglang_shim/torch113_compat.h" -I"$sglang/sgl-kernel/csrc/cpu" "${tinc[@]}" "${sinc[@]}" \
    -c "$sglang/sgl-kernel/csrc/cpu/rope.cpp" -o "$out/sglang/rope.o"
  "$cxx" "${common[@]}" -fopenmp -Wno-deprecated-declarations "${tinc[@]}" -c "$here/peer_sglang.cpp" -o "$out/peer_sglang.o"
  defs+=(-DSBS_WITH_SGLANG)
  objs+=("$out/peer_sglang.o" "$out/sglang/rope.o")
fi

"$cxx" "${common[@]}" "${defs[@]}" -fopenmp -c "$here/side_by_side.cpp" -o "$out/side_by_side.o"
"$cxx" -fopenmp "$out/side_by_side.o" "${objs[@]}" "$lib" "${libs[@]}" -lhwy_contrib -lhwy -lfmt -lpthread -lm \
  -o "$out/side_by_side"
echo "built $out/side_by_side"
