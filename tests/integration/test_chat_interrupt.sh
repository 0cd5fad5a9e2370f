#!/usr/bin/env bash
# llmrt chat and Ctrl-C (SIGINT): a Ctrl-C while a reply is generated stops it (the request is
# cancelled) and the program goes on, keeping the conversation (the next turn's prompt holds
# the stopped reply); a second Ctrl-C at the prompt quits with status 0; a reply without
# --max-tokens stops at 2048 tokens, and never runs past cache.max_model_len. On the tiny
# random model with the real Qwen3 tokenizer (tests/serve/lib.sh), whose replies rarely end
# by themselves. Skipped (77) only when the tokenizer cannot be fetched.
set -uo pipefail
fail() { echo "FAIL: $*"; [[ -f "$tmp/err" ]] && tail -5 "$tmp/err"; exit 1; }
tmp=$(mktemp -d)
PID=
trap '[[ -n "$PID" ]] && kill -KILL $PID 2>/dev/null; rm -rf "$tmp"' EXIT
. "$LLMRT_SOURCE_DIR/tests/serve/lib.sh"
serve_model "$tmp/model"

# wait_for FILE PATTERN WHAT: up to 30 s for a line matching PATTERN (grep -E)
wait_for() {
  local i
  for ((i = 0; i < 300; i++)); do
    grep -qE "$2" "$1" 2>/dev/null && return 0
    kill -0 "$PID" 2>/dev/null || fail "$3: llmrt chat exited"
    sleep 0.1
  done
  fail "$3 (no '$2' in $1)"
}
# wait_bytes FILE N WHAT: up to 30 s until FILE holds at least N bytes
wait_bytes() {
  local i
  for ((i = 0; i < 300; i++)); do
    (( $(stat -c %s "$1" 2>/dev/null || echo 0) >= $2 )) && return 0
    kill -0 "$PID" 2>/dev/null || fail "$3: llmrt chat exited"
    sleep 0.1
  done
  fail "$3 (fewer than $2 bytes in $1)"
}

mkfifo "$tmp/in"
"$LLMRT" chat --model "$tmp/model" < "$tmp/in" > "$tmp/out" 2> "$tmp/err" &
PID=$!
exec 3> "$tmp/in"
echo "Hello there" >&3
wait_bytes "$tmp/out" 400 "the first reply streams"
kill -INT "$PID"
wait_for "$tmp/err" 'reply stopped by Ctrl-C' "a Ctrl-C stops the reply"
sleep 0.3
kill -0 "$PID" 2>/dev/null || fail "llmrt chat exited on the first Ctrl-C"
first=$(grep -oE 'stopped by Ctrl-C: [0-9]+ prompt tokens, [0-9]+ generated' "$tmp/err" | head -1)
p1=$(sed -E 's/.*: ([0-9]+) prompt.*/\1/' <<< "$first")
g1=$(sed -E 's/.*, ([0-9]+) generated/\1/' <<< "$first")
(( g1 > 0 && g1 < 2048 )) || fail "the first reply was not stopped early ($first)"

size=$(stat -c %s "$tmp/out")
echo "Tell me more" >&3
wait_bytes "$tmp/out" $((size + 40)) "the second reply streams"
kill -INT "$PID"
for ((i = 0; i < 300; i++)); do
  (( $(grep -c 'reply stopped by Ctrl-C' "$tmp/err") >= 2 )) && break
  sleep 0.1
done
second=$(grep -oE 'stopped by Ctrl-C: [0-9]+ prompt tokens, [0-9]+ generated' "$tmp/err" | sed -n 2p)
[[ -n "$second" ]] || fail "the second Ctrl-C did not stop the second reply"
p2=$(sed -E 's/.*: ([0-9]+) prompt.*/\1/' <<< "$second")
# the conversation was kept: the second prompt holds the first turn and its stopped reply
# (re-encoded, so not exactly g1 tokens; without it the prompt grows by ~10 tokens)
(( p2 > p1 + 12 + g1 / 2 )) || fail "the second prompt ($p2 tokens) does not hold the first turn ($p1 + $g1)"

# at the prompt, Ctrl-C again quits, with status 0
sleep 0.3
kill -INT "$PID"
for ((i = 0; i < 100; i++)); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$PID" 2>/dev/null && fail "a Ctrl-C at the prompt after a stopped reply did not quit"
wait "$PID"; rc=$?
PID=
exec 3>&-
[[ $rc -eq 0 ]] || fail "llmrt chat exited $rc after Ctrl-C at the prompt, expected 0"

# at a fresh prompt one Ctrl-C only warns; the second quits
mkfifo "$tmp/in2"
"$LLMRT" chat --model "$tmp/model" < "$tmp/in2" > "$tmp/out" 2> "$tmp/err" &
PID=$!
exec 3> "$tmp/in2"
wait_for "$tmp/err" 'engine:' "chat loads"
sleep 0.3
kill -INT "$PID"
wait_for "$tmp/err" 'Ctrl-C again to quit' "a Ctrl-C at the prompt warns"
sleep 0.2
kill -0 "$PID" 2>/dev/null || fail "one Ctrl-C at the prompt quit"
kill -INT "$PID"
for ((i = 0; i < 100; i++)); do kill -0 "$PID" 2>/dev/null || break; sleep 0.1; done
kill -0 "$PID" 2>/dev/null && fail "the second Ctrl-C at the prompt did not quit"
wait "$PID"; rc=$?
PID=
exec 3>&-
[[ $rc -eq 0 ]] || fail "exit $rc after two Ctrl-C at the prompt"

# the default reply length: 2048 tokens, and never past max_model_len
printf 'Hello\n' | "$LLMRT" chat --model "$tmp/model" > "$tmp/out" 2> "$tmp/err" || fail "chat"
grep -q '2048 generated, stopped at the token limit' "$tmp/err" || fail "the default reply is not 2048 tokens"
printf 'Hello\n' | "$LLMRT" chat --model "$tmp/model" --set cache.max_model_len=64 > "$tmp/out" 2> "$tmp/err" || fail "chat"
line=$(grep -oE '[0-9]+ prompt tokens, [0-9]+ generated' "$tmp/err")
p=$(sed -E 's/^([0-9]+) prompt.*/\1/' <<< "$line")
g=$(sed -E 's/.*, ([0-9]+) generated/\1/' <<< "$line")
(( p + g == 64 )) || fail "a reply ran past max_model_len 64 ($line)"
"$LLMRT" chat --help | grep -q 'default 2048' || fail "--help does not say the default reply length"
echo "ok: chat interrupt"
