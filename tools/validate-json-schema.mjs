#!/usr/bin/env node
// validate-json-schema.mjs — validate a JSON file against a JSON Schema (draft 2020-12 or
// draft-07) with ajv, in strict mode, reporting every error with its JSON pointer.
//
// Why: docs/bench.schema.json is a published contract; tests check that what `llmrt bench
// --json` writes really follows it, with a real validator rather than a hand-written check.
//
// usage: node tools/validate-json-schema.mjs SCHEMA.json DATA.json
// ajv is found through the folder named by AJV_PREFIX (an `npm install --prefix DIR ajv`
// folder; tests install it into a cache folder outside the repository), else through the
// normal module resolution. Exit status: 0 valid, 1 invalid, 2 usage error or ajv missing.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

function fail(code, msg) {
  process.stderr.write(`validate-json-schema: ${msg}\n`);
  process.exit(code);
}

const [schemaPath, dataPath] = process.argv.slice(2);
if (!schemaPath || !dataPath || process.argv.length !== 4)
  fail(2, 'usage: node tools/validate-json-schema.mjs SCHEMA.json DATA.json');

function readJson(p, what) {
  let text;
  try {
    text = readFileSync(p, 'utf8');
  } catch (e) {
    fail(2, `cannot read the ${what} ${p}: ${e.message}`);
  }
  try {
    return JSON.parse(text);
  } catch (e) {
    fail(1, `${p} is not valid JSON: ${e.message}`);
  }
}

const schema = readJson(schemaPath, 'schema');
const data = readJson(dataPath, 'data file');

const base = process.env.AJV_PREFIX
  ? path.join(path.resolve(process.env.AJV_PREFIX), 'node_modules', 'ajv-loader.cjs')
  : import.meta.url;
const require = createRequire(base);
const draft2020 = (schema.$schema || '').includes('2020-12');
let Ajv;
try {
  const mod = require(draft2020 ? 'ajv/dist/2020' : 'ajv');
  Ajv = mod.default || mod;
} catch (e) {
  fail(2, `ajv is not installed (npm install --prefix DIR ajv, then AJV_PREFIX=DIR): ${e.message}`);
}

const ajv = new Ajv({ allErrors: true, strict: true, allowUnionTypes: true });
let validate;
try {
  validate = ajv.compile(schema);
} catch (e) {
  fail(1, `${schemaPath} is not a valid schema: ${e.message}`);
}
if (validate(data)) {
  process.stdout.write(`ok: ${dataPath} follows ${schemaPath}\n`);
  process.exit(0);
}
for (const err of validate.errors.slice(0, 50))
  process.stderr.write(`${dataPath}: ${err.instancePath || '/'} ${err.message}` +
    (err.params && Object.keys(err.params).length ? ` ${JSON.stringify(err.params)}` : '') + '\n');
if (validate.errors.length > 50)
  process.stderr.write(`... and ${validate.errors.length - 50} more errors\n`);
fail(1, `${dataPath} does not follow ${schemaPath}`);
