// Generates differential cases for the C JSON writer and the §5 ledger,
// with the answers from JavaScript itself (run by the project's Node):
//
//   node spec/differential/gen.mjs [--cases N] [--seed S] | build/json_diff
//
// One case per line, fields separated by tabs (kind "p" is a JSON text for
// lr__json_parse: its UTF-8 bytes in hex, then JSON.stringify(JSON.parse(t));
// kind "u" is pipe bytes: chunks in hex joined by ".", then TextDecoder's
// text of each chunk and of the end, the same way):
//   kind   "v" a value, "l" a logs array (strings only: the ledger's add_log)
//   tokens the value in pre-order, built without any JSON text so the C side
//          has to print every number and escape every string itself:
//          z null, t true, f false, n<16 hex> a double's bits,
//          s<4 hex per UTF-16 unit> a string, a<n> an array, o<n> an object
//          (then n key strings each followed by its value)
//   text   JSON.stringify(value)
//   bytes  Buffer.byteLength(JSON.stringify(value)), the §5 cost
//   lossless 1 when SPEC §6 lets the value cross (no NaN, ±Infinity, -0)
// and a last line "end N". The same seed gives the same cases.
import { writeSync } from "node:fs";

let cases = 200000;
let seed = 1;
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  if (argv[i] === "--cases") cases = Number(argv[++i]);
  else if (argv[i] === "--seed") seed = Number(argv[++i]);
  else {
    process.stderr.write(`gen.mjs: unknown argument ${argv[i]}\n`);
    process.exit(2);
  }
}
if (!Number.isSafeInteger(cases) || cases < 0 || !Number.isSafeInteger(seed)) {
  process.stderr.write("gen.mjs: --cases and --seed take integers\n");
  process.exit(2);
}

// sfc32: small, fast, and the same sequence on every machine.
let a = 0x9e3779b9, b = seed >>> 0, c = Math.floor(seed / 2 ** 32) >>> 0, d = 1;
function u32() {
  const t = (((a + b) | 0) + d) | 0;
  d = (d + 1) | 0;
  a = b ^ (b >>> 9);
  b = (c + (c << 3)) | 0;
  c = (c << 21) | (c >>> 11);
  c = (c + t) | 0;
  return t >>> 0;
}
for (let i = 0; i < 16; i++) u32();
const below = (n) => u32() % n;
const pick = (arr) => arr[below(arr.length)];
const chance = (p) => u32() / 2 ** 32 < p;

const f64 = new Float64Array(1);
const u32s = new Uint32Array(f64.buffer);
function fromBits(hi, lo) {
  u32s[1] = hi >>> 0;
  u32s[0] = lo >>> 0;
  return f64[0];
}
function bitsHex(x) {
  f64[0] = x;
  return u32s[1].toString(16).padStart(8, "0") + u32s[0].toString(16).padStart(8, "0");
}
function nextUp(x, k) { // k ulps away (k may be negative), same sign
  f64[0] = x;
  const big = (BigInt(u32s[1]) << 32n) | BigInt(u32s[0]);
  const n = big + BigInt(k);
  if (n < 0n || n > 0x7fefffffffffffffn) return x;
  u32s[1] = Number(n >> 32n);
  u32s[0] = Number(n & 0xffffffffn);
  return f64[0];
}

const edges = [
  0, -0, 1, -1, 0.1, 0.2, 0.1 + 0.2, 1 / 3, 2 / 3, 1e21, 1e21 - 65536, 999999999999999900000, 1e20, 1e-6, 1e-7,
  1.5e-7, 0.000001, 0.0000015, 123e-20, Number.MIN_VALUE, -Number.MIN_VALUE, Number.MAX_VALUE, Number.EPSILON,
  2 ** -1022, 2 ** -1022 - 2 ** -1074, 2 ** 1023, 2 ** 53, 2 ** 53 - 1, 2 ** 53 + 2, -(2 ** 53), 2 ** 63, 2 ** 64,
  4294967295, 4294967296, 5e-324, 1.7976931348623157e308, 2.2250738585072014e-308, 9007199254740993,
  0.3, 5e-7, 1.2345678901234567e-300, 4.35, 0.07, 1e23, 8.41e21, 5.764607523034235e39,
  NaN, Infinity, -Infinity,
];

