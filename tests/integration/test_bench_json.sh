#!/usr/bin/env bash
# llmrt bench --json follows docs/bench.schema.json (validated with ajv in strict mode, in
# latency and load mode), and its content agrees with the run: one token time per generated
# token, the verdict sentences the terminal printed, the configs' memory paths. A document
# with a missing field must fail validation, so the check cannot pass vacuously.
# ajv comes from npm, installed once into a cache folder outside the repository; the test
# skips (77) only when npm cannot fetch it.
set -uo pipefail
# These tests are about the CPU backend (CI's); on a GPU machine `auto` would pick CUDA.
export LLMRT_RUNTIME_BACKEND=cpu
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; [[ -f "$tmp/out" ]] && tail -30 "$tmp/out"; exit 1; }

cache=${XDG_CACHE_HOME:-$HOME/.cache}/llmrt-test/ajv
if [[ ! -f "$cache/node_modules/ajv/package.json" ]]; then
  command -v npm > /dev/null || { echo "SKIP: npm is not installed, cannot fetch ajv"; exit 77; }
  mkdir -p "$cache"
  npm install --prefix "$cache" --no-audit --no-fund --silent ajv@8 > "$tmp/npm.log" 2>&1 || {
    cat "$tmp/npm.log"; echo "SKIP: npm could not fetch ajv (offline?)"; exit 77; }
fi
validate() { AJV_PREFIX="$cache" node "$LLMRT_SOURCE_DIR/tools/validate-json-schema.mjs" \
  "$LLMRT_SOURCE_DIR/docs/bench.schema.json" "$1"; }

"$LLMRT" mkmodel --preset tiny -o "$tmp/tiny" -q || fail "llmrt mkmodel --preset tiny"
for m in pageable uva; do
  printf '[model]\npath = tiny\n[memory]\nplugin = %s\n[cache]\nkv_tokens = 2048\n' "$m" > "$tmp/$m.ini"
done

# an API key (a secret: never in the report, the CSV or the log) and a developer key
"$LLMRT" bench -c "$tmp/pageable.ini" -c "$tmp/uva.ini" --input-len 8 --output-len 6 --warmup 1 \
  --rounds 2 --requests 4 --json "$tmp/lat.json" --csv "$tmp/csv" --set server.api_key=sekrit-4711 \
  --set backend.cpu.simd=baseline --set runtime.log_level=debug > "$tmp/out" 2>&1 || fail "latency run"
! grep -rq "sekrit" "$tmp/lat.json" "$tmp/csv" "$tmp/out" || fail "the API key is printed"
validate "$tmp/lat.json" > "$tmp/v.out" 2>&1 || { cat "$tmp/v.out"; fail "latency JSON does not follow the schema"; }

"$LLMRT" bench -c "$tmp/pageable.ini" -c "$tmp/uva.ini" --input-len 8 --output-len 6 --warmup 1 \
  --rounds 1 --requests 5 --concurrency 1,3 --order random --seed 7 --json "$tmp/load.json" \
  > "$tmp/load.out" 2>&1 || { cp "$tmp/load.out" "$tmp/out"; fail "load run"; }
validate "$tmp/load.json" > "$tmp/v.out" 2>&1 || { cat "$tmp/v.out"; fail "load JSON does not follow the schema"; }

# content: counts, sentences, memory paths (node is there: ajv needs it)
node - "$tmp/lat.json" "$tmp/out" "$tmp/load.json" <<'EOF' || fail "JSON content does not match the run"
const fs = require('fs');
const [latPath, outPath, loadPath] = process.argv.slice(2);
const lat = JSON.parse(fs.readFileSync(latPath, 'utf8'));
const out = fs.readFileSync(outPath, 'utf8');
const load = JSON.parse(fs.readFileSync(loadPath, 'utf8'));
function check(cond, msg) { if (!cond) { console.error('mismatch: ' + msg); process.exit(1); } }
check(lat.settings.mode === 'latency' && lat.settings.output_len === 6, 'settings');
check(lat.configs.map(c => c.name).join() === 'pageable,uva', 'config names');
check(lat.configs[1].memory_path === 'uva' && lat.configs[0].memory_path === 'pageable', 'memory paths');
check(lat.settings_diff.length === 1 && lat.settings_diff[0].key === 'memory.plugin' &&
      lat.settings_diff[0].class === 'knob', 'settings_diff');
check(lat.samples.requests.length === 16, '2 configs x 8 requests');
check(lat.samples.requests.every(r => r.token_s.length === 6 && r.finish === 'length'), '6 tokens each');
check(lat.samples.requests.every(r => r.token_s.every((t, i) => i === 0 ? t >= r.submit_s : t >= r.token_s[i - 1])),
      'token times increase');
