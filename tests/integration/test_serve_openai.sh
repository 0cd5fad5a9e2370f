#!/usr/bin/env bash
# `llmrt serve` driven by the official `openai` npm package (tests/serve/openai_client.mjs):
# models, completions and chat, whole and streamed, n > 1 with logprobs, and the client's
# typed errors for 404/400/401 — on the tiny model with the real Qwen3 tokenizer and an
# API key set.
#
# The package is installed by this test into a cache folder outside the repository
# ($XDG_CACHE_HOME or ~/.cache, llmrt/npm-openai-<version>); the test is skipped (77)
# only when npm cannot fetch it.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d)
SERVE_PID=
trap '[[ -n "$SERVE_PID" ]] && kill -KILL $SERVE_PID 2>/dev/null; rm -rf "$tmp"' EXIT
. "$LLMRT_SOURCE_DIR/tests/serve/lib.sh"

version=6.49.0
prefix="${XDG_CACHE_HOME:-$HOME/.cache}/llmrt/npm-openai-$version"
if [[ ! -f "$prefix/node_modules/openai/package.json" ]]; then
  command -v npm > /dev/null || { echo "SKIP: npm is not installed (needed to fetch the openai package)"; exit 77; }
  mkdir -p "$prefix"
  if ! npm install --prefix "$prefix" --no-audit --no-fund --silent "openai@$version" > "$tmp/npm.log" 2>&1; then
    echo "SKIP: npm could not install openai@$version:"
    tail -5 "$tmp/npm.log"
    exit 77
  fi
fi

serve_model "$tmp/tiny"
serve_start openai "$tmp/tiny" --set server.api_key=test-key
OPENAI_PREFIX="$prefix" node "$LLMRT_SOURCE_DIR/tests/serve/openai_client.mjs" "$SERVE_URL" test-key tiny ||
  { tail -20 "$SERVE_LOG.err"; fail "the openai client checks failed"; }
serve_stop
echo "ok: serve openai"
