#!/usr/bin/env bash
# serve-bench.sh — the server figures of BENCHMARKS.md in one command: for each runtime.ini
# given (default: the built-in configuration), start `llmrt serve` on MODEL on a free
# loopback port, run the load generator at each concurrency (streaming completions,
# ignore_eos so every request yields exactly MAX_TOKENS), stop the server with SIGTERM
# (it must exit 0), and print requests/s and output tokens/s per level.
#
# usage: tools/serve-bench.sh LLMRT MODEL_DIR [CONF.ini ...]
# environment:
#   CONCURRENCY=1,8,32   levels          MAX_TOKENS=64    output tokens per request
#   REQUESTS=0           per level (0: 4 x concurrency, at least 8)
#   PROMPT_WORDS=0       a prompt of N words instead of the default sentence
#   SHARED_PREFIX=0      a system prompt of about N tokens shared by every client (then a
#                        per-request number): with cache.prefix_caching on, only the rest is
#                        prefilled; the "cached" column is the prefix-cache hit rate
#   TOKENIZER=DIR        a folder with tokenizer.json + tokenizer_config.json, used when
#                        MODEL_DIR has none (e.g. an 8B-shaped `llmrt mkmodel` checkpoint):
#                        the model is then served from a folder of symlinks, MODEL_DIR is
#                        left untouched
#   SETS="k=v k=v"       extra --set overrides for every run (server.max_connections_per_ip
#                        is 0 and server.max_connections 8192 unless set here: all clients
#                        come from one address)
#   OUT=DIR              where the JSON results and server logs go (default: a temp folder)
# The load generator is tools/serve-load.mjs under node, else tools/serve-load.py (the GPU
# machine has python3 but no node). Exit 1 when any run fails.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[[ $# -ge 2 ]] || { sed -n '2,/^set /p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
llmrt=$1 model=$2
shift 2
confs=("$@")
[[ ${#confs[@]} -eq 0 ]] && confs=("")
[[ -x $llmrt ]] || { echo "serve-bench: $llmrt is not an executable" >&2; exit 2; }
[[ -f $model/config.json ]] || { echo "serve-bench: $model has no config.json" >&2; exit 2; }
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
work=$(mktemp -d)
pid=
trap '[[ -n "$pid" ]] && kill -KILL $pid 2>/dev/null; rm -rf "$work"' EXIT

if [[ ! -f $model/tokenizer.json ]]; then
  [[ -n "${TOKENIZER:-}" && -f $TOKENIZER/tokenizer.json ]] ||
    { echo "serve-bench: $model has no tokenizer.json; set TOKENIZER=DIR to one that has" >&2; exit 2; }
  mkdir "$work/model"
  for f in "$model"/*; do ln -s "$(cd "$(dirname "$f")" && pwd)/$(basename "$f")" "$work/model/"; done
  for f in tokenizer.json tokenizer_config.json; do
    [[ -f $TOKENIZER/$f ]] && ln -sf "$(cd "$TOKENIZER" && pwd)/$f" "$work/model/$f"
  done
  model=$work/model
fi

if command -v node > /dev/null; then
  load=(node "$here/serve-load.mjs")
else
  load=(python3 "$here/serve-load.py")
fi
# the HTTP status of GET URL (curl, or python3 where curl is missing); 000 when unreachable
http_code() {
  if command -v curl > /dev/null; then
    curl -s -o /dev/null -w '%{http_code}' "$1"
  else
    python3 -c 'import sys, urllib.request, urllib.error
try: print(urllib.request.urlopen(sys.argv[1], timeout=5).status)
except urllib.error.HTTPError as e: print(e.code)
except Exception: print("000")' "$1"
  fi
}
# every client of the load generator has one address (loopback): the server's per-address
# cap (server.max_connections_per_ip, a defence against one hostile client) would close the
# connections beyond it, and server.max_connections keeps an eighth of its slots for new
# clients by closing the oldest still-sending ones — both are lifted here; SETS may put them back
sets=(--set server.max_connections_per_ip=0 --set server.max_connections=8192)
for s in ${SETS:-}; do sets+=(--set "$s"); done
load_args=(--concurrency "${CONCURRENCY:-1,8,32}" --max-tokens "${MAX_TOKENS:-64}")
[[ ${REQUESTS:-0} -gt 0 ]] && load_args+=(--requests "$REQUESTS")
[[ ${PROMPT_WORDS:-0} -gt 0 ]] && load_args+=(--prompt-words "$PROMPT_WORDS")
[[ ${SHARED_PREFIX:-0} -gt 0 ]] && load_args+=(--shared-prefix "$SHARED_PREFIX")

status=0
for conf in "${confs[@]}"; do
  name=$(basename "${conf:-default}" .ini)
  args=(serve --model "$model" --port 0 "${sets[@]}")
  [[ -n $conf ]] && args=(serve -c "$conf" --model "$model" --port 0 "${sets[@]}")
  "$llmrt" "${args[@]}" > "$OUT/serve-$name.out" 2> "$OUT/serve-$name.log" &
  pid=$!
  url=
  for ((i = 0; i < 6000; i++)); do # model loading can take minutes for big checkpoints
    url=$(sed -n 's/^listening on //p' "$OUT/serve-$name.out")
    [[ -n $url && $(http_code "$url/health") == 200 ]] && break
    kill -0 $pid 2>/dev/null || break
    sleep 0.1
  done
  if [[ -z $url || $(http_code "$url/health") != 200 ]]; then
    echo "== $name: the server did not become ready"; tail -5 "$OUT/serve-$name.log"
    status=1; kill -KILL $pid 2>/dev/null; wait $pid 2>/dev/null; pid=; continue
  fi
  echo "== $name ($(grep -o 'backend [a-z]*, memory path [^)]*' "$OUT/serve-$name.log" | head -1))"
  "${load[@]}" --url "$url" "${load_args[@]}" --json "$OUT/serve-load-$name.json" || status=1
  kill -TERM $pid
  wait $pid; rc=$?
  pid=
  [[ $rc -eq 0 ]] || { echo "== $name: llmrt serve exited $rc after SIGTERM"; status=1; }
done
echo "results and server logs: $OUT"
exit $status
