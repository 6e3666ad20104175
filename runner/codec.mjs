// The runner's shared code: captured intrinsics, the output ledger (SPEC §5),
// the wire codec (SPEC §6) and line reading. Imported by the worker (which
// must capture every intrinsic before any program code exists: this module
// is evaluated first), by the controller and by the launcher.

import * as util from 'node:util';

// ---------------------------------------------------------------------------
// Intrinsics, captured before any program runs.

const ReflectApply = Reflect.apply;
const ReflectDefineProperty = Reflect.defineProperty;
const ReflectOwnKeys = Reflect.ownKeys;
const ReflectGetOwnPropertyDescriptor = Reflect.getOwnPropertyDescriptor;
const ReflectGetPrototypeOf = Reflect.getPrototypeOf;
const ObjectCreate = Object.create;
const ObjectHasOwn = Object.hasOwn;
const ObjectKeys = Object.keys;
const MathCeil = Math.ceil;
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
const JSONParse = JSON.parse;
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
const BufferByteLength = Buffer.byteLength;
const BufferFrom = Buffer.from;
const BufferPrototypeToString = uncurry(Buffer.prototype.toString);
const TextDecoderPrototypeDecode = uncurry(TextDecoder.prototype.decode);
// ignoreBOM: a leading U+FEFF in bytes the program writes is output, as the
// same character in a string write is (the default would drop it).
const utf8Lenient = new TextDecoder('utf-8', { ignoreBOM: true });
const utilInspect = util.inspect;
const {
  isProxy, isDate, isMap, isSet, isWeakMap, isWeakSet, isRegExp, isNativeError, isBoxedPrimitive,
  isArrayBufferView, isAnyArrayBuffer, isPromise, isGeneratorObject, isMapIterator, isSetIterator,
  isArgumentsObject, isModuleNamespaceObject, isExternal,
} = util.types;
const processNextTick = process.nextTick;
const ConsoleCtor = console.Console;

export const DEFAULT_MAX_FRAME_BYTES = 268435456;

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

// Gives fn its own `apply` and `call`: node's event emitters invoke a
// listener as `handler.apply(this, args)`, which a program that rewrote
// Function.prototype.apply would otherwise intercept.
function pinApply(fn) {
  const desc = ObjectCreate(null);
  desc.writable = false;
  desc.enumerable = false;
  desc.configurable = false;
  desc.value = function apply(thisArg, args) { return ReflectApply(fn, thisArg, args === undefined || args === null ? [] : args); };
  ReflectDefineProperty(fn, 'apply', desc);
  desc.value = function call(thisArg, ...args) { return ReflectApply(fn, thisArg, args); };
  ReflectDefineProperty(fn, 'call', desc);
  return fn;
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
  const small = encodeSmall(root);
  if (small !== null && small.cost <= costLimit && small.wire <= wireLimit) return small;
  return encodeGeneral(root, costLimit, wireLimit, rootName);
}

// The fast path for what binding arguments and results mostly are: a scalar,
// or a plain object of at most 16 own enumerable data properties whose values
// are scalars. It writes the token array's JSON text directly (`json`, no
// `tokens`); anything else (or anything odd) returns null and takes the
// general path, which also says why a value is refused.
const SMALL_KEYS = 16;

function scalarCost(v) {
  const t = typeof v;
  if (t === 'string') return stringCost(v);
  if (t === 'number') return v - v === 0 && !(v === 0 && 1 / v < 0) ? numberCost(v) : -1;
  if (t === 'boolean') return v ? 4 : 5;
  if (v === null) return 4;
  return -1;
}

// The JSON text of a scalar that scalarCost accepted.
function scalarJson(v) {
  return typeof v === 'string' ? JSONStringify(v) : '' + v;
}

// Past this length a string's cost is taken from its JSON text, which is
// needed anyway: the UTF-8 length of JSON.stringify(s) is exactly the SPEC §5
// cost (the same escapes, lone surrogates as \u escapes), and measuring it
// is far cheaper than scanning the string for escapes (a 64 MiB string:
// about 20 ms against 200 ms).
const LONG_STRING = 4096;

function encodeSmall(root) {
  if (typeof root === 'string' && root.length > LONG_STRING) {
    const json = JSONStringify(root);
    const cost = BufferByteLength(json, 'utf8');
    return { ok: true, json: '[' + json + ']', cost, wire: cost + 2 };
  }
  let c = scalarCost(root);
  if (c >= 0) return { ok: true, json: '[' + scalarJson(root) + ']', cost: c, wire: c + 2 };
  if (typeof root !== 'object' || root === null || isProxy(root) || ArrayIsArray(root)) return null;
  const proto = ReflectGetPrototypeOf(root);
  if (proto !== ObjectPrototype && proto !== null) return null;
  const keys = ReflectOwnKeys(root);
  const n = keys.length;
  if (n > SMALL_KEYS) return null;
  let keysJson = '';
  let valuesJson = '';
  let cost = 2 + (n > 0 ? n - 1 : 0);
  let wire = 1 + 28 + (n > 0 ? n - 1 : 0);
  for (let i = 0; i < n; i++) {
    const k = keys[i];
    if (typeof k !== 'string') return null;
    const d = ReflectGetOwnPropertyDescriptor(root, k);
    if (d === undefined || !d.enumerable || !ObjectHasOwn(d, 'value')) return null;
    const v = d.value;
    c = scalarCost(v);
    if (c < 0) return null;
    const kc = stringCost(k);
    cost += kc + 1 + c;
    wire += kc + c + 1;
    const kj = JSONStringify(k);
    keysJson = i === 0 ? kj : keysJson + ',' + kj;
    valuesJson += ',' + scalarJson(v);
  }
  return { ok: true, json: '[{"kind":"object","keys":[' + keysJson + ']}' + valuesJson + ']', cost, wire };
}

