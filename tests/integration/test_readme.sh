#!/usr/bin/env bash
# README stays true:
#  - every runtime.ini key of core's schema is documented, and the key table's defaults and
#    meanings are the schema's (`llmrt config --template`); every subcommand is mentioned;
#  - nothing points outside the repository, and every repository path it names exists;
#  - what it says about the binary, the tokenizer, mkmodel's presets and the short flags;
#  - its serve example works as written (the demo checkpoint of scripts/run.sh, then the
#    block's `llmrt serve` and `curl` lines; only the port is changed, to a free one).
set -uo pipefail
fail() { echo "FAIL: $*"; missing=1; }
cd "$LLMRT_SOURCE_DIR"
tmp=$(mktemp -d)
SERVE_PID=
trap '[[ -n "$SERVE_PID" ]] && kill -KILL $SERVE_PID 2>/dev/null; rm -rf "$tmp"' EXIT
export LLMRT_SYSTEM_CONFIG= # defaults only
unset LLMRT_PLUGIN_PATH
missing=0

# ---- keys and commands ----
while read -r key; do
  grep -q "\`$key\`" README.md || fail "README.md does not document $key"
done < <("$LLMRT" config --show | awk '/^\[/{gsub(/[][]/,"");sec=$1;next} /^[a-z_]+ =/{print sec"."$1}' | grep -v '^\(backend\|memory\|quant\|model\)\.[a-z0-9_-]*\.')
for cmd in generate chat serve bench doctor plugins config tokenize mkmodel logits; do
  grep -q "$cmd" README.md || fail "README.md does not mention llmrt $cmd"
done
# the key table against the schema: same default, same meaning
"$LLMRT" config --template > "$tmp/template.ini"
python3 - "$tmp/template.ini" README.md > "$tmp/table.out" <<'PY' || { cat "$tmp/table.out"; fail "the README's key table disagrees with the schema"; }
import re, sys
core = {"runtime", "model", "memory", "cache", "scheduler", "server"}
want, sec, help = {}, None, []
for line in open(sys.argv[1]).read().split("\n"):
    m = re.match(r"^\[(.*)\]$", line)
    if m:
        sec, help = m.group(1), []
        continue
    if sec not in core:
        continue
    if line.startswith("; allowed: "):
        continue
    if line.startswith("; "):
        help.append(line[2:])
        continue
    m = re.match(r"^([a-z_]+) = ?(.*)$", line)
    if m:
        want[sec + "." + m.group(1)] = (m.group(2), " ".join(help))
        help = []
rows = {}
for line in open(sys.argv[2]).read().split("\n"):
    m = re.match(r"^\| `([a-z_]+\.[a-z_]+)` \| [^|]+ \| `([^`]*)` \| (.*) \|$", line)
    if m:
        rows[m.group(1)] = (m.group(2), m.group(3))
bad = 0
for k, (d, h) in want.items():
    if k not in rows:
        print(f"no table row for {k}"); bad = 1
    elif rows[k] != (d, h):
        print(f"{k}: README says default `{rows[k][0]}`, meaning \"{rows[k][1]}\"\n    schema: default `{d}`, meaning \"{h}\""); bad = 1
for k in rows:
    if k not in want:
        print(f"README's table has {k}, which is no key"); bad = 1
sys.exit(bad)
PY

# ---- nothing outside the repository; every path named exists ----
! grep -n '](\.\./\|`\.\./\|\.\./shared' README.md || fail "README.md points outside the repository"
grep -o '](\([^)#]*\))' README.md | sed 's/^](//; s/)$//' | grep -v '^https\?:' | while read -r link; do
  [[ -e "$link" ]] || echo "missing link target: $link"
done > "$tmp/links"
[[ ! -s "$tmp/links" ]] || { cat "$tmp/links"; fail "README.md links to files that do not exist"; }
grep -o '`\(conf\|docs\|scripts\|tools\|tests\|packaging\|include\|core\|server\|bench\|cli\|plugins\|benchmarks\)/[^` ]*`' README.md |
  tr -d '`' | grep -v '[<*]' | sort -u | while read -r path; do
  [[ -e "$path" ]] || echo "$path"
