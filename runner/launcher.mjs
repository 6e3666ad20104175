// lunarun's runner: one dependency-free file, three roles (docs/PROTOCOL.md).
//
//   launcher    `node runner.mjs`: speaks base64 JSON frames with the host on
//               stdin/stdout, spawns the controller in its own process group,
//               turns the controller's stdout/stderr into log entries, keeps
//               an output ledger, writes exactly one terminal frame.
//   controller  `node runner.mjs --controller`: fd 3 is a private socket to
//               the launcher; starts the worker, polls its compute budget.
//   worker      a worker_thread of the controller that runs the program.
//
// The worker captures every intrinsic it uses right here, when the module is
// evaluated, before any program code exists, and never looks anything up on
// a prototype the program can reach afterwards: a program that rewrites JSON,
// Array.prototype, Object, Promise.prototype.then, Function.prototype.call…
// cannot corrupt transport or accounting.

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { Socket } from 'node:net';
import { Writable } from 'node:stream';
import { StringDecoder } from 'node:string_decoder';
import { fileURLToPath } from 'node:url';
import * as util from 'node:util';
import { performance as ownPerformance } from 'node:perf_hooks';
import vm from 'node:vm';
import {
  MessageChannel, MessagePort, Worker, isMainThread, receiveMessageOnPort, workerData,
} from 'node:worker_threads';

// ---------------------------------------------------------------------------
// Intrinsics, captured before any program runs.

const ReflectApply = Reflect.apply;
const ReflectDefineProperty = Reflect.defineProperty;
const ReflectOwnKeys = Reflect.ownKeys;
const ReflectGetOwnPropertyDescriptor = Reflect.getOwnPropertyDescriptor;
const ReflectGetPrototypeOf = Reflect.getPrototypeOf;
const ObjectCreate = Object.create;
const ObjectHasOwn = Object.hasOwn;
const ArrayIsArray = Array.isArray;
const NumberIsSafeInteger = Number.isSafeInteger;
const ObjectPrototype = Object.prototype;
const ArrayPrototype = Array.prototype;
const ErrorPrototype = Error.prototype;
const ErrorCtor = Error;
const TypeErrorCtor = TypeError;
const ErrorCaptureStackTrace = Error.captureStackTrace;
const StringCtor = String;
const PromiseCtor = Promise;
const MapCtor = Map;
const JSONStringify = JSON.stringify;
const AsyncFunctionCtor = (async function () {}).constructor;
const uncurry = Function.prototype.bind.bind(Function.prototype.call);
const StringPrototypeCharCodeAt = uncurry(String.prototype.charCodeAt);
const StringPrototypeSlice = uncurry(String.prototype.slice);
const StringPrototypeIndexOf = uncurry(String.prototype.indexOf);
const RegExpPrototypeExec = uncurry(RegExp.prototype.exec);
const MapPrototypeGet = uncurry(Map.prototype.get);
const MapPrototypeSet = uncurry(Map.prototype.set);
const MapPrototypeDelete = uncurry(Map.prototype.delete);
const PromisePrototypeThen = uncurry(Promise.prototype.then);
const MessagePortPrototypePostMessage = uncurry(MessagePort.prototype.postMessage);
const MessagePortPrototypeRef = uncurry(MessagePort.prototype.ref);
const MessagePortPrototypeUnref = uncurry(MessagePort.prototype.unref);
const BufferByteLength = Buffer.byteLength;
const BufferFrom = Buffer.from;
const BufferPrototypeToString = uncurry(Buffer.prototype.toString);
const TextDecoderPrototypeDecode = uncurry(TextDecoder.prototype.decode);
const utf8Lenient = new TextDecoder('utf-8');
const utilInspect = util.inspect;
const {
  isProxy, isDate, isMap, isSet, isWeakMap, isWeakSet, isRegExp, isNativeError, isBoxedPrimitive,
  isArrayBufferView, isAnyArrayBuffer, isPromise, isGeneratorObject, isMapIterator, isSetIterator,
  isArgumentsObject, isModuleNamespaceObject, isExternal,
} = util.types;
const processNextTick = process.nextTick;
const ConsoleCtor = console.Console;

const RUNNER_URL = import.meta.url;
const RUNNER_PATH = fileURLToPath(import.meta.url);
const DEFAULT_MAX_FRAME_BYTES = 268435456;
const DRAIN_AFTER_EXIT_MS = 250;

// ---------------------------------------------------------------------------
// Small hardened helpers (usable after the program started).

// A reusable null-prototype data descriptor: defining with it never consults
// a prototype (no `get`/`set` inherited from Object.prototype).
const DATA_DESC = ObjectCreate(null);
DATA_DESC.value = undefined;
DATA_DESC.writable = true;
DATA_DESC.enumerable = true;
DATA_DESC.configurable = true;

function defineData(obj, key, value) {
  DATA_DESC.value = value;
  ReflectDefineProperty(obj, key, DATA_DESC);
  DATA_DESC.value = undefined;
}

const DIGIT_START_RE = /^[0-9]/;

// True when `arr[arr.length] = v` on an ordinary array cannot reach program
// code: Array.prototype still inherits straight from Object.prototype (whose
// own prototype is immutable) and neither has an own key that is an index
// (index keys come first in own-key order, so keys[0] tells). Otherwise the
// slow path (defineProperty) is used.
function protoClean() {
  if (ReflectGetPrototypeOf(ArrayPrototype) !== ObjectPrototype) return false;
  let k = ReflectOwnKeys(ArrayPrototype)[0];
  if (typeof k === 'string' && RegExpPrototypeExec(DIGIT_START_RE, k) !== null) return false;
  k = ReflectOwnKeys(ObjectPrototype)[0];
  if (typeof k === 'string' && RegExpPrototypeExec(DIGIT_START_RE, k) !== null) return false;
  return true;
}

// True when `obj[k] = v` on a fresh ordinary object, for k !== "__proto__",
// cannot reach program code: every own property of Object.prototype but
// __proto__ is a writable data property.
function objectProtoPlain() {
  const keys = ReflectOwnKeys(ObjectPrototype);
  for (let i = 0; i < keys.length; i++) {
    const k = keys[i];
    if (k === '__proto__') continue;
    const d = ReflectGetOwnPropertyDescriptor(ObjectPrototype, k);
    if (d === undefined || !ObjectHasOwn(d, 'value') || d.writable !== true) return false;
  }
  return true;
}

