-- Faults injected through the real host (issue 11): the sandbox SIGKILLed
-- at each stage of a run, a write to a dead runner, a runtime folder that
-- cannot be made, the strip helper killed mid-request, hooks that raise.
-- Each ends in one typed result, leaves no process and no runtime folder,
-- and the next run of the same runtime is healthy. The kills are real: the
-- scripts (spec/fixtures/module.lua) find the sandbox's processes by the
-- runtime folder in their command lines (and their descendants) and send
-- SIGKILL by pid, from a binding handler, a log callback or a timer.
local h = require("spec.helper")
local m = require("spec.fixtures.module")

-- Defines sandbox_pids(), strip_pids(), kill(pids) and wait_gone(pids) in
-- the script. Under bubblewrap the outer bwrap and the namespace's init
-- carry the runtime folder's path; the Node inside does not, so
-- descendants are collected too.
local KILL = [==[
local __dir = os.getenv("TMPDIR"):gsub("[%.%-]", "\\%0") .. "/lunarun-[A-Za-z0-9]+/"
local function __pgrep(args)
  local p = io.popen("pgrep " .. args .. " 2>/dev/null")
  local list = {}
  for pid in p:lines() do list[#list + 1] = tonumber(pid) end
  p:close()
  return list
end
local function __tree(roots)
  local all, i = {}, 1
  for _, pid in ipairs(roots) do all[#all + 1] = pid end
  while i <= #all do
    for _, c in ipairs(__pgrep("-P " .. all[i])) do all[#all + 1] = c end
    i = i + 1
  end
  return all
end
local function sandbox_pids()
  local roots = {}
  for _, pid in ipairs(__pgrep("-f '" .. __dir .. "'")) do
    local f = io.open("/proc/" .. pid .. "/cmdline", "rb")
    local cmd = f and f:read("a") or ""
    if f then f:close() end
    if not cmd:find("strip.mjs", 1, true) and (cmd:find("bwrap", 1, true) or cmd:find("controller.mjs", 1, true)) then
      roots[#roots + 1] = pid
    end
  end
  return __tree(roots)
end
local function strip_pids()
  return __pgrep("-f '" .. __dir .. "runner/strip\\.mjs'")
end
local function kill(pids)
  if #pids > 0 then os.execute("kill -KILL " .. table.concat(pids, " ") .. " 2>/dev/null") end
  return #pids
end
-- Blocks the loop (on purpose) until none of pids is alive.
local function wait_gone(pids)
  for _, pid in ipairs(pids) do
    while os.execute("kill -0 " .. pid .. " 2>/dev/null && ! grep -q '^State:.*Z' /proc/" .. pid .. "/status") do
      os.execute("sleep 0.01")
    end
  end
end
-- Blocks the loop (on purpose) until a thread of pids waits in a write to
-- a full pipe: the sandbox is in the middle of sending a frame the host is
-- not reading. False after 20 s.
local function wait_writing(pids)
  for _ = 1, 2000 do
    for _, pid in ipairs(pids) do
      local p = io.popen("cat /proc/" .. pid .. "/task/*/wchan 2>/dev/null")
      local s = p:read("a")
      p:close()
      if s:find("pipe_write", 1, true) then return true end
    end
    os.execute("sleep 0.01")
  end
  return false
end
-- Polls every ms until the runtime has a sandbox process; yields.
local function wait_sandbox()
  for _ = 1, 5000 do
    local pids = sandbox_pids()
    if #pids > 0 then return pids end
    sleep(1)
  end
  error("no sandbox appeared")
end
]==]

-- Runs body (after the KILL prelude) and returns its out(); checks that
-- nothing is left.
local function script(body, env)
  local r = m.script(KILL .. body, env)
  m.assert_clean()
  assert.are.same({}, h.runtime_folders())
  assert.are.equal(0, r.code, r.stdout .. r.stderr)
  return r.out, r
end

local KILLED = "the sandbox process was killed by signal 9 (SIGKILL) before the program settled"

-- A script's runtime config: the specs' isolation mode, and no pool unless
-- asked.
local function config(extra)
  local t = { "poolSize = " .. (extra or 0) }
  if h.isolation then t[#t + 1] = "isolation = " .. string.format("%q", h.isolation) end
  return "{ " .. table.concat(t, ", ") .. " }"
end

-- The run after a fault, on the same runtime, is healthy.
local HEALTHY = [[
local again = result(rt:run("const x: number = 2; return x;"))
rt:dispose()
]]

local function assert_healthy(out)
  assert.are.equal(2, out.again.value)
  assert.is_nil(out.again.error)
end

describe("a sandbox killed with SIGKILL", function()
  it("while it waits in the pool, before boot: the run takes a fresh one", function()
    local out = script("local rt = lunarun.runtime(" .. config(1) .. ")\n" .. [[
local pids = wait_sandbox()
sleep(300) -- the pooled one is up and warm
local killed = kill(pids)
sleep(300)
local res = result(rt:run("return 1"))
]] .. HEALTHY .. "out({ killed = killed, res = res, again = again })")
    assert.is_true(out.killed > 0)
    assert.are.equal(1, out.res.value)
    assert.is_nil(out.res.error)
    assert_healthy(out)
  end)

  it("during boot, before the program starts: worker-exit", function()
    local out = script("local rt = lunarun.runtime(" .. config() .. ")\n" .. [[
local co = coroutine.running()
local res
rt:run('console.log("started"); return 1', {}, function(r)
  res = result(r)
  if coroutine.status(co) == "suspended" then coroutine.resume(co) end
end)
local killed = kill(wait_sandbox()) -- polled every ms from the spawn on
if not res then coroutine.yield() end
]] .. HEALTHY .. "out({ killed = killed, res = res, again = again })")
    assert.is_true(out.killed > 0)
    assert.are.same({ kind = "worker-exit", message = KILLED }, out.res.error)
    assert.are.same({}, out.res.logs)
    assert_healthy(out)
  end)

  it("by a binding handler, with its call in flight: worker-exit, and the handler's late answer goes nowhere", function()
    local out = script("local rt = lunarun.runtime(" .. config() .. ")\n" .. [[
rt:add({ global = "tools", functions = {
  killer = function() kill(sandbox_pids()) lunarun.sleep(200) return 1 end,
} })
local res = result(rt:run('console.log("calling"); await tools.killer(null); return "unreachable"'))
]] .. HEALTHY .. "out({ res = res, again = again })")
    assert.are.same({ kind = "worker-exit", message = KILLED }, out.res.error)
    assert.are.same({ "calling" }, out.res.logs)
    assert.are.equal(1, out.res.stats.bindingCalls)
    assert_healthy(out)
  end)

  it("between a call frame and the terminal frame of the same write: the value stands", function()
    -- The call leaves with the done frame (one write at the end of the
    -- turn); its handler kills the sandbox before the host reads on.
    local out = script("local rt = lunarun.runtime(" .. config() .. ")\n" .. [[
rt:add({ global = "tools", functions = {
  killer = function() kill(sandbox_pids()) lunarun.sleep(200) return 1 end,
} })
local res = result(rt:run('tools.killer(null); return 42'))
]] .. HEALTHY .. "out({ res = res, again = again })")
    assert.are.equal(42, out.res.value)
    assert.is_nil(out.res.error)
    assert.are.equal(1, out.res.stats.bindingCalls)
    assert_healthy(out)
  end)

  it("in the middle of sending a 64 MiB value: worker-exit for the frame cut short", function()
    -- The log callback holds the host's loop until the sandbox waits in a
    -- write to the full pipe, then kills it.
    local out = script("local rt = lunarun.runtime(" .. config() .. ")\n" .. [[
local writing = false
local res = result(rt:run('console.log("go"); return "x".repeat(64 * 1024 * 1024 - 100);', {
  on_log = function(text)
    if text ~= "go" then return end
    local pids = sandbox_pids()
    writing = wait_writing(pids)
    kill(pids)
  end }))
]] .. HEALTHY .. "out({ writing = writing, res = res, again = again })")
    assert.is_true(out.writing)
    assert.are.equal("worker-exit", out.res.error.kind)
    assert.truthy(out.res.error.message:find(
      "^broken frame from the runner: frame: stream ended mid%-frame %(%d+ bytes without a newline%)$"), out.res.error.message)
    assert.are.same({ "go" }, out.res.logs)
    assert_healthy(out)
  end)

  it("and then written to (a reply to a dead runner): worker-exit, the host survives the broken pipe", function()
    -- The handler waits until every process is gone before it answers: the
    -- reply meets a pipe with no reader (SIGPIPE is ignored; EPIPE comes
    -- back a turn after the exit is seen, which decides).
    local out = script("local rt = lunarun.runtime(" .. config() .. ")\n" .. [[
rt:add({ global = "tools", functions = {
  killer = function() local p = sandbox_pids() kill(p) wait_gone(p) return 1 end,
} })
local res = result(rt:run('await tools.killer(null); return "unreachable"'))
]] .. HEALTHY .. "out({ res = res, again = again })")
    assert.are.same({ kind = "worker-exit", message = KILLED }, out.res.error)
    assert_healthy(out)
  end)
end)

describe("the strip helper killed mid-request", function()
  it("fails that run as worker-exit; the next run starts a new helper", function()
    local out = script("local rt = lunarun.runtime(" .. config() .. ")\n" .. [[
local warm = result(rt:run("return 0")) -- the helper is up
local big = string.rep("let v: number = 1;\n", 200000) .. "return v;"
local co = coroutine.running()
local res
rt:run(big, {}, function(r)
  res = result(r)
  if coroutine.status(co) == "suspended" then coroutine.resume(co) end
end)
local killed = kill(strip_pids()) -- the request is written; the answer is not back
if not res then coroutine.yield() end
]] .. HEALTHY .. "out({ warm = warm, killed = killed, res = res, again = again })")
    assert.are.equal(0, out.warm.value)
    assert.are.equal(1, out.killed)
    assert.are.same({ kind = "worker-exit", message = "type stripping failed: the type stripper exited (status 0, signal 9)" },
      out.res.error)
    assert_healthy(out)
  end)
end)

describe("hooks that raise", function()
  it("are reported on stderr and change nothing for the calls", function()
    local out, r = script("local rt = lunarun.runtime(" .. config() .. ")\n" .. [[
local seen = 0
rt:add({ global = "tools",
  hooks = {
    before = function() seen = seen + 1 error("before hook fails", 0) end,
    after = function() seen = seen + 1 error({ message = "after hook fails" }) end,
  },
  functions = { inc = function(args) return args.v + 1 end } })
local res = result(rt:run("return [await tools.inc({ v: 1 }), await tools.inc({ v: 2 })]"))
]] .. HEALTHY .. "out({ seen = seen, res = res, again = again })")
    assert.are.equal(4, out.seen)
    assert.are.same({ 2, 3 }, out.res.value)
    assert.are.equal(2, out.res.stats.bindingCalls)
    local _, before = r.stderr:gsub("lunarun: before hook failed: before hook fails\n", "")
    local _, after = r.stderr:gsub("lunarun: after hook failed: after hook fails\n", "")
    assert.are.equal(2, before, r.stderr)
    assert.are.equal(2, after, r.stderr)
    assert_healthy(out)
  end)
end)

describe("a runtime folder that cannot be made", function()
  -- A mount namespace of the CLI's own (root only) with a tiny tmpfs as
  -- runtimeRoot: remounted read-only, or too small for the runner's files.
  local function in_tmpfs(ro)
    local dir = h.tmpfile()
    local prog = h.tmpfile("return 1", ".ts")
    local cmd = string.format("unshare -m sh -c %s 2>&1", h.q(string.format(
      "mkdir -p %s && mount -t tmpfs -o size=64k,mode=1777 none %s %s && TMPDIR=%s %s run --set runtimeRoot=%s --json %s; "
        .. "echo \"rc=$?\"; echo \"left=$(ls -A %s)\"",
      dir, dir, ro and ("&& mount -o remount,ro " .. dir) or "", h.q(h.tmpdir), h.q(h.bin), dir, prog, dir)))
    local p = io.popen(cmd)
    local s = p:read("a")
    p:close()
    os.remove(prog)
    os.remove(dir)
    return s
  end

  local can = os.execute("unshare -m true 2>/dev/null")

  it("read-only: misuse naming runtimeRoot, nothing spawned or left", function()
    if not can then return pending("needs root for a mount namespace") end
    local s = in_tmpfs(true)
    assert.truthy(s:find('lunarun: config: runtimeRoot "[^"]+": cannot make a folder there: Read%-only file system\nrc=2\nleft=\n'), s)
    h.assert_clean()
    assert.are.equal(2, h.run("return 1 + 1").result.value)
  end)

  it("full: misuse naming the file, and the half-made folder is removed", function()
    if not can then return pending("needs root for a mount namespace") end
    local s = in_tmpfs(false)
    assert.truthy(s:find("lunarun: cannot write [^\n]+/lunarun%-[A-Za-z0-9]+/runner/[a-z]+%.mjs: No space left on device\nrc=2\nleft=\n"), s)
    h.assert_clean()
    assert.are.equal(2, h.run("return 1 + 1").result.value)
  end)
end)
