// The frame channel to the host, shared by the worker and the controller
// (docs/PROTOCOL.md). The sandbox writes frames on fd 4 (a blocking pipe),
// each line `token + base64(UTF-8(JSON)) + "\n"`, and reads the host's on
// fd 3. Log entries wait in a SharedArrayBuffer until the end of the
// worker's turn (or 64 KB): the controller can send them when the worker is
// stuck in a loop or was stopped, so no line is lost on a kill. Whoever
// writes fd 4 holds the buffer's lock, so lines never interleave.

import { writeSync } from 'node:fs';

export const IN_FD = 3;
export const OUT_FD = 4;

// Int32 header: the lock, the committed end of the log bytes, how far they
// were sent, whether the worker sent its terminal frame, how many flushes the
// worker made, the token's length; then the token, then the log bytes
// (`,"text"` per entry: JSON strings, each with a leading comma).
const LOCK = 0;
const LEN = 1;
const SENT = 2;
const TERMINAL = 3;
const FLUSHES = 4;
const TOKEN_AT = 32;
const TOKEN_MAX = 64;
const DATA_AT = TOKEN_AT + TOKEN_MAX;
const DATA_SIZE = 1 << 20;
export const FLUSH_AT = 64 * 1024;

// Captured before any program runs: this module is evaluated inside the
// program's worker, and nothing here may be looked up on an object the
// program can rewrite afterwards.
const uncurry = Function.prototype.bind.bind(Function.prototype.call);
// writeSync too: an imported binding of a builtin follows the program's
// `fs.writeSync = …` once it calls module.syncBuiltinESMExports().
const WriteSync = writeSync;
const ObjectFreeze = Object.freeze;
const AtomicsLoad = Atomics.load;
const AtomicsStore = Atomics.store;
const AtomicsAdd = Atomics.add;
const AtomicsCompareExchange = Atomics.compareExchange;
const AtomicsWait = Atomics.wait;
const AtomicsNotify = Atomics.notify;
const BufferFrom = Buffer.from;
const BufferConcat = Buffer.concat;
const BufferByteLength = Buffer.byteLength;
const BufferPrototypeToString = uncurry(Buffer.prototype.toString);
const BufferPrototypeWrite = uncurry(Buffer.prototype.write);
const Uint8ArrayPrototypeSubarray = uncurry(Uint8Array.prototype.subarray);
const Int32ArrayCtor = Int32Array;

const LOGS_OPEN = BufferFrom('{"type":"logs","texts":[');
const LOGS_CLOSE = BufferFrom(']}');

export function createShared() {
  return new SharedArrayBuffer(DATA_AT + DATA_SIZE);
}

// One per thread, over the same shared buffer.
export class Channel {
  constructor(sab) {
    this.i32 = new Int32ArrayCtor(sab, 0, 8);
    this.bytes = BufferFrom(sab, 0, DATA_AT + DATA_SIZE);
    this.token = '';
  }

  setToken(token) {
    const n = BufferPrototypeWrite(this.bytes, token, TOKEN_AT, TOKEN_MAX, 'latin1');
    AtomicsStore(this.i32, 5, n);
    this.token = token;
  }

  loadToken() {
    const n = AtomicsLoad(this.i32, 5);
    if (n > 0) this.token = BufferPrototypeToString(this.bytes, 'latin1', TOKEN_AT, TOKEN_AT + n);
    return this.token !== '';
  }

  // --- the worker's side -----------------------------------------------

  // Appends one entry, already a JSON string literal. Returns false when it
  // does not fit the buffer even when empty (the caller sends it alone).
  // Returns the bytes now pending.
  appendLog(json) {
    const i32 = this.i32;
    let len = AtomicsLoad(i32, LEN);
    const need = BufferByteLength(json, 'utf8') + 1;
    if (need > DATA_SIZE) return -1;
    if (len + need > DATA_SIZE) {
      this.flush('');
      len = 0;
    }
    this.bytes[DATA_AT + len] = 0x2c; // ','
    BufferPrototypeWrite(this.bytes, json, DATA_AT + len + 1, 'utf8');
    AtomicsStore(i32, LEN, len + need);
    return len + need - AtomicsLoad(i32, SENT);
  }

