#!/bin/sh
# The figures of docs/benchmarks/generation.md from nothing: makes the two random-weight Hugging Face
# folders (tools/make_hf_model.py: a GPT-2-like model of 308 MB and a Llama-like one of 221 MB as
# imported, fp32), imports them (`ember model import`), and runs generation_bench on each with
# PyTorch beside it (--torch), writing the table rows to $MODELS/generation.md.
#
#   bench/generation_compare.sh [BUILD_DIR] [generation_bench options...]
#
# BUILD_DIR (default build) holds bin/ember and bin/generation_bench (-DEMBER_BENCH=ON); the models go
# to BUILD_DIR/bench-models and are made once. Options after BUILD_DIR go to both runs (e.g.
# --threads 16, --rounds 5). TORCH=0 leaves PyTorch out (needed with --device cuda: the baseline runs
# on the CPU only). Nothing is downloaded.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
[ $# -gt 0 ] && shift
python=${PYTHON:-/usr/bin/python3}
models=$build/bench-models
mkdir -p "$models"
make_model() {  # NAME FAMILY OPTIONS...
  name=$1; shift
  if [ ! -f "$models/$name-hf/config.json" ]; then
    "$python" "$here/tools/make_hf_model.py" --out "$models/$name-hf" --family "$@"
  fi
  if [ ! -f "$models/$name/1/model.json" ]; then
    "$build/bin/ember" model import "$models/$name-hf" --out "$models/$name/1" --name "$name-small-random"
  fi
}
make_model gpt2 gpt2 --hidden 512 --layers 8 --heads 8 --positions 512 --tokenizer gpt2 --seed 1
make_model llama llama --hidden 512 --layers 8 --heads 8 --kv-heads 2 --intermediate 1408 --positions 512 \
  --tokenizer llama2 --no-tie --seed 2
: > "$models/generation.md"
for name in gpt2 llama; do
  if [ "${TORCH:-1}" = 1 ]; then
    "$build/bin/generation_bench" "$models/$name/1" --torch --hf "$models/$name-hf" --python "$python" \
      --markdown "$models/generation.md" "$@"
  else
    "$build/bin/generation_bench" "$models/$name/1" --markdown "$models/generation.md" "$@"
  fi
  echo
done
echo "table rows: $models/generation.md"