done > "$tmp/paths"
[[ ! -s "$tmp/paths" ]] || { cat "$tmp/paths"; fail "README.md names repository paths that do not exist"; }
grep -q 'docs/design.md' README.md && [[ -f docs/design.md ]] || fail "README.md does not point to docs/design.md"

# ---- the binary, the tokenizer, mkmodel, the short flags ----
grep -q 'The binary is `build/bin/llmrt`' README.md && [[ -x "$LLMRT_BUILD_DIR/bin/llmrt" ]] || fail "where the binary is"
grep -q 'tools/fetch-qwen3-tokenizer.sh' README.md || fail "README.md does not say how to get the tokenizer"
"$LLMRT" mkmodel --list-presets > "$tmp/presets" || fail "mkmodel --list-presets"
for p in tiny qwen3-0.6b qwen3-8b; do
  grep -q "^  $p " "$tmp/presets" || fail "README.md names preset $p, mkmodel --list-presets does not"
  grep -q "\`$p\`" README.md || fail "README.md does not name preset $p"
done
"$LLMRT" mkmodel --preset tiny --quant awq -q -o "$tmp/awq" > "$tmp/mk.log" 2>&1 || { cat "$tmp/mk.log"; fail "README: --preset tiny --quant awq works"; }
grep -q '"group_size": 64' "$tmp/awq/config.json" || fail "README: --preset tiny --quant awq makes groups of 64"
for f in --max-model-len --gpu-memory-utilization --max-num-seqs --max-num-batched-tokens --port --host --api-key --served-model-name; do
  grep -q -- "\`$f" README.md || fail "README.md does not name $f"
  "$LLMRT" serve --help | grep -q -- "$f" || fail "README.md names $f, llmrt serve --help does not"
done

# ---- the serve example, as written ----
if bash tools/fetch-qwen3-tokenizer.sh > /dev/null 2> "$tmp/fetch.err"; then
  awk '/^```sh$/ { blk = ""; on = 1; next } /^```$/ { if (on && blk ~ /llmrt serve models\/tiny-qwen3/) printf "%s", blk; on = 0; next } on { blk = blk $0 "\n" }' README.md > "$tmp/example.sh"
  grep -q '^scripts/run.sh' "$tmp/example.sh" && grep -q '^build/bin/llmrt serve ' "$tmp/example.sh" && grep -q '^curl ' "$tmp/example.sh" ||
    { cat "$tmp/example.sh"; fail "the serve example block (run.sh, llmrt serve, curl) is not there"; }
  mkdir -p "$tmp/models"
  LLMRT_RUN_NO_BUILD=1 LLMRT_RUN_MODEL="$tmp/models/tiny-qwen3" bash scripts/run.sh > /dev/null 2> "$tmp/run.err" ||
    { tail -5 "$tmp/run.err"; fail "scripts/run.sh (the example's first line)"; }
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  serve=$(grep '^build/bin/llmrt serve ' "$tmp/example.sh" | sed "s|^build/bin/llmrt|\"$LLMRT\"|; s|8000|$port|g")
  client=$(sed -n '/^curl /,/[^\\]$/p' "$tmp/example.sh" | sed "s|8000|$port|g")
  # exec: SERVE_PID is the server itself, not a subshell that a TERM would leave it behind
  (cd "$tmp" && eval "exec $serve") > "$tmp/serve.out" 2> "$tmp/serve.err" &
  SERVE_PID=$!
  for ((i = 0; i < 300; i++)); do
    [[ $(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/health") == 200 ]] && break
    sleep 0.1
  done
  (cd "$tmp" && eval "$client") > "$tmp/reply.txt" 2>&1 || { cat "$tmp/reply.txt"; fail "the example's curl"; }
  grep -q '^data: {.*"chat.completion.chunk"' "$tmp/reply.txt" && tail -2 "$tmp/reply.txt" | grep -q '^data: \[DONE\]' ||
    { head -c 800 "$tmp/reply.txt"; tail -5 "$tmp/serve.err"; fail "the README's serve example does not work as written"; }
  kill -TERM $SERVE_PID; wait $SERVE_PID || fail "the server did not exit 0 on SIGTERM"; SERVE_PID=
else
  echo "note: the Qwen3 tokenizer could not be fetched; the serve example was not run"
fi
exit $missing
