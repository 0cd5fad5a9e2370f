#!/usr/bin/env bash
# conf/: runtime.ini is exactly what `llmrt config --template` writes from core's and the
# plugins' key tables (docs cannot drift), every shipped config validates, and the A/B
# variants differ in memory.plugin and nothing else.
#
# conf/runtime.ini is written by a build with every plugin of this tree (CUDA included). A
# build without the CUDA backend (LLMRT_CUDA=OFF: CI's sanitizer runs) cannot write the
# [backend.cuda] section, so there the file is compared without that section — and only
# there: where backend-cuda is installed the comparison is whole.
set -euo pipefail
cd "$LLMRT_SOURCE_DIR"
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
unset LLMRT_PLUGIN_PATH # the plugins of this build only

# the file's paragraphs (sections are blank-line separated, none holds a blank line), less
# the section named $1 (if any)
paragraphs() { awk -v RS= -v ORS='\n\n' -v drop="$1" 'drop == "" || index($0, "[" drop "]\n") != 1' "$2"; }

"$LLMRT" config --template > "$tmp/template.ini"
if "$LLMRT" plugins | grep -q '^backend  *cuda '; then
  paragraphs "" conf/runtime.ini > "$tmp/expected.ini"
else
  echo "note: no backend-cuda in this build: conf/runtime.ini is compared without [backend.cuda]"
  ! grep -q '^\[backend\.cuda\]' "$tmp/template.ini" || { echo "FAIL: a template without the CUDA plugin names [backend.cuda]"; exit 1; }
  paragraphs backend.cuda conf/runtime.ini > "$tmp/expected.ini"
fi
paragraphs "" "$tmp/template.ini" > "$tmp/got.ini"
diff -u "$tmp/expected.ini" "$tmp/got.ini" || {
  echo "FAIL: conf/runtime.ini is out of date: regenerate with a build of every plugin (CUDA too):"
  echo "      env -u LLMRT_PLUGIN_PATH build/bin/llmrt config --template > conf/runtime.ini"; exit 1; }
# the template itself is a valid config (developer keys commented out, defaults valid)
"$LLMRT" config -c "$tmp/template.ini" > /dev/null || { echo "FAIL: the template does not validate"; exit 1; }
grep -q '^; simd = auto$' "$tmp/template.ini" || { echo "FAIL: a developer key is not commented out"; exit 1; }

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
