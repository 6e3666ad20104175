// A test double of E2B: the REST control plane and envd (process and file
// services) on one HTTP port, running commands for real on this machine, each
// sandbox in a folder of its own. Started through spec/e2b/double (see
// spec/e2b/README.md). Node built-ins only.
import http from "node:http";
import { spawn } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import crypto from "node:crypto";
import zlib from "node:zlib";

const ENVD_VERSION = "0.5.7";
const ENVD_PORT = 49983;
const CLIENT_ID = "6532622b";
const DEFAULT_TIMEOUT_S = 15; // openapi NewSandbox.timeout default

// ---- arguments -------------------------------------------------------------

function usage(msg) {
  process.stderr.write(`double: ${msg}\nusage: double --port P [--node PATH] [--api-key KEY] [--root DIR]\n`);
  process.exit(2);
}
const opts = { port: null, node: process.execPath, apiKey: null, root: null };
{
  const a = process.argv.slice(2);
  for (let i = 0; i < a.length; i++) {
    const k = a[i], v = a[i + 1];
    if (!["--port", "--node", "--api-key", "--root"].includes(k)) usage(`unknown argument ${k}`);
    if (v === undefined) usage(`${k} needs a value`);
    i++;
    if (k === "--port") {
      if (!/^\d+$/.test(v) || Number(v) > 65535) usage(`bad port ${v}`);
      opts.port = Number(v);
    } else if (k === "--node") opts.node = path.resolve(v);
    else if (k === "--api-key") opts.apiKey = v;
    else opts.root = path.resolve(v);
  }
  if (opts.port === null) usage("--port is required");
}
let ownRoot = false;
if (opts.root) fs.mkdirSync(opts.root, { recursive: true });
else {
  opts.root = fs.mkdtempSync(path.join(os.tmpdir(), "e2b-double-"));
  ownRoot = true;
}
opts.root = fs.realpathSync(opts.root);

// ---- state -----------------------------------------------------------------

/** id -> sandbox {id, templateID, dir, token, startedAt, endAt, timer, metadata, envVars, procs: Map pid->proc, streams: Set<res>} */
const sandboxes = new Map();
/** pid -> {sandboxID, start} : every process ever seen as belonging to a sandbox (spawned or found by a scan) */
const known = new Map();
let faults = {};
const requestLog = [];
const LOG_MAX = 2000;

// ---- helpers ---------------------------------------------------------------

function sendJSON(res, status, obj, extraHeaders = {}) {
  const body = obj === undefined ? "" : JSON.stringify(obj);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body), ...extraHeaders });
  res.end(body);
}
function sendEmpty(res, status) {
  res.writeHead(status, { "Content-Length": 0 });
  res.end();
}
function apiError(res, status, message) {
  sendJSON(res, status, { code: status, message });
}
const CONNECT_STATUS = {
  canceled: 499, unknown: 500, invalid_argument: 400, deadline_exceeded: 504, not_found: 404,
  already_exists: 409, permission_denied: 403, resource_exhausted: 429, failed_precondition: 400,
  aborted: 409, out_of_range: 400, unimplemented: 501, internal: 500, unavailable: 503,
  data_loss: 500, unauthenticated: 401,
};
class ConnectErr extends Error {
  constructor(code, message) { super(message); this.code = code; }
}
function connectUnaryError(res, code, message) {
  sendJSON(res, CONNECT_STATUS[code] ?? 500, { code, message });
}
function envelope(flag, obj) {
  const body = Buffer.from(typeof obj === "string" ? obj : JSON.stringify(obj));
  const head = Buffer.alloc(5);
  head[0] = flag;
  head.writeUInt32BE(body.length, 1);
  return Buffer.concat([head, body]);
}
function readBody(req, limit = 512 * 1024 * 1024) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    let n = 0;
    req.on("data", (c) => {
      n += c.length;
      if (n > limit) { reject(new Error("body too large")); req.destroy(); return; }
      chunks.push(c);
    });
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}
function randomId(n = 20) {
  const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789";
  const bytes = crypto.randomBytes(n);
  let s = "";
  for (const b of bytes) s += alphabet[b % alphabet.length];
  return s;
}
function sleep(ms) { return new Promise((r) => setTimeout(r, ms)); }
function within(dir, p) {
  return p === dir || p.startsWith(dir + "/");
}

// ---- the process table (/proc) -----------------------------------------------

function readStat(pid) {
  try {
    const s = fs.readFileSync(`/proc/${pid}/stat`, "latin1");
    const close = s.lastIndexOf(")");
    const f = s.slice(close + 2).split(" ");
    return { state: f[0], ppid: Number(f[1]), start: f[19] };
  } catch { return null; }
}
function readCmdline(pid) {
  try { return fs.readFileSync(`/proc/${pid}/cmdline`, "utf8").replace(/\0+$/, "").split("\0").join(" "); }
  catch { return ""; }
}
function readCwd(pid) {
  try { return fs.readlinkSync(`/proc/${pid}/cwd`); } catch { return null; }
}
function readSandboxEnv(pid) {
  let e;
  try { e = fs.readFileSync(`/proc/${pid}/environ`, "latin1"); } catch { return null; }
  if (!e.includes("E2B_DOUBLE_ROOT=")) return null;
  let root = null, id = null;
  for (const kv of e.split("\0")) {
    if (kv.startsWith("E2B_DOUBLE_ROOT=")) root = kv.slice(16);
    else if (kv.startsWith("E2B_SANDBOX_ID=")) id = kv.slice(15);
  }
  return root === opts.root ? id : null;
}

