// Drives the E2B double with E2B's official JavaScript SDK (npm `e2b`, which
// scripts/setup installs into .tools/e2b) and prints one JSON object of what
// it saw, for spec/e2b_sdk_spec.lua to check.
// Usage: node sdk_check.mjs URL   (the double must run with --api-key test-key)
import path from "node:path";
import { pathToFileURL, fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const sdkDir = process.env.E2B_SDK_DIR || path.join(here, "../../.tools/e2b/node_modules/e2b");
const { Sandbox, CommandExitError, NotFoundError, AuthenticationError } =
  await import(pathToFileURL(path.join(sdkDir, "dist/index.mjs")).href);

const url = process.argv[2];
process.env.E2B_API_URL = url;
process.env.E2B_SANDBOX_URL = url;
process.env.E2B_API_KEY = "test-key";

const out = {};
const errName = (e) => (e && e.constructor ? e.constructor.name : String(e));
async function step(name, fn) {
  try {
    out[name] = await fn();
  } catch (e) {
    out[name] = { threw: errName(e), message: String(e && e.message) };
  }
}
async function until(cond, ms = 10000) {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) return false;
    await new Promise((r) => setTimeout(r, 20));
  }
  return true;
}
const getJSON = async (p) => (await fetch(url + p)).json();

// no key at all: the server's 401 (the SDK refuses to send without a key)
await step("noKey", async () => {
  const r = await fetch(url + "/v2/sandboxes", { method: "POST", headers: { "Content-Type": "application/json" }, body: '{"templateID":"base"}' });
  return { status: r.status, body: await r.json() };
});
await step("wrongKey", async () => {
  try {
    await Sandbox.create({ apiKey: "wrong-key" });
    return { created: true };
  } catch (e) {
    return { threw: errName(e), isAuth: e instanceof AuthenticationError };
  }
});
await step("unknownTemplate", async () => {
  try {
    await Sandbox.create("no-such-template");
    return { created: true };
  } catch (e) {
    return { threw: errName(e), message: e.message };
  }
});

const sbx = await Sandbox.create({ timeoutMs: 60000 });
out.sandboxId = sbx.sandboxId;

await step("write", async () => {
  const info = await sbx.files.write("hello.txt", "hi there\n");
  const nested = await sbx.files.write("dir/sub/data.bin", new Uint8Array([0, 1, 2, 255]).buffer);
  return { name: info.name, type: info.type, absolute: path.isAbsolute(info.path), nestedName: nested.name };
});
await step("read", async () => sbx.files.read("hello.txt"));
await step("readBytes", async () => [...(await sbx.files.read("dir/sub/data.bin", { format: "bytes" }))]);
await step("readMissing", async () => {
  try { await sbx.files.read("no/such/file"); return { read: true }; } catch (e) { return { threw: errName(e), isNotFound: e instanceof NotFoundError }; }
});

await step("run", async () => {
  const r = await sbx.commands.run('cat hello.txt; echo "to stderr" >&2; [ "$(pwd)" = "$HOME" ] && echo home-is-cwd; node -e "console.log(typeof process.version)"');
  return { stdout: r.stdout, stderr: r.stderr, exitCode: r.exitCode };
});
await step("runFails", async () => {
  try { await sbx.commands.run("echo partial; exit 3"); return { ok: true }; } catch (e) {
    return { threw: errName(e), isExit: e instanceof CommandExitError, exitCode: e.exitCode, stdout: e.stdout };
  }
});
await step("cwdAndEnvs", async () => {
  const r = await sbx.commands.run('pwd; echo "$GREETING"', { cwd: "dir", envs: { GREETING: "hello env" } });
  return { lines: r.stdout.trim().split("\n") };
});

await step("stream", async () => {
  const chunks = [];
  const h = await sbx.commands.run("for i in 1 2 3; do echo line$i; sleep 0.05; done", { background: true, onStdout: (d) => chunks.push(d) });
  const r = await h.wait();
  return { joined: chunks.join(""), stdout: r.stdout, pidIsNumber: typeof h.pid === "number" };
});