// Copies every method and accessor of obj's prototype chain onto obj itself,
// read-only: node's internals reach the private port's machinery through
// `this.x` / `this[symbol]` lookups, and a program that rewrites
// MessagePort.prototype or EventTarget.prototype must not see them (it would
// get hold of the port).
function pinMethods(obj) {
  for (let p = ReflectGetPrototypeOf(obj); p !== null && p !== ObjectPrototype; p = ReflectGetPrototypeOf(p)) {
    const keys = ReflectOwnKeys(p);
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i];
      if (k === 'constructor' || ObjectHasOwn(obj, k)) continue;
      const d = ReflectGetOwnPropertyDescriptor(p, k);
      const pinned = ObjectCreate(null);
      if (ObjectHasOwn(d, 'value')) {
        if (typeof d.value !== 'function') continue;
        pinned.value = d.value;
        pinned.writable = false;
      } else {
        pinned.get = d.get;
        pinned.set = d.set;
      }
      pinned.enumerable = false;
      pinned.configurable = false;
      ReflectDefineProperty(obj, k, pinned);
    }
  }
}

function push(fast, arr, v) {
  if (fast) arr[arr.length] = v;
  else defineData(arr, arr.length, v);
}

// ---------------------------------------------------------------------------
// The ledger (SPEC §5).

const ANY_SPECIAL_RE = /["\\\x00-\x1f\ud800-\udfff]/;
const COST_RE = /(["\\\b\t\n\f\r])|([\x00-\x1f])|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

// Cost of s as a JSON string: quotes plus, per code point, `"` `\` and
// \b \t \n \f \r 2, other controls 6, a lone surrogate 6, else UTF-8 length.
function stringCost(s) {
  const len = s.length;
  if (len <= 24) {
    let cost = 2;
    for (let i = 0; i < len; i++) {
      const c = StringPrototypeCharCodeAt(s, i);
      if (c >= 0x20 && c < 0x7f) cost += c === 0x22 || c === 0x5c ? 2 : 1;
      else if (c < 0x20) cost += c === 8 || c === 9 || c === 10 || c === 12 || c === 13 ? 2 : 6;
      else if (c < 0x800) cost += c < 0x80 ? 1 : 2;
      else if (c < 0xd800 || c > 0xdfff) cost += 3;
      else if (c <= 0xdbff && i + 1 < len) {
        const d = StringPrototypeCharCodeAt(s, i + 1);
        if (d >= 0xdc00 && d <= 0xdfff) { cost += 4; i++; } else cost += 6;
      } else cost += 6;
    }
    return cost;
  }
  let cost = BufferByteLength(s, 'utf8') + 2; // a lone surrogate counts 3 here
  if (RegExpPrototypeExec(ANY_SPECIAL_RE, s) === null) return cost;
  COST_RE.lastIndex = 0;
  let m;
  while ((m = RegExpPrototypeExec(COST_RE, s)) !== null) {
    if (m[1] !== undefined) cost += 1;
    else if (m[2] !== undefined) cost += 5;
    else cost += 3;
  }
  COST_RE.lastIndex = 0;
  return cost;
}

function numberCost(n) {
  if (n >= 0 && n < 1e9 && n === (n | 0)) {
    return n < 10 ? 1 : n < 100 ? 2 : n < 1000 ? 3 : n < 1e4 ? 4 : n < 1e5 ? 5 : n < 1e6 ? 6 : n < 1e7 ? 7 : n < 1e8 ? 8 : 9;
  }
  return ('' + n).length;
}

// The longest prefix of s whose UTF-8 length is at most max bytes, never
// splitting a surrogate pair.
function cutUtf8(s, max) {
  if (BufferByteLength(s, 'utf8') <= max) return s;
  const n = s.length;
  let bytes = 0;
  let i = 0;
  while (i < n) {
    const c = StringPrototypeCharCodeAt(s, i);
    let w = 3;
    let step = 1;
    if (c < 0x80) w = 1;
    else if (c < 0x800) w = 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < n) {
      const d = StringPrototypeCharCodeAt(s, i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) { w = 4; step = 2; }
    }
    if (bytes + w > max) break;
    bytes += w;
    i += step;
  }
  return StringPrototypeSlice(s, 0, i);
}

// Compact-JSON cost of the value that a token array describes.
function tokensCost(tokens) {
  let cost = 0;
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i];
    if (typeof t === 'string') cost += stringCost(t);
    else if (typeof t === 'number') cost += numberCost(t);
    else if (t === true || t === null) cost += 4;
    else if (t === false) cost += 5;
    else if (t && t.kind === 'array') cost += 2 + (t.length > 0 ? t.length - 1 : 0);
    else if (t && t.kind === 'object' && ArrayIsArray(t.keys)) {
      const ks = t.keys;
      cost += 2 + (ks.length > 0 ? ks.length - 1 : 0);
      for (let j = 0; j < ks.length; j++) cost += stringCost(StringCtor(ks[j])) + 1;
    }
  }
  return cost;
}

// ---------------------------------------------------------------------------
// Wire encoding (SPEC §6), iterative. Reads each property of the value once
// (through its descriptor: getters are called once, toJSON is never
// consulted) and refuses anything JSON would not carry exactly.

const IDENT_RE = /^[A-Za-z_$][A-Za-z0-9_$]*$/;

function pathOf(stack, rootName) {
  let p = rootName;
  for (let i = 0; i < stack.length; i++) {
    const f = stack[i];
    const at = f.i - 1;
    if (f.keys === null) p += '[' + at + ']';
    else {
      const k = f.keys[at];
      p += RegExpPrototypeExec(IDENT_RE, k) !== null ? '.' + k : '[' + JSONStringify(k) + ']';
    }
  }
  return p;
}

function className(proto) {
  try {
    const d = ReflectGetOwnPropertyDescriptor(proto, 'constructor');
    if (d && ObjectHasOwn(d, 'value') && typeof d.value === 'function') {
      const nd = ReflectGetOwnPropertyDescriptor(d.value, 'name');
      if (nd && ObjectHasOwn(nd, 'value') && typeof nd.value === 'string' && nd.value !== '') {
        return 'an instance of ' + nd.value;
      }
    }
  } catch {}
  return 'an object that is not a plain object';
}

function exoticName(v) {
  if (isDate(v)) return 'a Date';
  if (isMap(v)) return 'a Map';
  if (isSet(v)) return 'a Set';
  if (isWeakMap(v)) return 'a WeakMap';
  if (isWeakSet(v)) return 'a WeakSet';
  if (isRegExp(v)) return 'a RegExp';
  if (isNativeError(v)) return 'an Error';
  if (isBoxedPrimitive(v)) return 'a boxed primitive';
  if (isArrayBufferView(v)) return 'a typed array or DataView';
  if (isAnyArrayBuffer(v)) return 'an ArrayBuffer';
  if (isPromise(v)) return 'a Promise';
  if (isGeneratorObject(v)) return 'a generator';
  if (isMapIterator(v) || isSetIterator(v)) return 'an iterator';
  if (isArgumentsObject(v)) return 'an arguments object';
  if (isModuleNamespaceObject(v)) return 'a module namespace';
  if (isExternal(v)) return 'an external value';
  return null;
}

