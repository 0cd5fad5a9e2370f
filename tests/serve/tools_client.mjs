// tools_client.mjs — tool calls, reasoning and the model's sampling defaults through
// `llmrt serve`, checked with the official `openai` npm package against scripted models
// (mkmodel --preset tiny-chat: the greedy reply is a known text) and the random tiny model.
//
// usage: OPENAI_PREFIX=DIR node tools_client.mjs BASE_URL MODEL SCENARIO
//   SCENARIO: call | reasoning_off | two | think | malformed | defaults (see test_serve_tools.sh
//   for the model each one is served with). Exit 0 when every check passes.
import { createRequire } from 'node:module';
import path from 'node:path';
import assert from 'node:assert/strict';

const [baseURL, model, scenario] = process.argv.slice(2);
const require = createRequire(path.join(path.resolve(process.env.OPENAI_PREFIX || '.'), 'noop.js'));
const { default: OpenAI } = await import(require.resolve('openai'));
const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey: 'none', maxRetries: 0, timeout: 120_000 });

let n = 0;
async function step(what, fn) {
  try {
    await fn();
    n++;
  } catch (e) {
    console.error(`FAIL: ${scenario}: ${what}: ${e.stack || e}`);
    process.exit(1);
  }
}

const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string' } }, required: ['city'] },
  },
};
const clock = { type: 'function', function: { name: 'get_time', parameters: { type: 'object', properties: {} } } };
const ask = [{ role: 'user', content: 'What is the weather in Paris?' }];

// Everything a stream says, accumulated by hand (the chunks as the wire has them).
async function collect(params) {
  const stream = await client.chat.completions.create({ ...params, stream: true });
  const out = { role: null, content: '', reasoning: '', calls: [], finish: null, chunks: 0, firstDeltas: [] };
  for await (const chunk of stream) {
    out.chunks++;
    assert.equal(chunk.object, 'chat.completion.chunk');
    for (const c of chunk.choices) {
      const d = c.delta;
      if (d.role) out.role = d.role;
      if (d.content) out.content += d.content;
      if (d.reasoning_content) out.reasoning += d.reasoning_content;
      for (const t of d.tool_calls ?? []) {
        if (!out.calls[t.index]) {
          // the first delta of a call: index, id, type, function.name, arguments ""
          out.firstDeltas.push(t);
          assert.match(t.id, /^call_[0-9a-f]{24}$/);
          assert.equal(t.type, 'function');
          assert.equal(typeof t.function.name, 'string');
          assert.equal(t.function.arguments, '');
          out.calls[t.index] = { id: t.id, name: t.function.name, arguments: '' };
        } else {
          assert.equal(t.id, undefined, 'only the first delta of a call has its id');
          out.calls[t.index].arguments += t.function.arguments ?? '';
        }
      }
      if (c.finish_reason) out.finish = c.finish_reason;
    }
  }
  return out;
}

function checkCall(call, name, args) {
  assert.equal(call.type ?? 'function', 'function');
  const fn = call.function ?? call;
  assert.equal(fn.name, name);
  assert.equal(typeof fn.arguments, 'string', 'arguments are a JSON string');
  assert.deepEqual(JSON.parse(fn.arguments), args);
}

const T1_REASONING = 'The user wants the weather.';

