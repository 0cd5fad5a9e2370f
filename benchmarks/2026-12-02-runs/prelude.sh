# prelude.sh — what every device call of the second 2026-12-02 session (re.sh .. rj.sh) starts
# with, sourced by them (factored out after they ran; same commands): the packed build put
# where its ctest files expect it (as scripts/gpu-check.sh does), the library path, the commit
# bench reports name, a deadline, and helpers. Set DEADLINE before sourcing to change 560 s.
#   say MSG            a timestamped line into summary.txt (and the results tarball)
#   left               seconds before the deadline
#   bench NAME TO ...  `llmrt bench ... --json $OUT/<date>-NAME.json` unless fewer than TO
#                      seconds are left; prints its table rows and verdicts
#   tests REGEX TO     the ctest tests matching REGEX (4 at a time, TO seconds), then the
#                      summary line and the failures (third session on; K and L wrote it out)
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"; L=$(mktemp -d); t0=$(date +%s)
DEADLINE=${DEADLINE:-560}
left() { echo $(( DEADLINE - ($(date +%s) - t0) )); }
say() { echo "[$(( $(date +%s) - t0 ))s] $*" | tee -a "$L/summary.txt"; tar -C "$L" -czf "$OUT/logs.tgz" . 2>/dev/null; }
[[ -f .device/build-gpu.tgz && ! -d .device/build-gpu ]] && tar -C .device -xzf .device/build-gpu.tgz
if [[ -d .device/build-gpu ]]; then
  [[ -e build-gpu ]] || ln -s .device/build-gpu build-gpu
  src=$(cat build-gpu/SOURCE_DIR)
  [[ "$src" != "$PWD" && ! -e "$src" ]] && { mkdir -p "$(dirname "$src")"; ln -s "$PWD" "$src"; }
fi
export LD_LIBRARY_PATH=$PWD/build-gpu/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export LLMRT_BENCH_COMMIT=$(cat .device/COMMIT)
B=$PWD/build-gpu/bin/llmrt
d=2026-12-02
bench() { # name timeout args...
  local name=$1 to=$2; shift 2
  (( $(left) < to )) && { say "SKIP $name (time)"; return 1; }
  timeout "$to" "$B" bench "$@" --json "$OUT/$d-$name.json" > "$L/$name.txt" 2>&1
  local rc=$?
  say "$name exit $rc:"
  grep -E '^ +[0-9]+ \S+ +[0-9.]+ |TTFT p50|ITL p50|faster|slower|difference' "$L/$name.txt" | tr -s ' ' | cut -c1-160 | tee -a "$L/summary.txt"
  return $rc
}
tests() { # regex timeout
  timeout "$2" ctest --test-dir build-gpu -R "$1" -j4 --timeout $(( $2 - 10 )) --output-on-failure > "$L/ctest.log" 2>&1
  say "ctest: $(grep -E 'tests passed|tests failed' "$L/ctest.log" | tail -1)"
  grep -E '\*\*\*(Failed|Exception|Timeout)|:F:|:E:' "$L/ctest.log" | head -20 | cut -c1-300 | tee -a "$L/summary.txt"
}