// Returns {ok: true, tokens, cost, wire} or {ok: false, tooLarge, what, path}.
// Two running sizes: `cost`, the compact-JSON cost of the value (SPEC §5),
// and `wire`, the JSON size of the token array. Past costLimit or wireLimit
// the encoding stops (tooLarge: 'cost' or 'wire'), before any copy that
// would cross them, so a shared-reference bomb stops early too.
//
// A container's own keys are taken when it is opened (its marker needs
// them); each child is read, through its property descriptor, when it is
// visited: a getter is called once, a property gone by then is refused.
function wireEncode(root, costLimit, wireLimit, rootName) {
  const tokens = [];
  const stack = [];
  // Every container met so far, to its frame: open (an ancestor: meeting
  // it again is a cycle) or closed (its token range, to copy).
  const seenMap = new MapCtor();
  let fast = protoClean();
  let cost = 0;
  let wire = 1; // the brackets of the token array, less one comma
  let v = root;
  let what = null;
  // Past wireLimit, when costLimit is finite, the encoding goes on without
  // tokens, to tell "over the output cap" (cost) from "over the frame cap".
  let tokensOff = false;

  for (;;) {
    const t = typeof v;
    if (t === 'string') {
      if (tokensOff) ; else if (fast) tokens[tokens.length] = v; else push(false, tokens, v);
      const c = stringCost(v);
      cost += c;
      wire += c + 1;
    } else if (t === 'number') {
      if (v !== v) what = 'NaN';
      else if (v === Infinity) what = 'Infinity';
      else if (v === -Infinity) what = '-Infinity';
      else if (v === 0 && 1 / v < 0) what = '-0';
      else {
        if (tokensOff) ; else if (fast) tokens[tokens.length] = v; else push(false, tokens, v);
        const c = numberCost(v);
        cost += c;
        wire += c + 1;
      }
    } else if (t === 'boolean') {
      if (tokensOff) ; else if (fast) tokens[tokens.length] = v; else push(false, tokens, v);
      cost += v ? 4 : 5;
      wire += v ? 5 : 6;
    } else if (v === null) {
      if (tokensOff) ; else if (fast) tokens[tokens.length] = null; else push(false, tokens, null);
      cost += 4;
      wire += 5;
    } else if (t === 'undefined') what = 'undefined';
    else if (t === 'bigint') what = 'a bigint';
    else if (t === 'symbol') what = 'a symbol';
    else if (t === 'function') what = 'a function';
    else if (t !== 'object') what = 'a value of type ' + t;
    else {
      const seen = MapPrototypeGet(seenMap, v);
      if (seen !== undefined && seen.open) what = 'a cycle';
      else if (seen !== undefined) {
        // A shared, acyclic reference: copied, not read again.
        cost += seen.cost;
        wire += seen.wire;
        if (!tokensOff && cost <= costLimit && wire <= wireLimit) {
          for (let i = seen.start; i < seen.end; i++) push(fast, tokens, tokens[i]);
        }
      } else if (isProxy(v)) what = 'a Proxy';
      else if (ArrayIsArray(v)) {
        if (ReflectGetPrototypeOf(v) !== ArrayPrototype) what = 'an array with a non-standard prototype';
        else {
          const n = v.length;
          const keys = ReflectOwnKeys(v);
          // Indices come first, ascending, then "length": with exactly n + 1
          // keys, keys[n] === "length" and keys[n - 1] === "n - 1", the
          // array is dense and has no other own property.
          if (keys.length !== n + 1 || keys[n] !== 'length' || (n > 0 && keys[n - 1] !== '' + (n - 1))) {
            what = 'a sparse array or an array with extra properties';
          } else {
            const frame = {
              obj: v, keys: null, i: 0, n, open: true, start: tokens.length, end: 0, cost, wire,
            };
            push(fast, stack, frame);
            MapPrototypeSet(seenMap, v, frame);
            if (!tokensOff) push(fast, tokens, { kind: 'array', length: n });
            cost += 2 + (n > 0 ? n - 1 : 0);
            wire += 27 + numberCost(n); // {"kind":"array","length":n},
          }
        }
      } else {
        const proto = ReflectGetPrototypeOf(v);
        if (proto !== ObjectPrototype && proto !== null) what = exoticName(v) || className(proto);
        else {
          const keys = ReflectOwnKeys(v);
          const n = keys.length;
          let keyCost = 0;
          for (let i = 0; i < n; i++) {
            const k = keys[i];
            if (typeof k !== 'string') { what = 'an object with a symbol key'; break; }
            keyCost += stringCost(k) + 1;
          }
          if (what === null) {
            const frame = {
              obj: v, keys, i: 0, n, open: true, start: tokens.length, end: 0, cost, wire,
            };
            push(fast, stack, frame);
            MapPrototypeSet(seenMap, v, frame);
            if (!tokensOff) push(fast, tokens, { kind: 'object', keys });
            cost += 2 + (n > 0 ? n - 1 : 0) + keyCost;
            // {"kind":"object","keys":[k,…]}, : each key costs its string
            // cost plus a comma (keyCost counted a colon instead).
            wire += 28 + (n > 0 ? n - 1 : 0) + keyCost - n;
          }
        }
      }
    }
    if (what === null) {
      if (cost > costLimit) return { ok: false, tooLarge: 'cost', what: 'too large', path: rootName };
      if (wire > wireLimit) {
        if (costLimit === Infinity) return { ok: false, tooLarge: 'wire', what: 'too large', path: rootName };
        tokensOff = true;
      }
      // Next value in pre-order; close finished containers.
      for (;;) {
        if (stack.length === 0) {
          if (tokensOff) return { ok: false, tooLarge: 'wire', what: 'too large', path: rootName };
          return { ok: true, tokens, cost, wire };
        }
        const top = stack[stack.length - 1];
        if (top.i < top.n) {
          const obj = top.obj;
          const key = top.keys === null ? top.i : top.keys[top.i];
          top.i++;
          const d = ReflectGetOwnPropertyDescriptor(obj, key);
          if (d === undefined) {
            what = top.keys === null ? 'a sparse array' : 'a property removed while it was read';
          } else if (!d.enumerable) {
            what = top.keys === null ? 'an array with a non-enumerable element' : 'a non-enumerable property';
          } else if (ObjectHasOwn(d, 'value')) {
            v = d.value;
          } else if (d.get === undefined) {
            v = undefined;
          } else {
            try {
              v = ReflectApply(d.get, obj, []);
            } catch {
              what = 'a getter that throws';
            }
            fast = fast && protoClean();
          }
          break;
        }
        // Closed: from now on the frame records the token range and sizes.
        top.open = false;
        top.end = tokens.length;
        top.cost = cost - top.cost;
        top.wire = wire - top.wire;
        top.obj = null;
        top.keys = null;
        stack.length = stack.length - 1;
      }
    }
    if (what !== null) return { ok: false, tooLarge: false, what, path: pathOf(stack, rootName) };
  }
}

