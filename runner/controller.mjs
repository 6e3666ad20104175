// lunarun's sandbox process (docs/PROTOCOL.md): `node controller.mjs HEAP_MB`.
// It starts the program's worker at once (warm, waiting for the boot frame),
// keeps the compute budget, and reports a worker that ends without settling.
// The worker talks to the host directly (fd 3 in, fd 4 out); this thread
// writes fd 4 only for the logs the worker could not send itself and for a
// terminal frame once the worker is gone.

import { writeSync } from 'node:fs';
import { MessageChannel, Worker, receiveMessageOnPort } from 'node:worker_threads';
import { Socket } from 'node:net';
import { Channel, IN_FD, createShared } from './channel.mjs';
import { LineReader, base64Length, validTokens, DEFAULT_MAX_FRAME_BYTES } from './codec.mjs';

const heapMb = Number(process.argv[2]) || 512;
const sab = createShared();
const channel = new Channel(sab);
const { port1: port, port2 } = new MessageChannel();

// The program's worker may not start workers of its own: given the process's
// flags without --allow-worker, a nested `new Worker(…, { execArgv: [] })` is
// refused instead of shedding --permission.
const execArgv = process.execArgv.filter((a) => a !== '--allow-worker');

const worker = new Worker(new URL('./worker.mjs', import.meta.url), {
  workerData: { sab, port: port2 },
  transferList: [port2],
  env: {},
  execArgv,
  resourceLimits: { maxOldGenerationSizeMb: heapMb },
  // What reaches the worker's own process.stdout/stderr (Node's warnings)
  // goes to this process's fd 1/2 as it is: touching process.stdout here
  // would make fd 1 non-blocking for the program too.
  stdout: true,
  stderr: true,
  name: 'lunarun',
});
for (const [stream, fd] of [[worker.stdout, 1], [worker.stderr, 2]]) {
  stream.on('data', (buf) => {
    try {
      writeSync(fd, buf);
    } catch {}
  });
}

let budget = 0;
let startupActive = 0;
let lastActive = 0;
let timedOut = false;
let exitNote = null;
let pollTimer = null;
let flushesSeen = -1;
let workerError = null;

function active() {
  try {
    lastActive = worker.performance.eventLoopUtilization().active;
  } catch {}
  return lastActive;
}

function frame(msg) {
  return channel.line(JSON.stringify(msg));
}

function stats() {
  return frame({ type: 'stats', computeMs: Math.max(0, Math.round(lastActive - startupActive)) });
}

function onMessage(m) {
  if (!Array.isArray(m)) return;
  if (m[0] === 'started' && pollTimer === null) {
    startupActive = typeof m[1] === 'number' ? m[1] : 0;
    budget = typeof m[2] === 'number' ? m[2] : 60000;
    pollTimer = setInterval(poll, 10);
  } else if (m[0] === 'exit') {
    exitNote = { code: m[1], requested: m[2] };
  }
}
port.on('message', onMessage);
port.unref();

// Every 10 ms: the compute budget, and logs the worker holds while it is
// stuck in one long turn (they leave within about 20 ms).
function poll() {
  if (channel.terminalSent()) return;
  if (active() - startupActive > budget) {
    timedOut = true;
    clearInterval(pollTimer);
    worker.terminate();
    return;
  }
  const flushes = channel.flushes();
  if (channel.pendingBytes() > 0 && flushes === flushesSeen) channel.rescue(false);
  flushesSeen = flushes;
}

worker.on('error', (e) => {
  workerError = e;
});

