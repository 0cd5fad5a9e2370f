#!/usr/bin/env bash
# The CLI surface: --help for every subcommand exits 0; unknown commands, unknown flags and
# missing arguments exit 2 with the usage; config errors exit 1 naming file:line.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT

"$LLMRT" --help > "$tmp/out" || fail "llmrt --help"
for cmd in generate chat serve bench doctor plugins config tokenize mkmodel logits; do
  grep -q "^  $cmd " "$tmp/out" || fail "llmrt --help does not list $cmd"
  "$LLMRT" "$cmd" --help > "$tmp/help" 2>&1; rc=$?
  [[ $rc -eq 0 ]] || fail "llmrt $cmd --help exited $rc"
  grep -qi "usage: llmrt $cmd" "$tmp/help" || fail "llmrt $cmd --help prints no usage"
  "$LLMRT" "$cmd" --no-such-flag > "$tmp/bad" 2>&1; rc=$?
  [[ $rc -eq 2 ]] || fail "llmrt $cmd --no-such-flag exited $rc, expected 2"
  grep -qi "usage: llmrt $cmd" "$tmp/bad" || fail "llmrt $cmd --no-such-flag does not show the usage"
done
"$LLMRT" frobnicate > "$tmp/out" 2>&1; [[ $? -eq 2 ]] || fail "unknown command must exit 2"
grep -q "unknown command 'frobnicate'" "$tmp/out" || fail "unknown command message"
"$LLMRT" config -c > "$tmp/out" 2>&1; [[ $? -eq 2 ]] || fail "missing argument must exit 2"

printf '[cache]\nblock_size = 16\n[memroy]\nplugin = pinned\n' > "$tmp/bad.ini"
"$LLMRT" config -c "$tmp/bad.ini" > "$tmp/out" 2>&1; rc=$?
[[ $rc -eq 1 ]] || fail "bad ini must exit 1 (got $rc)"
grep -q "bad.ini:4: unknown section \[memroy\] (did you mean \[memory\]?)" "$tmp/out" || { cat "$tmp/out"; fail "bad ini message"; }
"$LLMRT" plugins -c "$tmp/bad.ini" > "$tmp/out" 2>&1; [[ $? -eq 1 ]] || fail "plugins with a bad ini must exit 1"
"$LLMRT" config --set memory.plugin=uva | grep -q "^plugin = uva  *; --set" || fail "--set shown with its origin"
LLMRT_MEMORY=pageable "$LLMRT" config | grep -q "^plugin = pageable  *; env LLMRT_MEMORY" || fail "LLMRT_MEMORY"
printf '[memory.pinnned]\ndouble_buffer = false\n' > "$tmp/orphan.ini"
"$LLMRT" plugins -c "$tmp/orphan.ini" > "$tmp/out" 2>&1 || fail "a section for a missing plugin is not fatal"
grep -q "orphan.ini:2: section \[memory.pinnned\] is for memory plugin 'pinnned', which is not installed (did you mean pinned?" "$tmp/out" \
  || { cat "$tmp/out"; fail "typo in a plugin section name is not reported"; }
echo "ok: cli"
