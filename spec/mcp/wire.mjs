// Speaks raw JSON-RPC lines to `lunarun mcp` (no SDK between): exact error
// codes, ping, cancellation, what reaches stdout, and the exit on EOF or a
// signal. Prints one JSON report for spec/mcp_server_spec.lua.
//
//   node wire.mjs '{"scenario": "errors", "command": "/path/lunarun", "args": ["mcp"], "pattern": "..."}'
import { spawn, execFileSync } from "node:child_process";

const opts = JSON.parse(process.argv[2]);
const MODERN = {
  "io.modelcontextprotocol/protocolVersion": "2026-07-28",
  "io.modelcontextprotocol/clientCapabilities": {},
};

function start() {
  const child = spawn(opts.command, opts.args, { stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, ...(opts.env || {}) } });
  const server = { child, lines: [], waiters: [], stderr: "", exited: null };
  let buf = "";
  child.stdout.setEncoding("utf8");
  child.stdout.on("data", (d) => {
    buf += d;
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      server.lines.push(line);
      for (const w of server.waiters.splice(0)) w();
    }
  });
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d) => (server.stderr += d));
  server.exit = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal, rest: buf })));
  return server;
}

function send(server, msg) {
  server.child.stdin.write((typeof msg === "string" ? msg : JSON.stringify(msg)) + "\n");
}

// The next message that answers id (parsed); messages are kept in order.
async function response(server, id) {
  for (;;) {
    for (const line of server.lines) {
      let m;
      try {
        m = JSON.parse(line);
      } catch {
        continue;
      }
      if ("id" in m && m.id === id && !("method" in m)) return m;
    }
    await new Promise((resolve) => server.waiters.push(resolve));
  }
}

async function request(server, id, method, params) {
  send(server, { jsonrpc: "2.0", id, method, ...(params === undefined ? {} : { params }) });
  return response(server, id);
}

function processes(pattern) {
  try {
    return execFileSync("pgrep", ["-af", pattern], { encoding: "utf8" }).split("\n").filter((l) => l && !l.includes("pgrep"));
  } catch {
    return [];
  }
}

async function until(pred, ms) {
  const end = Date.now() + ms;
  while (!pred() && Date.now() < end) await new Promise((r) => setTimeout(r, 100));
}

const scenarios = {
  async errors(server) {
    const r = {};
    send(server, "this is not json");
    send(server, "[]");
    await until(() => server.lines.length >= 2, 10000);
    r.parse = JSON.parse(server.lines[0]);
    r.batch = JSON.parse(server.lines[1]);
    r.unknownMethod = await request(server, 1, "no/such/method", { _meta: MODERN });
    r.noMeta = await request(server, 2, "tools/list", {});
    r.badVersion = await request(server, 3, "tools/list", { _meta: { ...MODERN, "io.modelcontextprotocol/protocolVersion": "1900-01-01" } });
    r.noCapabilities = await request(server, 4, "tools/list", { _meta: { "io.modelcontextprotocol/protocolVersion": "2026-07-28" } });
    r.unknownTool = await request(server, 5, "tools/call", { name: "nope", arguments: {}, _meta: MODERN });
    r.modernPing = await request(server, 6, "ping", { _meta: MODERN });
    r.discover = await request(server, 7, "server/discover", { _meta: MODERN });
    r.modernList = await request(server, 8, "tools/list", { _meta: MODERN });
    r.initialize = await request(server, 9, "initialize", { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "wire", version: "0" } });
    send(server, { jsonrpc: "2.0", method: "notifications/initialized" });
    r.initializeUnknown = await request(server, 10, "initialize", { protocolVersion: "2099-01-01", capabilities: {}, clientInfo: { name: "wire", version: "0" } });
    r.ping = await request(server, 11, "ping");
    r.legacyList = await request(server, 12, "tools/list");
    r.legacyCall = await request(server, 13, "tools/call", { name: "run", arguments: { code: opts.code ?? "return 1 + 1" } });
    r.badLimit = await request(server, 14, "tools/call", { name: "run", arguments: { code: "return 1", limits: { computeMs: 1e12 } } });
    r.lowerLimit = await request(server, 15, "tools/call", {
      name: "run", arguments: { code: "while (true) {}", limits: { computeMs: 200 } },
    });
    return r;
  },

  async cancel(server) {
    const r = {};
    send(server, { jsonrpc: "2.0", id: 50, method: "tools/call", params: { name: "run", arguments: { code: "await new Promise((r) => setTimeout(r, 120000))" }, _meta: MODERN } });
    await until(() => processes(opts.pattern).length > 0, 30000);
    r.during = processes(opts.pattern);
    send(server, { jsonrpc: "2.0", method: "notifications/cancelled", params: { requestId: 50, reason: "spec" } });
    await until(() => processes(opts.pattern).length === 0, 30000);
    r.left = processes(opts.pattern);
    r.ping = await request(server, 51, "tools/list", { _meta: MODERN });
    return r;
  },

  // A call in flight when standard input ends: the server disposes the
  // runtime and exits 0, answering nothing more.
  async eof(server) {
    send(server, { jsonrpc: "2.0", id: 60, method: "tools/call", params: { name: "run", arguments: { code: "await new Promise((r) => setTimeout(r, 120000))" }, _meta: MODERN } });
    await until(() => processes(opts.pattern).length > 0, 30000);
    return { during: processes(opts.pattern) };
  },

  async sigterm(server) {
    const r = await scenarios.eof(server);
    server.child.kill("SIGTERM");
    return r;
  },

  // More calls than the server runs at once: every one is answered, each
  // with its own value.
  async concurrent(server) {
    const n = 7;
    const calls = [];
    for (let i = 0; i < n; i++) {
      calls.push(request(server, 100 + i, "tools/call", {
        name: "run", arguments: { code: `await new Promise((r) => setTimeout(r, 300)); return ${i}` }, _meta: MODERN,
      }));
    }
    const answers = await Promise.all(calls);
    return { values: answers.map((a) => a.result.structuredContent.value) };
  },

  async call(server) {
    return { result: await request(server, 70, "tools/call", { name: opts.tool ?? "run", arguments: opts.arguments, _meta: MODERN }) };
  },

  async list(server) {
    return { result: await request(server, 80, "tools/list", { _meta: MODERN }) };
  },
};

const server = start();
const report = await scenarios[opts.scenario](server);
if (opts.scenario !== "sigterm") server.child.stdin.end();
const exit = await server.exit;
report.exit = exit;
// Every line on stdout is one JSON-RPC message.
report.stdout = server.lines;
report.badLines = server.lines.filter((l) => {
  try {
    return JSON.parse(l).jsonrpc !== "2.0";
  } catch {
    return true;
  }
});
report.stderr = server.stderr;
report.leftAfterExit = opts.pattern ? processes(opts.pattern) : [];
process.stdout.write(JSON.stringify(report) + "\n");
