#!/usr/bin/env bash
# conf/: runtime.ini is exactly what the schema generates (docs cannot drift), every shipped
# config validates, and the A/B variants differ in memory.plugin and nothing else.
set -euo pipefail
cd "$LLMRT_SOURCE_DIR"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

"$LLMRT" config --template > "$tmp/template.ini"
diff -u conf/runtime.ini "$tmp/template.ini" || {
  echo "FAIL: conf/runtime.ini is out of date: regenerate with 'llmrt config --template > conf/runtime.ini'"; exit 1; }

for f in conf/*.ini; do
  "$LLMRT" config -c "$f" --show > "$tmp/$(basename "$f").show" || { echo "FAIL: $f does not validate"; exit 1; }
done
# values only (drop origins and the header), then compare the variants pairwise
for v in pageable pinned uva; do
  sed -e 's/ *;.*$//' -e '/^$/d' "$tmp/$v.ini.show" | grep -v '^memory.plugin\|^plugin = ' > "$tmp/$v.values"
  grep -q "^plugin = $v" "$tmp/$v.ini.show" || { echo "FAIL: conf/$v.ini does not select memory.plugin = $v"; exit 1; }
done
diff -u "$tmp/pageable.values" "$tmp/pinned.values"
diff -u "$tmp/pageable.values" "$tmp/uva.values"
echo "ok: conf files consistent"
