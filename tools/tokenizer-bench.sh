#!/usr/bin/env bash
# tokenizer-bench.sh — encode throughput of llmrt's tokenizer on a fixed text, and of HF
# `tokenizers` on the same text when python can import it (the GPU machine can).
#
# The text: llmrt's own C sources (code, comments, English) followed by the multilingual
# reference corpus of tests/fixtures/tokenizer/qwen3_refs.json. It is written next to the
# output so the same bytes can be timed elsewhere.
#
# Usage: tools/tokenizer-bench.sh [path/to/llmrt]      (default build/bin/llmrt)
# Environment: TOKENIZER=DIR (default: tools/fetch-qwen3-tokenizer.sh), SECONDS_PER_RUN=3
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
llmrt=${1:-$root/build/bin/llmrt}
dir=${TOKENIZER:-$("$root/tools/fetch-qwen3-tokenizer.sh")}
secs=${SECONDS_PER_RUN:-3}
text=$(mktemp --suffix=.txt)
trap 'rm -f "$text"' EXIT
(cd "$root" && find core cli include -type f \( -name '*.c' -o -name '*.h' \) | LC_ALL=C sort | xargs cat) > "$text"
python3 -c 'import json, sys
for c in json.load(open(sys.argv[1], encoding="utf-8"))["encode"]:
    sys.stdout.write(c["text"] + "\n")' "$root/tests/fixtures/tokenizer/qwen3_refs.json" >> "$text"
echo "text: $(wc -c < "$text") bytes (sha256 $(sha256sum "$text" | cut -c1-16)), $(nproc) cores"
if [ -x "$llmrt" ]; then
    "$llmrt" tokenize --tokenizer "$dir" --bench "$text" --seconds "$secs"
    "$llmrt" tokenize --tokenizer "$dir" --bench "$text" --seconds "$secs" --threads "$(nproc)"
fi
if python3 -c 'import tokenizers' 2>/dev/null; then
    python3 "$root/tools/make_tokenizer_refs.py" --tokenizer "$dir" --bench "$text" --seconds "$secs"
fi
