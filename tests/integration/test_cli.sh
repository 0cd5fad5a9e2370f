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
grep -q "bad.ini:3: unknown section \[memroy\] (did you mean \[memory\]?)" "$tmp/out" || { cat "$tmp/out"; fail "bad ini message (at the section's header)"; }
"$LLMRT" plugins -c "$tmp/bad.ini" > "$tmp/out" 2>&1; [[ $? -eq 1 ]] || fail "plugins with a bad ini must exit 1"
"$LLMRT" config --set memory.plugin=uva | grep -q "^plugin = uva  *; --set" || fail "--set shown with its origin"
LLMRT_MEMORY=pageable "$LLMRT" config | grep -q "^plugin = pageable  *; env LLMRT_MEMORY" || fail "LLMRT_MEMORY"
printf '[memory.pinnned]\ndouble_buffer = false\n' > "$tmp/orphan.ini"
"$LLMRT" plugins -c "$tmp/orphan.ini" > "$tmp/out" 2>&1 || fail "a section for a missing plugin is not fatal"
grep -q "orphan.ini:1: section \[memory.pinnned\] is for memory plugin 'pinnned', which is not installed (did you mean pinned?" "$tmp/out" \
  || { cat "$tmp/out"; fail "typo in a plugin section name is not reported"; }

# ---- config that holds (each of these was accepted, misread or hung before) ----
# expect_config_error RC TEXT ARGS...: llmrt config ARGS exits RC (within 20 s) and says TEXT
expect_config_error() {
  local rc_want=$1 text=$2; shift 2
  timeout 20 "$LLMRT" config "$@" > "$tmp/out" 2>&1; local rc=$?
  [[ $rc -eq $rc_want ]] || { cat "$tmp/out"; fail "config $*: exit $rc, expected $rc_want"; }
  grep -qF -- "$text" "$tmp/out" || { cat "$tmp/out"; fail "config $*: no '$text'"; }
}
printf '[cache]\nblock_size = 16\n[bogus]\n' > "$tmp/empty.ini"
expect_config_error 1 "empty.ini:3: unknown section [bogus]" -c "$tmp/empty.ini"
expect_config_error 1 "--set: server.port = 99999 is out of range (allowed: 0..65535)" --set server.port=99999
expect_config_error 1 "cache.block_size = 99999999999 is out of range (allowed: 1..1024)" --set cache.block_size=99999999999
expect_config_error 1 "server.timeout_s = 4294967297 is out of range (allowed: 1..86400)" --set server.timeout_s=4294967297
# a 230-character comment whose last 31 characters inih read as a line of its own: block_size = 64
printf '[cache]\n; %s%16sblock_size = 64\n' "$(printf 'x%.0s' {1..197})" "" > "$tmp/long.ini"
expect_config_error 1 "long.ini:2: line longer than 199 characters" -c "$tmp/long.ini"
printf '[cache]\nblock_size = 8\nblock_size = 16\n' > "$tmp/dupkey.ini"
expect_config_error 1 "dupkey.ini:3: duplicate key 'block_size' in [cache] (first set at line 2" -c "$tmp/dupkey.ini"
printf '[cache]\nblock_size = 8\n[server]\nport = 1\n[cache]\n' > "$tmp/dupsec.ini"
expect_config_error 1 "dupsec.ini:5: duplicate section [cache]" -c "$tmp/dupsec.ini"
printf '[cache]\nblock_size = 8\n  kv_tokens = 64\n' > "$tmp/indent.ini"
expect_config_error 1 "indent.ini:3: the line starts with whitespace" -c "$tmp/indent.ini"
expect_config_error 1 "is a folder" -c "$tmp"
mkfifo "$tmp/fifo.ini"
expect_config_error 1 "is not a regular file" -c "$tmp/fifo.ini"

# ---- plugin keys: declared by the plugins, checked by the host ----
expect_config_error 1 "--set: unknown key 'thread' in [backend.cpu] (did you mean backend.cpu.threads?)" --set backend.cpu.thread=2
printf '[model.qwen3]\nfusee = off\n' > "$tmp/q.ini"
expect_config_error 1 "q.ini:2: unknown key 'fusee' in [model.qwen3] (did you mean model.qwen3.fuse?)" -c "$tmp/q.ini"
expect_config_error 1 "--set: backend.cpu.threads = 99999 is out of range (allowed: 0..1024)" --set backend.cpu.threads=99999
expect_config_error 1 "memory.pinned.double_buffer = 'maybe' is not a boolean" --set memory.pinned.double_buffer=maybe
expect_config_error 1 "unknown key 'double_buffer' in [memory.pageable]" --set memory.pageable.double_buffer=true
out=$(LLMRT_BACKEND_CPU_THREADS=3 "$LLMRT" config 2>&1) || fail "env for a plugin key"
grep -q "^threads = 3  *; env LLMRT_BACKEND_CPU_THREADS$" <<<"$out" || { echo "$out"; fail "a plugin key's environment variable and origin"; }
grep -q "^greedy_head = auto  *; default$" <<<"$out" || fail "a plugin key's default is shown"
grep -q "^simd = auto  *; default (developer key)$" <<<"$out" || fail "developer keys are marked"
out=$(LLMRT_BACKEND_CPU_THREADS=3 "$LLMRT" config --set backend.cpu.threads=2 2>&1) || fail "--set over env"
grep -q "^threads = 2  *; --set$" <<<"$out" || { echo "$out"; fail "--set must win over a plugin key's environment variable"; }

# ---- LLMRT_* variables that are no key are reported (and those llmrt reads otherwise are not) ----
out=$(LLMRT_CACHE_BLOK_SIZE=8 LLMRT_CPU_THREADS=2 LLMRT_CUDA=OFF LLMRT_JOBS=2 LLMRT_BENCH_COMMIT=x "$LLMRT" config 2>&1 >/dev/null)
grep -q "environment variable LLMRT_CACHE_BLOK_SIZE matches no configuration key (did you mean LLMRT_CACHE_BLOCK_SIZE?)" <<<"$out" || { echo "$out"; fail "unknown LLMRT_ variable warning"; }
grep -q "LLMRT_CPU_THREADS matches no configuration key (did you mean LLMRT_BACKEND_CPU_THREADS?)" <<<"$out" || { echo "$out"; fail "a renamed variable's new name"; }
! grep -q "LLMRT_CUDA\b\|LLMRT_JOBS\|LLMRT_BENCH_COMMIT\|LLMRT_SOURCE_DIR\|LLMRT_PLUGIN_DIR" <<<"$out" || { echo "$out"; fail "a variable llmrt reads otherwise was reported"; }

# ---- no secret printed ----
out=$("$LLMRT" config --set server.api_key=sekrit-0123 --set runtime.log_level=debug 2>&1) || fail "config with an api key"
! grep -q "sekrit" <<<"$out" || fail "config --show prints the api key"
grep -q "^api_key = (set)  *; --set$" <<<"$out" || fail "api_key shown as (set)"
"$LLMRT" config | grep -q "^api_key = (unset)  *; default$" || fail "api_key shown as (unset)"
echo "ok: cli"