// Every live (non-zombie) process that belongs to a sandbox of this double:
// those it spawned, their descendants (by ppid), any process that was once
// seen as such and still runs (a reparented orphan), any process whose cwd
// is inside a sandbox folder, and any carrying this double's marker in its
// environment. Returns Map pid -> {sandboxID, cmdline}.
function scan() {
  const stats = new Map();
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    if (pid === process.pid) continue;
    const st = readStat(pid);
    if (st) stats.set(pid, st);
  }
  const owner = new Map();
  // known pids that still run (same start time: not a recycled pid)
  for (const [pid, k] of known) {
    const st = stats.get(pid);
    if (!st || st.start !== k.start) { known.delete(pid); continue; }
    owner.set(pid, k.sandboxID);
  }
  const dirs = [...sandboxes.values()].map((s) => [s.dir, s.id]);
  for (const [pid, st] of stats) {
    if (owner.has(pid)) continue;
    const cwd = readCwd(pid);
    if (cwd) {
      const hit = dirs.find(([d]) => within(d, cwd));
      if (hit) { owner.set(pid, hit[1]); continue; }
    }
    const env = readSandboxEnv(pid);
    if (env) owner.set(pid, env);
  }
  // descendants by ppid
  const children = new Map();
  for (const [pid, st] of stats) {
    if (!children.has(st.ppid)) children.set(st.ppid, []);
    children.get(st.ppid).push(pid);
  }
  const queue = [...owner.keys()];
  while (queue.length) {
    const p = queue.pop();
    for (const c of children.get(p) || []) {
      if (owner.has(c)) continue;
      owner.set(c, owner.get(p));
      queue.push(c);
    }
  }
  const out = new Map();
  for (const [pid, sandboxID] of owner) {
    const st = stats.get(pid);
    if (!known.has(pid)) known.set(pid, { sandboxID, start: st.start });
    if (st.state === "Z" || st.state === "X") continue;
    out.set(pid, { sandboxID, cmdline: readCmdline(pid) });
  }
  return out;
}

function signalPid(pid, sig) {
  try { process.kill(pid, sig); return true; } catch { return false; }
}

// Kills every process of the sandboxes matched by `which` (a predicate on
// sandboxID): stop them all (so none forks meanwhile), rescan, then SIGKILL,
// until a scan finds none alive.
async function killProcesses(which) {
  for (let round = 0; round < 100; round++) {
    const found = [...scan()].filter(([, v]) => which(v.sandboxID));
    if (found.length === 0) return true;
    for (const [pid] of found) signalPid(pid, "SIGSTOP");
    for (const [pid] of [...scan()].filter(([, v]) => which(v.sandboxID))) signalPid(pid, "SIGKILL");
    for (const [pid] of found) signalPid(pid, "SIGKILL");
    await sleep(round < 10 ? 10 : 50);
  }
  return false;
}

// ---- sandboxes -------------------------------------------------------------

function nodeForTemplate(sb, template) {
  const bin = path.join(sb.dir, ".double-bin");
  fs.mkdirSync(bin, { recursive: true });
  if (template === "node18") {
    fs.writeFileSync(path.join(bin, "node"),
      '#!/bin/sh\n# double: the template "node18" carries a Node too old for lunarun\n'
      + 'if [ "$1" = "--version" ] || [ "$1" = "-v" ]; then echo v18.19.0; exit 0; fi\n'
      + 'echo "node18 stand-in: only --version works" >&2\nexit 1\n', { mode: 0o755 });
  } else {
    fs.symlinkSync(opts.node, path.join(bin, "node"));
  }
  // bash -l reads /etc/profile, which resets PATH; the home's .profile puts
  // the template's tools first again (as a template's image would).
  fs.writeFileSync(path.join(sb.dir, ".profile"), 'export PATH="$HOME/.double-bin:$PATH"\n');
}
const TEMPLATES = new Set(["base", "node18"]);

function createSandbox(body) {
  const templateID = body.templateID ?? "base";
  const id = randomId();
  const dir = path.join(opts.root, id);
  fs.mkdirSync(dir, { recursive: false });
  const now = Date.now();
  const timeoutS = Number.isFinite(body.timeout) ? body.timeout : DEFAULT_TIMEOUT_S;
  const sb = {
    id, templateID, dir, token: body.secure === true ? crypto.randomBytes(24).toString("hex") : undefined,
    startedAt: new Date(now), endAt: null, timer: null, metadata: body.metadata ?? {},
    envVars: body.envVars ?? {}, procs: new Map(), streams: new Set(), gone: false,
  };
  nodeForTemplate(sb, templateID);
  sandboxes.set(id, sb);
  setSandboxTimeout(sb, timeoutS);
  return sb;
}
function setSandboxTimeout(sb, seconds) {
  if (sb.timer) clearTimeout(sb.timer);
  sb.endAt = new Date(Date.now() + seconds * 1000);
  sb.timer = setTimeout(() => { endSandbox(sb, "timeout").catch(() => {}); }, Math.max(0, Math.min(seconds * 1000, 2147483647)));
  sb.timer.unref?.();
}
function sandboxJSON(sb) {
  const o = { sandboxID: sb.id, templateID: sb.templateID, alias: sb.templateID, clientID: CLIENT_ID, envdVersion: ENVD_VERSION, domain: null, trafficAccessToken: null };
  if (sb.token) o.envdAccessToken = sb.token;
  return o;
}
function sandboxDetail(sb) {
  const o = {
    templateID: sb.templateID, alias: sb.templateID, sandboxID: sb.id, clientID: CLIENT_ID,
    startedAt: sb.startedAt.toISOString(), endAt: sb.endAt.toISOString(), cpuCount: 2, memoryMB: 512,
    diskSizeMB: 1024, metadata: sb.metadata, state: "running", envdVersion: ENVD_VERSION, volumeMounts: [],
  };
  return o;
}