function number() {
  switch (below(10)) {
    case 0: return pick(edges);
    case 1: return fromBits(u32(), u32()); // anything, NaN and infinities too
    case 2: return fromBits(u32() & 0x800fffff, u32()); // denormals (and ±0)
    case 3: { // integers around 2^53 and 2^k
      const base = pick([2 ** 53, 2 ** 52, 2 ** 54, 2 ** 31, 2 ** 32, 2 ** 63, 2 ** 64, 1e15, 1e16, 1e17, 1e21]);
      const x = base + (below(41) - 20) * (chance(0.5) ? 1 : base / 2 ** 52);
      return chance(0.2) ? -x : x;
    }
    case 4: return (chance(0.3) ? -1 : 1) * below(2 ** 31) * (chance(0.5) ? 1 : 2 ** 21 + below(1000));
    case 5: { // short decimals, the shortest-digits search's usual work
      const digits = String(1 + below(999999)).slice(0, 1 + below(6));
      const e = below(640) - 330;
      const x = Number(`${digits[0]}.${digits.slice(1) || "0"}e${e}`);
      return chance(0.2) ? -x : x;
    }
    case 6: { // a power of two or ten, and its neighbours
      const x = chance(0.5) ? 2 ** (below(2098) - 1074) : Number(`1e${below(632) - 323}`);
      return nextUp(x, below(5) - 2);
    }
    case 7: return nextUp(pick(edges.filter(Number.isFinite)), below(9) - 4);
    case 8: return (u32() / 2 ** 32) * 10 ** (below(50) - 25);
    default: return fromBits((below(0x7fe) + 1) << 20 | (u32() & 0xfffff), u32()) * (chance(0.3) ? -1 : 1);
  }
}

function unit(out) {
  switch (below(12)) {
    case 0: case 1: case 2: case 3: out.push(0x20 + below(95)); break; // printable ASCII
    case 4: out.push(pick([0x22, 0x5c, 0x2f, 0x7f])); break;
    case 5: out.push(below(0x20)); break; // controls: \b \t \n \f \r and \u00XX
    case 6: out.push(0x80 + below(0x780)); break;
    case 7: out.push(pick([0x2028, 0x2029, 0xfeff, 0xfffd, 0xfffe, 0xffff, 0x20ac, 0x0800, 0xd7ff, 0xe000])); break;
    case 8: { // astral: a proper pair
      const cp = 0x10000 + below(0x100000);
      out.push(0xd800 + ((cp - 0x10000) >> 10), 0xdc00 + ((cp - 0x10000) & 0x3ff));
      break;
    }
    case 9: out.push(0xd800 + below(0x400)); break; // lone high (unless a low follows by chance)
    case 10: out.push(0xdc00 + below(0x400)); break; // lone low
    default: out.push(0x800 + below(0xd000)); break; // other BMP below the surrogates
  }
}

function string(maxLen) {
  const units = [];
  const n = chance(0.05) ? below(400) : below(maxLen);
  while (units.length < n) unit(units);
  return String.fromCharCode(...units);
}

function key() {
  if (chance(0.3)) return pick(["", "__proto__", "constructor", "0", "1", "10", "-1", "01", "1.5", "4294967294",
    "4294967295", "9007199254740993", "a", "kind", "length", "keys", "toJSON"]);
  return string(8);
}

function value(depth) {
  const r = below(100);
  if (depth > 0 && r < 30) {
    const n = below(7);
    if (chance(0.5)) {
      const arr = [];
      for (let i = 0; i < n; i++) arr.push(value(depth - 1));
      return arr;
    }
    const obj = chance(0.5) ? {} : Object.create(null);
    for (let i = 0; i < n; i++) {
      // defineProperty: "__proto__" becomes an own member, as the runner
      // reads it from a program's object
      Object.defineProperty(obj, key(), { value: value(depth - 1), enumerable: true, writable: true, configurable: true });
    }
    return obj;
  }
  if (r < 60) return number();
  if (r < 90) return string(24);
  return pick([null, true, false]);
}

// Deep nesting: SPEC §6 asks for depth 5000 both ways; JSON.stringify's
// own recursion gives out a little beyond that.
function deep() {
  let v = chance(0.5) ? [] : {};
  const n = 1000 + below(4001);
  for (let i = 0; i < n; i++) v = chance(0.5) ? [v] : { k: v };
  return v;
}

function hex4(s) {
  let h = "";
  for (let i = 0; i < s.length; i++) h += s.charCodeAt(i).toString(16).padStart(4, "0");
  return h;
}