// Wire validation (SPEC §6), iterative, for the launcher: token arrays from
// the host, parsed by JSON.parse in a realm no program runs in. Refuses a
// marker with missing or extra keys or a wrong kind, a length beyond the
// tokens left, keys that are not strings or repeat, a bare array token,
// -0 / non-finite numbers, trailing tokens, and anything that is not exactly
// one complete root.
function validTokens(tokens) {
  if (!Array.isArray(tokens) || tokens.length === 0) return false;
  const n = tokens.length;
  let need = 1; // values still expected
  for (let pos = 0; pos < n; pos++) {
    if (need === 0) return false; // trailing tokens
    need--;
    const t = tokens[pos];
    const type = typeof t;
    if (type === 'string' || type === 'boolean' || t === null) continue;
    if (type === 'number') {
      if (!Number.isFinite(t) || Object.is(t, -0)) return false;
      continue;
    }
    if (type !== 'object' || Array.isArray(t)) return false;
    const ks = Object.keys(t);
    if (ks.length !== 2 || ks[0] !== 'kind') return false;
    if (t.kind === 'array' && ks[1] === 'length') {
      const len = t.length;
      if (!Number.isSafeInteger(len) || len < 0 || len > n - pos - 1) return false;
      need += len;
    } else if (t.kind === 'object' && ks[1] === 'keys') {
      const keys = t.keys;
      if (!Array.isArray(keys) || keys.length > n - pos - 1) return false;
      if (keys.length > 1) {
        const seen = new Set();
        for (const k of keys) {
          if (typeof k !== 'string' || seen.has(k)) return false;
          seen.add(k);
        }
      } else if (keys.length === 1 && typeof keys[0] !== 'string') return false;
      need += keys.length;
    } else return false;
  }
  return need === 0;
}

// Wire decoding, iterative, for the worker. Its input was validated by the
// launcher (validTokens) and structured-cloned here, so it only re-checks
// shapes cheaply, reading own data properties only. Builds ordinary objects
// and arrays of this realm by definition (an own "__proto__" key stays a
// key). Returns {ok: true, value} or {ok: false}.
const DECODE_FAIL = { ok: false };

function wireDecode(tokens) {
  if (!ArrayIsArray(tokens)) return DECODE_FAIL;
  const n = tokens.length;
  if (n === 0) return DECODE_FAIL;
  const fast = protoClean();
  const fastObj = fast && objectProtoPlain();
  const stack = [];
  let pos = 0;
  let root;
  for (;;) {
    if (pos >= n) return DECODE_FAIL;
    const t = tokens[pos++];
    let v;
    let frame = null;
    const type = typeof t;
    if (type === 'string' || type === 'boolean') v = t;
    else if (type === 'number') {
      if (t - t !== 0 || (t === 0 && 1 / t < 0)) return DECODE_FAIL;
      v = t;
    } else if (t === null) v = null;
    else if (type === 'object' && !ArrayIsArray(t) && ObjectHasOwn(t, 'kind')) {
      const kind = t.kind;
      if (kind === 'array' && ObjectHasOwn(t, 'length')) {
        const len = t.length;
        if (!NumberIsSafeInteger(len) || len < 0 || len > n - pos) return DECODE_FAIL;
        v = [];
        if (len > 0) frame = { c: v, keys: null, i: 0, n: len };
      } else if (kind === 'object' && ObjectHasOwn(t, 'keys')) {
        const keys = t.keys;
        if (!ArrayIsArray(keys)) return DECODE_FAIL;
        const kl = keys.length;
        if (kl > n - pos) return DECODE_FAIL;
        v = {};
        if (kl > 0) frame = { c: v, keys, i: 0, n: kl };
      } else return DECODE_FAIL;
    } else return DECODE_FAIL;

    if (stack.length === 0) root = v;
    else {
      const top = stack[stack.length - 1];
      if (top.keys === null) {
        if (fast) top.c[top.c.length] = v; else push(false, top.c, v);
      } else {
        const k = top.keys[top.i];
        if (typeof k !== 'string' || ObjectHasOwn(top.c, k)) return DECODE_FAIL;
        if (fastObj && k !== '__proto__') top.c[k] = v;
        else defineData(top.c, k, v);
      }
      top.i++;
    }
    if (frame !== null) push(fast, stack, frame);
    while (stack.length > 0 && stack[stack.length - 1].i === stack[stack.length - 1].n) {
      stack.length = stack.length - 1;
    }
    if (stack.length === 0) return pos === n ? { ok: true, value: root } : DECODE_FAIL;
  }
}

// ---------------------------------------------------------------------------
// Line reading with one concatenation per line (lines may be ~90 MB).

class LineReader {
  constructor(maxLine, onLine, onTooLong) {
    this.maxLine = maxLine;
    this.onLine = onLine; // returns false to stop reading
    this.onTooLong = onTooLong;
    this.chunks = [];
    this.len = 0;
    this.stopped = false;
  }

  push(buf) {
    let start = 0;
    while (!this.stopped) {
      const nl = buf.indexOf(10, start);
      if (nl === -1) {
        const rest = buf.length - start;
        if (rest > 0) {
          if (this.len + rest > this.maxLine) return this.tooLong();
          this.chunks.push(start === 0 ? buf : buf.subarray(start));
          this.len += rest;
        }
        return;
      }
      const part = nl - start;
      if (this.len + part > this.maxLine) return this.tooLong();
      let line;
      if (this.chunks.length === 0) line = buf.subarray(start, nl);
      else {
        this.chunks.push(buf.subarray(start, nl));
        line = Buffer.concat(this.chunks, this.len + part);
        this.chunks = [];
        this.len = 0;
      }
      start = nl + 1;
      if (this.onLine(line) === false) { this.stopped = true; return; }
    }
  }

  get pending() {
    return this.len > 0;
  }

  tooLong() {
    this.stopped = true;
    this.chunks = [];
    this.onTooLong();
  }
}

function isPositiveSafeInteger(x) {
  return NumberIsSafeInteger(x) && x >= 1;
}

function base64Length(n) {
  return Math.ceil(n / 3) * 4;
}

// ---------------------------------------------------------------------------
// Launcher.

// The terminal message of a sandbox that broke or died without settling.
function workerExit(message) {
  return { type: 'done', error: { kind: 'worker-exit', message } };
}