// Ends a sandbox: delete, timeout, vanish and shutdown all come here. Its
// envd streams are destroyed (as when its VM goes), its processes killed,
// its folder removed.
async function endSandbox(sb, why) {
  if (sb.gone) return;
  sb.gone = true;
  sandboxes.delete(sb.id);
  if (sb.timer) clearTimeout(sb.timer);
  for (const res of sb.streams) res.destroy();
  sb.streams.clear();
  await killProcesses((id) => id === sb.id);
  for (const p of sb.procs.values()) p.ended = true;
  fs.rmSync(sb.dir, { recursive: true, force: true });
  log({ event: "sandbox-ended", sandboxID: sb.id, why });
}

// ---- processes (envd's process service) --------------------------------------

const PROCESS_FIELDS = {
  StartRequest: { process: "ProcessConfig", pty: "PTY", tag: 1, stdin: 1 },
  ProcessConfig: { cmd: 1, args: 1, envs: 1, cwd: 1 },
  PTY: { size: "Size" },
  Size: { cols: 1, rows: 1 },
  ConnectRequest: { process: "ProcessSelector" },
  ProcessSelector: { pid: 1, tag: 1 },
  SendInputRequest: { process: "ProcessSelector", input: "ProcessInput" },
  ProcessInput: { stdin: 1, pty: 1 },
  SendSignalRequest: { process: "ProcessSelector", signal: 1 },
  CloseStdinRequest: { process: "ProcessSelector" },
  ListRequest: {},
  UpdateRequest: { process: "ProcessSelector", pty: "PTY" },
};
// protojson rejects unknown fields (envd uses connect-go's default codec).
function checkFields(type, obj, where = "") {
  if (obj === null || typeof obj !== "object" || Array.isArray(obj)) {
    throw new ConnectErr("invalid_argument", `proto: syntax error: ${type}${where} is not an object`);
  }
  const fields = PROCESS_FIELDS[type];
  for (const k of Object.keys(obj)) {
    if (!(k in fields)) throw new ConnectErr("invalid_argument", `proto: (line 1:2): unknown field "${k}"`);
    if (typeof fields[k] === "string" && obj[k] !== null) checkFields(fields[k], obj[k], `.${k}`);
  }
}
function selectProcess(sb, sel) {
  if (!sel) throw new ConnectErr("invalid_argument", "process selector required");
  let p;
  if (sel.pid !== undefined) p = sb.procs.get(Number(sel.pid));
  else if (sel.tag !== undefined) p = [...sb.procs.values()].find((q) => q.tag === sel.tag);
  else throw new ConnectErr("invalid_argument", "process selector required");
  if (!p || p.ended) {
    throw new ConnectErr("not_found", sel.pid !== undefined ? `process with pid ${sel.pid} not found` : `process with tag ${sel.tag} not found`);
  }
  return p;
}

// A stream of process events to one client (Start or Connect).
function openStream(sb, res, req, pidForStart) {
  res.writeHead(200, { "Content-Type": "application/connect+json" });
  sb.streams.add(res);
  const s = { res, open: true, timers: [] };
  const close = () => {
    if (!s.open) return;
    s.open = false;
    for (const t of s.timers) clearTimeout(t), clearInterval(t);
    sb.streams.delete(res);
  };
  // called once the client drained what was written, or went away
  s.waiters = new Set();
  const wake = () => { const w = [...s.waiters]; s.waiters.clear(); for (const f of w) f(); };
  res.on("drain", wake);
  res.on("close", wake);
  res.on("close", close);
  res.on("error", () => {});
  // false when the client reads slower than the process writes
  s.send = (obj) => (s.open ? res.write(envelope(0, obj)) : true);
  s.finish = (error) => {
    if (!s.open) return;
    res.write(envelope(2, error ? { error } : {}));
    res.end();
    close();
  };
  s.close = close;
  const ka = Number(req.headers["keepalive-ping-interval"]);
  const kaMs = Number.isFinite(ka) && ka > 0 ? ka * 1000 : 50000;
  s.timers.push(setInterval(() => s.send({ event: { keepalive: {} } }), kaMs));
  return s;
}

function endEventFor(code, signal) {
  // Go's exec: ExitCode() is -1 when signalled, Exited() false, String()
  // "signal: killed"; Wait's error is the same text for a failure.
  const e = {};
  let status;
  if (signal) {
    const names = { SIGKILL: "killed", SIGTERM: "terminated", SIGINT: "interrupt", SIGHUP: "hangup", SIGPIPE: "broken pipe", SIGSEGV: "segmentation fault", SIGABRT: "aborted" };
    status = `signal: ${names[signal] ?? signal}`;
    e.exitCode = -1;
  } else {
    status = `exit status ${code}`;
    if (code !== 0) e.exitCode = code;
    e.exited = true;
  }
  e.status = status;
  if (signal || code !== 0) e.error = status;
  return e;
}

