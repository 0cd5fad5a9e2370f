#!/usr/bin/env node
// jv.cjs — evaluate a JavaScript expression over a JSON document, for the serve tests'
// shell scripts (jq is not among the project's dependencies; node is).
//
// usage: node jv.cjs FILE 'EXPR'      (FILE "-" reads stdin; the document is `j`; EXPR
//        may begin with statements: its last expression is the value)
// Prints the value: strings raw, everything else as JSON. Exit 1 when the file is not JSON
// or the expression throws; exit 3 when EXPR evaluates to false (handy in `||` checks).
'use strict';
const fs = require('node:fs');
const [file, expr] = process.argv.slice(2);
if (!file || !expr) {
  process.stderr.write('usage: node jv.cjs FILE EXPR\n');
  process.exit(2);
}
let text;
try {
  text = fs.readFileSync(file === '-' ? 0 : file, 'utf8');
} catch (e) {
  process.stderr.write(`jv: cannot read ${file}: ${e.message}\n`);
  process.exit(1);
}
let j;
try {
  j = JSON.parse(text);
} catch (e) {
  process.stderr.write(`jv: ${file} is not JSON (${e.message}): ${text.slice(0, 300)}\n`);
  process.exit(1);
}
let v;
try {
  // eval, so EXPR may start with statements ("const l = j.x; l.length === 2"): the value
  // of the last expression statement is the result
  v = new Function('j', 'return eval(arguments[1]);')(j, expr);
} catch (e) {
  process.stderr.write(`jv: ${expr}: ${e.message}\n`);
  process.exit(1);
}
process.stdout.write((typeof v === 'string' ? v : JSON.stringify(v)) + '\n');
process.exit(v === false ? 3 : 0);