function launcherMain() {
  let maxFrameBytes = DEFAULT_MAX_FRAME_BYTES;
  let cap = Infinity;
  let booted = false;
  let child = null;
  let channel = null;
  let token = null;

  // Ledger of every entry forwarded.
  let logsCost = 2;
  let logsCount = 0;
  let ledgerOver = false;

  // Ending: the terminal message once decided ({type: 'done', ...} or
  // {type: 'output-limit'}), and the cost of a done value.
  let ending = null;
  let endingValueCost = 0;
  let finalWritten = false;

  let childExited = false;
  let exitCode = null;
  let exitSignal = null;
  let exitTimer = null;
  let channelEnded = false;
  let lostTimer = null;
  let oomHint = false;
  const pipeEnded = [false, false];
  const decoders = [new StringDecoder('utf8'), new StringDecoder('utf8')];

  // Frames to the host, batched into one write per turn of the loop.
  let out = [];
  let outBytes = 0;
  let flushScheduled = false;

  function flush() {
    flushScheduled = false;
    if (out.length === 0) return;
    const data = out.length === 1 ? out[0] : out.join('');
    out = [];
    outBytes = 0;
    process.stdout.write(data);
  }

  // Returns false (writing nothing) when the frame is over maxFrameBytes.
  function queueFrame(msg) {
    return queueRaw(Buffer.from(JSON.stringify(msg), 'utf8'));
  }

  // The same for a message that is already JSON text (UTF-8 bytes).
  function queueRaw(bytes) {
    if (bytes.length > maxFrameBytes) return false;
    const line = bytes.toString('base64') + '\n';
    out.push(line);
    outBytes += line.length;
    if (outBytes >= 1 << 20) flush();
    else if (!flushScheduled) {
      flushScheduled = true;
      setImmediate(flush);
    }
    return true;
  }

  function killGroup() {
    if (child && child.pid) {
      try { process.kill(-child.pid, 'SIGKILL'); } catch {}
    }
  }

  // A log message already in JSON (a line from the controller). Its ledger
  // cost is the byte length of the JSON string, which JSON.stringify
  // escapes exactly as SPEC §5 counts: no parse is needed.
  function forwardLogRaw(bytes) {
    if (ledgerOver || finalWritten) return;
    // {"type":"log","text":"…"}: the string is from the last quote of the
    // prefix to the byte before the closing brace.
    logsCost += bytes.length - (LOG_PREFIX.length - 1) - 1 + (logsCount > 0 ? 1 : 0);
    logsCount++;
    if (logsCost > cap) {
      ledgerOver = true;
      const text = JSON.parse(bytes.toString('utf8')).text;
      queueFrame({ type: 'log', text: cutUtf8(String(text), cap) });
      conclude({ type: 'output-limit' });
      return;
    }
    if (!queueRaw(bytes)) conclude(workerExit(`a log entry's frame exceeds maxFrameBytes (${maxFrameBytes})`));
  }

  function forwardLog(text) {
    if (ledgerOver || finalWritten) return;
    if (!oomHint && (text.includes('heap out of memory') || text.includes('Reached heap limit'))) oomHint = true;
    logsCost += stringCost(text) + (logsCount > 0 ? 1 : 0);
    logsCount++;
    if (logsCost > cap) {
      ledgerOver = true;
      queueFrame({ type: 'log', text: cutUtf8(text, cap) });
      conclude({ type: 'output-limit' });
      return;
    }
    if (!queueFrame({ type: 'log', text })) {
      conclude(workerExit(`a log entry's frame exceeds maxFrameBytes (${maxFrameBytes})`));
    }
  }

  // Decides the terminal message (once; an output-limit found while
  // draining replaces a pending done), then kills and drains.
  function conclude(msg, valueCost = 0) {
    if (finalWritten) return;
    if (ending !== null) {
      if (msg.type === 'output-limit') ending = msg;
      return;
    }
    ending = msg;
    endingValueCost = valueCost;
    killGroup();
    if (channel) {
      channel.removeAllListeners('data');
      channel.destroy();
    }
    // Safety net: never wait on the drain for long.
    setTimeout(finish, 5000).unref();
    if (!child || !child.pid) return finish();
    maybeFinish();
  }

  function maybeFinish() {
    if (ending === null || finalWritten) return;
    if ((pipeEnded[0] && pipeEnded[1] && childExited) || !child || !child.pid) finish();
    else if (childExited && exitTimer === null) exitTimer = setTimeout(finish, DRAIN_AFTER_EXIT_MS);
  }

  function finish() {
    if (finalWritten) return;
    // What the pipes still hold counts, then nothing more is read.
    for (let i = 0; i < 2; i++) {
      if (!pipeEnded[i]) {
        pipeEnded[i] = true;
        const rest = decoders[i].end();
        if (rest) forwardLog(rest);
      }
    }
    if (child) {
      child.stdout.destroy();
      child.stderr.destroy();
    }
    let msg = ending;
    // Logs plus the value or the failure message over the cap: output-limit.
    if (msg.type === 'done' && (msg.value !== undefined || msg.error !== undefined || msg.raw !== undefined)
      && !ledgerOver && logsCost + endingValueCost > cap) {
      msg = { type: 'output-limit' };
    }
    finalWritten = true;
    flush();
    let bytes = msg.raw !== undefined ? msg.raw : Buffer.from(JSON.stringify(msg), 'utf8');
    if (bytes.length > maxFrameBytes) {
      bytes = Buffer.from(JSON.stringify(workerExit(`the result frame exceeds maxFrameBytes (${maxFrameBytes})`)));
    }
    const line = bytes.toString('base64') + '\n';
    bytes = null;
    process.stdout.write(line, () => process.exit(0));
  }

  // The channel ended or the controller exited, with no terminal message:
  // waits (at most 250 ms) for the other of the two, so that data still in
  // the channel is read and the message can say how the controller ended.
  function onChannelLost() {
    if (ending !== null) return;
    if (childExited && channelEnded) {
      if (lostTimer !== null) clearTimeout(lostTimer);
      return decideLost();
    }
    if (lostTimer === null) lostTimer = setTimeout(decideLost, DRAIN_AFTER_EXIT_MS);
  }

  function decideLost() {
    if (ending !== null) return;
    let why;
    if (childExited) {
      why = exitSignal
        ? `the sandbox process was killed by ${exitSignal} before the run settled`
        : `the sandbox process exited with code ${exitCode} before the run settled`;
      if (oomHint) why = `the worker ran out of memory (JavaScript heap out of memory); ${why}`;
    } else why = 'the sandbox closed its frame channel before the run settled';
    conclude(workerExit(why));
  }

  let pendingCost = null;
  const CALL_PREFIX = Buffer.from('{"type":"call",');
  const LOG_PREFIX = Buffer.from('{"type":"log","text":"');
  const DONE_VALUE_PREFIX = Buffer.from('{"type":"done","value":');
  function startsWith(buf, at, prefix) {
    return buf.length - at >= prefix.length && buf.compare(prefix, 0, prefix.length, at, at + prefix.length) === 0;
  }

  function onChannelLine(line) {
    if (ending !== null) return false;
    if (line.length < 32 || line.toString('latin1', 0, 32) !== token) {
      conclude(workerExit('the sandbox broke the frame channel (a line without the channel token)'));
      return false;
    }
    // The messages that may be huge or many are forwarded as the JSON text
    // the controller wrote, without a parse and a stringify: a log entry, a
    // call, and a done with a value (announced by a `cost` message, its
    // ledger cost).
    if (startsWith(line, 32, LOG_PREFIX) && line[line.length - 1] === 0x7d) {
      forwardLogRaw(line.subarray(32));
      return ending === null;
    }
    if (startsWith(line, 32, CALL_PREFIX)) {
      if (!queueRaw(line.subarray(32))) {
        conclude(workerExit(`a binding call frame exceeds maxFrameBytes (${maxFrameBytes})`));
        return false;
      }
      return true;
    }
    if (pendingCost !== null && startsWith(line, 32, DONE_VALUE_PREFIX)) {
      conclude({ type: 'done', raw: line.subarray(32) }, pendingCost);
      return false;
    }
    let msg;
    try {
      msg = JSON.parse(line.toString('utf8', 32));
    } catch {
      conclude(workerExit('the sandbox broke the frame channel (a line that is not JSON)'));
      return false;
    }
    if (msg === null || typeof msg !== 'object') {
      conclude(workerExit('the sandbox broke the frame channel (a message that is not an object)'));
      return false;
    }
    switch (msg.type) {
      case 'log':
        if (typeof msg.text === 'string') forwardLog(msg.text);
        break;
      case 'cost':
        pendingCost = typeof msg.cost === 'number' ? msg.cost : null;
        break;
      case 'stats':
        queueFrame({ type: 'stats', computeMs: typeof msg.computeMs === 'number' ? msg.computeMs : 0 });
        break;
      case 'call':
        if (!queueFrame(msg)) {
          conclude(workerExit(`a binding call frame (${msg.global}.${msg.name}) exceeds maxFrameBytes (${maxFrameBytes})`));
          return false;
        }
        break;
      case 'done':
        if (ArrayIsArray(msg.value)) conclude({ type: 'done', value: msg.value }, tokensCost(msg.value));
        else if (msg.error && typeof msg.error === 'object') {
          const message = StringCtor(msg.error.message);
          conclude({ type: 'done', error: { kind: StringCtor(msg.error.kind), message } }, stringCost(message));
        } else conclude({ type: 'done' });
        return false;
      case 'output-limit':
        ledgerOver = true;
        conclude({ type: 'output-limit' });
        return false;
      default:
        conclude(workerExit('the sandbox broke the frame channel (an unknown message)'));
        return false;
    }
    return true;
  }

  function startController(boot) {
    token = randomBytes(16).toString('hex');
    try {
      // The controller gets the launcher's own Node flags (under isolation:
      // --permission and its grants), without --allow-child-process when the
      // host said the program may not start processes.
      const noChildren = process.argv.includes('--no-child-processes');
      const flags = process.execArgv.filter((f) => !(noChildren && f === '--allow-child-process'));
      child = spawn(process.execPath, [...flags, RUNNER_PATH, '--controller'], {
        detached: true,
        stdio: ['ignore', 'pipe', 'pipe', 'pipe'],
        env: {},
      });
    } catch (e) {
      conclude(workerExit(`failed to start the sandbox process: ${e && e.message}`));
      return;
    }
    child.on('error', (e) => {
      if (!child.pid) {
        child = null;
        conclude(workerExit(`failed to start the sandbox process: ${e && e.message}`));
      }
    });
    if (!child.pid) return; // 'error' follows
    queueFrame({ type: 'controller', pid: child.pid });
    flush();

    child.on('exit', (code, signal) => {
      childExited = true;
      exitCode = code;
      exitSignal = signal;
      if (ending !== null) maybeFinish();
      else onChannelLost();
    });
    [child.stdout, child.stderr].forEach((stream, i) => {
      stream.on('data', (buf) => {
        if (pipeEnded[i]) return;
        const text = decoders[i].write(buf);
        if (text) forwardLog(text);
      });
      const ended = () => {
        if (pipeEnded[i]) return;
        pipeEnded[i] = true;
        const rest = decoders[i].end();
        if (rest) forwardLog(rest);
        maybeFinish();
      };
      stream.on('end', ended);
      stream.on('close', ended);
      stream.on('error', () => {});
    });

    channel = child.stdio[3];
    const reader = new LineReader(maxFrameBytes + 32, onChannelLine, () => {
      conclude(workerExit(`a frame from the sandbox exceeds maxFrameBytes (${maxFrameBytes})`));
    });
    channel.on('data', (buf) => reader.push(buf));
    channel.on('error', () => {});
    const lost = () => {
      channelEnded = true;
      if (ending === null) onChannelLost();
    };
    channel.on('end', lost);
    channel.on('close', lost);
    channel.write(token + '\n' + JSON.stringify(boot) + '\n');
  }

  function validateBoot(m) {
    if (typeof m.program !== 'string') return 'program';
    if (!ArrayIsArray(m.namespaces)) return 'namespaces';
    for (const ns of m.namespaces) {
      if (!ns || typeof ns !== 'object' || typeof ns.global !== 'string' || !ArrayIsArray(ns.members)) return 'namespaces';
      if (!ns.members.every((x) => typeof x === 'string')) return 'namespaces';
      const ec = ns.errorClass;
      if (ec !== undefined && ec !== null && (typeof ec !== 'object' || typeof ec.name !== 'string'
        || typeof ec.memberNameProperty !== 'string')) return 'errorClass';
    }
    for (const k of ['computeMs', 'maxOutputBytes', 'maxOldGenerationSizeMb']) {
      if (!isPositiveSafeInteger(m[k])) return k;
    }
    if (m.maxFrameBytes !== undefined && !isPositiveSafeInteger(m.maxFrameBytes)) return 'maxFrameBytes';
    return null;
  }

  function onHostMessage(m, text) {
    if (m === null || typeof m !== 'object' || ArrayIsArray(m)) {
      conclude(workerExit('the host sent a message that is not an object'));
      return false;
    }
    if (m.type === 'boot') {
      if (booted) return true;
      booted = true;
      const bad = validateBoot(m);
      if (bad) {
        conclude(workerExit(`the host sent an invalid boot message (${bad})`));
        return false;
      }
      cap = m.maxOutputBytes;
      if (m.maxFrameBytes !== undefined) maxFrameBytes = m.maxFrameBytes;
      reader.maxLine = base64Length(maxFrameBytes);
      startController({
        type: 'boot',
        program: m.program,
        namespaces: m.namespaces.map((ns) => ({
          global: ns.global,
          members: ns.members,
          errorClass: ns.errorClass ? { name: ns.errorClass.name, memberNameProperty: ns.errorClass.memberNameProperty } : null,
        })),
        computeMs: m.computeMs,
        maxOutputBytes: m.maxOutputBytes,
        maxOldGenerationSizeMb: m.maxOldGenerationSizeMb,
        maxFrameBytes,
      });
      return true;
    }
    if (m.type === 'reply') {
      if (!channel || ending !== null) return true;
      if (!isPositiveSafeInteger(m.id) || typeof m.ok !== 'boolean') return true;
      let fwd;
      if (m.ok ? validTokens(m.value) : typeof m.message === 'string') {
        // Forwarded as the host wrote it (a raw newline in JSON text can only
        // be whitespace), without a second stringify of a value that may be
        // tens of megabytes.
        fwd = text.includes('\n') ? text.replace(/\n/g, ' ') : text;
      } else if (m.ok) {
        fwd = JSON.stringify({ type: 'reply', id: m.id, ok: false, message: 'binding resolution must be lossless JSON' });
      } else {
        fwd = JSON.stringify({ type: 'reply', id: m.id, ok: false, message: StringCtor(m.message) });
      }
      channel.write(fwd + '\n');
      return true;
    }
    return true; // unknown messages from the host are ignored
  }

  const fatalUtf8 = new TextDecoder('utf-8', { fatal: true });
  const BASE64_RE = /^[A-Za-z0-9+/]*={0,2}$/;

  function onHostLine(line) {
    if (ending !== null) return false;
    const fail = (why) => {
      conclude(workerExit(`the host sent a broken frame (${why})`));
      return false;
    };
    if (line.length === 0) return fail('an empty line');
    const s = line.toString('latin1');
    if (s.length % 4 !== 0 || !BASE64_RE.test(s)) return fail('malformed base64');
    const bytes = Buffer.from(s, 'base64');
    if (bytes.length > maxFrameBytes) return fail('over maxFrameBytes');
    let msg;
    let text;
    try {
      text = fatalUtf8.decode(bytes);
      msg = JSON.parse(text);
    } catch {
      return fail('invalid UTF-8 or JSON');
    }
    return onHostMessage(msg, text);
  }

  const reader = new LineReader(base64Length(maxFrameBytes), onHostLine, () => {
    conclude(workerExit('the host sent a broken frame (a line over maxFrameBytes)'));
  });

  function abandon() {
    // The host is gone or wants us gone: nothing is written any more. The
    // controller is reaped (briefly waited for) before the launcher exits.
    finalWritten = true;
    killGroup();
    if (!child || !child.pid || childExited) process.exit(0);
    child.once('exit', () => process.exit(0));
    setTimeout(() => process.exit(0), 500).unref();
  }

  process.stdin.on('data', (buf) => reader.push(buf));
  process.stdin.on('end', abandon);
  process.stdin.on('error', abandon);
  process.stdout.on('error', abandon);
  process.on('SIGTERM', abandon);
  process.on('SIGINT', abandon);
  process.on('SIGHUP', abandon);
  process.on('uncaughtException', (e) => {
    try {
      if (ending === null) conclude(workerExit(`the runner failed: ${e && e.stack}`));
      else {
        killGroup();
        process.exit(70);
      }
    } catch {
      killGroup();
      process.exit(70);
    }
  });
}