function startProcess(sb, request, timeoutMs, stream, fault) {
  const cfg = request.process;
  if (!cfg || typeof cfg.cmd !== "string" || cfg.cmd === "") throw new ConnectErr("invalid_argument", "process.cmd is required");
  if (request.pty) throw new ConnectErr("unimplemented", "double: PTY is not supported");
  const cwd = cfg.cwd ? path.resolve(sb.dir, cfg.cwd) : sb.dir;
  if (!fs.existsSync(cwd)) throw new ConnectErr("invalid_argument", `error starting process: chdir ${cwd}: no such file or directory`);
  const env = {
    PATH: `${sb.dir}/.double-bin:/usr/local/bin:/usr/bin:/bin`, HOME: sb.dir, USER: "user",
    E2B_SANDBOX: "true", E2B_SANDBOX_ID: sb.id,
  };
  for (const [k, v] of Object.entries({ ...sb.envVars, ...(cfg.envs ?? {}) })) env[k] = String(v);
  // how the double finds a process of its own again in /proc (it cannot be overridden)
  env.E2B_SANDBOX_ID = sb.id;
  env.E2B_DOUBLE_ROOT = opts.root;
  let child;
  try {
    child = spawn(cfg.cmd, cfg.args ?? [], { cwd, env, stdio: [request.stdin ? "pipe" : "ignore", "pipe", "pipe"] });
  } catch (e) {
    throw new ConnectErr("internal", `error starting process: ${e.message}`);
  }
  if (child.pid === undefined) {
    return new Promise((resolve, reject) => {
      child.once("error", (e) => reject(new ConnectErr("internal", `error starting process: ${e.message}`)));
    });
  }
  const st = readStat(child.pid);
  if (st) known.set(child.pid, { sandboxID: sb.id, start: st.start });
  const p = {
    pid: child.pid, child, tag: request.tag, config: { cmd: cfg.cmd, args: cfg.args ?? [], envs: cfg.envs ?? {}, cwd: cfg.cwd },
    subscribers: new Set([stream]), ended: false, stdin: request.stdin === true,
  };
  sb.procs.set(p.pid, p);
  child.on("error", () => {});
  child.stdin?.on("error", () => {});
  stream.send({ event: { start: { pid: p.pid } } });
  const broadcast = (obj) => { for (const s of p.subscribers) s.send(obj); };
  // Backpressure: a slow reader stops the process's pipes (as envd's would
  // fill), instead of the double buffering without bound.
  const resume = () => { child.stdout.resume(); child.stderr.resume(); };
  const output = (obj) => {
    let blocked = false;
    for (const s of p.subscribers) {
      if (!s.send(obj)) {
        blocked = true;
        s.waiters.add(resume);
      }
    }
    if (blocked) { child.stdout.pause(); child.stderr.pause(); }
  };
  child.stdout.on("data", (b) => output({ event: { data: { stdout: b.toString("base64") } } }));
  child.stderr.on("data", (b) => output({ event: { data: { stderr: b.toString("base64") } } }));
  // 'close' comes once the process exited and stdout and stderr closed
  child.on("close", (code, signal) => {
    p.ended = true;
    sb.procs.delete(p.pid);
    broadcast({ event: { end: endEventFor(code, signal) } });
    for (const s of p.subscribers) s.finish();
    p.subscribers.clear();
  });
  if (timeoutMs > 0) {
    const t = setTimeout(() => {
      signalPid(p.pid, "SIGKILL");
      stream.finish({ code: "deadline_exceeded", message: "context deadline exceeded" });
      p.subscribers.delete(stream);
    }, timeoutMs);
    stream.timers.push(t);
  }
  stream.res.on("close", () => p.subscribers.delete(stream));
  if (fault) applyStartFault(fault, stream, p);
  return p;
}

function applyStartFault(fault, stream, p) {
  const res = stream.res;
  const mode = fault.mode;
  const detach = () => { p.subscribers.delete(stream); };
  if (mode === "cut") {
    stream.timers.push(setTimeout(() => {
      if (!stream.open) return;
      detach();
      const env = envelope(0, { event: { keepalive: {} } });
      res.write(env.subarray(0, 8), () => setTimeout(() => res.socket?.destroy(), 20));
      stream.close();
    }, 100));
  } else if (mode === "truncated") {
    detach();
    const body = Buffer.from(JSON.stringify({ event: { data: { stdout: Buffer.from("truncated").toString("base64") } } }));
    const head = Buffer.alloc(5);
    head.writeUInt32BE(body.length + 100, 1);
    res.write(Buffer.concat([head, body]));
    res.end();
    stream.close();
  } else if (mode === "oversized") {
    detach();
    const head = Buffer.alloc(5);
    head.writeUInt32BE(0x7fffffff, 1);
    res.write(Buffer.concat([head, Buffer.from('{"event":')]));
    res.end();
    stream.close();
  } else if (mode === "error-end") {
    detach();
    stream.finish({ code: "internal", message: "double: injected" });
  }
}

// ---- faults ------------------------------------------------------------------