  lock() {
    const i32 = this.i32;
    while (AtomicsCompareExchange(i32, LOCK, 0, 1) !== 0) AtomicsWait(i32, LOCK, 1, 5);
  }

  unlock() {
    AtomicsStore(this.i32, LOCK, 0);
    AtomicsNotify(this.i32, LOCK);
  }

  // The worker: sends the pending logs, then `lines` (frame lines made by
  // line(), concatenated), in one write, then the frame of the JSON text
  // `lastJson` when there is one (a large value: its base64 is written as
  // it is, not copied into one string with the rest). With terminal,
  // records that the run's terminal frame went out.
  flush(lines, terminal = false, lastJson = '') {
    this.lock();
    try {
      const logs = this.logsLine();
      AtomicsStore(this.i32, LEN, 0);
      AtomicsStore(this.i32, SENT, 0);
      AtomicsAdd(this.i32, FLUSHES, 1);
      if (terminal) AtomicsStore(this.i32, TERMINAL, 1);
      const all = logs + lines;
      if (lastJson !== '') {
        writeAll(all + this.token);
        writeAll(BufferPrototypeToString(BufferFrom(lastJson, 'utf8'), 'base64'));
        writeAll('\n');
      } else if (all !== '') writeAll(all);
    } finally {
      this.unlock();
    }
  }

  // The frame line of one JSON text.
  line(json) {
    return this.token + BufferPrototypeToString(BufferFrom(json, 'utf8'), 'base64') + '\n';
  }

  // --- the controller's side -------------------------------------------

  terminalSent() {
    return AtomicsLoad(this.i32, TERMINAL) === 1;
  }

  flushes() {
    return AtomicsLoad(this.i32, FLUSHES);
  }

  pendingBytes() {
    return AtomicsLoad(this.i32, LEN) - AtomicsLoad(this.i32, SENT);
  }

  // Sends the logs the worker committed but has not sent (it is stuck in a
  // long turn, or gone). Only when the lock is free, unless forced (the
  // worker is gone: nobody else can hold it).
  rescue(force) {
    if (this.token === '' && !this.loadToken()) return;
    if (AtomicsCompareExchange(this.i32, LOCK, 0, 1) !== 0 && !force) return;
    try {
      // Exactly up to `to`: the worker appends without the lock, and an
      // entry it commits meanwhile is sent next time, not twice.
      const to = AtomicsLoad(this.i32, LEN);
      const logs = this.logsLine(to);
      AtomicsStore(this.i32, SENT, to);
      if (logs !== '') writeAll(logs);
    } finally {
      this.unlock();
    }
  }

  // The controller's own frames (a terminal one, once the worker is gone).
  send(lines, terminal = false) {
    this.rescue(true);
    if (terminal) AtomicsStore(this.i32, TERMINAL, 1);
    writeAll(lines);
  }

  // --- both ---------------------------------------------------------------

  logsLine(to = AtomicsLoad(this.i32, LEN)) {
    const from = AtomicsLoad(this.i32, SENT);
    if (to <= from) return '';
    // The first entry's leading comma is left out.
    const json = BufferConcat([LOGS_OPEN, Uint8ArrayPrototypeSubarray(this.bytes, DATA_AT + from + 1, DATA_AT + to), LOGS_CLOSE]);
    return this.token + BufferPrototypeToString(json, 'base64') + '\n';
  }
}

// A program can import this module (its file is readable to the sandbox):
// the class it finds must not let it hook the worker's channel (and read its
// token) by rewriting a method.
ObjectFreeze(Channel.prototype);
ObjectFreeze(Channel);

function writeAll(text) {
  const buf = BufferFrom(text, 'latin1');
  let off = 0;
  while (off < buf.length) {
    try {
      off += WriteSync(OUT_FD, buf, off, buf.length - off);
    } catch (e) {
      if (e && e.code === 'EAGAIN') continue;
      throw e;
    }
  }
}