const cell = lat.levels[0].configs[0];
check(cell.itl_ms.n === 8 * 5 && cell.ttft_ms.n === 8 && cell.tokens === 48, 'cell counts');
check(lat.levels[0].verdicts.length === 3, 'one verdict per metric');
const iv = lat.settings.interval;
check(iv.method === 'wilcoxon-signed-rank' && iv.family_size === 3 && iv.correction === 'bonferroni' &&
      Math.abs(iv.interval_level - (1 - 0.05 / 3)) < 1e-9 && iv.min_pairs === 7 && iv.unit === 'request' &&
      lat.settings.margin === 0.01, 'settings.interval and margin');
for (const v of lat.levels[0].verdicts) {
  check(out.includes('  ' + v.sentence + '\n'), 'terminal prints the sentence: ' + v.sentence);
  check(v.ok && v.ci_low <= v.rel_change && v.rel_change <= v.ci_high, 'interval holds the estimate');
  check(v.pairs === 8 && v.coverage >= iv.interval_level && v.margin === 0.01, 'pairs, coverage, margin');
  const want = v.ci_low > v.margin || v.ci_high < -v.margin ? 'difference'
             : v.ci_low >= -v.margin && v.ci_high <= v.margin ? 'no_meaningful_difference' : 'inconclusive';
  check(v.outcome === want, 'outcome ' + v.outcome + ' follows the interval and margin (' + want + ')');
}
check(lat.samples.steps.length >= 16 * 6, 'a step per token at least');
check(lat.configs.every(c => c.memory.device_engine_bytes === null || c.memory.device_engine_bytes > 0),
      'device_engine_bytes');
// recorded keys: what is not at its default, with its origin; every developer key
const [pg, uv] = lat.configs;
check(pg.settings['server.api_key'] === '(set)' && pg.non_default['server.api_key'].value === '(set)',
      'the api key as (set)');
check(uv.non_default['memory.plugin'].value === 'uva' && /uva\.ini:4$/.test(uv.non_default['memory.plugin'].origin),
      'memory.plugin with its file:line');
check(pg.non_default['runtime.backend'].origin === 'env LLMRT_RUNTIME_BACKEND', 'an env origin');
check(pg.non_default['backend.cpu.simd'].origin === '--set', 'a --set origin');
check(!('cache.block_size' in pg.non_default) && !('model.qwen3.fuse' in pg.non_default), 'defaults are not listed');
check(pg.developer_keys['backend.cpu.simd'].value === 'baseline', 'a developer key set');
check(pg.settings['model.qwen3.greedy_head'] === 'auto', 'a plugin key at its default is a setting');
for (const c of lat.configs)
  for (const [k, v] of Object.entries(c.developer_keys))
    check(k in c.settings && c.settings[k] === v.value, 'developer key ' + k + ' agrees with settings');
check(load.settings.mode === 'load' && load.levels.map(l => l.concurrency).join() === '1,3', 'levels');
check(load.configs[0].developer_keys['backend.cpu.simd'].value === 'auto' &&
      load.configs[0].developer_keys['backend.cpu.simd'].origin === 'default', 'a developer key at its default');
check(load.samples.requests.length === 2 * 5 * (1 + 3), 'load requests');
check(load.levels[1].configs[1].requests === 15 && load.levels[1].configs[1].batches === 5, 'load cell counts');
EOF

# a developer key is an A/B knob: configs that differ in it run without --allow-diff
{ cat "$tmp/pageable.ini"; printf '[backend.cpu]\nsimd = baseline\n'; } > "$tmp/simd.ini"
"$LLMRT" bench -c "$tmp/pageable.ini" -c "$tmp/simd.ini" --input-len 4 --output-len 3 --warmup 0 \
  --rounds 1 --requests 2 --json "$tmp/simd.json" > "$tmp/simd.out" 2>&1 || { cp "$tmp/simd.out" "$tmp/out"; fail "developer key A/B"; }
node -e 'const d=JSON.parse(require("fs").readFileSync(process.argv[1]));
  const r=d.settings_diff.find(x => x.key === "backend.cpu.simd");
  if (!r || r.class !== "knob" || r.values.join() !== "auto,baseline" ||
      d.configs[1].developer_keys["backend.cpu.simd"].origin.indexOf("simd.ini:") < 0) process.exit(1);' \
  "$tmp/simd.json" || fail "backend.cpu.simd is not recorded as a knob with its origin"
