# prelude.sh — the 2026-12-06 session's device calls start as the 2026-12-04 ones did
# (../2026-12-04-runs/prelude.sh: the packed build in place, the helpers say / left / bench /
# tests / trace), their JSON files dated today. ptrace NAME MODEL LEN: one `generate` of a
# LEN-token prompt and one output token with every kernel traced, the prefill step's kernels
# by kind (prefill-kinds.py) into NAME-prefill.txt.
source "$(dirname "${BASH_SOURCE[0]}")/../2026-12-04-runs/prelude.sh"
d=2026-12-06
ptrace() { # name model len [generate args...]
  local name=$1 model=$2 len=$3; shift 3
  (( $(left) < 40 )) && { say "SKIP ptrace $name (time)"; return 1; }
  env LLMRT_MEMORY=pinned LLMRT_CUPTI_TRACE="$L/$name.csv" \
    LD_PRELOAD="$PWD/build-gpu/lib/libllmrt-cupti-trace.so" timeout 40 "$B" generate \
    --model "$model" --set cache.kv_tokens=16384 --prompt-ids "$(seq -s, 1 "$len")" \
    --max-tokens 1 "$@" > "$L/$name-gen.txt" 2>&1
  python3 benchmarks/2026-12-06-runs/prefill-kinds.py "$L/$name.csv" > "$OUT/$name-prefill.txt" 2>&1
  say "ptrace $name exit $?: $(head -1 "$OUT/$name-prefill.txt")"
}
