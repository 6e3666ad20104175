-- The Lua module `require "lunarun"`, driven from a plain lua5.4 interpreter
-- with luv: each test writes a small Lua program, runs it as a subprocess
-- with LUA_CPATH pointing at the built module and TMPDIR at this spec's
-- private folder, and reads the lines it prints ("TAG<TAB>payload").
local h = require("spec.helper")
local json = h.json

local root = h.root_abs
local build = h.build_dir
local cpath = h.cpath

-- What every script starts with: the module, luv, and emit(tag, value)
-- (a string as it is, anything else as JSON).
local PRELUDE = [[
local uv = require("luv")
local lunarun = require("lunarun")
local dkjson = require("dkjson")
local function emit(tag, v)
  if type(v) ~= "string" then v = dkjson.encode(v) end
  io.write(tag, "\t", v, "\n")
  io.flush()
end
-- Waits ms inside a coroutine (the caller's own luv timer).
local function pause(ms)
  local co = coroutine.running()
  local t = uv.new_timer()
  t:start(ms, 0, function() t:close(); coroutine.resume(co) end)
  coroutine.yield()
end
]]

-- Runs a Lua program; returns {code, stdout, stderr, lines = {tag = {payloads}}}.
local function lua_run(body, args)
  local script = h.tmpfile(PRELUDE .. body, ".lua")
  local out, err = h.tmpfile(), h.tmpfile()
  local cmd = "cd " .. h.q(h.tmpdir) .. " && TMPDIR=" .. h.q(h.tmpdir) .. " LUA_CPATH=" .. h.q(cpath) ..
    " timeout 300 lua5.4 " .. h.q(script) .. " " .. (args or "") .. " >" .. out .. " 2>" .. err
  local _, _, code = os.execute(cmd)
  local r = { code = code, stdout = h.slurp(out), stderr = h.slurp(err), lines = {} }
  os.remove(script)
  os.remove(out)
  os.remove(err)
  for line in r.stdout:gmatch("[^\n]+") do
    local tag, payload = line:match("^([^\t]+)\t(.*)$")
    if tag then
      r.lines[tag] = r.lines[tag] or {}
      table.insert(r.lines[tag], payload)
    end
  end
  return r
end

local function decode(s)
  return json.decode(s, 1, json.null)
end

local function assert_clean(r)
  h.assert_clean()
  assert.are.same({}, h.runtime_folders())
  assert.are.equal(0, r.code, r.stdout .. r.stderr)
end

describe("the Lua module from plain lua5.4", function()
  it("runs programs with table namespaces: coroutine and callback forms, on_log, abort, dispose", function()
    local r = lua_run([[
local rt = lunarun.runtime({ computeMs = 10000, killGraceMs = 500 })
local handle
local added = rt:add({
  global = "tools",
  errorClass = { name = "ToolError", memberNameProperty = "tool" },
  functions = {
    inc = function(a) return a.v + 1 end,
    nap = function(a)
      if a.abort then -- abort our own run once this call is in flight
        local t = uv.new_timer()
        t:start(50, 0, function() t:close(); handle:abort() end)
      end
      lunarun.sleep(a.ms)
      return { slept = a.ms, v = a.v, list = lunarun.array() }
    end,
    fail = function() error({ message = "no luck" }) end,
  },
})
emit("add_returns_rt", tostring(added == rt))

coroutine.wrap(function()
  local streamed = {}
  local r = rt:run([=[
console.log("a");
const x = await tools.nap({ ms: 100, v: 1 });
console.log("b", x.slept, JSON.stringify(x.list));
try { await tools.fail(null); } catch (e) { console.log(String(e instanceof ToolError), (e as any).tool, (e as Error).message); }
return { n: await tools.inc({ v: x.v }), f: 1.5, arr: [], nil: null };
]=], { on_log = function(text) streamed[#streamed + 1] = text end })
  emit("coroutine", r.json)
  emit("streamed", streamed)
  emit("lua", {
    ok = r.ok,
    n_type = math.type(r.value.n),
    f_type = math.type(r.value.f),
    arr_is_array = lunarun.is_array(r.value.arr),
    null_is_sentinel = r.value["nil"] == lunarun.null,
    logs_are_array = lunarun.is_array(r.logs),
    calls = r.stats.bindingCalls,
  })

  -- The callback form returns a handle; its callback gets the result.
  local got
  handle = rt:run('console.log("waiting"); await tools.nap({ ms: 60000, v: 0, abort: true }); return 1',
    { on_log = function(text) emit("cb_log", text) end },
    function(res) got = res; emit("aborted", res.json) end)
  emit("handle_id", tostring(type(handle:id()) == "number"))
  while not got do pause(20) end
  handle:abort() -- after the result: a no-op

  -- An exception, in the coroutine form.
  local e = rt:run("const v: number = 1;\nthrow new TypeError('bad ' + v);")
  emit("exception", e.json)

  rt:dispose() -- yields until done
  emit("disposed", "yes")
end)()
uv.run()
emit("END", "ok")
]])
    assert_clean(r)
    local L = r.lines
    assert.are.same({ "ok" }, L.END)
    assert.are.same({ "true" }, L.add_returns_rt)
    local c = decode(L.coroutine[1])
    assert.are.same({ "a", "b 100 []", "true fail no luck" }, c.logs)
    assert.are.same({ n = 2, f = 1.5, arr = {}, ["nil"] = json.null }, c.value)
    assert.are.same(c.logs, decode(L.streamed[1]))
    assert.are.same({ ok = true, n_type = "integer", f_type = "float", arr_is_array = true,
      null_is_sentinel = true, logs_are_array = true, calls = 3 }, decode(L.lua[1]))
    local a = decode(L.aborted[1])
    assert.are.same({ kind = "abort", message = "the run was aborted" }, a.error)
    assert.are.same({ "waiting" }, a.logs)
    assert.are.same({ "waiting" }, L.cb_log)
    assert.are.same({ "true" }, L.handle_id)
    local e = decode(L.exception[1])
    assert.are.equal("exception", e.error.kind)
    assert.truthy(e.error.message:find("TypeError: bad 1", 1, true), e.error.message)
    assert.truthy(e.error.message:find(":2:", 1, true), e.error.message)
    assert.are.same({ "yes" }, L.disposed)
  end)

  it("runs 32 programs at once, each with its own bindings and limits, results never crossed", function()
    local r = lua_run([[
local N = 32
local rt = lunarun.runtime({ computeMs = 20000, killGraceMs = 500 })
local active, max_active, crossed = 0, 0, 0
local handles, results, ndone = {}, {}, 0

-- One namespace per run; each checks it is only ever called by its own run.
for i = 1, N do
  rt:add({
    global = "ns" .. i,
    errorClass = { name = "Err" .. i, memberNameProperty = "fn" },
    functions = {
      get = function(a)
        if a.i ~= i then crossed = crossed + 1; error("crossed: ns" .. i .. " got " .. tostring(a.i)) end
        active = active + 1
        if active > max_active then max_active = active end
        if a.abort then
          local t = uv.new_timer()
          t:start(100, 0, function() t:close(); handles[i]:abort() end)
        end
        lunarun.sleep(a.ms)
        active = active - 1
        return "ns" .. i .. ":" .. a.i
      end,
    },
  })
end

-- What run i does, by i % 8: 0-2 succeed, 3 throws, 4 hits its wall clock,
-- 5 spends its compute budget, 6 overflows its output cap, 7 is aborted.
local function job(i)
  local kind, other = i % 8, i % N + 1
  local cfg = { maxOutputBytes = 1000 + i, computeMs = 10000 + i }
  local program
  if kind <= 2 then
    program = string.format([=[
console.log("run %d");
const v = await ns%d.get({ i: %d, ms: %d });
return { i: %d, v, other: typeof ns%d };]=], i, i, i, 300 + 5 * i, i, other)
  elseif kind == 3 then
    program = string.format('await ns%d.get({ i: %d, ms: 20 });\nthrow new Error("fail %d");', i, i, i)
  elseif kind == 4 then
    cfg.maxWallMs = 1500 + i
    program = string.format('console.log("wall %d");\nawait ns%d.get({ i: %d, ms: 60000 });', i, i, i)
  elseif kind == 5 then
    -- Not too small: the worker's own start-up is charged to computeMs, and
    -- with 32 runs starting at once it can take several hundred ms.
    cfg.computeMs = 2000 + i
    program = string.format('console.log("spin %d");\nwhile (true) {}', i)
  elseif kind == 6 then
    cfg.maxOutputBytes = 50 + i
    program = string.format('console.log("y".repeat(%d));\nreturn %d;', 200 + i, i)
  else
    program = string.format('console.log("abort %d");\nawait ns%d.get({ i: %d, ms: 60000, abort: true });', i, i, i)
  end
  return program, { config = cfg, namespaces = { "ns" .. i } }
end

local function finish(i, res)
  results[i] = res.json
  ndone = ndone + 1
  if ndone == N then
    rt:dispose(function()
      for k = 1, N do emit("R" .. k, results[k]) end
      emit("max_active", tostring(max_active))
      emit("crossed", tostring(crossed))
    end)
  end
end

for i = 1, N do
  local program, opts = job(i)
  if i % 2 == 0 then
    coroutine.wrap(function() finish(i, rt:run(program, opts)) end)() -- yields
  else
    handles[i] = rt:run(program, opts, function(res) finish(i, res) end)
  end
end
uv.run()
emit("END", "ok")
]])
    assert_clean(r)
    local L = r.lines
    assert.are.same({ "ok" }, L.END, r.stderr)
    assert.are.same({ "0" }, L.crossed)
    assert.is_true(tonumber(L.max_active[1]) > 1, "the runs' bindings never overlapped")
    for i = 1, 32 do
      assert.is_table(L["R" .. i], "no result for run " .. i)
      local res = decode(L["R" .. i][1])
      local kind = i % 8
      local what = "run " .. i .. ": " .. L["R" .. i][1]
      if kind <= 2 then
        assert.is_nil(res.error, what)
        assert.are.same({ i = i, v = "ns" .. i .. ":" .. i, other = "undefined" }, res.value, what)
        assert.are.same({ "run " .. i }, res.logs, what)
        assert.are.equal(1, res.stats.bindingCalls, what)
      elseif kind == 3 then
        assert.are.equal("exception", res.error.kind, what)
        assert.truthy(res.error.message:find("Error: fail " .. i .. "\n", 1, true), what)
      elseif kind == 4 then
        assert.are.equal("timeout", res.error.kind, what)
        assert.truthy(res.error.message:find("wall-clock", 1, true), what)
        assert.truthy(res.error.message:find(tostring(1500 + i), 1, true), what)
      elseif kind == 5 then
        assert.are.equal("timeout", res.error.kind, what)
        assert.are.equal("compute budget of " .. (2000 + i) .. " ms spent", res.error.message, what)
        assert.are.same({ "spin " .. i }, res.logs, what)
      elseif kind == 6 then
        assert.are.same({ kind = "output-limit", message = "outer output exceeded " .. (50 + i) .. " bytes" },
          res.error, what)
        assert.are.equal(1, #res.logs, what)
        assert.truthy(res.logs[1]:match("^y+$"), what)
        assert.is_true(res.stats.outputBytes <= 50 + i, what)
      else
        assert.are.same({ kind = "abort", message = "the run was aborted" }, res.error, what)
        assert.are.same({ "abort " .. i }, res.logs, what)
      end
    end
  end)

  it("boots a pooled sandbox while the program is stripped: a strip failure or an abort costs only that sandbox", function()
    local r = lua_run([[
local rt = lunarun.runtime({ poolSize = 1 })
rt:add({ global = "tools", functions = { inc = function(a) return a.v + 1 end } })
coroutine.wrap(function()
  pause(1500) -- the pooled sandbox is up and warm
  local bad = rt:run("let x = 1;\nenum Color { Red }\nreturn 1;")
  emit("bad", { bad.error.kind, bad.error.message })
  pause(1500)
  local aborted
  local handle = rt:run("return 2", function(res) aborted = res end)
  handle:abort() -- still being stripped, its pooled sandbox already booted
  while not aborted do pause(20) end
  emit("aborted", aborted.error.kind)
  pause(1500)
  emit("after", rt:run("return await tools.inc({ v: 2 })").value)
  rt:dispose()
  emit("END", "ok")
end)()
uv.run()
]])
    assert_clean(r)
    local L = r.lines
    assert.are.same({ "ok" }, L.END, r.stderr)
    local bad = decode(L.bad[1])
    assert.are.equal("exception", bad[1])
    assert.truthy(bad[2]:find("program.ts:2", 1, true), bad[2])
    assert.truthy(bad[2]:find("enum", 1, true), bad[2])
    assert.are.same({ "abort" }, L.aborted)
    assert.are.same({ "3" }, L.after)
  end)

  it("disposes with runs in flight: every run ends with abort before dispose returns", function()
    local r = lua_run([[
local rt = lunarun.runtime({ killGraceMs = 500 })
local started = 0
rt:add({ global = "tools", functions = {
  nap = function(a) started = started + 1; lunarun.sleep(a.ms); return 1 end,
} })
local events = {}
local programs = {
  "await tools.nap({ ms: 60000 });",
  "console.log('x'); await tools.nap({ ms: 60000 });",
  "console.log('spinning'); while (true) {}",
}
for i, p in ipairs(programs) do
  rt:run(p, function(res) events[#events + 1] = i .. " " .. res.error.kind .. " " .. res.error.message end)
end
coroutine.wrap(function()
  while started < 2 do pause(20) end
  pause(300) -- the spinner is spinning by now
  rt:run("return 4", function(res) events[#events + 1] = "4 " .. res.error.kind end) -- still being stripped
  rt:dispose()
  events[#events + 1] = "disposed"
  emit("events", events)
  local ok, err = pcall(rt.run, rt, "return 1", function() end)
  emit("run_after_dispose", tostring(ok) .. " " .. tostring(err))
  emit("dispose_again", tostring(pcall(rt.dispose, rt)))
end)()
uv.run()
emit("END", "ok")
]])
    assert_clean(r)
    local L = r.lines
    assert.are.same({ "ok" }, L.END, r.stderr)
    local events = decode(L.events[1])
    assert.are.equal("disposed", events[5])
    table.sort(events)
    assert.are.same({
      "1 abort the runtime was disposed",
      "2 abort the runtime was disposed",
      "3 abort the runtime was disposed",
      "4 abort",
      "disposed",
    }, events)
    assert.truthy(L.run_after_dispose[1]:find("^false .*disposed"), L.run_after_dispose[1])
    assert.are.same({ "true" }, L.dispose_again)
  end)

  it("on_log gets only what the ledger admitted: a prefix of the result's logs, even when the run is cut", function()
    local r = lua_run([[
local rt = lunarun.runtime({ poolSize = 0 })
coroutine.wrap(function()
  local streamed = {}
  local res = rt:run('for (let i = 0; i < 50; i++) console.log("entry " + i); return 1',
    { config = { maxOutputBytes = 200 }, on_log = function(text) streamed[#streamed + 1] = text end })
  emit("kind", res.error and res.error.kind or "ok")
  emit("streamed", streamed)
  emit("logs", res.logs)
  rt:dispose()
end)()
uv.run()
emit("END", "ok")
]])
    assert_clean(r)
    assert.are.same({ "ok" }, r.lines.END, r.stderr)
    assert.are.same({ "output-limit" }, r.lines.kind)
    local streamed, logs = decode(r.lines.streamed[1]), decode(r.lines.logs[1])
    assert.truthy(#streamed > 3 and #streamed <= #logs, r.stdout)
    for i = 1, #streamed do assert.are.equal(logs[i], streamed[i]) end
  end)

  it("raises on misuse, naming what is wrong, and starts nothing", function()
    local old_node = h.tmpfile('#!/bin/sh\necho v20.11.1\n')
    os.execute("chmod +x " .. h.q(old_node))
    local r = lua_run([[
local function try(name, f, ...)
  local ok, err = pcall(f, ...)
  emit(name, tostring(ok) .. " " .. tostring(err))
end
try("bad_value", lunarun.runtime, { computeMs = 0 })
try("bad_key", lunarun.runtime, { noSuchKey = 1 })
try("bad_rule", lunarun.runtime, { maxOutputBytes = 100, maxFrameBytes = 10 })
try("old_node", lunarun.runtime, { nodePath = arg[1] })
local rt = lunarun.runtime({})
try("reserved", rt.add, rt, { global = "class", functions = { f = function() end } })
rt:add({ global = "tools", functions = { f = function() return 1 end } })
try("duplicate", rt.add, rt, { global = "tools", functions = { g = function() end } })
try("no_callback", rt.run, rt, "return 1")
try("hidden", rt.run, rt, "return 1", { namespaces = { "nope" } }, function() end)
try("run_config", rt.run, rt, "return 1", { config = { computeMs = -5 } }, function() end)
try("load_missing", rt.load, rt, "/nonexistent/bindings.lua")
rt:dispose(function() emit("disposed", "yes") end)
uv.run()
emit("END", "ok")
]], h.q(old_node))
    os.remove(old_node)
    assert_clean(r)
    local L = r.lines
    assert.are.same({ "ok" }, L.END, r.stderr)
    assert.are.same({ "yes" }, L.disposed)
    local function raised(tag, needle)
      assert.truthy(L[tag] and L[tag][1]:find("^false ") and L[tag][1]:find(needle, 1, true),
        tag .. ": " .. tostring(L[tag] and L[tag][1]))
    end
    raised("bad_value", "computeMs")
    raised("bad_key", "noSuchKey")
    raised("bad_rule", "maxFrameBytes")
    -- The same line as the CLI's (spec/cli_spec.lua), after "lunarun: ".
    assert.are.equal("false lunarun: Node " .. old_node .. " is v20.11.1; lunarun needs Node >= 22.13"
      .. " (set nodePath or $LUNARUN_NODE to a newer one)", L.old_node[1])
    raised("reserved", "class")
    raised("duplicate", "tools")
    raised("no_callback", "callback")
    raised("hidden", "nope")
    raised("run_config", "computeMs")
    raised("load_missing", "/nonexistent/bindings.lua")
  end)

  -- Known core bug: a script that ran a program and exits without
  -- rt:dispose() dies with SIGSEGV in luv's loop __gc, which closes the
  -- runtime's own handles (the strip helper's) with luv's close callback.
  it("exits cleanly when a runtime that ran a program is never disposed", function()
    -- The runtime's __gc at exit starts its disposal and the closing state
    -- turns the loop until it ends: no crash, no process, no folder left.
    local r = lua_run([[
local rt = lunarun.runtime()
rt:run("return 1 + 1", function(res) emit("value", res.value); uv.stop() end)
uv.run()
emit("exiting", true)
]])
    assert_clean(r)
    assert.are.same({ "2" }, r.lines.value)
    assert.are.same({ "true" }, r.lines.exiting)
  end)

  it("runs examples/embed.lua as the README shows it", function()
    local out, err = h.tmpfile(), h.tmpfile()
    local _, _, code = os.execute("cd " .. h.q(root) .. " && TMPDIR=" .. h.q(h.tmpdir) .. " LUA_CPATH=" ..
      h.q(cpath) .. " lua5.4 examples/embed.lua >" .. out .. " 2>" .. err)
    local stdout, stderr = h.slurp(out), h.slurp(err)
    os.remove(out)
    os.remove(err)
    assert_clean({ code = code, stdout = stdout, stderr = stderr })
    local log, result = stdout:match("^log: ([^\n]*)\n({[^\n]*})\n$")
    assert.are.equal("Lisbon: clear", log, stdout)
    local res = decode(result)
    assert.are.equal(21, res.value)
    assert.are.same({ "Lisbon: clear" }, res.logs)
  end)

  it("gives a failed run's result to examples/embed.lua and exits 1", function()
    local out = h.tmpfile()
    local _, _, code = os.execute("cd " .. h.q(root) .. " && TMPDIR=" .. h.q(h.tmpdir) .. " LUA_CPATH=" ..
      h.q(cpath) .. " lua5.4 examples/embed.lua 'await weather.nothing(null)' >" .. out .. " 2>&1")
    local stdout = h.slurp(out)
    os.remove(out)
    h.assert_clean()
    assert.are.equal(1, code, stdout)
    assert.truthy(stdout:find('"kind":"exception"', 1, true), stdout)
  end)
end)
