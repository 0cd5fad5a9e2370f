#!/usr/bin/env bash
# llmrt bench on the CPU backend with the tiny synthetic model: usage errors; configs that
# differ beyond the A/B knobs are refused (exit 2, naming the key) and --allow-diff accepts
# them; knob-only differences run; the report has its table and one verdict sentence per
# metric; --csv files have the documented columns and one row per token / step; --plot
# writes a real PNG and SVG; load mode runs every level; too few requests give no verdict.
set -uo pipefail
# These tests are about the CPU backend (CI's); on a GPU machine `auto` would pick CUDA.
export LLMRT_RUNTIME_BACKEND=cpu
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; [[ -f "$tmp/out" ]] && tail -40 "$tmp/out"; exit 1; }

"$LLMRT" mkmodel --preset tiny -o "$tmp/tiny" -q || fail "llmrt mkmodel --preset tiny"
for m in pageable pinned; do
  printf '[model]\npath = tiny\n[memory]\nplugin = %s\n[cache]\nkv_tokens = 2048\n' "$m" > "$tmp/$m.ini"
done
printf '[model]\npath = tiny\n[memory]\nplugin = pinned\n[cache]\nkv_tokens = 2048\nblock_size = 32\n' > "$tmp/blocks.ini"
short=(--input-len 8 --output-len 8 --warmup 1 --rounds 2 --requests 4)

# ---- usage errors: exit 2 with a message that names the problem ----
expect_usage() { # expect_usage "message part" args...
  local want=$1; shift
  "$LLMRT" bench "$@" > "$tmp/out" 2>&1; local rc=$?
  [[ $rc -eq 2 ]] || fail "llmrt bench $* exited $rc, expected 2"
  grep -qF -- "$want" "$tmp/out" || fail "llmrt bench $*: message lacks '$want'"
}
expect_usage "no config given"
expect_usage "--order zigzag: expected abab or random" -c "$tmp/pinned.ini" --order zigzag
expect_usage "must end in .png or .svg" -c "$tmp/pinned.ini" --plot "$tmp/p.pdf"
expect_usage "--concurrency 0,2" -c "$tmp/pinned.ini" --concurrency 0,2
expect_usage "--rounds 0: expected an integer from 1" -c "$tmp/pinned.ini" --rounds 0
expect_usage "--input-len x" -c "$tmp/pinned.ini" --input-len x

# ---- a difference outside the knobs is refused before loading, naming the key ----
"$LLMRT" bench -c "$tmp/pinned.ini" -c "$tmp/blocks.ini" "${short[@]}" > "$tmp/out" 2>&1; rc=$?
[[ $rc -eq 2 ]] || fail "configs differing in cache.block_size: exit $rc, expected 2"
grep -q "refusing to compare configs that differ in cache.block_size" "$tmp/out" || fail "refusal names the key"
grep -Eq "^  cache.block_size +differs +16 +32" "$tmp/out" || fail "the diff table shows cache.block_size 16 vs 32"
grep -Eq "^  memory.plugin" "$tmp/out" && fail "memory.plugin is equal here and must not be listed"
grep -q "loading" "$tmp/out" && fail "a refused comparison must not load any engine"

# ---- ... and --allow-diff runs it anyway, with a warning ----
"$LLMRT" bench -c "$tmp/pinned.ini" -c "$tmp/blocks.ini" "${short[@]}" --allow-diff > "$tmp/out" 2>&1; rc=$?
[[ $rc -eq 0 ]] || fail "--allow-diff: exit $rc"
grep -q "warning: the configs differ in cache.block_size" "$tmp/out" || fail "--allow-diff warns"
grep -q "in ITL" "$tmp/out" || fail "--allow-diff run gives a verdict"

# ---- knob-only difference: runs without --allow-diff; table, verdicts and outputs ----
"$LLMRT" bench -c "$tmp/pageable.ini" -c "$tmp/pinned.ini" "${short[@]}" \
  --csv "$tmp/csv" --plot "$tmp/plot.png" > "$tmp/out" 2>&1; rc=$?
[[ $rc -eq 0 ]] || fail "pageable vs pinned: exit $rc"
grep -Eq "^  memory.plugin +knob +pageable +pinned" "$tmp/out" || fail "diff table: memory.plugin is a knob"
for row in "ITL p50 (ms)" "ITL p99 (ms)" "TTFT p50 (ms)" "output tok/s" "idle = wall - busy (ms)" \
           "memory path in use" "host pinned" "KV capacity (tokens)"; do
  grep -qF "  $row" "$tmp/out" || fail "report lacks the row '$row'"
done
grep -Eq "^  memory path in use +pageable +pinned" "$tmp/out" || fail "memory path per config"
for m in ITL TTFT throughput; do
  grep -Eq "^  (pinned is [0-9.]+% (faster|slower) than pageable in $m \[-?[0-9.]+%, -?[0-9.]+%\]|(no meaningful difference|inconclusive) between pinned and pageable in $m \([-+][0-9.]+% \[[-+][0-9.]+%, [-+][0-9.]+%\], (within|neither within nor beyond) ±1%\))$" \
    "$tmp/out" || fail "no verdict sentence for $m"
done

