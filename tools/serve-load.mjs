#!/usr/bin/env node
// serve-load.mjs — load generator for `llmrt serve` (or any OpenAI-compatible server):
// N concurrent clients, each sending streaming requests back to back; reports requests/s,
// output tokens/s, TTFT, inter-token latency and end-to-end latency per concurrency level.
// The figures in BENCHMARKS.md for the server come from this tool.
//
// usage: node tools/serve-load.mjs --url http://127.0.0.1:8000 [options]
//   --concurrency 1,8,32   levels to run, one after the other (default 1,8,32)
//   --requests N           requests per level (default 4 x concurrency, at least 8)
//   --max-tokens N         output tokens per request (ignore_eos, so exactly N; default 64)
//   --prompt TEXT          prompt (default a short sentence); --prompt-words N repeats a word
//   --shared-prefix N      a system prompt of about N tokens (N words) shared by every request,
//                          then a per-request number and the prompt, so only the shared part
//                          can come from a prefix cache (chat: the system message)
//   --chat                 use /v1/chat/completions instead of /v1/completions
//   --no-stream            whole responses (then TTFT/ITL are not measured)
//   --model NAME --api-key KEY
//   --json FILE            also write the results as JSON
// Output tokens are counted from the server's usage (stream_options.include_usage), so a
// server that miscounts shows up as a mismatch warning, not a wrong figure; the prefix-cache
// hit rate is the usage's prompt_tokens_details.cached_tokens over prompt_tokens.
import { writeFileSync } from 'node:fs';

function parseArgs(argv) {
  const o = { url: 'http://127.0.0.1:8000', levels: [1, 8, 32], requests: 0, maxTokens: 64,
              prompt: 'The quick brown fox jumps over the lazy dog. Tell me a story about it.',
              chat: false, stream: true, model: undefined, apiKey: undefined, json: undefined,
              sharedPrefix: 0 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i], v = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    const int = (s) => {
      const n = Number(s);
      if (!Number.isInteger(n) || n < 1) usage(`${a} wants a positive integer, got '${s}'`);
      return n;
    };
    switch (a) {
      case '--url': o.url = v().replace(/\/+$/, ''); break;
      case '--concurrency': o.levels = v().split(',').map(int); break;
      case '--requests': o.requests = int(v()); break;
      case '--max-tokens': o.maxTokens = int(v()); break;
      case '--prompt': o.prompt = v(); break;
      case '--prompt-words': o.prompt = 'word '.repeat(int(v())).trim(); break;
      case '--shared-prefix': o.sharedPrefix = int(v()); break;
      case '--chat': o.chat = true; break;
      case '--no-stream': o.stream = false; break;
      case '--model': o.model = v(); break;
      case '--api-key': o.apiKey = v(); break;
      case '--json': o.json = v(); break;
      case '--help': case '-h': usage(); break;
      default: usage(`unknown option ${a}`);
    }
  }
  return o;
}

function usage(msg) {
  if (msg) process.stderr.write(`serve-load: ${msg}\n`);
  process.stderr.write('usage: node tools/serve-load.mjs --url URL [--concurrency 1,8,32] [--requests N] ' +
                       '[--max-tokens N] [--prompt TEXT | --prompt-words N] [--shared-prefix N] ' +
                       '[--chat] [--no-stream] ' +
                       '[--model NAME] [--api-key KEY] [--json FILE]\n');
  process.exit(msg ? 2 : 0);
}

const now = () => performance.now() / 1000;

// The shared system prompt: N common words (most are one token each with their space).
const WORDS = ('the of and to in is you that it he was for on are as with his they at be this ' +
               'have from or one had by word but not what all were we when your can said there ' +
               'use an each which she do how their if will up other about out many then them').split(' ');
const sharedText = (n) => Array.from({ length: n }, (_, i) => WORDS[i % WORDS.length]).join(' ');
let requestNo = 0;

// One request; returns {ok, e2e, ttft, itls[], outTokens, promptTokens, cachedTokens, error}.
async function one(o) {
  let messages = [{ role: 'user', content: o.prompt }], prompt = o.prompt;
  if (o.sharedPrefix) { // the shared part first; a number makes the rest of each request its own
    const k = requestNo++, sys = sharedText(o.sharedPrefix);
    messages = [{ role: 'system', content: sys }, { role: 'user', content: `Request ${k}: ${o.prompt}` }];
    prompt = `${sys}\n\nRequest ${k}: ${o.prompt}`;
  }
  const body = {
    max_tokens: o.maxTokens, ignore_eos: true, temperature: 0, stream: o.stream,
    ...(o.stream ? { stream_options: { include_usage: true } } : {}),
    ...(o.model ? { model: o.model } : {}),
    ...(o.chat ? { messages } : { prompt }),
  };
  const headers = { 'Content-Type': 'application/json' };
  if (o.apiKey) headers.Authorization = `Bearer ${o.apiKey}`;
  const t0 = now();
  let res;
  try {
    res = await fetch(`${o.url}/v1/${o.chat ? 'chat/completions' : 'completions'}`,
                      { method: 'POST', headers, body: JSON.stringify(body) });
  } catch (e) {
    return { ok: false, error: String(e.cause || e) };
  }
  if (!res.ok) return { ok: false, error: `HTTP ${res.status}: ${(await res.text()).slice(0, 200)}` };
  if (!o.stream) {
    const j = await res.json();
    return { ok: true, e2e: now() - t0, itls: [], outTokens: j.usage.completion_tokens,
             promptTokens: j.usage.prompt_tokens, cachedTokens: cachedOf(j.usage) };
  }
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = '', ttft = null, last = null, usage = null, done = false;
  const itls = [];
  while (!done) {
    const { value, done: end } = await reader.read();
    if (end) break;
    buf += dec.decode(value, { stream: true });
    let k;
    while ((k = buf.indexOf('\n\n')) >= 0) {
      const ev = buf.slice(0, k);
      buf = buf.slice(k + 2);
      if (!ev.startsWith('data: ')) continue;
      const d = ev.slice(6);
      if (d === '[DONE]') { done = true; break; }
      const j = JSON.parse(d);
      if (j.error) return { ok: false, error: j.error.message };
      if (j.usage) usage = j.usage;
      const c = j.choices && j.choices[0];
      const text = c ? (o.chat ? c.delta && c.delta.content : c.text) : '';
      if (text) {
        const t = now();
        if (ttft === null) ttft = t - t0;
        else itls.push(t - last);
        last = t;
      }
    }
  }
  if (!usage) return { ok: false, error: 'no usage chunk in the stream' };
  return { ok: true, e2e: now() - t0, ttft, itls, outTokens: usage.completion_tokens,
           promptTokens: usage.prompt_tokens, cachedTokens: cachedOf(usage) };
}