# prefix caching off / on (an A/B knob) with a shared prompt prefix: 32 of 40 prompt tokens
# are the same in every request, so after the warm-up each measured request finds 2 blocks
# of 16 cached with caching on; the JSON records it per request, per cell and per config
for pc in off on; do
  printf '[model]\npath = tiny\n[cache]\nkv_tokens = 2048\nprefix_caching = %s\n' "$pc" > "$tmp/pc-$pc.ini"
done
"$LLMRT" bench -c "$tmp/pc-off.ini" -c "$tmp/pc-on.ini" --input-len 40 --prefix-len 32 --output-len 4 \
  --warmup 1 --rounds 1 --requests 5 --json "$tmp/pc.json" > "$tmp/pc.out" 2>&1 || { cp "$tmp/pc.out" "$tmp/out"; fail "prefix run"; }
validate "$tmp/pc.json" > "$tmp/v.out" 2>&1 || { cat "$tmp/v.out"; fail "prefix-caching JSON does not follow the schema"; }
grep -Eq "^  prefix cache hit rate +off +80.0%" "$tmp/pc.out" || { cp "$tmp/pc.out" "$tmp/out"; fail "terminal hit rate row"; }
node - "$tmp/pc.json" <<'EOF2' || fail "prefix-caching JSON content"
const d = JSON.parse(require('fs').readFileSync(process.argv[2], 'utf8'));
function check(cond, msg) { if (!cond) { console.error('mismatch: ' + msg); process.exit(1); } }
check(d.settings.prefix_len === 32 && d.settings.input_len === 40, 'settings.prefix_len');
check(d.settings_diff.some(r => r.key === 'cache.prefix_caching' && r.class === 'knob'), 'cache.prefix_caching is a knob');
check(d.configs[0].prefix_caching === false && d.configs[1].prefix_caching === true, 'configs[].prefix_caching');
const [off, on] = d.levels[0].configs;
check(off.prefix_hit_rate === null && off.cached_tokens === 0, 'off: no hits');
check(on.cached_tokens === 5 * 32 && on.prompt_tokens === 5 * 40 && on.prefix_hit_rate === 0.8, 'on: 32 of 40 per request');
const reqs = d.samples.requests;
check(reqs.filter(r => r.config === 'pc-on').every(r => r.cached_tokens === 32), 'requests: 32 cached each');
check(reqs.filter(r => r.config === 'pc-off').every(r => r.cached_tokens === 0), 'requests off: 0 cached');
const pc = d.configs[1].prefix_cache;
check(pc.queries === 6 * 40 && pc.hits === 5 * 32 && Math.abs(pc.hit_rate - 160 / 240) < 1e-9, 'config counters (warm-up included)');
check(d.configs[0].prefix_cache.queries === 0 && d.configs[0].prefix_cache.hit_rate === null, 'off counters');
EOF2
"$LLMRT" bench -c "$tmp/pc-on.ini" --input-len 8 --prefix-len 8 > "$tmp/pc.out" 2>&1; rc=$?
[[ $rc -eq 2 ]] && grep -q -- "--prefix-len 8: must be shorter than --input-len 8" "$tmp/pc.out" || { cat "$tmp/pc.out"; fail "--prefix-len >= --input-len: exit $rc"; }

# a document missing a required field must be rejected
node -e 'const fs=require("fs");const d=JSON.parse(fs.readFileSync(process.argv[1]));delete d.levels[0].configs[0].itl_ms.p99;fs.writeFileSync(process.argv[2],JSON.stringify(d))' \
  "$tmp/lat.json" "$tmp/broken.json"
validate "$tmp/broken.json" > "$tmp/v.out" 2>&1 && fail "a JSON without itl_ms.p99 passed validation"
grep -q "must have required property 'p99'" "$tmp/v.out" || { cat "$tmp/v.out"; fail "validator message"; }

# --json - writes the document to stdout and the table to stderr; LLMRT_BENCH_COMMIT names
# the commit (a tree copy whose git metadata is not the build's)
LLMRT_BENCH_COMMIT=feedbee "$LLMRT" bench -c "$tmp/pageable.ini" --input-len 4 --output-len 3 \
  --warmup 0 --rounds 1 --requests 2 \
  --json - > "$tmp/stdout.json" 2> "$tmp/stderr.txt" || fail "--json -"
grep -q '"commit": *"feedbee"' "$tmp/stdout.json" || fail "LLMRT_BENCH_COMMIT is not the report's commit"
validate "$tmp/stdout.json" > "$tmp/v.out" 2>&1 || { cat "$tmp/v.out"; fail "--json - output"; }
grep -q "llmrt bench — latency mode" "$tmp/stderr.txt" || fail "--json -: table goes to stderr"
echo "ok: bench json"
