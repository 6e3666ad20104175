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

  it("is followed by a healthy run", function()
    assert.are.equal(2, run("return 1 + 1").result.value)
  end)
end)
