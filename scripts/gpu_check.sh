#!/usr/bin/env bash
# One call on a CUDA machine: parity of every decode impl, the engine twins, prefix caching, both benches.
#   scripts/gpu_check.sh OUT_DIR [--device cuda|cpu] [--quick] [--sections parity,engine,kernels,bench]
# Writes OUT_DIR/gpu_check.json and OUT_DIR/gpu_check.txt; exit status 1 when a correctness check failed.
# Needs only python with torch (+ safetensors, + triton for impl="triton"); $PYTHON picks the interpreter.
set -euo pipefail
if [ $# -lt 1 ] || [ "${1#-}" != "$1" ]; then
  echo "usage: $0 OUT_DIR [--device cuda|cpu] [--quick] [--sections parity,engine,kernels,bench]" >&2
  exit 2
fi
mkdir -p "$1"
out="$(cd "$1" && pwd)"  # absolute, before leaving the caller's directory
shift
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
exec "${PYTHON:-python3}" -m benchmarks.gpu_check "$out" "$@"