if (scenario === 'call') {
  let usageWithTools;
  await step('a tool call, whole', async () => {
    const r = await client.chat.completions.create({ model, messages: ask, tools: [weather, clock], temperature: 0 });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls');
    assert.equal(c.message.role, 'assistant');
    assert.equal(c.message.content, null);
    assert.equal(c.message.reasoning_content, T1_REASONING);
    assert.equal(c.message.tool_calls.length, 1);
    assert.match(c.message.tool_calls[0].id, /^call_[0-9a-f]{24}$/);
    checkCall(c.message.tool_calls[0], 'get_weather', { city: 'Paris' });
    usageWithTools = r.usage.prompt_tokens;
  });
  await step('a tool call, streamed', async () => {
    const s = await collect({ model, messages: ask, tools: [weather, clock], temperature: 0 });
    assert.equal(s.role, 'assistant');
    assert.equal(s.finish, 'tool_calls');
    assert.equal(s.reasoning, T1_REASONING);
    assert.equal(s.content, '');
    assert.equal(s.calls.length, 1);
    assert.equal(s.calls[0].name, 'get_weather');
    assert.deepEqual(JSON.parse(s.calls[0].arguments), { city: 'Paris' });
  });
  await step('the stream helper accumulates the call (finalChatCompletion)', async () => {
    const runner = client.chat.completions.stream({ model, messages: ask, tools: [weather], temperature: 0 });
    const final = await runner.finalChatCompletion();
    const c = final.choices[0];
    assert.equal(c.finish_reason, 'tool_calls');
    checkCall(c.message.tool_calls[0], 'get_weather', { city: 'Paris' });
    assert.match(c.message.tool_calls[0].id, /^call_/);
  });
  await step('n = 2: every choice has its call', async () => {
    const r = await client.chat.completions.create({ model, messages: ask, tools: [weather], n: 2, temperature: 0 });
    assert.equal(r.choices.length, 2);
    for (const c of r.choices) checkCall(c.message.tool_calls[0], 'get_weather', { city: 'Paris' });
    assert.notEqual(r.choices[0].message.tool_calls[0].id, r.choices[1].message.tool_calls[0].id);
  });
  await step('a second turn with the call and its result in history', async () => {
    const first = await client.chat.completions.create({ model, messages: ask, tools: [weather], temperature: 0 });
    const m = first.choices[0].message;
    const messages = [...ask, { role: 'assistant', content: m.content, tool_calls: m.tool_calls },
      { role: 'tool', tool_call_id: m.tool_calls[0].id, content: '{"temp": 18}' }];
    const r = await client.chat.completions.create({ model, messages, tools: [weather], temperature: 0 });
    assert.ok(r.usage.prompt_tokens > first.usage.prompt_tokens, 'the history is in the prompt');
    checkCall(r.choices[0].message.tool_calls[0], 'get_weather', { city: 'Paris' });
  });
  await step('tool_choice "none": no tools in the prompt, the markup stays content', async () => {
    const r = await client.chat.completions.create({ model, messages: ask, tools: [weather, clock], tool_choice: 'none', temperature: 0 });
    const bare = await client.chat.completions.create({ model, messages: ask, temperature: 0 });
    assert.equal(r.usage.prompt_tokens, bare.usage.prompt_tokens, 'tools were rendered into the prompt');
    assert.ok(usageWithTools > r.usage.prompt_tokens);
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'stop');
    assert.equal(c.message.tool_calls, undefined);
    assert.equal(c.message.reasoning_content, T1_REASONING);
    assert.equal(c.message.content, '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>');
    // without tools the same
    assert.equal(bare.choices[0].message.content, c.message.content);
  });
  await step('tool_choice "auto" is the default with tools', async () => {
    const r = await client.chat.completions.create({ model, messages: ask, tools: [weather], tool_choice: 'auto', temperature: 0 });
    checkCall(r.choices[0].message.tool_calls[0], 'get_weather', { city: 'Paris' });
  });
  await step('tool_choice naming a missing function → BadRequestError', async () => {
    await assert.rejects(
      client.chat.completions.create({ model, messages: ask, tools: [weather], tool_choice: { type: 'function', function: { name: 'nope' } } }),
      (e) => e instanceof OpenAI.BadRequestError && e.param === 'tool_choice' && /nope/.test(e.message));
  });
} else if (scenario === 'reasoning_off') {
  await step('server.reasoning = off: the think block stays content', async () => {
    const r = await client.chat.completions.create({ model, messages: ask, tools: [weather], temperature: 0 });
    const c = r.choices[0];
    assert.equal(c.message.reasoning_content, undefined);
    assert.equal(c.message.content, `<think>\n${T1_REASONING}\n</think>`);
    checkCall(c.message.tool_calls[0], 'get_weather', { city: 'Paris' });
    const s = await collect({ model, messages: ask, tools: [weather], temperature: 0 });
    assert.equal(s.reasoning, '');
    assert.equal(s.content, c.message.content);
  });
} else if (scenario === 'two') {
  await step('two calls in one reply, whole', async () => {
    const r = await client.chat.completions.create({ model, messages: ask, tools: [weather], temperature: 0 });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls');
    assert.equal(c.message.content, null);
    assert.equal(c.message.tool_calls.length, 2);
    checkCall(c.message.tool_calls[0], 'get_weather', { city: 'Paris', unit: 'celsius' });
    checkCall(c.message.tool_calls[1], 'get_weather', { city: 'Tokyo', unit: 'celsius' });
    assert.notEqual(c.message.tool_calls[0].id, c.message.tool_calls[1].id);
  });
  await step('two calls in one reply, streamed (index 0 and 1)', async () => {
    const s = await collect({ model, messages: ask, tools: [weather], temperature: 0 });
    assert.equal(s.finish, 'tool_calls');
    assert.deepEqual(s.firstDeltas.map((t) => t.index), [0, 1]);
    assert.equal(s.calls.length, 2);
    assert.deepEqual(JSON.parse(s.calls[0].arguments), { city: 'Paris', unit: 'celsius' });
    assert.deepEqual(JSON.parse(s.calls[1].arguments), { city: 'Tokyo', unit: 'celsius' });
    const final = await client.chat.completions.stream({ model, messages: ask, tools: [weather], temperature: 0 }).finalChatCompletion();
    assert.equal(final.choices[0].message.tool_calls.length, 2);
  });
  await step('parallel_tool_calls false keeps the first call', async () => {
    const r = await client.chat.completions.create({ model, messages: ask, tools: [weather], parallel_tool_calls: false, temperature: 0 });
    assert.equal(r.choices[0].message.tool_calls.length, 1);
    checkCall(r.choices[0].message.tool_calls[0], 'get_weather', { city: 'Paris', unit: 'celsius' });
    const s = await collect({ model, messages: ask, tools: [weather], parallel_tool_calls: false, temperature: 0 });
    assert.equal(s.calls.length, 1);
    assert.equal(s.finish, 'tool_calls');
  });
} else if (scenario === 'think') {
  const reasoning = 'Okay: 2+2. That is 4. Check: 2+2 = 4. Yes, 4.';
  const content = 'The answer is **4**. 🎉 Grüße aus Köln!';
  await step('reasoning split, whole', async () => {
    const r = await client.chat.completions.create({ model, messages: ask, temperature: 0 });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'stop');
    assert.equal(c.message.reasoning_content, reasoning);
    assert.equal(c.message.content, content);
    assert.equal(c.message.tool_calls, undefined);
  });
  await step('reasoning split, streamed', async () => {
    const s = await collect({ model, messages: ask, temperature: 0, stream_options: { include_usage: true } });
    assert.equal(s.finish, 'stop');
    assert.equal(s.reasoning, reasoning);
    assert.equal(s.content, content);
    assert.ok(s.chunks > 5, `only ${s.chunks} chunks`);
    const final = await client.chat.completions.stream({ model, messages: ask, temperature: 0 }).finalChatCompletion();
    assert.equal(final.choices[0].message.content, content);
  });
  await step('chat_template_kwargs.enable_thinking still renders (a different prompt)', async () => {
    const on = await client.chat.completions.create({ model, messages: ask, temperature: 0, max_tokens: 1 });
    const off = await client.chat.completions.create({ model, messages: ask, temperature: 0, max_tokens: 1, chat_template_kwargs: { enable_thinking: false } });
    assert.ok(off.usage.prompt_tokens > on.usage.prompt_tokens, 'enable_thinking false adds the empty think block');
  });
} else if (scenario === 'malformed') {
  const text = 'Let me try.\n<tool_call>\n{"name": get_weather, "arguments": {}}\n</tool_call>';
  await step('a malformed call stays content, whole', async () => {
    const r = await client.chat.completions.create({ model, messages: ask, tools: [weather], temperature: 0 });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'stop');
    assert.equal(c.message.content, text);
    assert.equal(c.message.tool_calls, undefined);
  });
  await step('a malformed call stays content, streamed', async () => {
    const s = await collect({ model, messages: ask, tools: [weather], temperature: 0 });
    assert.equal(s.finish, 'stop');
    assert.equal(s.content, text);
    assert.equal(s.calls.length, 0);
  });
} else if (scenario === 'defaults') {
  // generation_config.json has temperature 1.3, top_p 0.9, top_k 40: a request that leaves
  // them out samples with them; explicit values win, temperature 0 included
  const prompt = 'The capital of France is';
  await step('completions: the model\'s sampling defaults apply', async () => {
    const omitted = await client.completions.create({ model, prompt, max_tokens: 12, seed: 5 });
    const explicit = await client.completions.create({ model, prompt, max_tokens: 12, seed: 5, temperature: 1.3, top_p: 0.9, top_k: 40 });
    const greedy = await client.completions.create({ model, prompt, max_tokens: 12, seed: 5, temperature: 0 });
    const other = await client.completions.create({ model, prompt, max_tokens: 12, seed: 5, temperature: 1.3, top_p: 1, top_k: 0 });
    assert.equal(omitted.choices[0].text, explicit.choices[0].text);
    assert.notEqual(omitted.choices[0].text, greedy.choices[0].text);
    assert.notEqual(omitted.choices[0].text, other.choices[0].text, 'top_p/top_k defaults not applied');
  });
  await step('chat: the model\'s sampling defaults apply', async () => {
    const messages = [{ role: 'user', content: 'Name a colour.' }];
    const omitted = await client.chat.completions.create({ model, messages, max_tokens: 12, seed: 9 });
    const explicit = await client.chat.completions.create({ model, messages, max_tokens: 12, seed: 9, temperature: 1.3, top_p: 0.9, top_k: 40 });
    const greedy = await client.chat.completions.create({ model, messages, max_tokens: 12, seed: 9, temperature: 0 });
    assert.equal(omitted.choices[0].message.content, explicit.choices[0].message.content);
    assert.notEqual(omitted.choices[0].message.content, greedy.choices[0].message.content);
  });
} else {
  console.error(`unknown scenario ${scenario}`);
  process.exit(2);
}
console.log(`ok: ${n} ${scenario} checks`);
