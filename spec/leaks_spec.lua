-- A handler's error never exits the host and never leaks a coroutine, a
-- handle or a registry reference; memory a handler takes is collected
-- (issue 3). Counted inside the host: Lua scripts that embed lunarun with
-- the Lua module (spec/fixtures/module.lua) run batches of programs whose
-- calls end badly (spec/fixtures/leaky.lua) and compare, after each batch,
-- the registry's references, the live luv handles and the Lua memory with a
-- baseline taken after a first batch.
local h = require("spec.helper")
local m = require("spec.fixtures.module")

local LEAKY = h.fixtures .. "leaky.lua"

-- Runs a module script with the leaky namespace at hand as `leaky`.
local function script(body)
  local r = m.script(string.format("local leaky = dofile(%q)\n", LEAKY) .. body)
  m.assert_clean()
  assert.are.equal(0, r.code, r.stdout .. r.stderr)
  return r.out, r
end

-- No process of an exec'd child is left either.
local function assert_no_sleep()
  local p = io.popen("pgrep -f 'sleep 987[.]654' 2>/dev/null")
  local s = p:read("a")
  p:close()
  assert.are.equal("", s)
end

-- The same counts as the baseline: references and handles exactly, memory
-- within slackKb.
local function assert_baseline(out, slack_kb)
  for i, c in ipairs(out.after) do
    assert.are.equal(out.base.registry, c.registry, "registry references after batch " .. i)
    assert.are.equal(out.base.handles, c.handles, "luv handles after batch " .. i)
    assert.is_true(c.kb - out.base.kb < slack_kb,
      string.format("Lua memory after batch %d: %.0f KB, baseline %.0f KB", i, c.kb, out.base.kb))
  end
end

describe("handlers that fail", function()
  it("leak no coroutine, handle or registry reference, whatever the way", function()
    local out, r = script([[
local rt = lunarun.runtime({ computeMs = 20000 })
rt:add(leaky.namespace)
local program = [=[
const out: string[] = [];
for (const f of ["errString", "errTable", "errOther", "errNumber", "errNil", "errFunction", "lossy", "timeout",
  "stuck", "cancelFails", "busy", "busyPcall", "busySort", "exec", "rawYield", "starterFails", "early", "doneTwice",
  "laterDoneTwice", "argsRefused"]) {
  try { out.push(f + ": " + JSON.stringify(await (bad as any)[f](null))); }
  catch (e: any) { out.push(f + ": " + e.message); }
}
return out;]=]
local function batch(n)
  local last
  for _ = 1, n do last = result(rt:run(program)) end
  return last
end
local first = batch(1)
local o = { first = first.value, base = counts(), after = {} }
for b = 1, 3 do
  batch(3)
  o.after[b] = counts()
end
rt:dispose()
out(o)]])
    assert.are.same({
      "errString: a string",
      "errTable: a table",
      "errOther: binding \"bad.errOther\" failed with a table error value",
      "errNumber: 42",
      "errNil: binding \"bad.errNil\" failed with a nil error value",
      "errFunction: binding \"bad.errFunction\" failed with a function error value",
      "lossy: binding resolution must be lossless JSON",
      "timeout: binding \"bad.timeout\" timed out after 50 ms",
      "stuck: binding \"bad.stuck\" timed out after 50 ms",
      "cancelFails: binding \"bad.cancelFails\" timed out after 50 ms",
      "busy: binding \"bad.busy\" ran for more than 50 ms without waiting",
      "busyPcall: binding \"bad.busyPcall\" ran for more than 50 ms without waiting",
      "busySort: binding \"bad.busySort\" ran for more than 50 ms without waiting",
      "exec: binding \"bad.exec\" timed out after 100 ms",
      "rawYield: the binding yielded outside lunarun.wait; nothing can resume it",
      "starterFails: the starter broke",
      "early: \"early\"",
      "doneTwice: 1",
      "laterDoneTwice: 1",
      "argsRefused: invalid arguments for \"bad.argsRefused\": args: expected object, got null",
    }, out.first)
    assert_baseline(out, 64)
    assert.truthy(r.stderr:find("the cancel function broke", 1, true), r.stderr)
    assert_no_sleep()
  end)

  it("leak nothing when their run is aborted with calls in flight", function()
    local out = script([[
local rt = lunarun.runtime({ computeMs = 20000 })
rt:add(leaky.namespace)
local program = "await Promise.all([bad.hang(null), bad.hang(null), bad.hang(null), bad.hangWrite(null), bad.hang(null)])"
local function batch(n)
  local last
  for _ = 1, n do
    leaky.inflight = 0
    local co = coroutine.running()
    local handle = rt:run(program, function(res) coroutine.resume(co, res) end)
    -- Abort once three read-only calls wait (the rest are queued behind
    -- the mutating one).
    local t = uv.new_timer()
    t:start(5, 5, function()
      if leaky.inflight >= 3 then t:stop() t:close() handle:abort() end
    end)
    last = result(coroutine.yield())
  end
  return last
end
local first = batch(1)
local o = { first = first.error, calls = first.stats.bindingCalls, base = counts(), after = {} }
for b = 1, 3 do
  batch(3)
  o.after[b] = counts()
end
rt:dispose()
out(o)]])
    assert.are.same({ kind = "abort", message = "the run was aborted" }, out.first)
    assert.are.equal(5, out.calls)
    assert_baseline(out, 64)
  end)

  it("leak nothing when their runtime is disposed with calls in flight", function()
    local out = script([[
local function cycle()
  local rt = lunarun.runtime({ computeMs = 20000 })
  rt:add(leaky.namespace)
  leaky.inflight = 0
  local got
  rt:run("await Promise.all([bad.hang(null), bad.hang(null), bad.exec(null)])", function(res) got = result(res) end)
  while leaky.inflight < 2 do sleep(5) end
  rt:dispose() -- waits for the run to end
  return got
end
local first = cycle()
local o = { first = first.error, base = counts(), after = {} }
for b = 1, 3 do
  cycle()
  cycle()
  o.after[b] = counts()
end
out(o)]])
    assert.are.same({ kind = "abort", message = "the runtime was disposed" }, out.first)
    assert_baseline(out, 64)
    assert_no_sleep()
  end)
end)

describe("memory a handler takes", function()
  it("is collected: returned, cut by a timeout, or stopped by the busy hook", function()
    local out = script([[
local rt = lunarun.runtime({ computeMs = 20000 })
rt:add(leaky.namespace)
local program = [=[
const out: any[] = [await bad.hog({ mb: 50 })];
for (const f of ["hogTimeout", "hogBusy"]) {
  try { await (bad as any)[f]({ mb: 20 }); } catch (e: any) { out.push(e.message); }
}
return out;]=]
result(rt:run("return await bad.hog({ mb: 1 })")) -- warm up
local o = { base = counts(), after = {} }
for b = 1, 3 do
  local r = result(rt:run(program))
  o.first = o.first or r.value
  o.after[b] = counts()
end
rt:dispose()
out(o)]])
    assert.are.same({ 51200, 'binding "bad.hogTimeout" timed out after 100 ms',
      'binding "bad.hogBusy" ran for more than 100 ms without waiting' }, out.first)
    -- 50 MB (then 2 x 20 MB) were taken each time; what is left is noise.
    assert_baseline(out, 512)
  end)
end)
