#!/usr/bin/env bash
# The CLI surface: --help for every subcommand exits 0; unknown commands, unknown flags and
# missing arguments exit 2 with one line that says what was wrong ("did you mean" for a
# misspelt flag) and where the help is, not the whole usage; the short flags of keys and
# their precedence; config errors exit 1 naming file:line.
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
  [[ $(wc -l < "$tmp/bad") -eq 1 ]] || { cat "$tmp/bad"; fail "llmrt $cmd --no-such-flag: more than one line"; }
  grep -q "^llmrt $cmd: unknown option '--no-such-flag'; see 'llmrt $cmd --help'$" "$tmp/bad" ||
    { cat "$tmp/bad"; fail "llmrt $cmd --no-such-flag: not the one-line usage error"; }
done
# expect_usage TEXT ARGS...: llmrt ARGS exits 2 with exactly one line holding TEXT
expect_usage() {
  local text=$1; shift
  "$LLMRT" "$@" > "$tmp/out" 2>&1; local rc=$?
  [[ $rc -eq 2 ]] || { cat "$tmp/out"; fail "llmrt $*: exit $rc, expected 2"; }
  [[ $(wc -l < "$tmp/out") -eq 1 ]] || { cat "$tmp/out"; fail "llmrt $*: more than one line"; }
  grep -qF -- "$text" "$tmp/out" || { cat "$tmp/out"; fail "llmrt $*: no '$text'"; }
}
expect_usage "unknown option '--temprature' (did you mean --temperature?); see 'llmrt generate --help'" generate --temprature 1
expect_usage "unknown option '--hots' (did you mean --host?)" serve --hots 0.0.0.0
expect_usage "unknown option '--max-model-length' (did you mean --max-model-len?)" serve --max-model-length 5
expect_usage "option --max-tokens needs a value; see 'llmrt generate --help'" generate --prompt-ids 1 --max-tokens
expect_usage "option --config needs a value" config -c
expect_usage "option '--pr' is ambiguous (--prompt, --prompt-ids, --prompts-file, --print-ids)" generate --pr x
expect_usage "option --show takes no value" config --show=yes
expect_usage "--max-tokens N is required; see 'llmrt generate --help'" generate --prompt-ids 1
expect_usage "unknown command 'genrate' (did you mean generate?); see 'llmrt --help'" genrate
expect_usage "unknown command 'frobnicate'; see 'llmrt --help'" frobnicate
expect_usage "unexpected argument 'b' (one model folder only)" serve a b
"$LLMRT" serve --help | grep -q "^usage: llmrt serve \[MODEL_DIR\]" || fail "serve --help does not name the positional model folder"

# ---- short flags of keys: --set overrides, an explicit --set wins over them ----
show() { "$LLMRT" config "$@" 2>&1; }
out=$(show --max-model-len 4096 --gpu-memory-utilization 0.5 --max-num-seqs 8 --max-num-batched-tokens 512)
grep -q "^max_model_len = 4096  *; --set$" <<<"$out" && grep -q "^gpu_memory_utilization = 0.5  *; --set$" <<<"$out" &&
  grep -q "^max_num_seqs = 8  *; --set$" <<<"$out" && grep -q "^max_num_batched_tokens = 512  *; --set$" <<<"$out" ||
  { echo "$out"; fail "engine short flags"; }
out=$(show --max-num-seqs 8 --set scheduler.max_num_seqs=9)
grep -q "^max_num_seqs = 9 " <<<"$out" || { echo "$out"; fail "an explicit --set must win over --max-num-seqs (given first)"; }
out=$(show --set scheduler.max_num_seqs=9 --max-num-seqs 8)
grep -q "^max_num_seqs = 9 " <<<"$out" || { echo "$out"; fail "an explicit --set must win over --max-num-seqs (given after)"; }
"$LLMRT" config --max-num-seqs 5000 > "$tmp/out" 2>&1; rc=$?
[[ $rc -eq 1 ]] && grep -q "scheduler.max_num_seqs = 5000 is out of range (allowed: 0..4096)" "$tmp/out" ||
  { cat "$tmp/out"; fail "a short flag's bad value: exit $rc"; }

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
# ---- the system file (etc/llmrt/runtime.ini of the installation): below -c, above defaults ----
printf '[cache]\nblock_size = 32\nmax_model_len = 100\n[model]\npath = models/m\n' > "$tmp/sys.ini"
printf '[cache]\nblock_size = 64\n' > "$tmp/user.ini"
out=$(LLMRT_SYSTEM_CONFIG="$tmp/sys.ini" "$LLMRT" config -c "$tmp/user.ini" 2>&1) || { echo "$out"; fail "a system file"; }
grep -q "^; effective configuration (files: $tmp/sys.ini, then $tmp/user.ini)$" <<<"$out" || { echo "$out"; fail "the system file is not named"; }
grep -q "^block_size = 64  *; $tmp/user.ini:2$" <<<"$out" || { echo "$out"; fail "-c must win over the system file"; }
grep -q "^max_model_len = 100  *; $tmp/sys.ini:3$" <<<"$out" || { echo "$out"; fail "the system file's value and origin"; }
grep -q "^path = $tmp/models/m  *; $tmp/sys.ini:5$" <<<"$out" || { echo "$out"; fail "a relative path in the system file resolves against its folder"; }
out=$(LLMRT_SYSTEM_CONFIG="$tmp/sys.ini" "$LLMRT" config -c "$tmp/user.ini" --set cache.max_model_len=7 2>&1)
grep -q "^max_model_len = 7  *; --set$" <<<"$out" || { echo "$out"; fail "--set must win over the system file"; }
out=$(LLMRT_SYSTEM_CONFIG= "$LLMRT" config 2>&1)
grep -q "^block_size = 16  *; default$" <<<"$out" || { echo "$out"; fail "LLMRT_SYSTEM_CONFIG= reads no system file"; }
printf '[cache]\nblok_size = 32\n' > "$tmp/badsys.ini"
LLMRT_SYSTEM_CONFIG="$tmp/badsys.ini" "$LLMRT" config > "$tmp/out" 2>&1; rc=$?
[[ $rc -eq 1 ]] && grep -q "the system config (LLMRT_SYSTEM_CONFIG= to skip it): $tmp/badsys.ini:2: unknown key 'blok_size'" "$tmp/out" ||
  { cat "$tmp/out"; fail "a bad system file: exit $rc"; }
! LLMRT_SYSTEM_CONFIG="$tmp/sys.ini" "$LLMRT" config 2>&1 >/dev/null | grep -q "LLMRT_SYSTEM_CONFIG" || fail "LLMRT_SYSTEM_CONFIG is reported as an unknown variable"
echo "ok: cli"