// ---------------------------------------------------------------------------
// Controller.

function controllerMain() {
  const channel = new Socket({ fd: 3, readable: true, writable: true });
  let token = null;
  let worker = null;
  let port = null;
  let terminalSent = false;
  let pollTimer = null;
  let startupActive = 0; // the worker's busy time before the program started
  let workerError = null;
  let exitNote = null;
  let boot = null;

  let outQ = [];
  let flushScheduled = false;

  function flush() {
    flushScheduled = false;
    if (outQ.length === 0) return;
    const data = outQ.length === 1 ? outQ[0] : outQ.join('');
    outQ = [];
    channel.write(data);
  }

  function send(msg) {
    outQ.push(token + JSON.stringify(msg) + '\n');
    if (!flushScheduled) {
      flushScheduled = true;
      setImmediate(flush);
    }
  }

  function die() {
    try { process.kill(-process.pid, 'SIGKILL'); } catch {}
    process.exit(1);
  }

  function drainPort() {
    if (!port) return;
    let m;
    while ((m = receiveMessageOnPort(port)) !== undefined) onWorkerMessage(m.message);
  }

  function sendTerminal(msg, cost) {
    if (terminalSent) return;
    drainPort(); // what the worker posted first goes first
    if (terminalSent) return;
    terminalSent = true;
    if (pollTimer) clearInterval(pollTimer);
    // The worker's busy time, for the result's stats (the host shows it).
    let active = 0;
    try {
      if (worker) active = worker.performance.eventLoopUtilization().active;
    } catch {}
    send({ type: 'stats', computeMs: Math.max(0, Math.round(active - startupActive)) });
    if (typeof cost === 'number') send({ type: 'cost', cost });
    send(msg);
    flush();
  }

  function onWorkerMessage(m) {
    if (terminalSent) return;
    if (typeof m === 'string') {
      send({ type: 'log', text: m });
      return;
    }
    if (!ArrayIsArray(m)) return;
    switch (m[0]) {
      case 'call':
        send({ type: 'call', id: m[1], global: m[2], name: m[3], args: m[4] });
        break;
      case 'done':
        if (m.length > 1) sendTerminal({ type: 'done', value: m[1] }, m[2]);
        else sendTerminal({ type: 'done' });
        break;
      case 'error':
        sendTerminal({ type: 'done', error: { kind: m[1], message: m[2] } });
        break;
      case 'output-limit':
        sendTerminal({ type: 'output-limit' });
        break;
      case 'exit':
        exitNote = { code: m[1], requested: m[2] };
        break;
      case 'started':
        if (typeof m[1] === 'number' && m[1] >= 0) startupActive = m[1];
        break;
      default:
        break;
    }
  }

  function onWorkerExit(code) {
    drainPort();
    if (terminalSent) return;
    let why;
    if (workerError && workerError.code === 'ERR_WORKER_OUT_OF_MEMORY') {
      why = `the worker ran out of memory (maxOldGenerationSizeMb ${boot.maxOldGenerationSizeMb}): ${workerError.message}`;
    } else if (workerError) {
      why = `the worker stopped on an uncaught error: ${workerError && (workerError.stack || workerError.message) || workerError}`;
    } else if (exitNote && exitNote.requested) {
      why = `the program called process.exit(${exitNote.code})`;
    } else if (exitNote && exitNote.code === 0 && code === 0) {
      why = "the program's promise never settled and nothing was left to run";
    } else {
      why = `the worker exited with code ${code} before the run settled`;
    }
    sendTerminal(workerExit(why));
  }

  function startWorker(b) {
    boot = b;
    const { port1, port2 } = new MessageChannel();
    port = port1;
    try {
      worker = new Worker(new URL(RUNNER_URL), {
        // Its own flags: the controller's without --allow-worker, so a nested
        // `new Worker(..., { execArgv: [] })` cannot shed --permission.
        execArgv: process.execArgv.filter((f) => f !== '--allow-worker'),
        workerData: { lunarunRole: 'worker', port: port2, boot: b },
        transferList: [port2],
        env: {},
        resourceLimits: { maxOldGenerationSizeMb: b.maxOldGenerationSizeMb },
        stdout: true,
        stderr: true,
        name: 'lunarun',
      });
    } catch (e) {
      sendTerminal(workerExit(`failed to start the worker: ${e && e.message}`));
      return;
    }
    port.on('message', onWorkerMessage);
    for (const stream of [worker.stdout, worker.stderr]) {
      stream.setEncoding('utf8');
      stream.on('data', (text) => {
        if (!terminalSent && text) send({ type: 'log', text });
      });
    }
    worker.on('error', (e) => { workerError = e; });
    worker.on('exit', onWorkerExit);
    const budget = b.computeMs;
    pollTimer = setInterval(() => {
      if (terminalSent) return;
      let active;
      try {
        active = worker.performance.eventLoopUtilization().active;
      } catch {
        return;
      }
      if (active - startupActive > budget) {
        sendTerminal({ type: 'done', error: { kind: 'timeout', message: `compute budget of ${budget} ms spent` } });
        worker.terminate();
      }
    }, 10);
  }

  let lineNo = 0;
  const reader = new LineReader(DEFAULT_MAX_FRAME_BYTES * 2, (line) => {
    lineNo++;
    if (lineNo === 1) {
      const t = line.toString('latin1');
      if (!/^[0-9a-f]{32}$/.test(t)) die();
      token = t;
      return true;
    }
    let msg;
    try {
      msg = JSON.parse(line.toString('utf8'));
    } catch {
      die();
    }
    if (msg.type === 'boot' && worker === null) {
      reader.maxLine = msg.maxFrameBytes * 2 + 64;
      startWorker(msg);
    } else if (msg.type === 'reply' && port !== null && !terminalSent) {
      port.postMessage([msg.id, msg.ok, msg.ok ? msg.value : msg.message]);
    }
    return true;
  }, die);

  channel.on('data', (buf) => reader.push(buf));
  channel.on('end', die);
  channel.on('close', die);
  channel.on('error', die);
  process.on('uncaughtException', (e) => {
    try {
      if (token && !terminalSent) {
        terminalSent = true;
        channel.write(token + JSON.stringify(workerExit(`the sandbox controller failed: ${e && e.stack}`)) + '\n');
      }
    } catch {}
  });
}

