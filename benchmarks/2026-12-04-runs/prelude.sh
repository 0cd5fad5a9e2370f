# prelude.sh — the 2026-12-04 session's device calls start as the 2026-12-02 ones did
# (../2026-12-02-runs/prelude.sh: the packed build in place, the library path, the helpers
# say / left / bench / tests), their JSON files dated today. trace NAME MODEL [ARGS]: one
# `generate` of 64 tokens after a 128-token prompt with every kernel traced (CUPTI), the
# per-kernel table of its last 16 steps into NAME-timeline.txt, the raw trace kept as
# NAME.csv.gz.
source "$(dirname "${BASH_SOURCE[0]}")/../2026-12-02-runs/prelude.sh"
d=2026-12-04
trace() { # name model [generate args...]
  local name=$1 model=$2; shift 2
  (( $(left) < 40 )) && { say "SKIP trace $name (time)"; return 1; }
  env LLMRT_MEMORY=pinned LLMRT_CUPTI_TRACE="$L/$name.csv" \
    LD_PRELOAD="$PWD/build-gpu/lib/libllmrt-cupti-trace.so" timeout 40 "$B" generate \
    --model "$model" --set cache.kv_tokens=16384 --prompt-ids "$(seq -s, 1 128)" \
    --max-tokens 64 --ignore-eos "$@" > "$L/$name-gen.txt" 2>&1
  python3 plugins/backend-cuda/bench/step-timeline.py "$L/$name.csv" 16 > "$OUT/$name-timeline.txt" 2>&1
  say "trace $name exit $?: $(head -1 "$OUT/$name-timeline.txt")"
  gzip -c "$L/$name.csv" > "$OUT/$name.csv.gz"
}
