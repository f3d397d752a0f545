#!/usr/bin/env bash
# scripts/device/python_cuda_check.sh: the msa_oracle package on a CUDA machine, in one call: python/tests (the CUDA
# tensor tests among them: exact mode reads CUDA tensors on the device and gives the reference's bits) and
# docs/examples/test_my_kernel.py, with the machine's own python3, torch and pytest. The package is built elsewhere
# for that python (a tree laid out as <build>/python: the msa_oracle folder and its dist-info), with the msa tool and
# the shared libraries the machine lacks:
#   PACKAGE=dir  the folder holding msa_oracle/ and msa_oracle-*.dist-info/ (default .devbuild/py/python)
#   BIN=dir      the folder holding the msa tool (default .devbuild/py/bin)
#   LIBS=dir     libhwy.so.1, libgomp.so.1 (default .devbuild/py/lib)
# Usage: scripts/device/python_cuda_check.sh [OUT_DIR]   (default: $OUT, else ./python_cuda_out); writes pytest's
# junit report and log there and prints the summary last.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT_DIR=${1:-${OUT:-$PWD/python_cuda_out}}
mkdir -p "$OUT_DIR"
export PYTHONPATH=$(cd "${PACKAGE:-.devbuild/py/python}" && pwd)
export PATH=$(cd "${BIN:-.devbuild/py/bin}" && pwd):$PATH
export LD_LIBRARY_PATH=$(cd "${LIBS:-.devbuild/py/lib}" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export MSA_ORACLE_CACHE=$(mktemp -d) MSA_ORACLE_DUMP_DIR=$(mktemp -d)
{
  nvidia-smi -L
  python3 -c 'import sys, torch, msa_oracle as mo; print("python", sys.version.split()[0], "torch", torch.__version__,
"cuda", torch.cuda.is_available(), "msa_oracle", mo.__version__, "backends", mo.backends())'
} 2>&1 | tee "$OUT_DIR/environment.txt"
python3 -m pytest -q -p no:cacheprovider -rs --junitxml="$OUT_DIR/pytest.xml" python/tests \
  docs/examples/test_my_kernel.py 2>&1 | tee "$OUT_DIR/pytest.log"
exit "${PIPESTATUS[0]}"
