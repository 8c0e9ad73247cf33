#!/usr/bin/env bash
# Side-by-side vector benchmark: Engram (daemon and library) against chromadb, LanceDB and sqlite-vec.
#
# usage: benches/compare/run.sh [--n 100000] [--queries 1000] [--stores engram-daemon,engram-library,engram-python,chromadb,lancedb,sqlite-vec]
#
# Makes its own venv (target/compare/venv, peers pinned in requirements.txt, from PyPI), the corpus (real English
# sentences from the docstrings and comments of the Python packages installed in that venv: corpus.py, not
# committed) and one set of all-MiniLM-L6-v2 vectors for it (embed.py, with the ONNX model of ../shared/models or
# $ENGRAM_MODEL_DIR; computed once and cached in target/compare), builds Engram in release (and the Python wheel,
# installed into that venv), and prints one table.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$root/target/compare"
model=${ENGRAM_MODEL_DIR:-$root/../shared/models/all-MiniLM-L6-v2-onnx}
n=100000
queries=1000
args=()
while [ $# -gt 0 ]; do
  case $1 in
    --n) n=$2; shift 2 ;;
    --queries) queries=$2; shift 2 ;;
    *) args+=("$1"); shift ;;
  esac
done
mkdir -p "$out"
if [ ! -x "$out/venv/bin/python" ]; then
  python3 -m venv "$out/venv"
fi
"$out/venv/bin/pip" install -q -r "$here/requirements.txt"
py="$out/venv/bin/python"
if [ ! -s "$out/corpus.jsonl" ]; then
  "$py" "$here/corpus.py" "$out/corpus.jsonl" $((n + queries))
fi
"$py" "$here/embed.py" "$out/corpus.jsonl" "$model" "$out/corpus.f32"
# The bench first: building it rebuilds target/release/engram without the server feature.
(cd "$root" && cargo build --release --quiet --bench vectors && cargo build --release --quiet --features server --bin engram)
# The Python wheel only when engram-python is among the stores (all are, without --stores).
stores=
for ((i = 0; i < ${#args[@]}; i++)); do
  [ "${args[$i]}" = --stores ] && stores=${args[$((i + 1))]:-}
done
if [ -z "$stores" ] || [[ ",$stores," == *,engram-python,* ]]; then
  "$out/venv/bin/maturin" build --release -q -m "$root/bindings/python/Cargo.toml" -o "$out/wheels"
  "$out/venv/bin/pip" install -q --force-reinstall --no-deps "$(ls -t "$out"/wheels/engram_store-*.whl | head -n 1)"
fi
bench=$(ls -t "$root"/target/release/deps/vectors-* | grep -v '\.d$' | head -n 1)
"$py" "$here/compare.py" --data "$out" --n "$n" --queries "$queries" --engram "$root/target/release/engram" \
  --library-bench "$bench" --work "$out" "${args[@]}"
