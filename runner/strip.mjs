// lunarun's type stripper: a long-lived helper the host starts once
// (`node --disable-warning=ExperimentalWarning strip.mjs`) and reuses.
//
// Requests and answers are frames, base64(UTF-8(JSON)) + "\n", one per line:
//   stdin   {"id": n, "program": "…"}
//   stdout  {"id": n, "ok": true, "code": "…"}
//           {"id": n, "ok": false, "message": "…"}
//
// The program is the body of an async function, so it is stripped wrapped as
// one (top-level await and return parse), with module.stripTypeScriptTypes in
// mode "strip": types are blanked in place, never re-printed, so every line
// and column of the result is the program's own. The wrapper is then removed
// again. Nothing of the program is ever executed here.
//
// A failure message names the program's line (the wrapper's line subtracted):
//   program.ts:LINE\n<that source line>\n<carets>\n\nSyntaxError: <Node's message>

import { stripTypeScriptTypes } from 'node:module';

const PREFIX = 'async function __lunarun__() {\n';
const SUFFIX = '\n}';
const LINE_BREAK_RE = /\r\n|[\n\r\u2028\u2029]/;

function programLines(program) {
  return program.split(LINE_BREAK_RE);
}

function failureMessage(e, program) {
  const name = e && typeof e.name === 'string' && e.name !== '' ? e.name : 'SyntaxError';
  const message = e && typeof e.message === 'string' ? e.message : String(e);
  const stack = e && typeof e.stack === 'string' ? e.stack : '';
  // Node's stack for these errors starts with ":LINE", then the source lines
  // around the error and a caret line under the failing one.
  const m = /^:(\d+)\n/.exec(stack);
  if (!m) return `program.ts\n\n${name}: ${message}`;
  const lines = programLines(program);
  let line = Number(m[1]) - 1; // the wrapper's first line
  let exact = true;
  if (line < 1) {
    line = 1;
    exact = false;
  } else if (line > lines.length) {
    line = lines.length; // at the end of the program (the wrapper's "}")
    exact = false;
  }
  const source = lines[line - 1];
  let carets = '';
  if (exact) {
    const ctx = stack.split('\n');
    for (let i = 1; i + 1 < ctx.length && !ctx[i].startsWith(`${name} `) && !ctx[i].startsWith(`${name}:`); i++) {
      if (ctx[i] === source && /^\s*\^+\s*$/.test(ctx[i + 1])) {
        carets = `\n${ctx[i + 1]}`;
        break;
      }
    }
  }
  return `program.ts:${line}\n${source}${carets}\n\n${name}: ${message}`;
}

function strip(program) {
  if (typeof program !== 'string') return { ok: false, message: 'program.ts\n\nTypeError: the program is not a string' };
  const wrapped = PREFIX + program + SUFFIX;
  let out;
  try {
    out = stripTypeScriptTypes(wrapped, { mode: 'strip' });
  } catch (e) {
    return { ok: false, message: failureMessage(e, program) };
  }
  // Blanking keeps every position (multi-byte characters inside a type are
  // blanked with as many UTF-16 units); anything else is refused.
  if (typeof out !== 'string' || out.length !== wrapped.length || !out.startsWith(PREFIX) || !out.endsWith(SUFFIX)) {
    return { ok: false, message: 'program.ts\n\nSyntaxError: type stripping did not keep the program\'s positions' };
  }
  return { ok: true, code: out.slice(PREFIX.length, out.length - SUFFIX.length) };
}

function send(msg) {
  process.stdout.write(Buffer.from(JSON.stringify(msg), 'utf8').toString('base64') + '\n');
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

// The stripper's first call compiles its WebAssembly (about 70 ms): done
// now, while the host starts up, rather than in the first run's path.
try {
  stripTypeScriptTypes('let warm: number = 1;', { mode: 'strip' });
} catch {}

function onLine(line) {
  let req;
  try {
    req = JSON.parse(utf8.decode(Buffer.from(line.toString('latin1'), 'base64')));
  } catch {
    send({ id: null, ok: false, message: 'strip: a request that is not a base64 JSON frame' });
    return;
  }
  const id = req && typeof req === 'object' && Number.isSafeInteger(req.id) ? req.id : null;
  if (id === null) {
    send({ id: null, ok: false, message: 'strip: a request without an integer id' });
    return;
  }
  let result;
  try {
    result = strip(req.program);
  } catch (e) {
    result = { ok: false, message: `program.ts\n\nError: the type stripper failed: ${e && e.message}` };
  }
  send({ id, ...result });
}

// Lines are gathered as chunks and joined once (programs may be large).
let chunks = [];
let pendingLength = 0;
process.stdin.on('data', (buf) => {
  let start = 0;
  for (;;) {
    const nl = buf.indexOf(10, start);
    if (nl === -1) {
      if (start < buf.length) {
        chunks.push(buf.subarray(start));
        pendingLength += buf.length - start;
      }
      return;
    }
    let line = buf.subarray(start, nl);
    if (chunks.length > 0) {
      chunks.push(line);
      line = Buffer.concat(chunks, pendingLength + line.length);
      chunks = [];
      pendingLength = 0;
    }
    start = nl + 1;
    if (line.length > 0) onLine(line);
  }
});
process.stdin.on('end', () => process.exit(0));
process.stdin.on('error', () => process.exit(0));
process.stdout.on('error', () => process.exit(0));
