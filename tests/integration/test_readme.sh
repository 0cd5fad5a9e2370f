#!/usr/bin/env bash
# README stays true: every runtime.ini key of core's schema is documented in README.md, and
# every subcommand is mentioned.
set -euo pipefail
cd "$LLMRT_SOURCE_DIR"
missing=0
while read -r key; do
  grep -q "\`$key\`" README.md || { echo "README.md does not document $key"; missing=1; }
done < <("$LLMRT" config --show | awk '/^\[/{gsub(/[][]/,"");sec=$1;next} /^[a-z_]+ =/{print sec"."$1}' | grep -v '^\(backend\|memory\|quant\|model\)\.[a-z0-9_-]*\.')
for cmd in generate chat serve bench doctor plugins config tokenize mkmodel logits; do
  grep -q "$cmd" README.md || { echo "README.md does not mention llmrt $cmd"; missing=1; }
done
exit $missing
