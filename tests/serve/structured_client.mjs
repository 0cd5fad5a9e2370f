// structured_client.mjs — structured outputs through `llmrt serve` and the official `openai`
// npm client, checked with ajv: json_schema replies that validate across random schemas of
// the supported subset, json_object replies that parse, vLLM's structured_outputs (json,
// regex, choice) in chat and completions, streaming, n > 1, tool_choice "required" and a
// named function producing valid calls, and a schema outside the subset refused with a 400
// naming the keyword. The model has random weights: only the grammar makes the replies
// valid.
//
// usage: OPENAI_PREFIX=DIR AJV_PREFIX=DIR node structured_client.mjs BASE_URL API_KEY MODEL [N]
//   N: how many random schemas (default 24). Exit 0 when every check passes.
import { createRequire } from 'node:module';
import path from 'node:path';
import assert from 'node:assert/strict';

const [baseURL, apiKey, model, nArg] = process.argv.slice(2);
const N_SCHEMAS = Number(nArg || 24);
const req = (prefix) => createRequire(path.join(path.resolve(prefix || '.'), 'noop.js'));
const { default: OpenAI } = await import(req(process.env.OPENAI_PREFIX).resolve('openai'));
const AjvMod = req(process.env.AJV_PREFIX)('ajv');
const Ajv = AjvMod.default || AjvMod;
const ajv = new Ajv({ allErrors: true, allowUnionTypes: true, strict: true });

const client = new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0, timeout: 300_000 });
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

function validate(schema, value, what) {
  const v = ajv.compile(schema);
  if (!v(value))
    throw new Error(`${what}: ${JSON.stringify(value)} does not follow ${JSON.stringify(schema)}: ` +
                    ajv.errorsText(v.errors));
}

