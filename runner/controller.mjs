// lunarun's sandbox process (docs/PROTOCOL.md): `node controller.mjs HEAP_MB`.
// It starts the program's worker at once (warm, waiting for the boot frame),
// keeps the compute budget, and reports a worker that ends without settling.
// The worker talks to the host directly (fd 3 in, fd 4 out); this thread
// writes fd 4 only for the logs the worker could not send itself and for a
// terminal frame once the worker is gone, and exits when the worker sees the
// host close fd 3.

import { writeSync } from 'node:fs';
import { MessageChannel, Worker, receiveMessageOnPort } from 'node:worker_threads';
import { Channel, createShared } from './channel.mjs';

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
  } else if (m[0] === 'eof') {
    process.exit(0);
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
