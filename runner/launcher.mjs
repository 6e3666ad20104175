// lunarun's launcher (docs/PROTOCOL.md), for backends where the host cannot
// start the sandbox process itself (a remote machine): `node launcher.mjs`
// speaks SPEC §7 frames with the host on stdin/stdout and does, next to the
// sandbox, what the local host does itself. It starts controller.mjs in a
// process group of its own with the channel pipes (fd 3 in, fd 4 out), hands
// it a token and the host's frames, forwards the sandbox's frames (checking
// the token) and turns the controller's stdout/stderr into log entries.
// Exactly one terminal frame leaves, after the controller's group is killed
// and its pipes are drained; then the launcher exits.

import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { constants as osConstants } from 'node:os';
import { StringDecoder } from 'node:string_decoder';
import { fileURLToPath } from 'node:url';
import { LineReader, base64Length, cutUtf8, stringCost, DEFAULT_MAX_FRAME_BYTES } from './codec.mjs';

const CONTROLLER = fileURLToPath(new URL('./controller.mjs', import.meta.url));
const DRAIN_AFTER_EXIT_MS = 250;
const TOKEN_LEN = 32;
// `launcher.mjs --no-child-processes` (allowChildProcesses = false): the
// controller and the program's worker lose --allow-child-process, which the
// launcher itself needs to start the controller.
const childArgv = process.argv.includes('--no-child-processes')
  ? process.execArgv.filter((a) => a !== '--allow-child-process')
  : process.execArgv;

let maxFrameBytes = DEFAULT_MAX_FRAME_BYTES;
let cap = Infinity;
let child = null;
let token = null;
let booted = false;
let childExited = false;
let exitHow = '';
let ending = null; // the terminal frame line, once decided
let finalWritten = false;
const pipeEnded = [false, false];
const decoders = [new StringDecoder('utf8'), new StringDecoder('utf8')];

// The ledger of the entries this launcher makes (the controller's pipes);
// the worker keeps its own, and the host's is authoritative.
let logsCost = 2;
let logsCount = 0;
let ledgerOver = false;

// Frames to the host, one write per turn of the loop.
let out = [];
let flushScheduled = false;

function flush() {
  flushScheduled = false;
  if (out.length === 0) return;
  const data = out.join('');
  out = [];
  process.stdout.write(data);
}

function queueLine(line) {
  out.push(line);
  if (!flushScheduled) {
    flushScheduled = true;
    setImmediate(flush);
  }
}

function frame(msg) {
  return Buffer.from(JSON.stringify(msg), 'utf8').toString('base64') + '\n';
}

function workerExit(message) {
  return frame({ type: 'done', error: { kind: 'worker-exit', message } });
}

function forwardLog(text) {
  if (ledgerOver || finalWritten) return;
  logsCost += stringCost(text) + (logsCount > 0 ? 1 : 0);
  logsCount++;
  if (logsCost > cap) {
    ledgerOver = true;
    queueLine(frame({ type: 'log', text: cutUtf8(text, cap) }));
    conclude(frame({ type: 'output-limit' }));
    return;
  }
  queueLine(frame({ type: 'log', text }));
}

function killGroup() {
  if (child && child.pid) {
    try { process.kill(-child.pid, 'SIGKILL'); } catch {}
  }
}

// Decides the terminal frame (once), then kills and drains.
function conclude(line) {
  if (ending !== null || finalWritten) return;
  ending = line;
  killGroup();
  setTimeout(finish, 5000).unref(); // never wait on the drain for long
  maybeFinish();
}

function maybeFinish() {
  if (ending === null || finalWritten) return;
  if (!child || !child.pid || (pipeEnded[0] && pipeEnded[1] && childExited)) finish();
  else if (childExited) setTimeout(finish, DRAIN_AFTER_EXIT_MS);
}

function finish() {
  if (finalWritten) return;
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
  finalWritten = true;
  queueLine(ledgerOver ? frame({ type: 'output-limit' }) : ending);
  flush();
  process.stdout.end(() => process.exit(0));
}

// The sandbox's frames (fd 4): `token + frame` per line. The terminal ones
// are held until the drain; the others go on as they are.
function onSandboxLine(line) {
  if (ending !== null) return false;
  if (line.length < TOKEN_LEN || line.toString('latin1', 0, TOKEN_LEN) !== token) {
    conclude(workerExit('the sandbox broke the frame channel (a line without the channel token)'));
    return false;
  }
  const text = line.toString('latin1', TOKEN_LEN) + '\n';
  // The first 12 bytes tell the type: {"type":"don… / {"type":"out….
  const head = Buffer.from(text.slice(0, 16), 'base64').toString('latin1');
  if (head === '{"type":"don' || head === '{"type":"out') {
    conclude(text);
    return false;
  }
  queueLine(text);
  return true;
}