// ---- random schemas of the subset (seeded: the same 24 every run) ----
function mulberry32(a) {
  return () => {
    a |= 0; a = (a + 0x6D2B79F5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
const rnd = mulberry32(20240611);
const pick = (a) => a[Math.floor(rnd() * a.length)];
const chance = (p) => rnd() < p;
const names = ['name', 'age', 'city', 'tags', 'score', 'ok', 'id', 'items', 'kind', 'note', 'x', 'y'];

function randomSchema(depth) {
  const kinds = depth > 2 ? ['string', 'integer', 'number', 'boolean', 'null', 'enum']
                          : ['object', 'object', 'array', 'string', 'integer', 'number', 'boolean',
                             'enum', 'const', 'anyOf', 'null'];
  switch (pick(kinds)) {
  case 'object': {
    const props = {};
    const k = 1 + Math.floor(rnd() * 3);
    const pool = [...names];
    for (let i = 0; i < k; i++)
      props[pool.splice(Math.floor(rnd() * pool.length), 1)[0]] = randomSchema(depth + 1);
    const keys = Object.keys(props);
    const s = { type: 'object', properties: props, required: keys.filter(() => chance(0.6)) };
    if (chance(0.7)) s.additionalProperties = false;
    return s;
  }
  case 'array': {
    const s = { type: 'array', items: randomSchema(depth + 1) };
    if (chance(0.5)) s.minItems = Math.floor(rnd() * 2);
    s.maxItems = (s.minItems || 0) + 1 + Math.floor(rnd() * 3);
    return s;
  }
  case 'string': {
    const s = { type: 'string' };
    if (chance(0.8)) s.maxLength = 1 + Math.floor(rnd() * 16);
    if (chance(0.3)) s.minLength = Math.min(s.maxLength ?? 3, 1 + Math.floor(rnd() * 3));
    if (!s.maxLength && !s.minLength && chance(0.3)) s.pattern = '^[a-z]{2,6}$';
    return s;
  }
  case 'integer': {
    const s = { type: 'integer' };
    if (chance(0.7)) s.minimum = Math.floor(rnd() * 200) - 100;
    if (chance(0.7)) s.maximum = (s.minimum ?? -50) + Math.floor(rnd() * 300);
    return s;
  }
  case 'number': {
    const s = { type: 'number' };
    if (chance(0.5)) { s.minimum = -Math.floor(rnd() * 5); s.maximum = 1 + Math.floor(rnd() * 5); }
    return s;
  }
  case 'boolean': return { type: 'boolean' };
  case 'null': return { type: 'null' };
  case 'enum': return { enum: ['red', 'green', 'blue', 7, null].filter(() => chance(0.7)).concat(['x']) };
  case 'const': return { const: pick(['fixed', 42, true]) };
  default:
    return { anyOf: [randomSchema(depth + 1), randomSchema(depth + 1)] };
  }
}

const user = (text) => [{ role: 'user', content: text }];

// ---- json_schema across random schemas ----
await step(`json_schema over ${N_SCHEMAS} random schemas`, async () => {
  for (let i = 0; i < N_SCHEMAS; i++) {
    const schema = randomSchema(0);
    const greedy = i % 3 !== 2;
    const params = {
      model, messages: user(`Give me a JSON value number ${i}.`), max_tokens: 200,
      temperature: greedy ? 0 : 0.9, seed: 100 + i,
      response_format: { type: 'json_schema', json_schema: { name: `s${i}`, schema, strict: i % 2 === 0 } },
    };
    if (i % 4 === 3) params.chat_template_kwargs = { enable_thinking: false };
    const r = await client.chat.completions.create(params);
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'stop', `schema ${i} ${JSON.stringify(schema)}: finish ${c.finish_reason}, content ${c.message.content}`);
    let value;
    try { value = JSON.parse(c.message.content); } catch (e) {
      throw new Error(`schema ${i} ${JSON.stringify(schema)}: not JSON: ${c.message.content}`);
    }
    validate(schema, value, `schema ${i}`);
  }
});

// ---- json_object: always parses ----
await step('json_object replies parse', async () => {
  for (let i = 0; i < 6; i++) {
    const r = await client.chat.completions.create({
      model, messages: user(`Object ${i}, please.`), max_tokens: 120, temperature: i % 2 ? 1.0 : 0,
      seed: i, response_format: { type: 'json_object' },
    });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'stop', `finish ${c.finish_reason}: ${c.message.content}`);
    const v = JSON.parse(c.message.content);
    assert.ok(v !== null && typeof v === 'object' && !Array.isArray(v), `not an object: ${c.message.content}`);
  }
});

// ---- structured_outputs (vLLM): json in completions, regex, choice; n > 1 ----
await step('structured_outputs json / regex / choice, chat and completions, n = 2', async () => {
  const schema = { type: 'object', properties: { city: { type: 'string', maxLength: 12 }, pop: { type: 'integer', minimum: 0 } },
                   required: ['city', 'pop'], additionalProperties: false };
  const r = await client.completions.create({
    model, prompt: 'City data as JSON:', max_tokens: 100, temperature: 0.7, seed: 3, n: 2,
    structured_outputs: { json: schema },
  });
  assert.equal(r.choices.length, 2);
  for (const c of r.choices) {
    assert.equal(c.finish_reason, 'stop');
    validate(schema, JSON.parse(c.text), 'completions json');
  }
  const pattern = '[a-z]{3,8}-[0-9]{2,4}';
  for (const kind of ['chat', 'completions']) {
    const body = { model, max_tokens: 30, temperature: 0, structured_outputs: { regex: pattern } };
    const text = kind === 'chat'
      ? (await client.chat.completions.create({ ...body, messages: user('A code:') })).choices[0].message.content
      : (await client.completions.create({ ...body, prompt: 'A code:' })).choices[0].text;
    assert.ok(new RegExp(`^(?:${pattern})$`).test(text), `${kind} regex: ${JSON.stringify(text)}`);
  }
  const colours = ['red', 'green', 'blue'];
  for (let i = 0; i < 3; i++) {
    const c = await client.chat.completions.create({
      model, messages: user('A colour?'), max_tokens: 10, temperature: 1, seed: i,
      structured_outputs: { choice: colours },
    });
    assert.ok(colours.includes(c.choices[0].message.content), `choice: ${c.choices[0].message.content}`);
    assert.equal(c.choices[0].finish_reason, 'stop');
  }
});

// ---- streaming ----
await step('json_schema streamed', async () => {
  const schema = { type: 'object', properties: { a: { type: 'array', items: { type: 'integer' }, maxItems: 4 },
                   b: { type: 'string', maxLength: 10 } }, required: ['a', 'b'], additionalProperties: false };
  const stream = await client.chat.completions.create({
    model, messages: user('Stream it.'), max_tokens: 150, temperature: 0, stream: true,
    response_format: { type: 'json_schema', json_schema: { name: 's', schema } },
  });
  let text = '', finish = null, chunks = 0;
  for await (const ch of stream) {
    chunks++;
    for (const c of ch.choices) {
      if (c.delta.content) text += c.delta.content;
      if (c.finish_reason) finish = c.finish_reason;
    }
  }
  assert.ok(chunks > 3, `${chunks} chunks`);
  assert.equal(finish, 'stop');
  validate(schema, JSON.parse(text), 'streamed');
});

// ---- tool_choice: required and a named function ----
const tools = [
  { type: 'function', function: { name: 'get_weather', description: 'Weather in a city',
    parameters: { type: 'object', properties: { location: { type: 'string', maxLength: 20 },
      unit: { enum: ['celsius', 'fahrenheit'] } }, required: ['location', 'unit'], additionalProperties: false } } },
  { type: 'function', function: { name: 'get_time', description: 'Time in a zone',
    parameters: { type: 'object', properties: { tz: { type: 'string', maxLength: 12 } }, required: ['tz'] } } },
];

// The calls of a reply: the server parses the forced markup into message.tool_calls (content
// then holds nothing but whitespace around the calls).
function callsOf(message) {
  assert.ok(message.tool_calls && message.tool_calls.length, `no tool_calls: ${JSON.stringify(message)}`);
  assert.equal((message.content || '').trim(), '', `content beside the calls: ${JSON.stringify(message)}`);
  return message.tool_calls.map((t) => ({ name: t.function.name, arguments: JSON.parse(t.function.arguments) }));
}

await step('tool_choice required and a named function', async () => {
  for (let i = 0; i < 4; i++) {
    const r = await client.chat.completions.create({
      model, messages: user('What is the weather in Paris?'), tools, tool_choice: 'required',
      max_tokens: 200, temperature: i ? 0.8 : 0, seed: i, parallel_tool_calls: i % 2 === 0,
    });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', `finish ${c.finish_reason}`);
    const calls = callsOf(c.message);
    assert.ok(calls.length >= 1, `no call: ${JSON.stringify(c.message)}`);
    if (i % 2 === 1)
      assert.equal(calls.length, 1, 'parallel_tool_calls false: one call');
    for (const call of calls) {
      const t = tools.find((x) => x.function.name === call.name);
      assert.ok(t, `unknown function ${call.name}`);
      validate(t.function.parameters, call.arguments, `arguments of ${call.name}`);
    }
  }
  for (const name of ['get_time', 'get_weather']) {
    const r = await client.chat.completions.create({
      model, messages: user('Call it.'), tools, max_tokens: 200, temperature: 0,
      tool_choice: { type: 'function', function: { name } },
    });
    const calls = callsOf(r.choices[0].message);
    assert.equal(calls.length, 1);
    assert.equal(calls[0].name, name);
    validate(tools.find((x) => x.function.name === name).function.parameters, calls[0].arguments, name);
  }
});

// ---- refusals ----
await step('a schema outside the subset is a 400 naming the keyword', async () => {
  await assert.rejects(
    client.chat.completions.create({
      model, messages: user('x'), max_tokens: 5,
      response_format: { type: 'json_schema', json_schema: { name: 'm', schema: { type: 'integer', multipleOf: 3 } } },
    }),
    (e) => e instanceof OpenAI.BadRequestError && e.status === 400 && /multipleOf/.test(e.message));
  await assert.rejects(
    client.chat.completions.create({ model, messages: user('x'), max_tokens: 5, structured_outputs: { regex: '(a)\\1' } }),
    (e) => e instanceof OpenAI.BadRequestError && /back-references/.test(e.message));
  await assert.rejects(
    client.chat.completions.create({
      model, messages: user('x'), max_tokens: 5, tool_choice: 'required',
      tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: { a: { not: {} } } } } }],
    }),
    (e) => e instanceof OpenAI.BadRequestError && /'not'/.test(e.message) && /tools\[0\]\.function\.parameters/.test(e.message));
});

console.log(`ok: ${n} structured-output checks (${N_SCHEMAS} random schemas)`);
