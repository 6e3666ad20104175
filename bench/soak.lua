-- Soak and load (bench/README.md, "Soak"): many runs with mixed outcomes
-- through the Lua module in one host process, with several in flight, and
-- what the host holds at the start, the middle and the end. Not a test: it
-- prints figures, and exits 1 only when a run's outcome is wrong or
-- something is left after disposal.
--
--   lua5.4 bench/soak.lua [--runs N] [--inflight K] [--pool P] [--phases nopool,pool]
--
-- Run it through bench/soak, which sets TMPDIR to a private folder: the
-- runtime folders and processes counted are those under it.
local uv = require("luv")
local lunarun = require("lunarun")

local opts = { runs = 1000, inflight = 16, pool = 4, phases = "nopool,pool" }
do
  local i = 1
  while i <= #arg do
    local k = arg[i]:match("^%-%-(.+)$")
    if not k or opts[k] == nil or not arg[i + 1] then
      io.stderr:write("usage: soak.lua [--runs N] [--inflight K] [--pool P] [--phases nopool,pool]\n")
      os.exit(2)
    end
    opts[k] = type(opts[k]) == "number" and assert(tonumber(arg[i + 1]), k) or arg[i + 1]
    i = i + 2
  end
end

local TMP = assert(os.getenv("TMPDIR"), "TMPDIR must be set (bench/soak does it)")

-- The mix: each kind of run, the outcome it must have, and how to check it.
local MIX = {
  { name = "ok", program = "return 1 + 1", want = function(r) return r.ok and r.value == 2 end },
  { name = "throw", program = 'throw new Error("boom")',
    want = function(r) return r.error and r.error.kind == "exception" and r.error.message:find("^Error: boom") end },
  { name = "timeout", program = "for (;;) {}", config = { computeMs = 200 },
    want = function(r) return r.error and r.error.kind == "timeout" end },
  { name = "abort", program = "await new Promise((r) => setTimeout(r, 30000))", abort_ms = 50,
    want = function(r) return r.error and r.error.kind == "abort" end },
  { name = "output-limit", program = 'console.log("x".repeat(2000)); return 1', config = { maxOutputBytes = 1000 },
    want = function(r) return r.error and r.error.kind == "output-limit" and #r.logs == 1 end },
  { name = "calls", program = "let s = 0; for (let i = 0; i < 50; i++) s += await tools.inc({ v: i }); return s",
    want = function(r) return r.ok and r.value == 1275 and r.stats.bindingCalls == 50 end },
  { name = "concurrent calls", program = "const a = []; for (let i = 0; i < 200; i++) a.push(tools.inc({ v: i })); return (await Promise.all(a)).length",
    want = function(r) return r.ok and r.value == 200 and r.stats.bindingCalls == 200 end },
  { name = "logs", program = 'for (let i = 0; i < 100; i++) console.log("line " + i); return 1',
    want = function(r) return r.ok and #r.logs == 100 and r.logs[100] == "line 99" end },
}

local function read(path)
  local f = io.open(path, "rb")
  if not f then return "" end
  local s = f:read("a")
  f:close()
  return s
end

local function lines_of(cmd)
  local p = io.popen(cmd)
  local n = 0
  for _ in p:lines() do n = n + 1 end
  p:close()
  return n
end

local function sleep(ms)
  local co = coroutine.running()
  local t = uv.new_timer()
  t:start(ms, 0, function() t:close() coroutine.resume(co) end)
  coroutine.yield()
end

-- What the host holds now: its RSS, open fds, Lua memory after a full
-- collection, runtime folders and processes under TMPDIR.
local function measure(label)
  collectgarbage("collect")
  collectgarbage("collect")
  return {
    label = label,
    rss_kb = tonumber(read("/proc/self/status"):match("VmRSS:%s*(%d+)")),
    fds = lines_of(string.format("ls /proc/%d/fd", uv.os_getpid())),
    lua_kb = collectgarbage("count"),
    folders = lines_of("ls -d " .. TMP .. "/lunarun-* 2>/dev/null"),
    -- Processes that mention the folder: each sandbox (under bubblewrap
    -- its outer bwrap and the namespace's init) and the strip helper.
    procs = lines_of("pgrep -f '" .. TMP:gsub("[%.%-]", "\\%0") .. "/' 2>/dev/null"),
  }
end

local function fmt(m)
  return string.format("%-22s RSS %7.2f MB  fds %3d  Lua %8.1f KB  runtime folders %d  processes %d",
    m.label, m.rss_kb / 1024, m.fds, m.lua_kb, m.folders, m.procs)
end

local failures = 0

-- n runs of the mix, k in flight; yields until all are done.
local function batch(rt, n, k, first)
  local co = coroutine.running()
  local started, done, waiting = 0, 0, false
  local counts = {}
  local function launch()
    local i = first + started
    started = started + 1
    local w = MIX[(i % #MIX) + 1]
    local timer
    local handle = rt:run(w.program, { config = w.config }, function(r)
      if timer then timer:close() end
      if not w.want(r) then
        failures = failures + 1
        io.stderr:write(string.format("run %d (%s): unexpected result %s\n", i, w.name, r.json:sub(1, 300)))
      end
      counts[w.name] = (counts[w.name] or 0) + 1
      done = done + 1
      if started < n then launch() end
      if done == n and waiting then coroutine.resume(co) end
    end)
    if w.abort_ms then
      timer = uv.new_timer()
      timer:start(w.abort_ms, 0, function() handle:abort() end)
    end
  end
  for _ = 1, math.min(k, n) do launch() end
  if done < n then
    waiting = true
    coroutine.yield()
  end
  return counts
end

local function phase(name, pool)
  print(string.format("== %s: %d runs, %d in flight, poolSize %d", name, opts.runs, opts.inflight, pool))
  local rt = lunarun.runtime({ poolSize = pool })
  rt:add({ global = "tools", functions = { inc = function(args) return args.v + 1 end } })
  batch(rt, #MIX, 1, 0) -- one of each: every path is warm before the start figures
  sleep(500)
  local marks = { measure("start") }
  print(fmt(marks[1]))
  local half = opts.runs // 2
  local t0 = uv.hrtime()
  batch(rt, half, opts.inflight, 0)
  sleep(500)
  marks[2] = measure("middle (" .. half .. " runs)")
  print(fmt(marks[2]))
  batch(rt, opts.runs - half, opts.inflight, half)
  local secs = (uv.hrtime() - t0) / 1e9
  sleep(500)
  marks[3] = measure("end (" .. opts.runs .. " runs)")
  print(fmt(marks[3]))
  local co = coroutine.running()
  rt:dispose(function() coroutine.resume(co) end)
  coroutine.yield()
  sleep(200)
  marks[4] = measure("after dispose")
  print(fmt(marks[4]))
  print(string.format("%.1f s, %.1f runs/s", secs, opts.runs / secs))
  if marks[4].folders ~= 0 or marks[4].procs ~= 0 then
    failures = failures + 1
    io.stderr:write("soak: something was left after disposal\n")
  end
end

coroutine.wrap(function()
  local ok, err = xpcall(function()
    for p in opts.phases:gmatch("[^,]+") do
      if p == "nopool" then phase("no pool", 0)
      elseif p == "pool" then phase("warm pool", opts.pool)
      else error("unknown phase " .. p) end
    end
  end, debug.traceback)
  if not ok then
    io.stderr:write(err, "\n")
    failures = failures + 1
  end
  print(failures == 0 and "soak: every run had its expected outcome" or ("soak: " .. failures .. " failures"))
end)()
uv.run()
os.exit(failures == 0 and 0 or 1)