await step("stdin", async () => {
  let seen = "";
  const h = await sbx.commands.run("cat", { background: true, stdin: true, onStdout: (d) => { seen += d; } });
  await sbx.commands.sendStdin(h.pid, "ping\n");
  const echoed = await until(() => seen.includes("ping\n"));
  await h.sendStdin("pong\n");
  await until(() => seen.includes("pong\n"));
  await h.closeStdin();
  const r = await h.wait();
  return { echoed, seen, exitCode: r.exitCode };
});

await step("connect", async () => {
  const h = await sbx.commands.run('read x; echo "got $x"', { background: true, stdin: true });
  let seen = "";
  const again = await sbx.commands.connect(h.pid, { onStdout: (d) => { seen += d; } });
  await sbx.commands.sendStdin(h.pid, "it\n");
  const r = await again.wait();
  await h.wait();
  return { samePid: again.pid === h.pid, seen, stdout: r.stdout };
});

await step("kill", async () => {
  const h = await sbx.commands.run("sleep 100", { background: true });
  const listed = (await sbx.commands.list()).some((p) => p.pid === h.pid);
  const killed = await sbx.commands.kill(h.pid);
  let result;
  try { await h.wait(); result = { ended: "ok" }; } catch (e) {
    result = { threw: errName(e), exitCode: e.exitCode, error: e.error };
  }
  return { listed, killed, result };
});
await step("handleKill", async () => {
  const h = await sbx.commands.run("sleep 100", { background: true });
  const killed = await h.kill();
  try { await h.wait(); return { killed, ended: "ok" }; } catch (e) { return { killed, threw: errName(e), exitCode: e.exitCode }; }
});

await step("unknownPid", async () => {
  const killed = await sbx.commands.kill(999999);
  let stdin;
  try { await sbx.commands.sendStdin(999999, "x"); stdin = { sent: true }; } catch (e) { stdin = { threw: errName(e), isNotFound: e instanceof NotFoundError }; }
  return { killed, stdin };
});

await step("setTimeout", async () => { await sbx.setTimeout(120000); return "ok"; });
await step("isRunning", async () => sbx.isRunning());
await step("listed", async () => (await Sandbox.list().nextItems()).some((s) => s.sandboxId === sbx.sandboxId));

// something left running, to see the kill end it
await step("leftRunning", async () => {
  await sbx.commands.run("sleep 100 >/dev/null 2>&1 &");
  const procs = await getJSON("/_double/processes");
  return procs.filter((p) => p.sandboxID === sbx.sandboxId && /sleep 100/.test(p.cmdline)).length;
});

await step("sandboxKill", async () => { await sbx.kill(); return "ok"; });
await step("processesAfterKill", async () => getJSON("/_double/processes"));
await step("isRunningAfterKill", async () => sbx.isRunning());
await step("killAgain", async () => Sandbox.kill(sbx.sandboxId));
await step("runAfterKill", async () => {
  try { await sbx.commands.run("true"); return { ran: true }; } catch (e) { return { threw: errName(e) }; }
});

await step("requests", async () => {
  const log = await getJSON("/_double/requests");
  const create = log.find((r) => r.method === "POST" && r.path === "/v2/sandboxes" && r.sandboxID === sbx.sandboxId);
  const start = log.find((r) => r.path === "/process.Process/Start" && r.sandboxID === sbx.sandboxId);
  return {
    createKey: create?.headers["x-api-key"],
    startSandboxHeader: start?.headers["e2b-sandbox-id"],
    startTimeout: start?.headers["connect-timeout-ms"],
    startCmd: start?.rpc?.process?.cmd,
    keyLeaked: JSON.stringify(log).includes("test-key"),
  };
});

process.stdout.write(JSON.stringify(out) + "\n");
