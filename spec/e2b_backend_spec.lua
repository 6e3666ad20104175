-- The E2B backend (backend = "e2b", core/sandbox_e2b.c) against the E2B test
-- double: what a run needs from E2B, and every fault of the control plane,
-- of envd and of the network ending the run as worker-exit with a message
-- that names the step, never a hang, nothing left running in the double.
-- (The main specs run on this backend too: spec/e2b/with-double.)
local h = require("spec.helper")
local e2b = require("spec.e2b.helper")
local m = require("spec.fixtures.module")
local json = h.json

local KEY = "lunarun-spec-secret-key"

local function env(d, extra)
  return string.format("env E2B_API_KEY=%s E2B_API_URL=%s E2B_SANDBOX_URL=%s %s", h.q(KEY), h.q(d and d.url or ""),
    h.q(d and d.url or ""), extra or "")
end

-- One CLI run on the e2b backend against double d.
local function run(d, program, sets, extra_env)
  local args = { "run", "--set backend=e2b", "--json" }
  for _, s in ipairs(sets or {}) do args[#args + 1] = "--set " .. h.q(s) end
  local prog = h.tmpfile(program, ".ts")
  args[#args + 1] = h.q(prog)
  local r = h.cli_wrapped(env(d, extra_env), table.concat(args, " "))
  os.remove(prog)
  if r.stdout ~= "" then r.result = json.decode(r.stdout, 1, json.null) end
  return r
end

-- Nothing runs in the double (a killed process may take a moment to go).
local function assert_nothing_running(d)
  local left
  for _ = 1, 100 do
    left = e2b.processes(d)
    if #left == 0 then return end
    e2b.sleep(0.05)
  end
  assert.are.same({}, left)
end

local function sandboxes(d)
  local _, list = e2b.http_json("GET", d.url .. "/sandboxes", { headers = { ["X-API-Key"] = KEY } })
  return list
end

local function requests(d, pattern)
  local _, log = e2b.http_json("GET", d.url .. "/_double/requests")
  local n = 0
  for _, r in ipairs(log) do
    if ((r.method or "") .. " " .. (r.path or "")):find(pattern) then n = n + 1 end
  end
  return n
end

local function worker_exit(r, message)
  assert.are.equal(1, r.code, r.stderr)
  assert.are.equal("worker-exit", r.result.error.kind)
  assert.are.equal(message, r.result.error.message)
  assert.falsy(r.stdout:find(KEY, 1, true))
  assert.falsy(r.stderr:find(KEY, 1, true))
end

describe("the e2b backend", function()
  local d

  setup(function() d = e2b.start({ api_key = KEY }) end)
  teardown(function() if d then d.stop() end end)
  after_each(function()
    e2b.clear_faults(d)
    assert_nothing_running(d)
    assert.are.same({}, sandboxes(d)) -- every runtime deleted its sandbox
    h.assert_clean()
  end)

  it("runs a program with bindings and logs, as the local backend does", function()
    local prog = [[console.log("a", 1); let s = 0; for (let i = 0; i < 3; i++) s += await tools.inc({ v: i });
return { s, big: 2n ** 70n > 0n, text: "é\u{1F600}" };]]
    local args = "--bindings " .. h.q(h.fixtures .. "tools.lua")
    local p = h.tmpfile(prog, ".ts")
    local remote = h.cli_wrapped(env(d), "run --set backend=e2b --json " .. args .. " " .. h.q(p))
    local here = h.cli("run --json " .. args .. " " .. h.q(p))
    os.remove(p)
    assert.are.equal(0, remote.code, remote.stderr)
    local a, b = json.decode(remote.stdout), json.decode(here.stdout)
    assert.are.equal("e2b", a.stats.isolation)
    a.stats, b.stats = nil, nil
    assert.are.same(b, a)
    assert.are.same({ "a 1" }, a.logs)
  end)

  it("gives the demo's result, as the local backend does", function()
    local args = "run --json --bindings " .. h.q(h.root .. "examples/tools.lua") .. " " .. h.q(h.root .. "examples/demo.ts")
    local remote = h.cli_wrapped(env(d), args .. " --set backend=e2b")
    local here = h.cli(args)
    assert.are.equal(0, remote.code, remote.stderr)
    assert.are.equal(0, here.code, here.stderr)
    local a, b = json.decode(remote.stdout), json.decode(here.stdout)
    assert.are.same({ "e2b", "bwrap" }, { a.stats.isolation, b.stats.isolation })
    for _, k in ipairs({ "wallMs", "computeMs", "isolation" }) do a.stats[k], b.stats[k] = nil, nil end
    assert.are.same(b, a)
  end)

  it("names the remote sandbox's Node when it is too old", function()
    local r = run(d, "return 1", { "e2bTemplate=node18" })
    worker_exit(r, 'e2b: the sandbox\'s Node is v18.19.0, lunarun\'s runner needs Node >= 22.13 (template "node18"; '
      .. 'README, "E2B", says which templates carry one)')
  end)

  it("refuses to start without an API key (misuse, one line, exit 2)", function()
    local r = h.cli_wrapped("env -u E2B_API_KEY", "run --set backend=e2b --json " .. h.q(h.tmpfile("return 1", ".ts")))
    assert.are.equal(2, r.code)
    assert.are.equal("lunarun: config: backend \"e2b\" needs an E2B API key in $E2B_API_KEY (it is never read from "
      .. "a config)\n", r.stderr)
    assert.are.equal("", r.stdout)
  end)

  for _, case in ipairs({
    { status = 401, body = '{"code":401,"message":"Invalid API key ' .. KEY .. '"}',
      message = 'e2b: create a sandbox (template "base"): HTTP 401: {"code":401,"message":"Invalid API key ***"}' },
    { status = 429, body = '{"code":429,"message":"rate limited"}',
      message = 'e2b: create a sandbox (template "base"): HTTP 429: {"code":429,"message":"rate limited"}' },
    { status = 500, body = "",
      message = 'e2b: create a sandbox (template "base"): HTTP 500' },
    { status = 201, body = "<html>surprise</html>",
      message = 'e2b: create a sandbox (template "base"): the reply is not JSON' },
    { status = 201, body = '{"templateID":"base"}',
      message = 'e2b: create a sandbox (template "base"): the reply has no usable sandboxID' },
  }) do
    it("fails the run when creating the sandbox answers " .. case.status .. " " .. (case.body ~= "" and case.body:sub(1, 20) or "(empty)"), function()
      e2b.faults(d, { create = { status = case.status, body = case.body } })
      worker_exit(run(d, "return 1"), case.message)
    end)
  end

  it("fails the run when the upload of the runner fails", function()
    e2b.faults(d, { upload = { status = 500, body = "disk full", times = 1 } })
    local r = run(d, "return 1")
    assert.are.equal("worker-exit", r.result.error.kind)
    assert.truthy(r.result.error.message:find("^e2b: upload the runner %(%a+%.mjs%): HTTP 500: disk full$"),
      r.result.error.message)
  end)

  it("fails the run when nothing listens (the network is down)", function()
    local r = h.cli_wrapped("env E2B_API_KEY=k E2B_API_URL=http://127.0.0.1:1 E2B_SANDBOX_URL=http://127.0.0.1:1",
      "run --set backend=e2b --json " .. h.q(h.tmpfile("return 1", ".ts")))
    local res = json.decode(r.stdout)
    assert.are.equal("worker-exit", res.error.kind)
    assert.truthy(res.error.message:find('^e2b: create a sandbox %(template "base"%): .* %(ECONNREFUSED%)$'),
      res.error.message)
  end)

  for _, case in ipairs({
    { mode = "cut", pattern = "^e2b: the runner's process stream" },
    { mode = "truncated", pattern = "^e2b: the runner's process stream ended inside an envelope$" },
    { mode = "oversized", pattern = "^e2b: the runner's process stream is broken: an envelope of 2147483647 bytes is "
      .. "over the limit of 16777216$" },
    { mode = "error-end", pattern = "^e2b: envd ended the runner's process stream with an error: internal: double: "
      .. "injected$" },
  }) do
    it("fails the run when the process stream is " .. case.mode, function()
      -- The Node check is a Start too: the fault hits the second one.
      e2b.faults(d, { start = { mode = case.mode, skip = 1 } })
      local r = run(d, "await new Promise((r) => setTimeout(r, 300)); return 1", { "maxWallMs=20000" })
      assert.are.equal("worker-exit", r.result.error.kind, r.stdout .. r.stderr)
      assert.truthy(r.result.error.message:find(case.pattern), r.result.error.message)
    end)
  end

  it("fails the run when the sandbox disappears mid-run", function()
    local prog = h.tmpfile("console.log('started'); await new Promise((r) => setTimeout(r, 30000)); return 1", ".ts")
    local out, done = h.tmpfile(), h.tmpfile()
    os.execute("(TMPDIR=" .. h.q(h.tmpdir) .. " " .. env(d) .. " " .. h.q(h.bin) .. " run --json --set backend=e2b "
      .. h.q(prog) .. " >" .. h.q(out) .. " 2>&1; echo $? >" .. h.q(done) .. ") </dev/null &")
    -- Once its launcher runs, the sandbox's VM "dies".
    local id
    for _ = 1, 400 do
      local list = e2b.processes(d)
      for _, p in ipairs(list) do
        if p.cmdline:find("controller.mjs", 1, true) then id = p.sandboxID end
      end
      if id then break end
      e2b.sleep(0.025)
    end
    assert.truthy(id, "the run never started")
    assert.are.equal(204, (e2b.http("POST", d.url .. "/_double/sandboxes/" .. id .. "/vanish")))
    for _ = 1, 800 do
      if h.slurp(done) ~= "" then break end
      e2b.sleep(0.025)
    end
    assert.are.equal("1\n", h.slurp(done))
    local r = json.decode(h.slurp(out))
    assert.are.equal("worker-exit", r.error.kind)
    assert.truthy(r.error.message:find("^e2b: the runner's process stream broke off: "), r.error.message)
    for _, f in ipairs({ prog, out, done }) do os.remove(f) end
  end)

  it("fails the run when envd does not know the runner's pid (404 on SendInput)", function()
    e2b.faults(d, { sendInput = { status = 404, body = '{"code":"not_found","message":"process with pid 1 not found"}' } })
    worker_exit(run(d, "return 1"), 'e2b: send input to the runner: HTTP 404: {"code":"not_found","message":'
      .. '"process with pid 1 not found"}')
  end)
end)

describe("one runtime on the e2b backend", function()
  -- Through the Lua module, which a sanitized build cannot give lua5.4.
  if h.bin:find("build%-asan") then
    pending("skipped against the sanitized build (the Lua module is not sanitized)")
    return
  end
  local d

  setup(function() d = e2b.start({ api_key = KEY }) end)
  teardown(function() if d then d.stop() end end)

  local function script(body)
    local r = m.script(body, env(d))
    assert.are.equal(0, r.code, r.stderr)
    -- The scripts' runtime folders (the double's own folder is there too).
    h.assert_clean((m.tmpdir:gsub("[%.%-]", "\\%0")) .. "/lunarun-[A-Za-z0-9]+/")
    return r.out
  end

  it("shares one remote sandbox between its runs, kills every run's processes after its outcome, deletes it at dispose",
    function()
      local url = d.url
      local out = script(string.format([[
local function processes()
  local p = io.popen("curl -s %s/_double/processes")
  local s = p:read("a") p:close()
  return #json.decode(s)
end
local function settled()
  -- Killed processes may take a moment to be gone.
  for _ = 1, 100 do if processes() == 0 then return true end sleep(20) end
  return false
end
local rt = lunarun.runtime({ backend = "e2b", killGraceMs = 200, maxWallMs = 20000 })
local co = coroutine.running()
local waiting = false
local function wake() if waiting then waiting = false coroutine.resume(co) end end
-- Concurrent runs: each its own launcher in the same sandbox.
local results, pending = {}, 3
for i = 1, 3 do
  rt:run("await new Promise((r) => setTimeout(r, 100)); return " .. i, {}, function(r)
    results[i] = result(r)
    pending = pending - 1
    if pending == 0 then wake() end
  end)
end
if pending > 0 then waiting = true coroutine.yield() end
local clean = { settled() }
-- A loop past its wall: TERM, then KILL after the grace.
local t = result(rt:run("for (;;) {}", { config = { maxWallMs = 1000 } }))
clean[#clean + 1] = settled()
-- A child that ignores SIGTERM, and its parent gone.
local c = result(rt:run([=[
const cp = process.getBuiltinModule("child_process");
cp.spawn("sh", ["-c", "trap '' TERM; sleep 907"], { stdio: "ignore" });
await new Promise((r) => setTimeout(r, 200));
throw new Error("left a child");]=]))
clean[#clean + 1] = settled()
local aborted
local handle = rt:run("await new Promise((r) => setTimeout(r, 60000))", {}, function(r) aborted = result(r) wake() end)
sleep(300)
handle:abort()
if not aborted then waiting = true coroutine.yield() end
clean[#clean + 1] = settled()
rt:dispose()
out({ values = { results[1].value, results[2].value, results[3].value }, timeout = t.error, child = c.error.kind,
  aborted = aborted.error.kind .. ": " .. aborted.error.message, clean = clean })]], url))
      assert.are.same({ 1, 2, 3 }, out.values)
      assert.are.same({ kind = "timeout", message = "wall-clock limit of 1000 ms reached" }, out.timeout)
      assert.are.equal("exception", out.child)
      assert.are.equal("abort: the run was aborted", out.aborted)
      assert.are.same({ true, true, true, true }, out.clean)
      assert.are.equal(1, requests(d, "^POST /sandboxes$"))
      assert.are.equal(1, requests(d, "^DELETE /sandboxes/"))
      assert.are.same({}, e2b.processes(d))
    end)

  it("keeps the remote sandbox alive while runs use it, and keeps other runs going when one loses its stream", function()
    local before = requests(d, "/timeout$")
    -- The first Start is the Node check; the second (the first run's
    -- launcher) has its stream cut mid-envelope.
    e2b.faults(d, { start = { mode = "cut", skip = 1, times = 1 } })
    local out = script([[
local rt = lunarun.runtime({ backend = "e2b", e2bTimeoutMs = 1500, maxWallMs = 20000 })
local co, results, pending = coroutine.running(), {}, 2
local programs = { "await new Promise((r) => setTimeout(r, 300)); return 'lost'",
  "await new Promise((r) => setTimeout(r, 1800)); return 'slow'" }
for i = 1, 2 do
  rt:run(programs[i], {}, function(r)
    results[i] = result(r)
    pending = pending - 1
    if pending == 0 then coroutine.resume(co) end
  end)
end
coroutine.yield()
rt:dispose()
out({ results[1].error and results[1].error.kind, results[2].value })]])
    e2b.clear_faults(d)
    assert.are.same({ "worker-exit", "slow" }, out)
    assert.truthy(requests(d, "/timeout$") > before)
    assert.are.same({}, e2b.processes(d))
  end)
end)
