// Drives `lunarun mcp` with an official MCP client, as a user's agent would,
// and prints one JSON report on stdout for spec/mcp_server_spec.lua.
//
//   node drive.mjs '{"scenario": "basic", "sdk": "v2", "mode": "legacy",
//                    "command": "/path/lunarun", "args": ["mcp", ...], "env": {...}}'
//
// sdk: "v2" (@modelcontextprotocol/client) or "v1" (@modelcontextprotocol/sdk);
// mode (v2 only): "legacy", "auto" or a version to pin ({pin: version}).
import { execFileSync } from "node:child_process";

const opts = JSON.parse(process.argv[2]);

async function connect() {
  const params = { command: opts.command, args: opts.args, env: { ...process.env, ...(opts.env || {}) }, stderr: "inherit" };
  if (opts.sdk === "v1") {
    const { Client } = await import("@modelcontextprotocol/sdk/client/index.js");
    const { StdioClientTransport } = await import("@modelcontextprotocol/sdk/client/stdio.js");
    const client = new Client({ name: "lunarun-spec", version: "0" });
    await client.connect(new StdioClientTransport(params));
    return { client, call: (p, o) => client.callTool(p, undefined, o) };
  }
  const { Client } = await import("@modelcontextprotocol/client");
  const { StdioClientTransport } = await import("@modelcontextprotocol/client/stdio");
  const mode = opts.mode === "legacy" || opts.mode === "auto" ? opts.mode : { pin: opts.mode };
  const client = new Client({ name: "lunarun-spec", version: "0" }, { versionNegotiation: { mode } });
  await client.connect(new StdioClientTransport(params));
  return { client, call: (p, o) => client.callTool(p, o) };
}

// A thrown protocol error, as a plain object.
function errorOf(e) {
  return { code: e.code ?? null, message: String(e.message), name: e.name };
}

async function capture(promise) {
  try {
    return { result: await promise };
  } catch (e) {
    return { error: errorOf(e) };
  }
}

// Processes matching the pattern (the runtime's sandboxes), polled until
// there are none or the deadline passes: abort is asynchronous.
function processes(pattern) {
  let out = "";
  try {
    out = execFileSync("pgrep", ["-af", pattern], { encoding: "utf8" });
  } catch {
    out = ""; // pgrep exits 1 when nothing matches
  }
  return out.split("\n").filter((l) => l && !l.includes("pgrep"));
}

async function leftoversAfter(pattern, deadlineMs) {
  const until = Date.now() + deadlineMs;
  for (;;) {
    const left = processes(pattern);
    if (left.length === 0 || Date.now() > until) return left;
    await new Promise((r) => setTimeout(r, 100));
  }
}

const scenarios = {
  async basic({ client, call }) {
    const report = {};
    report.protocolVersion = client.getNegotiatedProtocolVersion?.() ?? null;
    report.serverVersion = client.getServerVersion?.() ?? null;
    report.tools = (await client.listTools()).tools;
    report.value = await capture(call({ name: "run", arguments: { code: opts.code ?? 'console.log("hi"); return 6 * 7' } }));
    report.failed = await capture(call({ name: "run", arguments: { code: 'console.log("before"); throw new Error("bad")' } }));
    report.badArguments = await capture(call({ name: "run", arguments: { code: 42 } }));
    report.unknownTool = await capture(call({ name: "no_such_tool", arguments: {} }));
    return report;
  },

  async progress({ call }) {
    const progress = [];
    const code = 'console.log("step one"); await new Promise((r) => setTimeout(r, 1500)); console.log("step two"); return "done"';
    const r = await capture(call({ name: "run", arguments: { code } }, { onprogress: (p) => progress.push(p), timeout: 60000 }));
    return { progress, ...r };
  },

  async abort({ call }) {
    const controller = new AbortController();
    let sawProgress = false;
    let during = [];
    const code = 'console.log("started"); await new Promise((r) => setTimeout(r, 120000)); return "not aborted"';
    const pending = capture(call({ name: "run", arguments: { code } }, {
      signal: controller.signal,
      onprogress: (p) => {
        if (!sawProgress && String(p.message).includes("started")) {
          sawProgress = true;
          during = processes(opts.pattern); // the pattern does see the sandbox
          controller.abort();
        }
      },
      timeout: 120000,
    }));
    const r = await pending;
    const left = await leftoversAfter(opts.pattern, 30000);
    // The server still answers after the abort.
    const after = await capture(call({ name: "run", arguments: { code: "return 1" } }));
    return { sawProgress, during, ...r, left, after };
  },
};

const session = await connect();
let report;
try {
  report = await scenarios[opts.scenario](session);
} finally {
  await session.client.close();
}
process.stdout.write(JSON.stringify(report) + "\n");