const FAULT_OPS = new Set(["create", "delete", "timeout", "upload", "health", "start", "sendInput", "sendSignal"]);
const START_MODES = new Set(["cut", "truncated", "oversized", "error-end"]);
function takeFault(op) {
  const f = faults[op];
  if (!f) return null;
  // `skip: N` lets the first N matching requests through untouched.
  if (f.skip > 0) {
    f.skip--;
    return null;
  }
  if (f.times !== undefined) {
    f.times--;
    if (f.times <= 0) delete faults[op];
  }
  return f;
}
function sendFault(res, f) {
  const body = f.body === undefined ? "" : typeof f.body === "string" ? f.body : JSON.stringify(f.body);
  res.writeHead(f.status ?? 500, { "Content-Type": f.contentType ?? "application/json", "Content-Length": Buffer.byteLength(body) });
  res.end(body);
}

// ---- request log -------------------------------------------------------------

const LOGGED_HEADERS = ["host", "content-type", "x-api-key", "x-access-token", "authorization", "e2b-sandbox-id",
  "e2b-sandbox-port", "connect-protocol-version", "connect-timeout-ms", "keepalive-ping-interval", "user-agent", "content-encoding"];
const SECRET_HEADERS = new Set(["x-api-key", "x-access-token"]);
function log(entry) {
  entry.time = new Date().toISOString();
  requestLog.push(entry);
  if (requestLog.length > LOG_MAX) requestLog.splice(0, requestLog.length - LOG_MAX);
}
function logRequest(req) {
  const headers = {};
  for (const h of LOGGED_HEADERS) {
    if (req.headers[h] === undefined) continue;
    headers[h] = SECRET_HEADERS.has(h) ? "***" : req.headers[h];
  }
  const entry = { method: req.method, path: req.url, headers };
  log(entry);
  return entry;
}

// ---- the control plane (REST) --------------------------------------------------

async function readJSONBody(req, res) {
  const raw = await readBody(req);
  if (raw.length === 0) return {};
  try {
    const v = JSON.parse(raw.toString("utf8"));
    if (v === null || typeof v !== "object" || Array.isArray(v)) throw new Error("not an object");
    return v;
  } catch (e) {
    apiError(res, 400, `Error when parsing request: ${e.message}`);
    return null;
  }
}

async function controlPlane(req, res, url, entry) {
  const p = url.pathname;
  const m = req.method;
  // the API key (the SDK sends X-API-KEY; header names are case-insensitive)
  const key = req.headers["x-api-key"];
  const route =
    m === "POST" && (p === "/sandboxes" || p === "/v2/sandboxes") ? "create"
    : m === "DELETE" && /^\/sandboxes\/[^/]+$/.test(p) ? "delete"
    : m === "POST" && /^\/sandboxes\/[^/]+\/timeout$/.test(p) ? "timeout"
    : null;
  if (m === "GET" && p === "/health") return sendJSON(res, 200, { message: "Health check successful" });
  if (route) {
    const f = takeFault(route);
    if (f) return sendFault(res, f);
  }
  if (!key) return apiError(res, 401, "Invalid API key, please visit https://e2b.dev/docs/api-key for more information.");
  if (opts.apiKey !== null && key !== opts.apiKey) return apiError(res, 401, "Invalid API key");

  if (route === "create") {
    const body = await readJSONBody(req, res);
    if (!body) return;
    if (body.templateID === undefined) return apiError(res, 400, "Error when parsing request: templateID is required");
    if (typeof body.templateID !== "string") return apiError(res, 400, "Error when parsing request: templateID must be a string");
    if (!TEMPLATES.has(body.templateID)) return apiError(res, 404, `template '${body.templateID}' not found`);
    if (body.timeout !== undefined && !(Number.isInteger(body.timeout) && body.timeout >= 0)) return apiError(res, 400, "Error when parsing request: timeout must be a non-negative integer");
    const sb = createSandbox(body);
    entry.sandboxID = sb.id;
    return sendJSON(res, 201, sandboxJSON(sb));
  }
  let mm;
  if (m === "GET" && (p === "/sandboxes" || p === "/v2/sandboxes")) {
    return sendJSON(res, 200, [...sandboxes.values()].map(sandboxDetail).map(({ volumeMounts, ...x }) => ({ ...x, volumeMounts })));
  }
  if ((mm = /^\/sandboxes\/([^/]+)$/.exec(p))) {
    const sb = sandboxes.get(mm[1]);
    if (!sb) return apiError(res, 404, `sandbox "${mm[1]}" doesn't exist or you don't have access to it`);
    if (m === "GET") return sendJSON(res, 200, sandboxDetail(sb));
    if (m === "DELETE") {
      await endSandbox(sb, "delete");
      return sendEmpty(res, 204);
    }
  }
  if ((mm = /^\/sandboxes\/([^/]+)\/timeout$/.exec(p)) && m === "POST") {
    const body = await readJSONBody(req, res);
    if (!body) return;
    const sb = sandboxes.get(mm[1]);
    if (!sb) return apiError(res, 404, `sandbox "${mm[1]}" doesn't exist or you don't have access to it`);
    if (!(Number.isInteger(body.timeout) && body.timeout >= 0)) return apiError(res, 400, "Error when parsing request: timeout must be a non-negative integer");
    setSandboxTimeout(sb, body.timeout);
    return sendEmpty(res, 204);
  }
  if ((mm = /^\/(?:v2\/)?sandboxes\/([^/]+)\/connect$/.exec(p)) && m === "POST") {
    const body = await readJSONBody(req, res);
    if (!body) return;
    const sb = sandboxes.get(mm[1]);
    if (!sb) return apiError(res, 404, `sandbox "${mm[1]}" doesn't exist or you don't have access to it`);
    if (Number.isInteger(body.timeout) && sb.endAt.getTime() < Date.now() + body.timeout * 1000) setSandboxTimeout(sb, body.timeout);
    return sendJSON(res, 200, sandboxJSON(sb));
  }
  return apiError(res, 404, `double: no route ${m} ${p}`);
}