function encodeGeneral(root, costLimit, wireLimit, rootName) {
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


// Wire decoding, iterative, for the worker: the value tokens of a reply, as
// JSON.parse made them in the program's realm (so only own data properties
// are read). Refuses what SPEC §6 refuses: a marker with missing or extra
// keys or a wrong kind, a length beyond the tokens left, keys that are not
// strings or repeat, a bare array token, -0 / non-finite numbers, trailing
// tokens, and anything that is not exactly one complete root. Builds
// ordinary objects and arrays of this realm by definition (an own
// "__proto__" key stays a key). Returns {ok: true, value} or {ok: false}.
const DECODE_FAIL = { ok: false };

function wireDecode(tokens) {
  if (!ArrayIsArray(tokens)) return DECODE_FAIL;
  const n = tokens.length;
  if (n === 0) return DECODE_FAIL;
  // A scalar alone: no container, so no prototype is consulted.
  if (n === 1 && scalarCost(tokens[0]) >= 0) return { ok: true, value: tokens[0] };
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
    else if (type === 'object' && !ArrayIsArray(t)) {
      const ks = ObjectKeys(t);
      if (ks.length !== 2 || ks[0] !== 'kind') return DECODE_FAIL;
      const kind = t.kind;
      if (kind === 'array' && ks[1] === 'length') {
        const len = t.length;
        if (!NumberIsSafeInteger(len) || len < 0 || len > n - pos) return DECODE_FAIL;
        v = [];
        if (len > 0) frame = { c: v, keys: null, i: 0, n: len };
      } else if (kind === 'object' && ks[1] === 'keys') {
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

const BufferConcat = Buffer.concat;
const BufferPrototypeIndexOf = uncurry(Buffer.prototype.indexOf);
const Uint8ArrayPrototypeSubarray = uncurry(Uint8Array.prototype.subarray);
const TypedArrayPrototypeGetLength = uncurry(
  ReflectGetOwnPropertyDescriptor(ReflectGetPrototypeOf(Uint8Array.prototype), 'length').get);

// Reads lines out of chunks, with captured intrinsics only (it runs in the
// program's worker too). With copyRest, the tail of a chunk that waits for
// the rest of its line is copied: the caller reuses its chunk buffer (a
// line handed to onLine is only valid during the call).
class LineReader {
  constructor(maxLine, onLine, onTooLong, copyRest = false) {
    this.maxLine = maxLine;
    this.copyRest = copyRest;
    this.onLine = onLine; // returns false to stop reading
    this.onTooLong = onTooLong;
    this.chunks = ObjectCreate(null);
    this.nchunks = 0;
    this.len = 0;
    this.stopped = false;
  }

  push(buf) {
    let start = 0;
    const n = TypedArrayPrototypeGetLength(buf);
    while (!this.stopped) {
      const nl = BufferPrototypeIndexOf(buf, 10, start);
      if (nl === -1) {
        const rest = n - start;
        if (rest > 0) {
          if (this.len + rest > this.maxLine) return this.tooLong();
          const tail = start === 0 ? buf : Uint8ArrayPrototypeSubarray(buf, start);
          this.chunks[this.nchunks++] = this.copyRest ? BufferFrom(tail) : tail;
          this.len += rest;
        }
        return;
      }
      const part = nl - start;
      if (this.len + part > this.maxLine) return this.tooLong();
      let line;
      if (this.nchunks === 0) line = Uint8ArrayPrototypeSubarray(buf, start, nl);
      else {
        const list = [];
        for (let i = 0; i < this.nchunks; i++) defineData(list, i, this.chunks[i]);
        defineData(list, this.nchunks, Uint8ArrayPrototypeSubarray(buf, start, nl));
        line = BufferConcat(list, this.len + part);
        this.chunks = ObjectCreate(null);
        this.nchunks = 0;
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
    this.chunks = ObjectCreate(null);
    this.nchunks = 0;
    this.onTooLong();
  }
}

function isPositiveSafeInteger(x) {
  return NumberIsSafeInteger(x) && x >= 1;
}

function base64Length(n) {
  return MathCeil(n / 3) * 4;
}


export {
  ReflectApply, ReflectDefineProperty, ReflectOwnKeys, ReflectGetOwnPropertyDescriptor, ReflectGetPrototypeOf,
  ObjectCreate, ObjectHasOwn, ArrayIsArray, NumberIsSafeInteger, ObjectPrototype, ArrayPrototype, ErrorPrototype,
  ErrorCtor, TypeErrorCtor, ErrorCaptureStackTrace, StringCtor, PromiseCtor, MapCtor, JSONStringify,
  AsyncFunctionCtor, uncurry, StringPrototypeCharCodeAt, StringPrototypeSlice, StringPrototypeIndexOf,
  RegExpPrototypeExec, JSONParse, MapPrototypeGet, MapPrototypeSet, MapPrototypeDelete, PromisePrototypeThen,
  BufferByteLength, BufferFrom, BufferPrototypeToString, TextDecoderPrototypeDecode, utf8Lenient, utilInspect,
  isProxy, isNativeError, isArrayBufferView, processNextTick, ConsoleCtor,
  defineData, protoClean, objectProtoPlain, pinMethods, pinApply, push,
  stringCost, numberCost, cutUtf8, wireEncode, wireDecode,
  LineReader, isPositiveSafeInteger, base64Length, TypedArrayPrototypeGetLength,
};