// ---------------------------------------------------------------------------
// Worker.

// Captured before any program runs (a program may rewrite `performance`).
const ownEventLoopUtilization = ownPerformance.eventLoopUtilization.bind(ownPerformance);

function workerMain() {
  const data = workerData;
  const port = data.port;
  const boot = data.boot;
  delete data.port;
  delete data.boot;
  delete data.lunarunRole;

  const cap = boot.maxOutputBytes;
  const maxFrameBytes = boot.maxFrameBytes;

  let finished = false;
  let logsCost = 2;
  let logsCount = 0;
  let nextId = 0;
  let pendingCount = 0;
  const pending = new MapCtor();
  let exitRequested = false;
  const noop = () => {};

  function post(m) {
    MessagePortPrototypePostMessage(port, m);
  }

  function finish(m) {
    if (finished) return;
    finished = true;
    post(m);
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
  let captured = '';
  const capture = new Writable({
    write(chunk, encoding, cb) {
      captured += typeof chunk === 'string' ? chunk : BufferPrototypeToString(chunk, 'utf8');
      cb();
    },
  });
  const nodeConsole = new ConsoleCtor({ stdout: capture, stderr: capture, colorMode: false });
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
  for (const stream of [process.stdout, process.stderr]) {
    ReflectDefineProperty(stream, 'write', {
      __proto__: null, value: makeWrite(), writable: true, enumerable: false, configurable: true,
    });
  }

  // --- bindings -------------------------------------------------------------

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
    // Made here so that its stack shows where the program called.
    const err = errInfo !== null ? new errInfo.cls('') : new ErrorCtor('');
    ErrorCaptureStackTrace(err, f);
    const envelope = 47 + numberCost(nextId + 1) + stringCost(global) + stringCost(member);
    const enc = wireEncode(arg === undefined ? null : arg, Infinity, maxFrameBytes - envelope, 'args');
    if (!enc.ok) {
      if (enc.tooLarge) {
        finish(['error', 'worker-exit', `the arguments of ${global}.${member} exceed maxFrameBytes (${maxFrameBytes})`]);
        return new PromiseCtor(noop);
      }
      return rejected(fillError(err, errInfo, member, 'binding arguments must be lossless JSON'));
    }
    const id = ++nextId;
    return ownPromise(new PromiseCtor((resolve, reject) => {
      MapPrototypeSet(pending, id, { resolve, reject, err, errInfo, member });
      if (pendingCount++ === 0) MessagePortPrototypeRef(port);
      post(['call', id, global, member, enc.tokens]);
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

  function onReply(m) {
    if (!ArrayIsArray(m) || m.length !== 3) return;
    const id = m[0];
    const entry = MapPrototypeGet(pending, id);
    if (entry === undefined) return; // unknown or already answered
    MapPrototypeDelete(pending, id);
    if (--pendingCount === 0) MessagePortPrototypeUnref(port);
    if (finished) return;
    if (m[1] === true) {
      const dec = wireDecode(m[2]);
      if (dec.ok) entry.resolve(dec.value);
      else entry.reject(fillError(entry.err, entry.errInfo, entry.member, 'binding resolution must be lossless JSON'));
    } else {
      const message = typeof m[2] === 'string' ? m[2] : 'binding failed';
      entry.reject(fillError(entry.err, entry.errInfo, entry.member, message));
    }
  }

  port.on('message', onReply);
  MessagePortPrototypeUnref(port); // referenced only while calls are pending
  pinMethods(port);

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
        && (StringPrototypeIndexOf(line, RUNNER_URL) !== -1 || StringPrototypeIndexOf(line, RUNNER_PATH) !== -1);
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
      if (enc.ok) return finish(['done', enc.tokens, enc.cost]);
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
  process.on('uncaughtException', (e) => { if (!ownsEvent('uncaughtException')) onThrown(e); });
  process.on('unhandledRejection', (e) => { if (!ownsEvent('unhandledRejection')) onThrown(e); });
  const originalExit = process.exit;
  process.exit = function exit(code) {
    exitRequested = true;
    return ReflectApply(originalExit, process, arguments);
  };
  process.on('exit', (code) => {
    if (!finished) post(['exit', code, exitRequested]);
  });

  // --- compile and run ------------------------------------------------------

  const source = `(async function (${paramNames.join(', ')}) {"use strict";\n${boot.program}\n})`;
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
      new AsyncFunctionCtor(...paramNames, `"use strict";\n${boot.program}\n`);
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
    post(['started', ownEventLoopUtilization().active]);
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

// ---------------------------------------------------------------------------

if (!isMainThread && workerData && workerData.lunarunRole === 'worker') workerMain();
else if (process.argv[2] === '--controller') controllerMain();
else launcherMain();