# CSV: documented header, one row per token (2 configs x 8 requests x 8 tokens), 9 fields
[[ $(head -1 "$tmp/csv/tokens.csv") == "config,concurrency,round,batch,request,token,time_s,since_submit_ms,itl_ms" ]] \
  || fail "tokens.csv header"
[[ $(($(wc -l < "$tmp/csv/tokens.csv") - 1)) -eq 128 ]] || fail "tokens.csv has $(($(wc -l < "$tmp/csv/tokens.csv") - 1)) rows, expected 128"
awk -F, 'NR > 1 && NF != 9 { exit 1 }' "$tmp/csv/tokens.csv" || fail "tokens.csv rows must have 9 fields"
[[ $(awk -F, '$1 == "pageable"' "$tmp/csv/tokens.csv" | wc -l) -eq 64 ]] || fail "64 token rows per config"
[[ $(awk -F, 'NR > 1 && $6 == 0 && $9 == ""' "$tmp/csv/tokens.csv" | wc -l) -eq 16 ]] || fail "token 0 of each request has no ITL"
awk -F, 'NR > 1 && $6 > 0 && !($9 > 0) { exit 1 }' "$tmp/csv/tokens.csv" || fail "later tokens have a positive ITL"
steps_header="config,concurrency,round,batch,step,n_seqs,n_tokens,n_prefill_tokens,n_decode_seqs,graph,async,t_start_s,host_prepare_ms,h2d_ms,compute_ms,d2h_ms,gpu_busy_ms,wall_ms,idle_ms,h2d_bytes,d2h_bytes"
[[ $(head -1 "$tmp/csv/steps.csv") == "$steps_header" ]] || fail "steps.csv header"
awk -F, 'NR > 1 && NF != 21 { exit 1 }' "$tmp/csv/steps.csv" || fail "steps.csv rows must have 21 fields"
# every request's 8 tokens need 8 steps: one prefill (8-token prompt) and 7 decode steps
[[ $(awk -F, 'NR > 1 && $8 > 0' "$tmp/csv/steps.csv" | wc -l) -eq 16 ]] || fail "one prefill step per request"
[[ $(awk -F, 'NR > 1 && $8 == 0' "$tmp/csv/steps.csv" | wc -l) -ge 112 ]] || fail "at least 7 decode steps per request"
[[ $(awk -F, '$1 == "pinned"' "$tmp/csv/steps.csv" | wc -l) -gt 0 ]] || fail "steps of the second config"

# PNG: signature, IHDR 1400 x 560
[[ $(head -c 8 "$tmp/plot.png" | od -An -tx1 | tr -d ' \n') == "89504e470d0a1a0a" ]] || fail "plot.png is not a PNG"
[[ $(head -c 24 "$tmp/plot.png" | tail -c 8 | od -An -tx1 | tr -d ' \n') == "00000578""00000230" ]] || fail "plot.png is not 1400x560"
[[ $(stat -c %s "$tmp/plot.png") -gt 20000 ]] || fail "plot.png is suspiciously small"

# ---- SVG, load mode, and too few requests for an interval ----
"$LLMRT" bench -c "$tmp/pageable.ini" -c "$tmp/pinned.ini" --input-len 8 --output-len 8 --warmup 1 \
  --rounds 1 --requests 8 --concurrency 1,2 --plot "$tmp/plot.svg" --csv "$tmp/csv2" > "$tmp/out" 2>&1; rc=$?
[[ $rc -eq 0 ]] || fail "load mode: exit $rc"
head -c 200 "$tmp/plot.svg" | grep -q '^<?xml' || fail "plot.svg has no XML declaration"
grep -q '<svg[^>]*width="1400pt" height="1000pt"' "$tmp/plot.svg" || fail "plot.svg is not a 1400x1000 SVG"
tail -c 20 "$tmp/plot.svg" | grep -q '</svg>' || fail "plot.svg is not complete"
grep -q "llmrt bench — load mode" "$tmp/out" || fail "load mode header"
for c in 1 2; do
  grep -Eq "^  \[concurrency $c\] .* in ITL[ \[]" "$tmp/out" || fail "no ITL verdict at concurrency $c"
  grep -Eq "^  \[concurrency $c\] .*no verdict" "$tmp/out" && fail "8 batches per level give verdicts"
  grep -Eq "^ +$c pinned " "$tmp/out" || fail "load table has no row for pinned at concurrency $c"
done
# 2 configs x 8 batches x (1 + 2) requests x 8 tokens
[[ $(($(wc -l < "$tmp/csv2/tokens.csv") - 1)) -eq 384 ]] || fail "load mode tokens.csv rows"
[[ $(awk -F, '$2 == 2 && $5 == 1' "$tmp/csv2/tokens.csv" | wc -l) -eq 128 ]] || fail "second request of each concurrency-2 batch"

"$LLMRT" bench -c "$tmp/pageable.ini" -c "$tmp/pinned.ini" "${short[@]}" --requests 2 > "$tmp/out" 2>&1 \
  || fail "short run exit"
grep -q "no verdict (4 requests per config is too few for an interval at 98.33%; run at least 7" "$tmp/out" || fail "4 requests must give no verdict"
"$LLMRT" bench -c "$tmp/pinned.ini" "${short[@]}" > "$tmp/out" 2>&1 || fail "single config run"
grep -q "one config: no comparison" "$tmp/out" || fail "single config says there is no comparison"
echo "ok: bench"
