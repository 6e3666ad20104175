// lunarun's worker (docs/PROTOCOL.md): the thread that runs the program.
// It starts before its program is known and warms up; it reads the host's
// frames on fd 3 itself (the token, the boot frame, the replies) and sends
// its calls, logs and terminal frame on fd 4 (channel.mjs), with no hop
// through the controller either way.
//
// Every intrinsic it uses is captured when the modules are evaluated,
// before any program code exists, and nothing is looked up afterwards on a
// prototype the program can reach: a program that rewrites JSON,
// Array.prototype, Object, Promise.prototype.then, Function.prototype.call…
// cannot corrupt transport or accounting.

import { Writable } from 'node:stream';
import { Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { performance as ownPerformance } from 'node:perf_hooks';
import vm from 'node:vm';
import { MessagePort, workerData } from 'node:worker_threads';
import {
  ReflectApply, ReflectDefineProperty, ReflectGetPrototypeOf, ObjectCreate, ObjectHasOwn, ArrayIsArray,
  ErrorPrototype, ErrorCtor, TypeErrorCtor, ErrorCaptureStackTrace, StringCtor, PromiseCtor, MapCtor, JSONStringify,
  JSONParse, AsyncFunctionCtor, uncurry, StringPrototypeCharCodeAt, StringPrototypeSlice, StringPrototypeIndexOf,
  RegExpPrototypeExec, MapPrototypeGet, MapPrototypeSet, MapPrototypeDelete, PromisePrototypeThen, BufferFrom,
  BufferPrototypeToString, TextDecoderPrototypeDecode, utf8Lenient, utilInspect, isProxy, isNativeError,
  isArrayBufferView, processNextTick, ConsoleCtor, defineData, pinMethods, pinApply, stringCost, numberCost, cutUtf8,
  wireEncode, wireDecode, isPositiveSafeInteger, NumberIsSafeInteger, TypedArrayPrototypeGetLength, LineReader,
  base64Length, DEFAULT_MAX_FRAME_BYTES,
} from './codec.mjs';
import { Channel, FLUSH_AT, IN_FD } from './channel.mjs';

const MessagePortPrototypePostMessage = uncurry(MessagePort.prototype.postMessage);
const SocketPrototypeRef = uncurry(Socket.prototype.ref);
const SocketPrototypeUnref = uncurry(Socket.prototype.unref);
const Uint8ArrayPrototypeSubarray = uncurry(Uint8Array.prototype.subarray);
const MathRound = Math.round;
// A terminal frame whose JSON is longer goes out on its own (Channel.flush).
const BIG_FRAME = 1 << 20;
const setImmediateOwn = setImmediate;
// Captured before any program runs (a program may rewrite `performance`).
const ownEventLoopUtilization = ownPerformance.eventLoopUtilization.bind(ownPerformance);
const RUNNER_DIR_URL = new URL('.', import.meta.url).href;
const RUNNER_DIR_PATH = fileURLToPath(new URL('.', import.meta.url));

const channel = new Channel(workerData.sab);
const control = workerData.port;
delete workerData.sab;
delete workerData.port;
pinMethods(control);

let finished = false;
let startupActive = 0;
let pendingCount = 0;
const pending = new MapCtor();
let acceptReplies = false; // set by runProgram
let onProgram = null; // set by runProgram when the boot frame has no program

// --- the host's frames (fd 3) ------------------------------------------------

// Read with a net.Socket in `onread` mode: each read lands in one reused
// buffer and goes straight to onRead, without node's Readable machinery
// (whose internals call methods a program can rewrite). The lines are
// decoded and checked here (SPEC §7 refusals) with captured intrinsics.
const fatalUtf8 = new TextDecoder('utf-8', { fatal: true });
const BASE64_RE = /^[A-Za-z0-9+/]*={0,2}$/;
const TOKEN_RE = /^[0-9A-Za-z]{16,64}$/;
let lineNo = 0;
let maxFrameBytes = DEFAULT_MAX_FRAME_BYTES;
const reader = new LineReader(base64Length(maxFrameBytes) + 64, onLine, () => fail('a line over maxFrameBytes'), true);
const input = new Socket({
  fd: IN_FD,
  readable: true,
  writable: false,
  allowHalfOpen: true,
  onread: { buffer: BufferFrom(new ArrayBuffer(65536)), callback: pinApply(onRead) },
});

let warming = false;
function onRead(n, buf) {
  reader.push(Uint8ArrayPrototypeSubarray(buf, 0, n));
  // The token came without the boot frame: a sandbox in the pool.
  if (lineNo === 1 && !warming) {
    warming = true;
    setImmediateOwn(warmCalls, 0);
  }
}

// The host closed the channel: it is gone or done with this sandbox. The
// controller exits rather than wait for a boot frame that will never come
// (a sandbox whose outer process died before it could pass on the
// parent-death signal must not outlive its host).
const onInputEnd = pinApply(() => MessagePortPrototypePostMessage(control, ['eof']));
input.on('end', onInputEnd);
input.on('error', onInputEnd);

function fail(why) {
  hostFailure(`the host sent a broken frame (${why})`);
  return false;
}

function onLine(line) {
  lineNo++;
  if (lineNo === 1) {
    const token = BufferPrototypeToString(line, 'latin1');
    if (RegExpPrototypeExec(TOKEN_RE, token) === null) return fail('no channel token');
    channel.setToken(token);
    return true;
  }
  if (finished) return false;
  const msg = decodeLine(line);
  if (typeof msg === 'string') return fail(msg);
  const type = own(msg, 'type');
  if (lineNo === 2) {
    if (type !== 'boot') return fail('the first message is not boot');
    const mfb = own(msg, 'maxFrameBytes');
    if (NumberIsSafeInteger(mfb) && mfb > 0) maxFrameBytes = mfb;
    reader.maxLine = base64Length(maxFrameBytes);
    startRun(msg);
  } else if (type === 'program' && onProgram !== null) {
    const program = own(msg, 'program');
    const compile = onProgram;
    onProgram = null;
    if (typeof program !== 'string') return fail('a program frame without a program');
    compile(program);
  } else if (acceptReplies) {
    if (type === 'reply') reply(msg);
    else if (type === 'replies') {
      const replies = own(msg, 'replies');
      if (ArrayIsArray(replies)) {
        for (let i = 0; i < replies.length && !finished; i++) {
          const r = replies[i];
          if (r !== null && typeof r === 'object') reply(r);
        }
      }
    }
  }
  return !finished;
}

// One frame line's message, or why it is refused (a string).
function decodeLine(line) {
  if (TypedArrayPrototypeGetLength(line) === 0) return 'an empty line';
  const s = BufferPrototypeToString(line, 'latin1');
  if (s.length % 4 !== 0 || RegExpPrototypeExec(BASE64_RE, s) === null) return 'malformed base64';
  const bytes = BufferFrom(s, 'base64');
  if (TypedArrayPrototypeGetLength(bytes) > maxFrameBytes) return 'over maxFrameBytes';
  let msg;
  try {
    msg = JSONParse(TextDecoderPrototypeDecode(fatalUtf8, bytes));
  } catch {
    return 'invalid UTF-8 or JSON';
  }
  if (msg === null || typeof msg !== 'object' || ArrayIsArray(msg)) return 'a message that is not an object';
  return msg;
}

function reply(msg) {
  const ok = own(msg, 'ok');
  onReply(own(msg, 'id'), ok, ok === true ? own(msg, 'value') : own(msg, 'message'));
}

function own(obj, key) {
  return ObjectHasOwn(obj, key) ? obj[key] : undefined;
}

function hostFailure(message) {
  if (finished || !channel.loadToken()) return;
  finished = true;
  channel.flush(channel.line('{"type":"done","error":{"kind":"worker-exit","message":' + JSONStringify(message) + '}}'), true);
}

function startRun(msg) {
  const bad = validateBoot(msg);
  if (bad !== null) {
    hostFailure(`the host sent an invalid boot message (${bad})`);
    return;
  }
  channel.loadToken();
  runProgram({
    program: own(msg, 'program'),
    namespaces: msg.namespaces,
    computeMs: msg.computeMs,
    maxOutputBytes: msg.maxOutputBytes,
    maxOldGenerationSizeMb: msg.maxOldGenerationSizeMb,
  });
}

function validateBoot(m) {
  const program = own(m, 'program');
  if (program !== undefined && typeof program !== 'string') return 'program';
  const nss = own(m, 'namespaces');
  if (!ArrayIsArray(nss)) return 'namespaces';
  for (let i = 0; i < nss.length; i++) {
    const ns = nss[i];
    if (!ns || typeof ns !== 'object' || typeof own(ns, 'global') !== 'string' || !ArrayIsArray(own(ns, 'members'))) return 'namespaces';
    for (let j = 0; j < ns.members.length; j++) if (typeof ns.members[j] !== 'string') return 'namespaces';
    const ec = own(ns, 'errorClass');
    if (ec !== undefined && ec !== null && (typeof ec !== 'object' || typeof own(ec, 'name') !== 'string'
      || typeof own(ec, 'memberNameProperty') !== 'string')) return 'errorClass';
  }
  for (const k of ['computeMs', 'maxOutputBytes', 'maxOldGenerationSizeMb']) {
    if (!isPositiveSafeInteger(own(m, k))) return k;
  }
  const mfb = own(m, 'maxFrameBytes');
  if (mfb !== undefined && !isPositiveSafeInteger(mfb)) return 'maxFrameBytes';
  return null;
}

// The JSON text of a token array (SPEC §6), written by hand: JSON.stringify
// on objects consults toJSON through prototypes the program can reach.
function tokensJson(tokens) {
  let s = '[';
  for (let i = 0; i < tokens.length; i++) {
    if (i > 0) s += ',';
    const t = tokens[i];
    const type = typeof t;
    if (type === 'string') s += JSONStringify(t);
    else if (type === 'number') s += '' + t;
    else if (t === true) s += 'true';
    else if (t === false) s += 'false';
    else if (t === null) s += 'null';
    else if (t.kind === 'array') s += '{"kind":"array","length":' + t.length + '}';
    else {
      const ks = t.keys;
      s += '{"kind":"object","keys":[';
      for (let j = 0; j < ks.length; j++) s += (j > 0 ? ',' : '') + JSONStringify(ks[j]);
      s += ']}';
    }
  }
  return s + ']';
}

// Node's console for the methods the program's console borrows (dir, table,
// trace, …), printing into a capture. Made, like the worker's own stdio
// streams (which Node makes on first use), before any program is known:
// they cost about a millisecond of a pooled run otherwise.
let captured = '';
const capture = new Writable({
  write(chunk, encoding, cb) {
    captured += typeof chunk === 'string' ? chunk : BufferPrototypeToString(chunk, 'utf8');
    cb();
  },
});
const nodeConsole = new ConsoleCtor({ stdout: capture, stderr: capture, colorMode: false });
const workerStdio = [process.stdout, process.stderr];

// Warm-up, while the sandbox waits in the pool: the codec's and the
// compiler's paths run once, so the first real run starts hot.
(function warmUp() {
  const sample = { a: [1, 'x', true, null, 2.5], b: { c: 'é' } };
  for (let i = 0; i < 20; i++) {
    const enc = wireEncode(sample, Infinity, 1e6, 'value');
    (enc.json !== undefined ? enc.json : tokensJson(enc.tokens));
    wireDecode(enc.tokens);
    stringCost('warm up ' + i);
  }
  new vm.Script('(async function (console) {"use strict";\nreturn 1\n})', { filename: 'warmup.js' });
})();

// --- binding calls ---------------------------------------------------------
// At module level, not in runProgram, so that a pooled sandbox's warm-up
// runs the very functions a run's calls go through (V8 optimizes them
// before the run needs them). The worker runs one program: this is its
// state. While warmingCalls, nothing is written and fd 3's reference is
// left alone.

let nextId = 0;
let callsJson = ''; // the calls of this turn, as JSON array elements
let callsBytes = 0;
let flushScheduled = false;
let finishRun = null; // runProgram's finish
let warmingCalls = false;
const noop = () => {};

// Logs and calls wait for the end of the turn (or 64 KB of logs), then
// leave in one write.
function flushTurn() {
  flushScheduled = false;
  if (finished) return;
  const lines = callsJson === '' ? '' : channel.line('{"type":"calls","calls":[' + callsJson + ']}');
  callsJson = '';
  callsBytes = 0;
  if (!warmingCalls) channel.flush(lines);
}

function scheduleFlush() {
  if (!flushScheduled && !warmingCalls) {
    flushScheduled = true;
    setImmediateOwn(flushTurn);
  }
}

function rejected(err) {
  return ownPromise(new PromiseCtor((resolve, reject) => reject(err)));
}

function fillError(err, errInfo, member, message) {
  err.message = message;
  if (errInfo !== null) defineData(err, errInfo.prop, member);
  return err;
}

function callBinding(f, global, member, errInfo, arg) {
  if (finished) return new PromiseCtor(noop);
  // Made here so that its stack shows where the program called: one
  // capture, from f's caller (the constructor's own is switched off).
  const limit = ErrorCtor.stackTraceLimit;
  ErrorCtor.stackTraceLimit = 0;
  const err = errInfo !== null ? new errInfo.cls('') : new ErrorCtor('');
  ErrorCtor.stackTraceLimit = limit;
  ErrorCaptureStackTrace(err, f);
  const envelope = 47 + numberCost(nextId + 1) + stringCost(global) + stringCost(member);
  const enc = wireEncode(arg === undefined ? null : arg, Infinity, maxFrameBytes - envelope, 'args');
  if (!enc.ok) {
    if (enc.tooLarge) {
      finishRun(['error', 'worker-exit', `the arguments of ${global}.${member} exceed maxFrameBytes (${maxFrameBytes})`]);
      return new PromiseCtor(noop);
    }
    return rejected(fillError(err, errInfo, member, 'binding arguments must be lossless JSON'));
  }
  const id = ++nextId;
  return ownPromise(new PromiseCtor((resolve, reject) => {
    MapPrototypeSet(pending, id, { resolve, reject, err, errInfo, member });
    if (pendingCount++ === 0 && !warmingCalls) SocketPrototypeRef(input);
    // One frame per turn: a batch never grows past maxFrameBytes.
    const call = '[' + id + ',' + JSONStringify(global) + ',' + JSONStringify(member) + ',' + (enc.json !== undefined ? enc.json : tokensJson(enc.tokens)) + ']';
    const bytes = envelope + enc.wire;
    if (callsJson !== '' && callsBytes + bytes + 40 > maxFrameBytes) flushTurn();
    callsJson = callsJson === '' ? call : callsJson + ',' + call;
    callsBytes += bytes + 1;
    scheduleFlush();
  }));
}

// `await p` takes its fast path (no `then` call) when p.constructor is
// the intrinsic %Promise%: an own property keeps it so even when the
// program rewrote Promise.prototype.constructor and then.
const PROMISE_CTOR_DESC = { __proto__: null, value: PromiseCtor, writable: true, enumerable: false, configurable: true };
function ownPromise(p) {
  ReflectDefineProperty(p, 'constructor', PROMISE_CTOR_DESC);
  return p;
}

function onReply(id, ok, payload) {
  const entry = MapPrototypeGet(pending, id);
  if (entry === undefined) return; // unknown or already answered
  MapPrototypeDelete(pending, id);
  if (--pendingCount === 0 && !warmingCalls) SocketPrototypeUnref(input);
  if (finished) return;
  if (ok === true) {
    const dec = wireDecode(payload);
    if (dec.ok) entry.resolve(dec.value);
    else entry.reject(fillError(entry.err, entry.errInfo, entry.member, 'binding resolution must be lossless JSON'));
  } else {
    const message = typeof payload === 'string' ? payload : 'binding failed';
    entry.reject(fillError(entry.err, entry.errInfo, entry.member, message));
  }
}

// Then, when the token came without a boot frame (a sandbox waiting in the
// pool; a cold run's boot frame is in the same read), the per-call paths run
// often enough for V8 to optimize them before a run needs them (about 20 ms
// of CPU): a call with a small argument, its frame line, a replies frame's
// decoding and the reply. In slices, so that a boot frame that arrives stops
// it at once.
const warmBinding = (arg) => callBinding(warmBinding, 'tools', 'inc', null, arg);
const WARM_CALLS = 1000;
const WARM_SLICE = 50;
const warmFrame = BufferFrom(BufferPrototypeToString(BufferFrom(
  '{"type":"replies","replies":[{"type":"reply","id":1,"ok":true,"value":[2]},'
  + '{"type":"reply","id":2,"ok":true,"value":[{"kind":"object","keys":["a"]},"x"]}]}'), 'base64'));
function warmCalls(done) {
  if (lineNo >= 2 || done >= WARM_CALLS) return;
  warmingCalls = true;
  for (let i = done; i < done + WARM_SLICE; i++) {
    warmBinding({ v: i });
    flushTurn();
    const rs = own(decodeLine(warmFrame), 'replies');
    const r = rs[0];
    onReply(nextId, own(r, 'ok'), own(r, 'value'));
    wireDecode(own(rs[1], 'value'));
  }
  warmingCalls = false;
  nextId = 0;
  setImmediateOwn(warmCalls, done + WARM_SLICE);
}

// Parenthesized, so that V8 compiles it with the module (while a pooled
// sandbox waits) rather than lazily when the boot frame comes (about 0.3 ms).
const runProgram = (function runProgram(boot) {
  const cap = boot.maxOutputBytes;

  let logsCost = 2;
  let logsCount = 0;
  let exitRequested = false;
  nextId = 0;
  callsJson = '';
  callsBytes = 0;
  flushScheduled = false;
  acceptReplies = true;
  finishRun = finish;

  function post(text) {
    const pendingBytes = channel.appendLog(JSONStringify(text));
    if (pendingBytes < 0) {
      // Over the buffer on its own: it leaves alone, after what is pending.
      channel.flush(channel.line('{"type":"log","text":' + JSONStringify(text) + '}'));
    } else if (pendingBytes >= FLUSH_AT) {
      channel.flush('');
    } else {
      scheduleFlush();
    }
  }

  function finish(m) {
    if (finished) return;
    finished = true;
    const computeMs = MathRound(ownEventLoopUtilization().active - startupActive);
    let json;
    if (m[0] === 'done') json = m.length > 1 ? '{"type":"done","value":' + m[1] + '}' : '{"type":"done"}';
    else if (m[0] === 'output-limit') json = '{"type":"output-limit"}';
    else json = '{"type":"done","error":{"kind":' + JSONStringify(m[1]) + ',"message":' + JSONStringify(m[2]) + '}}';
    // Calls issued in this turn still leave first (the host cancels them).
    const calls = callsJson === '' ? '' : channel.line('{"type":"calls","calls":[' + callsJson + ']}');
    callsJson = '';
    const stats = channel.line('{"type":"stats","computeMs":' + (computeMs > 0 ? computeMs : 0) + '}');
    if (json.length > BIG_FRAME) channel.flush(calls + stats, true, json);
    else channel.flush(calls + stats + channel.line(json), true);
  }

  // --- logs ---------------------------------------------------------------

  function emitLog(text) {
    if (finished) return;
    logsCost += stringCost(text) + (logsCount > 0 ? 1 : 0);
    logsCount++;
    if (logsCost > cap) {
      post(cutUtf8(text, cap));
      finish(['output-limit']);
      return;
    }
    post(text);
  }

  function render(args) {
    let s = '';
    for (let i = 0; i < args.length; i++) {
      if (i > 0) s += ' ';
      const a = args[i];
      s += typeof a === 'string' ? a : utilInspect(a);
    }
    return s;
  }

  const programConsole = {
    log(...args) { emitLog(render(args)); },
    info(...args) { emitLog(render(args)); },
    warn(...args) { emitLog(render(args)); },
    error(...args) { emitLog(render(args)); },
    debug(...args) { emitLog(render(args)); },
  };
  // The other console methods a program may reach for (dir, table, trace,
  // assert, count, time…) are Node's own, printing into a capture: what one
  // call prints is one entry (its final newline dropped).
  for (const method of ['dir', 'dirxml', 'table', 'trace', 'assert', 'count', 'countReset', 'time', 'timeEnd', 'timeLog']) {
    const impl = nodeConsole[method];
    programConsole[method] = {
      [method](...args) {
        captured = '';
        try {
          ReflectApply(impl, nodeConsole, args);
        } finally {
          let text = captured;
          captured = '';
          if (text !== '') {
            if (StringPrototypeCharCodeAt(text, text.length - 1) === 10) text = StringPrototypeSlice(text, 0, text.length - 1);
            emitLog(method === 'trace' ? cleanStack(text) : text);
          }
        }
      },
    }[method];
  }
  // process.env is {} (the Worker's env option); make it a plain object, so
  // that it is also lossless JSON.
  ReflectDefineProperty(process, 'env', {
    __proto__: null, value: {}, writable: true, enumerable: true, configurable: true,
  });
  ReflectDefineProperty(globalThis, 'console', {
    __proto__: null, value: programConsole, writable: true, enumerable: false, configurable: true,
  });

  function chunkText(chunk, encoding) {
    if (typeof chunk === 'string') {
      if (typeof encoding === 'string' && encoding !== 'utf8' && encoding !== 'utf-8') {
        return BufferPrototypeToString(BufferFrom(chunk, encoding), 'utf8');
      }
      return chunk;
    }
    if (isArrayBufferView(chunk)) return TextDecoderPrototypeDecode(utf8Lenient, chunk);
    throw new TypeErrorCtor('The "chunk" argument must be of type string or an instance of Buffer or Uint8Array');
  }

  function makeWrite() {
    return function write(chunk, encoding, cb) {
      if (typeof encoding === 'function') {
        cb = encoding;
        encoding = undefined;
      }
      const text = chunkText(chunk, encoding);
      if (text !== '') emitLog(text);
      if (typeof cb === 'function') processNextTick(cb);
      return true;
    };
  }
  for (const stream of workerStdio) {
    ReflectDefineProperty(stream, 'write', {
      __proto__: null, value: makeWrite(), writable: true, enumerable: false, configurable: true,
    });
  }

  // --- bindings -------------------------------------------------------------


  function makeErrorClass(name) {
    const holder = { [name]: class extends ErrorCtor {} };
    const cls = holder[name];
    ReflectDefineProperty(cls.prototype, 'name', {
      __proto__: null, value: name, writable: true, enumerable: false, configurable: true,
    });
    return cls;
  }

  function makeNamespace(ns, errInfo) {
    const obj = ObjectCreate(null);
    for (const member of ns.members) {
      const f = (arg) => callBinding(f, ns.global, member, errInfo, arg);
      ReflectDefineProperty(f, 'name', { __proto__: null, value: member, configurable: true });
      defineData(obj, member, f);
    }
    return obj;
  }

  const paramNames = ['console'];
  const paramValues = [programConsole];
  const classNames = [];
  const classValues = [];
  for (const ns of boot.namespaces) {
    let errInfo = null;
    if (ns.errorClass) {
      errInfo = { cls: makeErrorClass(ns.errorClass.name), prop: ns.errorClass.memberNameProperty };
      classNames.push(ns.errorClass.name);
      classValues.push(errInfo.cls);
    }
    paramNames.push(ns.global);
    paramValues.push(makeNamespace(ns, errInfo));
  }
  for (let i = 0; i < classNames.length; i++) {
    paramNames.push(classNames[i]);
    paramValues.push(classValues[i]);
  }

  // --- completion -----------------------------------------------------------

  // Drops the runner's own frames ("at … runner.mjs:…") from a stack.
  function cleanStack(st) {
    let res = '';
    let first = true;
    let start = 0;
    for (;;) {
      const nl = StringPrototypeIndexOf(st, '\n', start);
      const line = nl === -1 ? StringPrototypeSlice(st, start) : StringPrototypeSlice(st, start, nl);
      const isRunnerFrame = StringPrototypeIndexOf(line, '    at ') === 0
        && (StringPrototypeIndexOf(line, RUNNER_DIR_URL) !== -1 || StringPrototypeIndexOf(line, RUNNER_DIR_PATH) !== -1);
      if (!isRunnerFrame) {
        res += first ? line : '\n' + line;
        first = false;
      }
      if (nl === -1) return res;
      start = nl + 1;
    }
  }

  function isErrorLike(e) {
    if (isNativeError(e)) return true;
    if (isProxy(e)) return false;
    let p = e;
    for (let i = 0; i < 1000; i++) {
      p = ReflectGetPrototypeOf(p);
      if (p === null) return false;
      if (p === ErrorPrototype) return true;
      if (isProxy(p)) return false;
    }
    return false;
  }

  function describeThrown(e) {
    try {
      if ((typeof e === 'object' && e !== null) || typeof e === 'function') {
        if (isErrorLike(e)) {
          let st;
          try { st = e.stack; } catch {}
          if (typeof st === 'string') return cleanStack(st);
          let msg;
          try { msg = e.message; } catch {}
          if (typeof msg === 'string') return msg;
        }
      }
      return StringCtor(e);
    } catch {
      try {
        return 'a value was thrown that cannot be converted to a string (' + typeof e + ')';
      } catch {
        return 'a value was thrown that cannot be converted to a string';
      }
    }
  }

  function onValue(v) {
    try {
      if (finished) return;
      if (v === undefined) return finish(['done']);
      const limit = cap - logsCost;
      const enc = wireEncode(v, limit < 0 ? 0 : limit, maxFrameBytes - 24, 'value');
      if (enc.ok) return finish(['done', enc.json !== undefined ? enc.json : tokensJson(enc.tokens)]);
      if (enc.tooLarge === 'cost') return finish(['output-limit']);
      if (enc.tooLarge) {
        return finish(['error', 'worker-exit', `the result frame would exceed maxFrameBytes (${maxFrameBytes})`]);
      }
      finish(['error', 'invalid-output', `the return value is not lossless JSON: ${enc.what} at ${enc.path}`]);
    } catch (e) {
      finish(['error', 'worker-exit', 'the runner failed to encode the return value: ' + describeThrown(e)]);
    }
  }

  function onThrown(e) {
    if (finished) return;
    const message = describeThrown(e);
    if (logsCost + stringCost(message) > cap) finish(['output-limit']);
    else finish(['error', 'exception', message]);
  }

  // A throw in a callback or an unhandled rejection ends the run as node
  // itself would, unless the program listens for it too.
  const processListenerCount = process.listenerCount;
  const ownsEvent = (event) => {
    try {
      return ReflectApply(processListenerCount, process, [event]) > 1;
    } catch {
      return false;
    }
  };
  process.on('uncaughtException', pinApply((e) => { if (!ownsEvent('uncaughtException')) onThrown(e); }));
  process.on('unhandledRejection', pinApply((e) => { if (!ownsEvent('unhandledRejection')) onThrown(e); }));
  const originalExit = process.exit;
  process.exit = function exit(code) {
    exitRequested = true;
    return ReflectApply(originalExit, process, arguments);
  };
  process.on('exit', pinApply((code) => {
    if (finished) return;
    try {
      channel.flush('');
    } catch {}
    MessagePortPrototypePostMessage(control, ['exit', code, exitRequested]);
  }));

  // --- compile and run ------------------------------------------------------

  // The program comes in the boot frame, or in a `program` frame after it
  // (the host sends a pooled sandbox its boot frame while it strips the
  // program's types, so the two overlap).
  function compileAndStart(program) {
    // From here fd 3 is referenced only while calls are pending (until the
    // program came, it kept the worker waiting for it).
    if (pendingCount === 0) SocketPrototypeUnref(input);
    const source = `(async function (${paramNames.join(', ')}) {"use strict";\n${program}\n})`;
    let fn;
    try {
      const options = { filename: 'program.ts', lineOffset: -1 };
      if (vm.constants && vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER) {
        options.importModuleDynamically = vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER;
      }
      const script = new vm.Script(source, options);
      try {
        // The body must stand on its own: a program that closes the wrapping
        // function early (`}); …; (function () {`) is refused, not run.
        new AsyncFunctionCtor(...paramNames, `"use strict";\n${program}\n`);
      } catch (e) {
        finish(['error', 'exception',
          `program.ts\n\nSyntaxError: ${e && e.message} (the program closes the function it runs in)`]);
        return;
      }
      fn = script.runInThisContext();
    } catch (e) {
      // V8's decorated SyntaxError: "program.ts:LINE\n<line>\n   ^^^\n\nSyntaxError: …"
      let msg = typeof e?.stack === 'string' ? e.stack : StringCtor(e);
      const at = msg.indexOf('\n    at ');
      if (at !== -1) msg = msg.slice(0, at);
      finish(['error', 'exception', msg]);
      return;
    }

    // Started from a promise job, so that the program's stack traces hold no
    // module-loading frames below its own.
    function start() {
      // The worker's own start-up is not the program's: the controller counts
      // the compute budget from here.
      startupActive = ownEventLoopUtilization().active;
      MessagePortPrototypePostMessage(control, ['started', startupActive, boot.computeMs]);
      let p;
      try {
        p = ReflectApply(fn, undefined, paramValues);
      } catch (e) {
        onThrown(e);
        return;
      }
      // `then` must not consult a rewritten Promise.prototype.constructor or
      // Symbol.species: the program holds no reference to p, so an own
      // `constructor: undefined` makes then() use the intrinsic %Promise%.
      ReflectDefineProperty(p, 'constructor', { __proto__: null, value: undefined, writable: true, configurable: true });
      PromisePrototypeThen(p, onValue, onThrown);
    }
    PromisePrototypeThen(PromiseCtor.resolve(), start);
  }

  if (typeof boot.program === 'string') compileAndStart(boot.program);
  else onProgram = compileAndStart;
});