worker.on('exit', (code) => {
  if (pollTimer !== null) clearInterval(pollTimer);
  let m;
  while ((m = receiveMessageOnPort(port)) !== undefined) onMessage(m.message);
  port.close();
  if (channel.terminalSent() || !channel.loadToken()) return;
  let error;
  if (timedOut) {
    error = { kind: 'timeout', message: `compute budget of ${budget} ms spent` };
  } else {
    let why;
    if (workerError && workerError.code === 'ERR_WORKER_OUT_OF_MEMORY') {
      why = `the worker ran out of memory (maxOldGenerationSizeMb ${heapMb}): ${workerError.message}`;
    } else if (workerError) {
      why = `the worker stopped on an uncaught error: ${workerError.stack || workerError.message || workerError}`;
    } else if (exitNote && exitNote.requested) {
      why = `the program called process.exit(${exitNote.code})`;
    } else if (exitNote && exitNote.code === 0 && code === 0) {
      why = "the program's promise never settled and nothing was left to run";
    } else {
      why = `the worker exited with code ${code} before the run settled`;
    }
    error = { kind: 'worker-exit', message: why };
  }
  channel.send(stats() + frame({ type: 'done', error }), true);
});

// The host's side of the channel (fd 3): the token, the boot frame, then
// replies, one frame per line. Read here, in a realm the program cannot
// reach (node's stream internals in the worker's realm could be hijacked by
// a program that rewrites Function.prototype.call), decoded and checked
// (SPEC §7 refusals), and handed to the worker in one message per read.
const fatalUtf8 = new TextDecoder('utf-8', { fatal: true });
const BASE64_RE = /^[A-Za-z0-9+/]*={0,2}$/;
const TOKEN_RE = /^[0-9A-Za-z]{16,64}$/;
let lineNo = 0;
let maxFrameBytes = DEFAULT_MAX_FRAME_BYTES;
let batch = [];
let broken = false;
const input = new Socket({ fd: IN_FD, readable: true, writable: false });
const reader = new LineReader(base64Length(maxFrameBytes) + 64, onLine, () => fail('a line over maxFrameBytes'));

function fail(why) {
  broken = true;
  batch.push(['broken', `the host sent a broken frame (${why})`]);
  return false;
}

function onLine(line) {
  lineNo++;
  if (lineNo === 1) {
    const token = line.toString('latin1');
    if (!TOKEN_RE.test(token)) return fail('no channel token');
    channel.setToken(token);
    return true;
  }
  if (line.length === 0) return fail('an empty line');
  const s = line.toString('latin1');
  if (s.length % 4 !== 0 || !BASE64_RE.test(s)) return fail('malformed base64');
  const bytes = Buffer.from(s, 'base64');
  if (bytes.length > maxFrameBytes) return fail('over maxFrameBytes');
  let msg;
  try {
    msg = JSON.parse(fatalUtf8.decode(bytes));
  } catch {
    return fail('invalid UTF-8 or JSON');
  }
  if (msg === null || typeof msg !== 'object' || Array.isArray(msg)) return fail('a message that is not an object');
  if (lineNo === 2) {
    if (msg.type !== 'boot') return fail('the first message is not boot');
    if (Number.isSafeInteger(msg.maxFrameBytes) && msg.maxFrameBytes > 0) maxFrameBytes = msg.maxFrameBytes;
    reader.maxLine = base64Length(maxFrameBytes);
    batch.push(['boot', msg]);
  } else if (msg.type === 'reply') {
    // Value tokens that fail the SPEC §6 checks reach the program as a
    // rejection (the worker's decoder only re-checks shapes).
    if (msg.ok === true && !validTokens(msg.value)) batch.push(['reply', msg.id, false, 'binding resolution must be lossless JSON']);
    else batch.push(['reply', msg.id, msg.ok, msg.ok ? msg.value : msg.message]);
  }
  return true;
}

input.on('data', (buf) => {
  if (broken) return;
  reader.push(buf);
  if (batch.length > 0) {
    port.postMessage(batch);
    batch = [];
  }
});
input.on('error', () => {});
// The host closed the channel: it is gone or done with this sandbox. Exit
// rather than wait for a boot frame that will never come (a sandbox whose
// outer process died before it could pass on the parent-death signal must
// not outlive its host).
input.on('end', () => process.exit(0));
input.unref();