// usage.prompt_tokens_details.cached_tokens (OpenAI's field), 0 when the server has none
function cachedOf(u) {
  return (u.prompt_tokens_details && u.prompt_tokens_details.cached_tokens) || 0;
}

const pct = (xs, p) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(p / 100 * s.length))];
};
const mean = (xs) => xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : NaN;

async function level(o, conc) {
  const total = o.requests || Math.max(8, 4 * conc);
  let next = 0;
  const results = [];
  const t0 = now();
  await Promise.all(Array.from({ length: conc }, async () => {
    while (next < total) {
      next++;
      results.push(await one(o));
    }
  }));
  const wall = now() - t0;
  const ok = results.filter(r => r.ok);
  const errors = results.filter(r => !r.ok).map(r => r.error);
  const out = ok.reduce((a, r) => a + r.outTokens, 0);
  const short = ok.filter(r => r.outTokens !== o.maxTokens).length;
  const promptSum = ok.reduce((a, r) => a + r.promptTokens, 0);
  const cachedSum = ok.reduce((a, r) => a + r.cachedTokens, 0);
  return {
    concurrency: conc, requests: results.length, ok: ok.length, errors: errors.length,
    first_error: errors[0], wall_s: wall, requests_per_s: ok.length / wall,
    output_tokens: out, output_tokens_per_s: out / wall,
    prompt_tokens: ok.length ? ok[0].promptTokens : 0, max_tokens: o.maxTokens,
    cached_tokens: cachedSum, prefix_hit_rate: promptSum ? cachedSum / promptSum : null,
    usage_mismatches: short,
    ttft_ms: { mean: 1e3 * mean(ok.map(r => r.ttft).filter(x => x !== null && x !== undefined)),
               p50: 1e3 * pct(ok.map(r => r.ttft).filter(x => x != null), 50),
               p99: 1e3 * pct(ok.map(r => r.ttft).filter(x => x != null), 99) },
    itl_ms: { mean: 1e3 * mean(ok.flatMap(r => r.itls)), p50: 1e3 * pct(ok.flatMap(r => r.itls), 50),
              p99: 1e3 * pct(ok.flatMap(r => r.itls), 99) },
    e2e_s: { mean: mean(ok.map(r => r.e2e)), p50: pct(ok.map(r => r.e2e), 50), p99: pct(ok.map(r => r.e2e), 99) },
  };
}

const o = parseArgs(process.argv.slice(2));
const f = (x, d = 1) => Number.isFinite(x) ? x.toFixed(d) : '-';
const warm = await one({ ...o, maxTokens: 2 });
if (!warm.ok) {
  process.stderr.write(`serve-load: the server at ${o.url} did not answer a warm-up request: ${warm.error}\n`);
  process.exit(1);
}
console.log(`serve-load: ${o.url} ${o.chat ? 'chat' : 'completions'}, ${o.stream ? 'streaming' : 'whole'}, ` +
            `prompt ${warm.promptTokens} tokens${o.sharedPrefix ? ` (a ${o.sharedPrefix}-word prefix shared by all)` : ''}, ` +
            `${o.maxTokens} output tokens per request`);
console.log('conc  requests  req/s   out tok/s  TTFT p50/p99 ms   ITL p50/p99 ms   e2e p50 s  cached  errors');
const all = [];
for (const conc of o.levels) {
  const r = await level(o, conc);
  all.push(r);
  console.log(`${String(conc).padStart(4)}  ${String(r.requests).padStart(8)}  ${f(r.requests_per_s, 2).padStart(6)}  ` +
              `${f(r.output_tokens_per_s).padStart(9)}  ${(f(r.ttft_ms.p50) + '/' + f(r.ttft_ms.p99)).padStart(15)}  ` +
              `${(f(r.itl_ms.p50, 2) + '/' + f(r.itl_ms.p99, 2)).padStart(15)}  ${f(r.e2e_s.p50, 2).padStart(9)}  ` +
              `${(r.prefix_hit_rate === null ? '-' : f(100 * r.prefix_hit_rate) + '%').padStart(6)}  ` +
              `${r.errors}${r.first_error ? ' (' + r.first_error + ')' : ''}`);
  if (r.usage_mismatches)
    console.log(`      warning: ${r.usage_mismatches} responses reported completion_tokens != ${o.maxTokens}`);
}
if (o.json) writeFileSync(o.json, JSON.stringify({ url: o.url, chat: o.chat, stream: o.stream,
                                                   shared_prefix_words: o.sharedPrefix, results: all }, null, 2));
process.exit(all.some(r => r.errors) ? 1 : 0);