function startController(heapMb) {
  token = randomBytes(TOKEN_LEN / 2).toString('hex');
  try {
    child = spawn(process.execPath, [...childArgv, CONTROLLER, String(heapMb)], {
      detached: true,
      stdio: ['ignore', 'pipe', 'pipe', 'pipe', 'pipe'],
      env: {},
    });
  } catch (e) {
    conclude(workerExit(`failed to start the sandbox process: ${e && e.message}`));
    return;
  }
  child.on('error', (e) => {
    if (!child.pid) conclude(workerExit(`failed to start the sandbox process: ${e && e.message}`));
  });
  if (!child.pid) return;
  child.on('exit', (code, signal) => {
    childExited = true;
    // Worded as the local host words it (core/run.c).
    exitHow = signal
      ? `was killed by signal ${osConstants.signals[signal] ?? '?'} (${signal})`
      : `exited with code ${code}`;
    maybeFinish();
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
  child.stdio[3].on('error', () => {});
  const reader = new LineReader(base64Length(maxFrameBytes) + TOKEN_LEN, onSandboxLine, () => {
    conclude(workerExit(`a frame from the sandbox exceeds maxFrameBytes (${maxFrameBytes})`));
  });
  const channel = child.stdio[4];
  channel.on('data', (buf) => reader.push(buf));
  channel.on('error', () => {});
  channel.on('close', () => {
    // The channel ended without a terminal frame: the sandbox died.
    const why = () => conclude(workerExit(`the sandbox process ${exitHow || 'ended'} before the program settled`));
    if (childExited) why();
    else child.once('exit', why);
  });
  toSandbox(token + '\n');
}

// A write to the controller's channel (its fd 3). A sandbox that closed its
// end can never be answered: the run ends as the local host ends it. (The
// failure comes to the write's callback; no 'error' event is emitted.)
function toSandbox(data) {
  child.stdio[3].write(data, (e) => {
    if (!e) return;
    const why = e.code === 'EPIPE' ? 'broken pipe' : e.message;
    conclude(workerExit(`cannot write to the runner: ${why}`));
  });
}

// The host's frames (stdin): the first is boot, which this launcher reads for
// the limits it needs; every line goes on to the controller as it is, and the
// controller checks it (SPEC §7 refusals).
function onHostLine(line) {
  if (ending !== null) return false;
  if (!booted) {
    booted = true;
    let boot = null;
    try {
      boot = JSON.parse(Buffer.from(line.toString('latin1'), 'base64').toString('utf8'));
    } catch {}
    if (boot === null || typeof boot !== 'object' || boot.type !== 'boot') {
      conclude(workerExit('the host sent a broken frame (the first message is not boot)'));
      return false;
    }
    if (Number.isSafeInteger(boot.maxOutputBytes) && boot.maxOutputBytes > 0) cap = boot.maxOutputBytes;
    if (Number.isSafeInteger(boot.maxFrameBytes) && boot.maxFrameBytes > 0) maxFrameBytes = boot.maxFrameBytes;
    hostReader.maxLine = base64Length(maxFrameBytes);
    const heap = Number.isSafeInteger(boot.maxOldGenerationSizeMb) ? boot.maxOldGenerationSizeMb : 512;
    startController(heap);
  }
  if (child && child.pid) toSandbox(Buffer.concat([line, Buffer.from('\n')]));
  return true;
}

const hostReader = new LineReader(base64Length(maxFrameBytes), onHostLine, () => {
  conclude(workerExit('the host sent a broken frame (a line over maxFrameBytes)'));
});

// The host is gone or wants us gone: nothing more is written.
function abandon() {
  finalWritten = true;
  killGroup();
  process.exit(0);
}

process.stdin.on('data', (buf) => hostReader.push(buf));
process.stdin.on('end', abandon);
process.stdin.on('error', abandon);
process.stdout.on('error', abandon);
process.on('SIGTERM', abandon);
process.on('SIGINT', abandon);
process.on('SIGHUP', abandon);
process.on('uncaughtException', (e) => {
  if (ending === null && !finalWritten) conclude(workerExit(`the launcher failed: ${e && e.stack}`));
  else {
    killGroup();
    process.exit(70);
  }
});