// JSON text for JSON.parse and lr__json_parse to read: the same value
// written in the many ways JSON allows (blanks, every escape, numbers with
// extra digits, signs and zeros, repeated keys). Keys that are array
// indices are left out: JavaScript orders them first in an object while the
// engine keeps the text's order (the wire carries JavaScript's order, so
// no value that crosses is affected).
const HEX = "0123456789abcdefABCDEF";
function blank() {
  let b = "";
  while (chance(0.15)) b += pick([" ", "\t", "\n", "\r"]);
  return b;
}
function u4(c) {
  let h = "";
  for (let i = 3; i >= 0; i--) {
    const d = (c >> (4 * i)) & 15;
    h += d < 10 ? String(d) : chance(0.5) ? HEX[d] : HEX[d + 6];
  }
  return "\\u" + h;
}
function textString(str) {
  let out = '"';
  for (let i = 0; i < str.length; i++) {
    const c = str.charCodeAt(i);
    const pair = c >= 0xd800 && c < 0xdc00 && i + 1 < str.length &&
      str.charCodeAt(i + 1) >= 0xdc00 && str.charCodeAt(i + 1) < 0xe000;
    const lone = !pair && c >= 0xd800 && c < 0xe000;
    if (pair) {
      out += chance(0.5) ? str[i] + str[i + 1] : u4(c) + u4(str.charCodeAt(i + 1));
      i++;
    } else if (lone || c < 0x20 || chance(0.1)) {
      const short = { 0x22: '\\"', 0x5c: "\\\\", 0x2f: "\\/", 8: "\\b", 12: "\\f", 10: "\\n", 13: "\\r", 9: "\\t" }[c];
      out += short && chance(0.7) ? short : u4(c);
    } else if (c === 0x22) out += '\\"';
    else if (c === 0x5c) out += "\\\\";
    else out += str[i];
  }
  return out + '"';
}
// A text that rounds past the largest double is Infinity to JSON.parse
// (then null) and refused by lr__json_parse (json.h): such texts are left
// out, the text of x itself is used instead.
function textNumber(x) {
  const t = textNumberAny(x);
  return Number.isFinite(Number(t)) ? t : String(x);
}
function textNumberAny(x) {
  if (Object.is(x, -0)) return pick(["-0", "-0.0", "-0e5", "-0E-2"]);
  switch (below(6)) {
    case 0: return String(x);
    case 1: return x.toExponential().replace("e", pick(["e", "E"])).replace("+", pick(["+", ""]));
    case 2: return x.toPrecision(1 + below(21));
    case 3: { // long digit strings that fall between doubles: both parsers round
      let d = String(1 + below(9));
      for (let i = 17 + below(12); i > 0; i--) d += String(below(10));
      return (x < 0 ? "-" : "") + d[0] + "." + d.slice(1) + "e" + (below(620) - 320);
    }
    case 4: return Number.isInteger(x) && Math.abs(x) < 1e21 ? x.toFixed(below(4)) : String(x);
    default: { // a decimal with trailing zeros and a padded exponent
      const [m, e] = x.toExponential().split("e");
      return m + (m.includes(".") ? "0".repeat(below(3)) : "." + "0".repeat(1 + below(2))) + pick(["e", "E"]) + (e[0] === "-" ? "-" : pick(["+", ""])) + "0".repeat(below(3)) + e.replace(/^[-+]/, "");
    }
  }
}
function isIndex(k) {
  return /^(0|[1-9][0-9]*)$/.test(k) && Number(k) < 4294967295;
}
function jsonText(root) {
  const out = [];
  const todo = [[0, root]];
  while (todo.length) {
    const [what, v] = todo.pop();
    if (what === 1) { out.push(v); continue; } // punctuation
    out.push(blank());
    if (v === null || v === true || v === false) out.push(String(v));
    else if (typeof v === "number") out.push(Number.isFinite(v) ? textNumber(v) : "null");
    else if (typeof v === "string") out.push(textString(v));
    else if (Array.isArray(v)) {
      out.push("[");
      todo.push([1, blank() + "]"]);
      for (let i = v.length - 1; i >= 0; i--) {
        todo.push([0, v[i]]);
        if (i) todo.push([1, blank() + ","]);
      }
    } else {
      out.push("{");
      const keys = Object.keys(v).filter((k) => !isIndex(k));
      const members = keys.map((k) => [k, v[k]]);
      if (members.length && chance(0.2)) { // a repeated key: the last value wins, at the first place
        members.push([pick(keys), value(1)]);
      }
      todo.push([1, blank() + "}"]);
      for (let i = members.length - 1; i >= 0; i--) {
        todo.push([0, members[i][1]]);
        todo.push([1, blank() + textString(members[i][0]) + blank() + ":"]);
        if (i) todo.push([1, blank() + ","]);
      }
    }
  }
  return out.join("") + blank();
}

// Bytes a sandbox might write to a pipe, valid UTF-8 or not, cut into the
// chunks read(2) would return: the host turns each chunk into log text with
// lr__utf8_stream_feed, which must agree with TextDecoder in stream mode.
const BAD = [[0x80], [0xbf], [0xc0, 0x80], [0xc1, 0xbf], [0xc2], [0xe0, 0x80, 0x80], [0xe0, 0xa0], [0xed, 0xa0, 0x80],
  [0xed, 0xbf, 0xbf], [0xef, 0xbf], [0xf0, 0x80, 0x80, 0x80], [0xf0, 0x90, 0x80], [0xf4, 0x90, 0x80, 0x80],
  [0xf5, 0x80], [0xfe], [0xff], [0xf0, 0x9f, 0x98], [0xe2, 0x82]];
