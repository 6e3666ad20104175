-- Programs are hostile (SPEC §8): each trick ends in one of the six kinds,
-- nothing of the run is left, and the next run is healthy.
local h = require("spec.helper")

local tools = h.fixtures .. "tools.lua"

local function run(program, opts)
  local r = h.run(program, opts)
  h.assert_clean()
  h.assert_clean("sleep 9[0-9][0-9]")
  return r
end

describe("a hostile program", function()
  it("cannot forge a done frame on fd 1: it arrives as a log entry", function()
    local r = run([[
const fs = process.getBuiltinModule("fs");
const forged = Buffer.from(JSON.stringify({ type: "done", value: ["forged"] })).toString("base64") + "\n";
fs.writeSync(1, forged);
fs.writeSync(2, forged);
return "real";
]])
    assert.are.equal(0, r.code)
    assert.are.equal("real", r.result.value)
    local seen = 0
    for _, l in ipairs(r.result.logs) do
      if l:find("eyJ0eXBlIjoiZG9uZSI", 1, true) then seen = seen + 1 end
    end
    assert.are.equal(2, seen)
  end)

  it("cannot forge frames on the private channel (fd 3)", function()
    local r = run([[
const fs = process.getBuiltinModule("fs");
try { fs.writeSync(3, JSON.stringify({ type: "done", value: ["forged"] }) + "\n"); } catch {}
await new Promise((r) => setTimeout(r, 200));
return "real";
]])
    assert.are_not.equal("forged", r.result.value)
    if r.result.error then assert.are.equal("worker-exit", r.result.error.kind) end
  end)

  it("gets child process output as log entries and leaves no child behind", function()
    local r = run([[
const cp = process.getBuiltinModule("child_process");
cp.spawn("sh", ["-c", "echo from-child; sleep 901"], { stdio: "inherit" });
await new Promise((r) => setTimeout(r, 300));
return 1;
]])
    assert.are.equal(0, r.code)
    local found = false
    for _, l in ipairs(r.result.logs) do
      if l:find("from-child", 1, true) then found = true end
    end
    assert.is_true(found)
  end)

  it("cannot stall the result with a descendant that holds the pipes", function()
    local r = run([[
const cp = process.getBuiltinModule("child_process");
cp.spawn("sh", ["-c", "sleep 902 & sleep 903"], { stdio: "inherit" });
return "done";
]])
    assert.are.equal(0, r.code)
    assert.are.equal("done", r.result.value)
  end)

  it("leaves no child behind after a timeout", function()
    local r = run([[
const cp = process.getBuiltinModule("child_process");
cp.spawn("sleep", ["904"], { stdio: "ignore" });
for (;;) {}
]], { sets = { "computeMs=300" } })
    assert.are.equal("timeout", r.result.error.kind)
  end)

  it("cannot corrupt transport by rewriting globals before a binding call", function()
    local r = run([[
const realStringify = JSON.stringify;
(JSON as any).stringify = () => "garbage";
(JSON as any).parse = () => ({ type: "done" });
(Array.prototype as any).push = function () { throw new Error("push"); };
(Array.prototype as any).map = function () { throw new Error("map"); };
(Object as any).keys = () => ["evil"];
(Object as any).entries = () => [];
(Promise.prototype as any).then = function () { throw new Error("then"); };
(Function.prototype as any).call = function () { throw new Error("call"); };
(Function.prototype as any).apply = function () { throw new Error("apply"); };
(Reflect as any).ownKeys = () => [];
(Object.prototype as any).type = "done";
(Array.prototype as any)[0] = "poison";
const v = await tools.echo({ a: [1, 2], b: "x" });
return { v, inc: await tools.inc({ v: 1 }) };
]], { bindings = { tools } })
    assert.are.equal(0, r.code, r.stdout)
    assert.truthy(r.stdout:find('"value":{"inc":2,"v":{"a":[1,2],"b":"x"}}', 1, true)
      or r.stdout:find('"value":{"v":{"a":[1,2],"b":"x"},"inc":2}', 1, true), r.stdout)
  end)

  it("cannot corrupt accounting by rewriting globals before returning", function()
    local r = run([[
(JSON as any).stringify = () => "1";
(String.prototype as any).repeat = () => "";
(Array.prototype as any).join = () => "";
console.log("abc");
return "xy";
]], { sets = { "maxOutputBytes=10" } })
    assert.are.equal("output-limit", r.result.error.kind)
    assert.are.equal("outer ", r.result.error.message)
  end)

  it("gets 'binding arguments must be lossless JSON' for lossy args", function()
    local r = run([[
const out: string[] = [];
for (const bad of [NaN, -0, Infinity, 1n, [1, , 2], new Date(0), new Map(), { f() {} }, undefined as any === 0 ? 0 : [undefined],
  (() => { const a: any = {}; a.a = a; return a })(), { get x() { throw new Error("getter") } }]) {
  try { await tools.echo(bad as any); out.push("passed"); } catch (e) { out.push((e as Error).message); }
}
return out;
]], { bindings = { tools } })
    assert.are.equal(0, r.code, r.stdout)
    assert.are.equal(11, #r.result.value)
    for _, m in ipairs(r.result.value) do
      assert.are.equal("binding arguments must be lossless JSON", m)
    end
  end)

  it("keeps the host healthy after a Lua binding raises", function()
    local r = run('try { await tools.failPlain(null) } catch (e) { console.log((e as Error).message) } return await tools.inc({ v: 1 })',
      { bindings = { tools } })
    assert.are.equal(0, r.code)
    assert.are.equal(2, r.result.value)
  end)

  it("cannot leave anything behind by killing its own sandbox process, even with a child that ignores SIGTERM", function()
    local r = run([[
const cp = process.getBuiltinModule("child_process");
cp.spawn("sh", ["-c", "trap '' TERM; sleep 906"], { stdio: "ignore" });
process.kill(process.pid, "SIGKILL");
await new Promise((r) => setTimeout(r, 60000));
]], { sets = { "killGraceMs=300" } })
    assert.are.equal("worker-exit", r.result.error.kind)
    assert.truthy(r.result.error.message:find("signal 9", 1, true), r.result.error.message)
  end)

  it("cannot exhaust memory with Buffers, which the heap cap does not bound", function()
    -- 64 MiB at a time until the process-level cap (maxProcessMemoryMb) says no.
    local r = run("const b: Buffer[] = []; for (;;) b.push(Buffer.alloc(64 << 20, 1));",
      { sets = { "maxProcessMemoryMb=3072" } })
    assert.are.equal(1, r.code)
    assert.truthy(r.result.error.kind == "exception" or r.result.error.kind == "worker-exit", r.stdout)
    assert.truthy(r.result.error.message:find("allocate", 1, true), r.result.error.message)
  end)

  it("floods the host with 100000 calls it never awaits one by one: each is answered, once", function()
    local r = run([[
const ps: Promise<number>[] = [];
for (let i = 0; i < 100000; i++) ps.push(tools.inc({ v: i }));
let sum = 0;
for (const x of await Promise.all(ps)) sum += x;
return sum;
]], { bindings = { tools } })
    assert.are.equal(0, r.code, r.stdout)
    assert.are.equal('{"value":5000050000,"logs":[],', r.stdout:sub(1, 30))
    assert.are.equal(100000, r.result.stats.bindingCalls)
  end)

  it("spends its compute budget on a catastrophic regex and gets timeout", function()
    local r = run('/(a+)+$/.test("a".repeat(40) + "!"); return 1;', { sets = { "computeMs=500" } })
    assert.are.same({ kind = "timeout", message = "compute budget of 500 ms spent" }, r.result.error)
  end)

  it("blocks forever in Atomics.wait: the blocked time is compute, and it times out", function()
    local r = run("Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0); return 1;", { sets = { "computeMs=500" } })
    assert.are.same({ kind = "timeout", message = "compute budget of 500 ms spent" }, r.result.error)
  end)

  it("starves the budget with a queueMicrotask loop and gets timeout", function()
    local r = run("const f = () => queueMicrotask(f); f(); await new Promise(() => {});", { sets = { "computeMs=500" } })
    assert.are.same({ kind = "timeout", message = "compute budget of 500 ms spent" }, r.result.error)
  end)

  it("overflows its stack: a RangeError it can catch, or an exception with its own frames", function()
    local caught = run([[
function f(n: number): number { return n === 0 ? 0 : 1 + f(n - 1); }
try { f(1e7); } catch (e) { console.log((e as Error).constructor.name, (e as Error).message); }
return f(1000);]])
    assert.are.same({ "RangeError Maximum call stack size exceeded" }, caught.result.logs)
    assert.are.equal(1000, caught.result.value)
    local r = run("function f(n: number): number { return n === 0 ? 0 : 1 + f(n - 1); }\nreturn f(1e7);")
    assert.are.equal("exception", r.result.error.kind)
    assert.are.equal("RangeError: Maximum call stack size exceeded\n    at f (program.ts:1:33)"
      .. string.rep("\n    at f (program.ts:1:58)", 9), r.result.error.message)
  end)

  it("pollutes the prototypes of the values the host returns: they stay exact", function()
    local r = run([[
Object.defineProperty(Object.prototype, "a", { set() { throw new Error("setter"); }, get() { return "polluted"; }, configurable: true });
Object.defineProperty(Array.prototype, "0", { set() { throw new Error("index"); }, get() { return "polluted"; }, configurable: true });
(Object.prototype as any).toJSON = () => "hijacked";
(Object.prototype as any).b = "inherited";
(Array.prototype as any).length2 = 1;
const v = await tools.echo({ a: [1, { a: 2 }], b: "x", c: [] });
return [v, Object.keys(v), v.a[0], v.a.length, Object.getPrototypeOf(v) === Object.prototype];
]], { bindings = { tools } })
    assert.are.equal(0, r.code, r.stdout)
    assert.are.equal('[{"a":[1,{"a":2}],"b":"x","c":[]},["a","b","c"],1,2,true]', h.raw_value(r.stdout))
  end)

  it("cannot steal the channel token by hooking the runner's own module", function()
    -- The runner's files are readable to the sandbox, so the program can
    -- import channel.mjs; its class is frozen, so the worker's channel
    -- cannot be hooked.
    local r = run([[
const m: any = await import(new URL("channel.mjs", "file://" + process.argv[1]).href);
m.Channel.prototype.line = function () { return ""; };
return "hooked";
]])
    assert.are.equal("exception", r.result.error.kind)
    assert.are.equal("TypeError: Cannot assign to read only property 'line' of object '#<Channel>'\n    at program.ts:2:26",
      r.result.error.message)
  end)

  it("cannot steal the token through fs.writeSync; frames forged with duplicate call ids break the channel", function()
    -- syncBuiltinESMExports() would pass a rewritten fs.writeSync to every
    -- `import { writeSync }`: the channel holds its own copy.
    local r = run([=[
const fs: any = process.getBuiltinModule("fs");
const mod: any = process.getBuiltinModule("module");
const real = fs.writeSync;
let token = "";
fs.writeSync = function (fd: number, buf: any, ...rest: any[]) {
  if (fd === 4 && token === "") token = Buffer.from(buf).toString("latin1").slice(0, 32);
  return real.call(this, fd, buf, ...rest);
};
mod.syncBuiltinESMExports();
console.log("token " + JSON.stringify(await tools.inc({ v: 1 }) === 2 ? token : "?"));
await new Promise((r) => setTimeout(r, 50)); // the log leaves before the forged line
fs.writeSync = real;
mod.syncBuiltinESMExports();
const call = { type: "calls", calls: [[1, "tools", "inc", [{ kind: "object", keys: ["v"] }, 1]], [1, "tools", "inc", [{ kind: "object", keys: ["v"] }, 1]]] };
fs.writeSync(4, token + Buffer.from(JSON.stringify(call)).toString("base64") + "\n");
await new Promise((r) => setTimeout(r, 60000));
]=], { bindings = { tools } })
    assert.are.same({ 'token ""' }, r.result.logs)
    -- On E2B the launcher words it (it checks the token there).
    local prefix = h.backend == "e2b" and "" or "broken frame from the runner: "
    assert.are.same({ kind = "worker-exit",
      message = prefix .. "the sandbox broke the frame channel (a line without the channel token)" },
      r.result.error)
    assert.are.equal(1, r.result.stats.bindingCalls)
  end)

  it("sends an argument just under maxFrameBytes (it passes) and just over (worker-exit)", function()
    -- A call frame holds 68 bytes besides a string argument of tools.nothing.
    local sets = { "maxFrameBytes=1048576", "maxOutputBytes=1000" }
    local under = run('return await tools.nothing("x".repeat(1048576 - 68));', { bindings = { tools }, sets = sets })
    assert.are.equal(0, under.code, under.stdout)
    assert.are.equal("null", h.raw_value(under.stdout))
    local over = run('await tools.nothing("x".repeat(1048576 - 67)); return "sent";', { bindings = { tools }, sets = sets })
    assert.are.same({ kind = "worker-exit", message = "the arguments of tools.nothing exceed maxFrameBytes (1048576)" },
      over.result.error)
    assert.are.equal(0, over.result.stats.bindingCalls)
  end)

  it("closes its channel in (fd 3): the host's next reply finds a broken pipe", function()
    local r = run([[
process.getBuiltinModule("fs").closeSync(3);
console.log("after close");
return await tools.inc({ v: 1 });
]], { bindings = { tools } })
    assert.are.same({ kind = "worker-exit", message = "cannot write to the runner: broken pipe" }, r.result.error)
    assert.are.equal("after close", r.result.logs[1])
    assert.are.equal(1, r.result.stats.bindingCalls)
  end)

  it("closes its channel out (fd 4), or reopens it elsewhere: worker-exit, and what it had not sent is lost", function()
    -- The program cut the only way its logs leave: nothing can carry them.
    for _, reopen in ipairs({ "", 'fs.openSync("/dev/null", "r");' }) do
      local r = run([[
const fs = process.getBuiltinModule("fs");
console.log("before close");
fs.closeSync(4);
]] .. reopen .. [[
console.log("after close");
return await tools.inc({ v: 1 });
]], { bindings = { tools } })
      assert.are.same({ kind = "worker-exit", message = "the sandbox process exited with code 0 before the program settled" },
        r.result.error)
      assert.are.same({}, r.result.logs)
    end
  end)

  it("writes megabytes to fd 1 and fd 2 at once: every byte arrives, and the ledger is exact", function()
    local r = run([[
const cp = process.getBuiltinModule("child_process");
cp.spawnSync("sh", ["-c", "head -c 2097152 /dev/zero | tr '\\0' a & head -c 2097152 /dev/zero | tr '\\0' b >&2; wait"], { stdio: "inherit" });
return "written";
]])
    assert.are.equal(0, r.code)
    local a, b, json_len = 0, 0, 2
    for i, l in ipairs(r.result.logs) do
      assert.is_nil(l:find("[^ab]"))
      local _, na = l:gsub("a", "")
      a = a + na
      b = b + #l - na
      json_len = json_len + #l + 2 + (i > 1 and 1 or 0)
    end
    assert.are.equal(2097152, a)
    assert.are.equal(2097152, b)
    assert.are.equal(json_len + #'"written"', r.result.stats.outputBytes)
  end)

  it("floods timers and leaves an interval running: the run ends with its value", function()
    local r = run([[
let n = 0;
for (let i = 0; i < 100000; i++) setTimeout(() => { n++; }, 0);
setInterval(() => {}, 1);
await new Promise((r) => setTimeout(r, 50));
return n;
]])
    assert.are.equal(100000, r.result.value)
  end)

  it("storms unhandled rejections: the first one ends the run", function()
    local r = run([[
for (let i = 0; i < 10000; i++) Promise.reject("r" + i);
await new Promise((r) => setTimeout(r, 1000));
return "survived";
]])
    assert.are.same({ kind = "exception", message = "r0" }, r.result.error)
  end)

  it("calls process.exit or process.abort", function()
    local r = run('console.log("bye"); process.exit(7);')
    assert.are.same({ "bye" }, r.result.logs)
    assert.are.same({ kind = "worker-exit", message = "the program called process.exit(7)" }, r.result.error)
    r = run('process.abort();')
    assert.are.same({ kind = "exception", message = "TypeError [ERR_WORKER_UNSUPPORTED_OPERATION]: process.abort() is not supported in workers\n"
      .. "    at process.unavailableInWorker [as abort] (node:internal/process/worker_thread_only:14:11)\n    at program.ts:1:9" },
      r.result.error)
  end)

  it("plays SharedArrayBuffer games at the boundaries: refused, not shared", function()
    local r = run([[
const sab = new SharedArrayBuffer(16);
const out: string[] = [];
for (const v of [new Int32Array(sab), { sab }]) {
  try { await tools.echo(v as any); out.push("passed"); } catch (e) { out.push((e as Error).message); }
}
console.log(out.join("; "));
return { buf: sab };
]], { bindings = { tools } })
    assert.are.same({ "binding arguments must be lossless JSON; binding arguments must be lossless JSON" }, r.result.logs)
    assert.are.same({ kind = "invalid-output", message = "the return value is not lossless JSON: an ArrayBuffer at value.buf" },
      r.result.error)
  end)

  it("overrides console and globalThis.console: its logs still arrive, one entry per call", function()
    local r = run([[
(globalThis as any).console = undefined;
Object.defineProperty(globalThis, "console", { get() { throw new Error("no console"); } });
console.log = ((...a: any[]) => process.stdout.write("patched:" + a.join(" "))) as any;
console.log("one", 2);
console.warn("two");
return 1;
]])
    assert.are.same({ "patched:one 2", "two" }, r.result.logs)
    assert.are.equal(1, r.result.value)
  end)

  it("throws values that are not Errors", function()
    for program, message in pairs({
      ["throw null;"] = "null",
      ["throw 42;"] = "42",
      ['throw Symbol("s");'] = "Symbol(s)",
      ["throw 10n;"] = "10",
      ['throw { toString() { return "custom"; } };'] = "custom",
      ["throw { toString() { throw new Error(); } };"] = "a value was thrown that cannot be converted to a string (object)",
      ["throw Object.create(null);"] = "a value was thrown that cannot be converted to a string (object)",
      ['throw new Proxy(new Error("p"), {});'] = "Error: p",
    }) do
      local r = run(program)
      assert.are.same({ kind = "exception", message = message }, r.result.error, program)
    end
  end)

  it("prints one log line far over maxOutputBytes: a prefix is kept, the ledger is exact", function()
    local r = run('console.log("x".repeat(10_000_000)); return 1;', { sets = { "maxOutputBytes=1000" } })
    assert.are.same({ kind = "output-limit", message = "outer output exceeded 1000 bytes" }, r.result.error)
    -- ["x…"] and the message as a JSON string: 1000 bytes exactly.
    assert.are.same({ string.rep("x", 1000 - 4 - #'"outer output exceeded 1000 bytes"') }, r.result.logs)
    assert.are.equal(1000, r.result.stats.outputBytes)
  end)

  it("prints 100000 empty entries: every one counts", function()
    local r = run('for (let i = 0; i < 100000; i++) console.log(""); return null;')
    assert.are.equal(100000, #r.result.logs)
    assert.are.equal(2 + 100000 * 2 + 99999 + 4, r.result.stats.outputBytes)
  end)

  it("logs without a pause in one long turn: each entry arrives once", function()
    -- The controller sends what the worker holds while it is stuck in a long
    -- turn (every 10 ms); an entry the worker added during such a send once
    -- left twice. Empty entries are small: the worker itself flushes rarely,
    -- so the controller sends many times while the worker appends.
    for _ = 1, 3 do
      local r = run('for (let i = 0; i < 500000; i++) console.log(""); return 1;')
      assert.are.equal(500000, r.result.stats.logEntries)
      assert.are.equal(500000, #r.result.logs)
      assert.are.equal(2 + 500000 * 2 + 499999 + 1, r.result.stats.outputBytes)
    end
  end)

  it("returns a Symbol or a BigInt: invalid-output naming where", function()
    local r = run('return { a: [1, Symbol("s")] };')
    assert.are.same({ kind = "invalid-output", message = "the return value is not lossless JSON: a symbol at value.a[1]" },
      r.result.error)
    r = run("return [1n];")
    assert.are.same({ kind = "invalid-output", message = "the return value is not lossless JSON: a bigint at value[0]" },
      r.result.error)
  end)

  it("returns a value nested 100000 deep: it arrives exact", function()
    local r = run("let v: any = []; for (let i = 0; i < 100000; i++) v = [v]; return v;")
    assert.are.equal(0, r.code)
    assert.are.equal(string.rep("[", 100001) .. string.rep("]", 100001), h.raw_value(r.stdout))
  end)

  -- Under bubblewrap only (the local process tree): maxProcesses is a limit
  -- inside the sandbox's user namespace, and the sandbox's parent is the
  -- namespace's init. Without isolation the program's parent is the host
  -- itself, which it could signal (README, "Isolation"); on E2B, the launcher.
  local bwrap_only = h.isolation == "none" or h.backend == "e2b"

  it("floods processes under maxProcesses (bwrap only): spawns fail with EAGAIN, none is left", function()
    if bwrap_only then return pending("bubblewrap isolation only") end
    local r = run([[
const cp = process.getBuiltinModule("child_process");
let n = 0, err = "";
for (let i = 0; i < 300; i++) {
  const c = cp.spawn("sleep", ["908"], { stdio: "ignore" });
  c.on("error", (e) => { err = e.message; });
  n++;
}
await new Promise((r) => setTimeout(r, 500));
return [n, err];
]], { sets = { "maxProcesses=64" } })
    assert.are.equal('[300,"spawn sleep EAGAIN"]', h.raw_value(r.stdout))
  end)

  it("sends SIGKILL to its parent (bwrap only): the namespace's init ignores it", function()
    if bwrap_only then return pending("bubblewrap isolation only") end
    local r = run('process.kill(process.ppid, "SIGKILL"); return ["alive", process.ppid];')
    assert.are.equal('["alive",1]', h.raw_value(r.stdout))
  end)

  it("is followed by a healthy run", function()
    assert.are.equal(2, run("return 1 + 1").result.value)
  end)
end)
