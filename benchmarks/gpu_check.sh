#!/usr/bin/env bash
# The GPU check: install what the GPU image lacks, then run benchmarks/gpu_check.py.
#
#   bash benchmarks/gpu_check.sh [RESULTS_DIR] [gpu_check.py options...]
#
# Needs nothing from the network. Python packages the image lacks (pydantic and the packages
# it needs) come as wheels in .whl/ beside this checkout; real MNIST and IMDB, if wanted, in
# .gpudata/ (below). The project runs from src/ (no build: the image's setuptools may be
# older than the project's build needs). Results go to RESULTS_DIR (default: $OUT, else
# ./gpu-check): results.jsonl, trainscale.db, the benchmarks' JSON, steps.tar (each step's
# output files), check.log: eight files at most.
set -uo pipefail
cd "$(dirname "$0")/.."
RESULTS=${1:-${OUT:-gpu-check}}
shift || true
mkdir -p "$RESULTS"
PY=${PYTHON:-python3}
if [ -z "${NO_WHEELS:-}" ] && ls .whl/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || exit 1
    export PYTHONPATH="$PWD/src:/tmp/site"
else
    export PYTHONPATH="$PWD/src"
fi
export PYTHONUNBUFFERED=1
# Real data in one folder, where the product's data search finds each set by name: MNIST
# as IDX files in .gpudata/mnist/, IMDB as .gpudata/imdb.tar.gz (imdb/aclImdb/..., about
# 25 MB: the tree itself is 50,000 small files).
DATA=/tmp/gpudata
mkdir -p "$DATA"
DATA_ARGS=()
if [ -d .gpudata/mnist ]; then
    ln -sfn "$PWD/.gpudata/mnist" "$DATA/mnist"
    DATA_ARGS+=(--mnist "$DATA/mnist")
fi
if [ -f .gpudata/imdb.tar.gz ] && tar -xzf .gpudata/imdb.tar.gz -C "$DATA"; then
    DATA_ARGS+=(--imdb "$DATA/imdb")
fi
"$PY" -c "import trainscale.cli, pydantic, torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'gpus', torch.cuda.device_count())" || exit 1
# Everything is written into RESULTS as each step ends (its output files appended to
# steps.tar), so a check stopped at a time limit still leaves what it measured.
"$PY" benchmarks/gpu_check.py --out "$RESULTS" "${DATA_ARGS[@]}" "$@" \
    2>&1 | tee "$RESULTS/check.log"