function pipeChunks() {
  const bytes = [];
  for (let i = below(12); i >= 0; i--) {
    if (chance(0.5)) bytes.push(...Buffer.from(string(6), "utf8"));
    else if (chance(0.8)) bytes.push(...pick(BAD));
    else bytes.push(below(256));
  }
  const chunks = [];
  let pos = 0;
  while (pos < bytes.length) {
    const k = 1 + below(chance(0.5) ? 3 : 12);
    chunks.push(Buffer.from(bytes.slice(pos, pos + k)));
    pos += k;
  }
  return chunks;
}

// Pre-order tokens and the lossless flag, with an explicit stack of work
// items: [0, value] or [1, key].
function tokens(root) {
  const out = [];
  let lossless = true;
  const todo = [[0, root]];
  while (todo.length) {
    const [isKey, v] = todo.pop();
    if (isKey) out.push("s" + hex4(v));
    else if (v === null) out.push("z");
    else if (v === true) out.push("t");
    else if (v === false) out.push("f");
    else if (typeof v === "number") {
      if (!Number.isFinite(v) || Object.is(v, -0)) lossless = false;
      out.push("n" + bitsHex(v));
    } else if (typeof v === "string") out.push("s" + hex4(v));
    else if (Array.isArray(v)) {
      out.push("a" + v.length);
      for (let i = v.length - 1; i >= 0; i--) todo.push([0, v[i]]);
    } else {
      const keys = Object.keys(v); // JavaScript's order: what the runner sends
      out.push("o" + keys.length);
      for (let i = keys.length - 1; i >= 0; i--) todo.push([0, v[keys[i]]], [1, keys[i]]);
    }
  }
  return { text: out.join(" "), lossless };
}

// Lines are gathered and written in large blocks; a pipe that is full
// (EAGAIN) is waited on.
let pending = [];
let pendingLen = 0;
function flush() {
  let buf = Buffer.from(pending.join(""), "utf8");
  pending = [];
  pendingLen = 0;
  while (buf.length) {
    try {
      const n = writeSync(1, buf);
      buf = buf.subarray(n);
    } catch (e) {
      if (e.code !== "EAGAIN") throw e;
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
    }
  }
}
function emit(line) {
  pending.push(line);
  pendingLen += line.length;
  if (pendingLen > 1 << 20) flush();
}

for (let n = 0; n < cases; n++) {
  let kind = "v";
  let v;
  if (n % 20000 === 19999) v = deep();
  else if (chance(0.05)) { // pipe bytes: per-chunk text against TextDecoder
    const chunks = pipeChunks();
    // ignoreBOM: a U+FEFF the program wrote is output like any other
    // character (the launcher's StringDecoder keeps it too); TextDecoder's
    // default would drop it from the start of the stream.
    const dec = new TextDecoder("utf-8", { ignoreBOM: true });
    const texts = chunks.map((c) => Buffer.from(dec.decode(c, { stream: true }), "utf8").toString("hex"));
    texts.push(Buffer.from(dec.decode(), "utf8").toString("hex"));
    emit(`u\t${chunks.map((c) => c.toString("hex")).join(".")}\t${texts.join(".")}\t0\t1\n`);
    continue;
  } else if (chance(0.1)) { // a JSON text: lr__json_parse + write against JSON.stringify(JSON.parse(text))
    const t = jsonText(value(1 + below(4)));
    const want = JSON.stringify(JSON.parse(t));
    emit(`p\t${Buffer.from(t, "utf8").toString("hex")}\t${want}\t${Buffer.byteLength(want)}\t1\n`);
    continue;
  } else if (chance(0.1)) {
    kind = "l";
    v = [];
    for (let i = below(6); i > 0; i--) v.push(string(40));
  } else v = value(1 + below(5));
  let text;
  for (;;) {
    try {
      text = JSON.stringify(v);
      break;
    } catch (e) { // too deep for JSON.stringify's recursion (objects cost more): peel levels
      if (!(e instanceof RangeError)) throw e;
      for (let i = 0; i < 500; i++) v = Array.isArray(v) ? v[0] : v.k;
    }
  }
  const { text: toks, lossless } = tokens(v);
  emit(`${kind}\t${toks}\t${text}\t${Buffer.byteLength(text)}\t${lossless ? 1 : 0}\n`);
}
emit(`end ${cases}\n`);
flush();
