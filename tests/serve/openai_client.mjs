// openai_client.mjs — drive `llmrt serve` with the official `openai` npm package, a client
// no one here wrote: if its parser accepts our responses, streams and errors, real users'
// code will too.
//
// usage: OPENAI_PREFIX=DIR node openai_client.mjs BASE_URL API_KEY MODEL
//   DIR is an `npm install --prefix DIR openai` folder (the test installs it into a cache
//   outside the repository). Exit 0 when every check passes; 1 with the failed check.
import { createRequire } from 'node:module';
import path from 'node:path';
import assert from 'node:assert/strict';

const [baseURL, apiKey, model] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(process.env.OPENAI_PREFIX || '.'), 'noop.js'));
const { default: OpenAI } = await import(require.resolve('openai'));

const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0, timeout: 120_000 });
let n = 0;
async function step(what, fn) {
  try {
    await fn();
    n++;
  } catch (e) {
    console.error(`FAIL: ${what}: ${e.stack || e}`);
    process.exit(1);
  }
}

await step('models.list', async () => {
  const page = await client.models.list();
  assert.equal(page.data.length, 1);
  assert.equal(page.data[0].id, model);
  const one = await client.models.retrieve(model);
  assert.equal(one.id, model);
});

let text;
await step('completions.create', async () => {
  const r = await client.completions.create({ model, prompt: 'The capital of France is', max_tokens: 6, temperature: 0 });
  assert.equal(r.object, 'text_completion');
  assert.equal(r.choices.length, 1);
  assert.equal(typeof r.choices[0].text, 'string');
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 6);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + 6);
  text = r.choices[0].text;
});

await step('completions.create stream', async () => {
  const stream = await client.completions.create({
    model, prompt: 'The capital of France is', max_tokens: 6, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let got = '', usage = null, finish = null;
  for await (const chunk of stream) {
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      got += c.text;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.equal(got, text);
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 6);
});

const messages = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Name a colour.' },
];
let content;
await step('chat.completions.create', async () => {
  const r = await client.chat.completions.create({ model, messages, max_completion_tokens: 5, temperature: 0 });
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.choices[0].message.role, 'assistant');
  assert.equal(typeof r.choices[0].message.content, 'string');
  assert.equal(r.choices[0].finish_reason, 'length');
  assert.equal(r.usage.completion_tokens, 5);
  content = r.choices[0].message.content;
});

await step('chat.completions.create stream', async () => {
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 5, temperature: 0, stream: true,
    stream_options: { include_usage: true },
  });
  let got = '', role = null, finish = null, usage = null, chunks = 0;
  for await (const chunk of stream) {
    chunks++;
    assert.equal(chunk.object, 'chat.completion.chunk');
    if (chunk.usage) usage = chunk.usage;
    for (const c of chunk.choices) {
      if (c.delta.role) role = c.delta.role;
      if (c.delta.content) got += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(chunks >= 3, `only ${chunks} chunks`);
  assert.equal(role, 'assistant');
  assert.equal(got, content);
  assert.equal(finish, 'length');
  assert.equal(usage.completion_tokens, 5);
  assert.equal(usage.total_tokens, usage.prompt_tokens + 5);
});

await step('chat stream helper (runTools-style accumulation)', async () => {
  const runner = client.chat.completions.stream({ model, messages, max_tokens: 5, temperature: 0 });
  const final = await runner.finalChatCompletion();
  assert.equal(final.choices[0].message.content, content);
});

await step('chat n=2 with logprobs', async () => {
  const r = await client.chat.completions.create({
    model, messages, max_tokens: 3, n: 2, logprobs: true, top_logprobs: 2, seed: 7, temperature: 0.8,
  });
  assert.equal(r.choices.length, 2);
  for (const c of r.choices) {
    assert.equal(c.logprobs.content.length, 3);
    assert.equal(c.logprobs.content[0].top_logprobs.length, 2);
  }
});

await step('errors: unknown model → NotFoundError', async () => {
  await assert.rejects(
    client.chat.completions.create({ model: 'gpt-4o', messages, max_tokens: 1 }),
    (e) => e instanceof OpenAI.NotFoundError && e.status === 404 && /gpt-4o/.test(e.message));
});

await step('errors: negative max_tokens → BadRequestError', async () => {
  await assert.rejects(
    client.completions.create({ model, prompt: 'x', max_tokens: -1 }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === 'max_tokens');
});

await step('errors: wrong API key → AuthenticationError', async () => {
  const bad = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'wrong', maxRetries: 0 });
  await assert.rejects(bad.models.list(),
    (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
});

console.log(`ok: ${n} openai-client checks`);
