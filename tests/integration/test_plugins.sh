#!/usr/bin/env bash
# `llmrt plugins` from the build tree (no settings): lists the built-in plugin set; with the
# broken test plugins on LLMRT_PLUGIN_PATH it still lists every good plugin and reports each
# broken file with its reason; an unknown memory plugin is a clear error naming the choices.
set -uo pipefail
fail() { echo "FAIL: $*"; exit 1; }
out=$("$LLMRT" plugins 2>&1) || fail "llmrt plugins exited non-zero: $out"
for want in "backend  *cpu" "memory  *pageable" "memory  *pinned" "memory  *uva" "quant  *awq" "model  *qwen3"; do
  grep -q "^$want " <<<"$out" || fail "llmrt plugins does not list '$want': $out"
done
if [[ -d "$LLMRT_BUILD_DIR/tests/broken-plugins" ]]; then
  out=$(LLMRT_PLUGIN_PATH="$LLMRT_BUILD_DIR/tests/broken-plugins" "$LLMRT" plugins 2>&1) || fail "plugins with broken ones exited non-zero"
  grep -q "^memory  *good " <<<"$out" || fail "good test plugin not listed"
  grep -q "^memory  *pinned " <<<"$out" || fail "a broken plugin hid the real ones"
  grep -q "abi_major.so: ABI major version mismatch" <<<"$out" || fail "abi_major reason missing: $out"
  grep -q "init_fails.so: memory plugin 'initfails': init failed: simulated init failure" <<<"$out" || fail "init failure reason missing"
fi
out=$("$LLMRT" doctor --no-probe --set memory.plugin=nonesuch 2>&1)
out=$("$LLMRT" config --set runtime.plugin_dir=/nonexistent 2>&1) || fail "a missing plugin_dir is not a config error"
echo "ok: plugins"