// ---- envd ----------------------------------------------------------------------

function envdSandboxId(req) {
  const h = req.headers["e2b-sandbox-id"];
  if (h) return h;
  const host = (req.headers.host || "").split(":")[0];
  const m = /^(\d+)-([a-z0-9]+)\.[^.]/i.exec(host);
  if (m && Number(m[1]) === ENVD_PORT) return m[2];
  return null;
}
function isEnvdPath(p) {
  return p === "/health" || p === "/files" || p === "/envs" || p === "/metrics" || p === "/init"
    || p.startsWith("/process.Process/") || p.startsWith("/filesystem.Filesystem/");
}
function sandboxGone(res, id) {
  // what E2B's proxy answers for a sandbox it does not know
  sendJSON(res, 502, { sandboxId: id, message: "The sandbox was not found", code: 502 });
}

async function envd(req, res, url, id, entry) {
  const p = url.pathname;
  entry.sandboxID = id;
  const sb = sandboxes.get(id);
  if (p === "/health" && req.method === "GET") {
    const f = takeFault("health");
    if (f) return sendFault(res, f);
    if (!sb) return sandboxGone(res, id);
    return sendEmpty(res, 204);
  }
  if (!sb) return sandboxGone(res, id);
  if (sb.token && req.headers["x-access-token"] !== sb.token) {
    if (p.startsWith("/process.Process/") || p.startsWith("/filesystem.Filesystem/")) return connectUnaryError(res, "unauthenticated", "invalid access token");
    return apiError(res, 401, "invalid access token");
  }
  if (p === "/files") return files(req, res, url, sb);
  if (p.startsWith("/process.Process/")) return processService(req, res, p.slice("/process.Process/".length), sb, entry);
  if (p === "/envs" && req.method === "GET") return sendJSON(res, 200, sb.envVars);
  return connectUnaryError(res, "unimplemented", `double: ${p} is not implemented`);
}

function resolveSandboxPath(sb, p) {
  if (p.startsWith("~/")) p = p.slice(2);
  return path.resolve(sb.dir, p);
}

function parseMultipart(buf, contentType) {
  const m = /boundary=(?:"([^"]+)"|([^;]+))/i.exec(contentType);
  if (!m) throw new Error("multipart body without a boundary");
  const boundary = Buffer.from("--" + (m[1] ?? m[2]).trim());
  const parts = [];
  let pos = buf.indexOf(boundary);
  if (pos < 0) throw new Error("multipart body without its boundary");
  for (;;) {
    pos += boundary.length;
    if (buf.slice(pos, pos + 2).toString() === "--") break;
    pos += 2; // CRLF
    const headEnd = buf.indexOf("\r\n\r\n", pos);
    if (headEnd < 0) throw new Error("malformed multipart part");
    const head = buf.slice(pos, headEnd).toString("utf8");
    const next = buf.indexOf(boundary, headEnd + 4);
    if (next < 0) throw new Error("multipart body not closed");
    const data = buf.slice(headEnd + 4, next - 2);
    const disp = /content-disposition:[^\r\n]*/i.exec(head)?.[0] ?? "";
    const name = /\bname="([^"]*)"/i.exec(disp)?.[1];
    const filename = /\bfilename="([^"]*)"/i.exec(disp)?.[1];
    parts.push({ name, filename, data });
    pos = next;
  }
  return parts;
}

async function files(req, res, url, sb) {
  const qpath = url.searchParams.get("path");
  if (req.method === "GET") {
    if (!qpath) return apiError(res, 400, "path is required");
    const target = resolveSandboxPath(sb, qpath);
    let st;
    try { st = fs.statSync(target); } catch { return apiError(res, 404, `path '${target}' does not exist`); }
    if (st.isDirectory()) return apiError(res, 400, `path '${target}' is a directory`);
    const data = fs.readFileSync(target);
    res.writeHead(200, { "Content-Type": "application/octet-stream", "Content-Length": data.length,
      "Content-Disposition": `inline; filename=${JSON.stringify(path.basename(target))}` });
    return res.end(data);
  }
  if (req.method !== "POST") return apiError(res, 405, "method not allowed");
  const f = takeFault("upload");
  if (f) { await readBody(req).catch(() => {}); return sendFault(res, f); }
  let raw = await readBody(req);
  if (sb.gone) return sandboxGone(res, sb.id);
  const ct = req.headers["content-type"] || "";
  const written = [];
  const put = (target, data) => {
    fs.mkdirSync(path.dirname(target), { recursive: true });
    fs.writeFileSync(target, data);
    written.push({ name: path.basename(target), type: "file", path: target });
  };
  try {
    if (/^multipart\/form-data/i.test(ct)) {
      const parts = parseMultipart(raw, ct).filter((x) => x.name === "file");
      if (parts.length === 0) return apiError(res, 400, "no file part in the request");
      for (const part of parts) {
        const p = qpath ?? part.filename;
        if (!p) return apiError(res, 400, "path is required");
        put(resolveSandboxPath(sb, p), part.data);
      }
    } else {
      if (!qpath) return apiError(res, 400, "path is required");
      if (/gzip/i.test(req.headers["content-encoding"] || "")) raw = zlib.gunzipSync(raw);
      put(resolveSandboxPath(sb, qpath), raw);
    }
  } catch (e) {
    return apiError(res, 400, `double: ${e.message}`);
  }
  return sendJSON(res, 200, written);
}

