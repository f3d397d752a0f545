# scripts/device/head_bundle.sh: sourced by a device run's script (carry .devbuild/carry): unpacks build_bundles.sh's
# head bundle (HEAD's binaries) and the shared libraries they link, and sets B to the binaries' folder.
tar xJf .devbuild/carry/head.tar.xz
tar xJf .devbuild/carry/bundle.tar.xz .devbuild/union/lib
export LD_LIBRARY_PATH=$PWD/.devbuild/union/lib
B=.devbuild/head/bin
# plan_bench NAME PLAN: writes $B/NAME, gpu_bench run under MSA_GPU_PLAN=PLAN (a build of its own for
# bench/gpu_index_bench.py's --bins).
plan_bench() {
  printf '#!/bin/sh\nMSA_GPU_PLAN=%s exec %s/gpu_bench "$@"\n' "$2" "$PWD/$B" >$B/$1
  chmod +x $B/$1
}
