-- Shared by the specs: run the real CLI on a program, read its result, and
-- check that nothing of a run is left behind.
local json = require("dkjson")
local luassert = require("luassert")

local M = {}

local here = debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./"
M.root = here .. "../"
M.bin = os.getenv("LUNARUN_BIN") or (M.root .. "build/lunarun")
M.fixtures = here .. "fixtures/"
M.isolation = os.getenv("LUNARUN_ISOLATION")
if M.isolation == "" then M.isolation = nil end
-- LUNARUN_BACKEND=e2b (set by spec/e2b/with-double, which starts the E2B
-- test double and points $E2B_API_URL/$E2B_SANDBOX_URL at it) runs the
-- specs on the E2B backend.
M.backend = os.getenv("LUNARUN_BACKEND")
if M.backend == "" then M.backend = nil end

-- Absolute paths, for commands that run in another folder.
function M.abspath(p)
  local f = io.popen("cd " .. M.q(p) .. " && pwd")
  local s = f:read("l")
  f:close()
  return s
end

local function shell_quote(s)
  return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end
M.q = shell_quote

-- Every CLI run of this process installs its runtime under a folder of its
-- own, so the leftover check sees this spec's processes only (and never
-- another run on the same machine).
math.randomseed(os.time() + math.floor(os.clock() * 1e6))
local tmpdir = string.format("%s/lunarun-spec-%d", os.getenv("TMPDIR") or "/tmp", math.random(1, 1e9))
os.execute("mkdir -p '" .. tmpdir .. "'")
M.tmpdir = tmpdir
-- Removed when the spec's Lua state closes (it is empty by then).
M._cleanup = setmetatable({}, { __gc = function() os.remove(tmpdir) end })
local counter = 0
function M.tmpfile(content, suffix)
  counter = counter + 1
  local path = string.format("%s/lunarun-spec-%d-%d%s", tmpdir, math.random(1, 1e9), counter, suffix or "")
  if content then
    local f = assert(io.open(path, "wb"))
    f:write(content)
    f:close()
  end
  return path
end

local function slurp(path)
  local f = io.open(path, "rb")
  if not f then return "" end
  local s = f:read("a")
  f:close()
  return s
end
M.slurp = slurp

-- Runs `lunarun <args>` and returns {code, stdout, stderr, result}.
-- opts: bindings = {files}, sets = {"k=v"}, config = file, json (default
-- true), stream (--stream: stdout is then left to the caller), stdin =
-- text (the program is then "-").
function M.cli(args)
  return M.cli_wrapped("", args)
end

-- The same, with the CLI started through a wrapper command (e.g. valgrind).
function M.cli_wrapped(wrapper, args)
  local out, err = M.tmpfile(), M.tmpfile()
  local cmd = "TMPDIR=" .. M.q(tmpdir) .. " " .. wrapper .. " " .. M.q(M.bin) .. " " .. args .. " >" .. out .. " 2>" .. err
  local _, _, code = os.execute(cmd)
  local r = { code = code, stdout = slurp(out), stderr = slurp(err) }
  os.remove(out)
  os.remove(err)
  return r
end

function M.run(program, opts)
  opts = opts or {}
  local args = { "run" }
  for _, b in ipairs(opts.bindings or {}) do
    args[#args + 1] = "--bindings " .. M.q(b)
  end
  if opts.config then args[#args + 1] = "--config " .. M.q(opts.config) end
  -- LUNARUN_ISOLATION=none runs the specs without isolation (the test
  -- command runs the main specs in both modes); a test's own sets come
  -- later and win.
  if M.isolation then args[#args + 1] = "--set isolation=" .. M.q(M.isolation) end
  if M.backend then args[#args + 1] = "--set backend=" .. M.q(M.backend) end
  for _, s in ipairs(opts.sets or {}) do
    args[#args + 1] = "--set " .. M.q(s)
  end
  if opts.json ~= false then args[#args + 1] = "--json" end
  if opts.stream then args[#args + 1] = "--stream" end
  local prog = M.tmpfile(program, ".ts")
  args[#args + 1] = M.q(prog)
  local r = M.cli(table.concat(args, " "))
  os.remove(prog)
  if opts.json ~= false and not opts.stream and r.stdout ~= "" then
    -- dkjson recurses: a result nested too deep for it leaves r.result nil
    -- (r.stdout still has it).
    local ok, v = pcall(json.decode, r.stdout, 1, json.null)
    r.result = ok and v or nil
  end
  return r
end

-- The raw JSON text of the result's value, cut out of stdout, for exact
-- comparisons that a Lua decoder would blur.
function M.raw_value(stdout)
  return stdout:match('^{"value":(.*),"logs":')
end

-- Processes left by runs: runners of any runtime, and the program's markers.
-- Under bwrap the processes inside show sandbox paths (/opt/lunarun/...), but
-- the outer bwrap and the namespace's init (bwrap too) carry the host path of
-- the runner they bind, and everything inside dies with them: matching them
-- is enough.
function M.leftovers(pattern)
  -- The runner folder of any runtime of this process: the controller's and
  -- the strip helper's command lines name it, and so does the bwrap that
  -- binds it.
  local pat = pattern or (tmpdir:gsub("[%.%-]", "\\%0") .. "/lunarun-[A-Za-z0-9]+/runner")
  local p = io.popen("pgrep -af " .. M.q(pat) .. " 2>/dev/null")
  local s = p:read("a")
  p:close()
  local list = {}
  for line in s:gmatch("[^\n]+") do
    if not line:find("pgrep", 1, true) then list[#list + 1] = line end
  end
  return list
end

-- Asserts nothing is left. No grace: the CLI returns only after every
-- process of its run is gone.
function M.assert_clean(pattern)
  luassert.are.same({}, M.leftovers(pattern))
end

-- The runtime folders (lunarun-XXXXXX) left in this process's folder; every
-- runtime removes its own when it is disposed. (The specs' own temporary
-- files there are named lunarun-spec-*.)
function M.runtime_folders()
  local p = io.popen("ls -A " .. M.q(tmpdir))
  local left = {}
  for name in p:lines() do
    if name:match("^lunarun%-") and not name:match("^lunarun%-spec%-") then left[#left + 1] = name end
  end
  p:close()
  return left
end

-- Where things are, absolute: the source tree, the build, the Lua module.
M.root_abs = M.abspath(M.root)
M.build_dir = M.abspath(M.bin:match("^(.*)/[^/]*$") or ".")
M.cpath = M.build_dir .. "/lua/?.so;;"

M.json = json
return M