async function processService(req, res, method, sb, entry) {
  const streaming = method === "Start" || method === "Connect";
  const raw = await readBody(req);
  let msg;
  const ct = req.headers["content-type"] || "";
  try {
    if (streaming) {
      if (!/^application\/connect\+json/i.test(ct)) {
        res.writeHead(415, { "Content-Length": 0, "Accept-Post": "application/connect+json" });
        return res.end();
      }
      if (raw.length < 5) throw new ConnectErr("invalid_argument", "protocol error: incomplete envelope");
      const len = raw.readUInt32BE(1);
      if (raw[0] !== 0 || raw.length !== 5 + len) throw new ConnectErr("invalid_argument", "protocol error: bad envelope");
      msg = JSON.parse(raw.subarray(5).toString("utf8"));
    } else {
      if (!/^application\/json/i.test(ct)) {
        res.writeHead(415, { "Content-Length": 0, "Accept-Post": "application/json" });
        return res.end();
      }
      msg = raw.length ? JSON.parse(raw.toString("utf8")) : {};
    }
  } catch (e) {
    const err = e instanceof ConnectErr ? e : new ConnectErr("invalid_argument", `unmarshal into process request: ${e.message}`);
    if (streaming) {
      res.writeHead(200, { "Content-Type": "application/connect+json" });
      res.write(envelope(2, { error: { code: err.code, message: err.message } }));
      return res.end();
    }
    return connectUnaryError(res, err.code, err.message);
  }
  // the decoded request, for specs to assert on (a big one only by its size)
  const size = raw.length;
  entry.rpc = size <= 65536 ? msg : { truncated: true, size };
  // the sandbox may have ended while the request was read
  if (sb.gone) return sandboxGone(res, sb.id);
  try {
    switch (method) {
      case "Start": {
        checkFields("StartRequest", msg);
        const f = takeFault("start");
        if (f && !START_MODES.has(f.mode)) return sendFault(res, f);
        const tmo = Number(req.headers["connect-timeout-ms"]);
        const stream = openStream(sb, res, req);
        try {
          await startProcess(sb, msg, Number.isFinite(tmo) && tmo > 0 ? tmo : 0, stream, f);
        } catch (e) {
          const err = e instanceof ConnectErr ? e : new ConnectErr("internal", e.message);
          stream.finish({ code: err.code, message: err.message });
        }
        return;
      }
      case "Connect": {
        checkFields("ConnectRequest", msg);
        const p = selectProcess(sb, msg.process);
        const stream = openStream(sb, res, req);
        p.subscribers.add(stream);
        stream.res.on("close", () => p.subscribers.delete(stream));
        stream.send({ event: { start: { pid: p.pid } } });
        const tmo = Number(req.headers["connect-timeout-ms"]);
        if (Number.isFinite(tmo) && tmo > 0) {
          stream.timers.push(setTimeout(() => {
            p.subscribers.delete(stream);
            stream.finish({ code: "deadline_exceeded", message: "context deadline exceeded" });
          }, tmo));
        }
        return;
      }
      case "List": {
        checkFields("ListRequest", msg);
        const processes = [...sb.procs.values()].filter((p) => !p.ended).map((p) => {
          const config = { cmd: p.config.cmd, args: p.config.args, envs: p.config.envs };
          if (p.config.cwd) config.cwd = p.config.cwd;
          const o = { config, pid: p.pid };
          if (p.tag) o.tag = p.tag;
          return o;
        });
        return sendJSON(res, 200, processes.length ? { processes } : {});
      }
      case "SendInput": {
        checkFields("SendInputRequest", msg);
        const f = takeFault("sendInput");
        if (f) return sendFault(res, f);
        const p = selectProcess(sb, msg.process);
        if (msg.input?.pty !== undefined) throw new ConnectErr("failed_precondition", "double: the process has no PTY");
        if (!p.stdin || !p.child.stdin || p.child.stdin.destroyed || p.child.stdin.writableEnded) {
          throw new ConnectErr("failed_precondition", "stdin not enabled or closed");
        }
        const data = Buffer.from(msg.input?.stdin ?? "", "base64");
        await new Promise((resolve) => p.child.stdin.write(data, () => resolve()));
        return sendJSON(res, 200, {});
      }
      case "SendSignal": {
        checkFields("SendSignalRequest", msg);
        const f = takeFault("sendSignal");
        if (f) return sendFault(res, f);
        const p = selectProcess(sb, msg.process);
        const sig = { SIGNAL_SIGKILL: "SIGKILL", 9: "SIGKILL", SIGNAL_SIGTERM: "SIGTERM", 15: "SIGTERM" }[msg.signal];
        if (!sig) throw new ConnectErr("invalid_argument", `invalid signal: ${msg.signal}`);
        // one pid, never its group (as envd does)
        if (!signalPid(p.pid, sig)) throw new ConnectErr("internal", `error sending signal: process already finished`);
        return sendJSON(res, 200, {});
      }
      case "CloseStdin": {
        checkFields("CloseStdinRequest", msg);
        const p = selectProcess(sb, msg.process);
        if (!p.stdin || !p.child.stdin) throw new ConnectErr("failed_precondition", "stdin not enabled");
        p.child.stdin.end();
        return sendJSON(res, 200, {});
      }
      case "Update":
        checkFields("UpdateRequest", msg);
        selectProcess(sb, msg.process);
        throw new ConnectErr("failed_precondition", "double: the process has no PTY");
      default:
        if (streaming) break;
        // connect-go answers an unknown procedure with 404
        return sendJSON(res, 404, { code: "unimplemented", message: `process.Process/${method} is not implemented` });
    }
  } catch (e) {
    const err = e instanceof ConnectErr ? e : new ConnectErr("internal", e.message);
    if (streaming) {
      if (!res.headersSent) res.writeHead(200, { "Content-Type": "application/connect+json" });
      res.write(envelope(2, { error: { code: err.code, message: err.message } }));
      return res.end();
    }
    return connectUnaryError(res, err.code, err.message);
  }
}

// ---- test controls (/_double/) -------------------------------------------------

async function controls(req, res, url) {
  const p = url.pathname;
  const m = req.method;
  if (p === "/_double/processes" && m === "GET") {
    return sendJSON(res, 200, [...scan()].map(([pid, v]) => ({ pid, sandboxID: v.sandboxID, cmdline: v.cmdline })));
  }
  if (p === "/_double/faults" && m === "POST") {
    let body;
    try { body = JSON.parse((await readBody(req)).toString("utf8")); } catch (e) { return apiError(res, 400, `bad JSON: ${e.message}`); }
    if (body === null || typeof body !== "object" || Array.isArray(body)) return apiError(res, 400, "faults: expected an object {op: fault}");
    for (const [op, f] of Object.entries(body)) {
      if (!FAULT_OPS.has(op)) return apiError(res, 400, `faults: unknown op ${op}`);
      if (f === null || typeof f !== "object") return apiError(res, 400, `faults: ${op}: expected an object`);
      if (f.mode !== undefined && (op !== "start" || !START_MODES.has(f.mode))) return apiError(res, 400, `faults: ${op}: bad mode ${f.mode}`);
      if (f.mode === undefined && !Number.isInteger(f.status)) return apiError(res, 400, `faults: ${op}: status (an integer) or mode is required`);
      if (f.times !== undefined && !(Number.isInteger(f.times) && f.times > 0)) return apiError(res, 400, `faults: ${op}: times must be a positive integer`);
    }
    for (const [op, f] of Object.entries(body)) faults[op] = { ...f };
    return sendJSON(res, 200, faults);
  }
  if (p === "/_double/faults" && m === "DELETE") {
    faults = {};
    return sendEmpty(res, 204);
  }
  if (p === "/_double/faults" && m === "GET") return sendJSON(res, 200, faults);
  let mm;
  if ((mm = /^\/_double\/sandboxes\/([^/]+)\/vanish$/.exec(p)) && m === "POST") {
    const sb = sandboxes.get(mm[1]);
    if (!sb) return apiError(res, 404, `sandbox ${mm[1]} not found`);
    await endSandbox(sb, "vanish");
    return sendEmpty(res, 204);
  }
  if (p === "/_double/requests" && m === "GET") return sendJSON(res, 200, requestLog);
  if (p === "/_double/requests" && m === "DELETE") { requestLog.length = 0; return sendEmpty(res, 204); }
  if (p === "/_double/sandboxes" && m === "GET") {
    return sendJSON(res, 200, [...sandboxes.values()].map((s) => ({ sandboxID: s.id, templateID: s.templateID, dir: s.dir, endAt: s.endAt.toISOString(), pids: [...s.procs.keys()] })));
  }
  return apiError(res, 404, `double: no control ${m} ${p}`);
}

// ---- the server ----------------------------------------------------------------

const server = http.createServer((req, res) => {
  const url = new URL(req.url, "http://double");
  const handle = async () => {
    if (url.pathname.startsWith("/_double/")) return controls(req, res, url);
    const entry = logRequest(req);
    res.on("finish", () => { entry.status = res.statusCode; });
    const id = envdSandboxId(req);
    if (id && isEnvdPath(url.pathname)) return envd(req, res, url, id, entry);
    return controlPlane(req, res, url, entry);
  };
  handle().catch((e) => {
    process.stderr.write(`double: ${req.method} ${req.url}: ${e.stack}\n`);
    if (!res.headersSent) apiError(res, 500, `double: ${e.message}`);
    else res.destroy();
  });
});
server.keepAliveTimeout = 5000;
server.requestTimeout = 0;

let stopping = false;
async function shutdown() {
  if (stopping) return;
  stopping = true;
  server.close();
  for (const sb of [...sandboxes.values()]) await endSandbox(sb, "shutdown");
  await killProcesses(() => true);
  server.closeAllConnections?.();
  if (ownRoot) fs.rmSync(opts.root, { recursive: true, force: true });
  process.exit(0);
}
process.on("SIGTERM", shutdown);
process.on("SIGINT", shutdown);
process.on("SIGHUP", shutdown);

server.listen(opts.port, "127.0.0.1", () => {
  process.stdout.write(`http://127.0.0.1:${server.address().port}\n`);
});
server.on("error", (e) => {
  process.stderr.write(`double: ${e.message}\n`);
  if (ownRoot) fs.rmSync(opts.root, { recursive: true, force: true });
  process.exit(1);
});
