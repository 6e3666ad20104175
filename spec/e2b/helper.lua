-- For specs that use the E2B test double (spec/e2b/double): start and stop
-- it, talk HTTP to it (through curl), build and read Connect envelopes.
local h = require("spec.helper")
local json = h.json

local M = {}

M.double_bin = h.root_abs .. "/spec/e2b/double"

local function sleep(s) os.execute("sleep " .. s) end
M.sleep = sleep

local function shell(cmd)
  local p = io.popen(cmd)
  local s = p:read("a")
  p:close()
  return s
end
M.shell = shell

-- A process that runs (a zombie does not count: whoever reaps orphans here
-- may take its time).
local function alive(pid)
  local f = io.open("/proc/" .. pid .. "/stat")
  if not f then return false end
  local s = f:read("a")
  f:close()
  local state = s:match("%) (%a)")
  return state ~= nil and state ~= "Z" and state ~= "X"
end
M.alive = alive

-- Starts the double on a free port with its sandboxes under a fresh folder
-- of the spec's temporary folder. opts: api_key, node. Returns
-- {url, pid, root, stop = function}; stop() ends it with SIGTERM, waits for
-- it and checks nothing of it is left (no process names its root, no folder).
function M.start(opts)
  opts = opts or {}
  local root = h.tmpfile() .. "-double"
  assert(os.execute("mkdir -p " .. h.q(root)))
  local out, err = h.tmpfile(), h.tmpfile()
  local args = { h.q(M.double_bin), "--port 0", "--root", h.q(root) }
  if opts.api_key then args[#args + 1] = "--api-key " .. h.q(opts.api_key) end
  if opts.node then args[#args + 1] = "--node " .. h.q(opts.node) end
  local pid = shell(table.concat(args, " ") .. " >" .. h.q(out) .. " 2>" .. h.q(err) .. " </dev/null & echo $!"):match("%d+")
  assert(pid, "the double did not start")
  local url
  for _ = 1, 400 do
    url = h.slurp(out):match("^(http://127%.0%.0%.1:%d+)\n")
    if url or not alive(pid) then break end
    sleep(0.025)
  end
  assert(url, "the double printed no URL: " .. h.slurp(err))
  local d = { url = url, pid = pid, root = root, out = out, err = err }
  function d.stop()
    if alive(pid) then os.execute("kill -TERM " .. pid) end
    for _ = 1, 400 do
      if not alive(pid) then break end
      sleep(0.025)
    end
    local still = alive(pid)
    if still then os.execute("kill -KILL " .. pid) end
    local left = h.leftovers(root:gsub("[%.%-]", "\\%0"))
    local folders = shell("ls -A " .. h.q(root) .. " 2>/dev/null")
    local stderr = h.slurp(err)
    os.execute("rm -rf " .. h.q(root))
    os.remove(out)
    os.remove(err)
    assert(not still, "the double did not end on SIGTERM")
    assert(#left == 0, "left running: " .. table.concat(left, "\n"))
    assert(folders == "", "sandbox folders left: " .. folders)
    return stderr
  end
  return d
end

-- One HTTP request through curl. opts: body (string), headers ({name = value}),
-- max_time (seconds, default 20). Returns status (number; 0 when curl got
-- no answer), body (raw bytes), curl's exit code.
function M.http(method, url, opts)
  opts = opts or {}
  local bodyfile = h.tmpfile()
  local args = { "curl -s -o " .. h.q(bodyfile), "-w '%{http_code}'", "-X " .. method,
    "--max-time " .. (opts.max_time or 20) }
  for k, v in pairs(opts.headers or {}) do args[#args + 1] = "-H " .. h.q(k .. ": " .. v) end
  local infile
  if opts.body then
    infile = h.tmpfile(opts.body)
    args[#args + 1] = "--data-binary @" .. h.q(infile)
    if not (opts.headers and (opts.headers["Content-Type"] or opts.headers["content-type"])) then
      args[#args + 1] = "-H 'Content-Type: application/json'"
    end
  end
  args[#args + 1] = h.q(url)
  local p = io.popen(table.concat(args, " "))
  local code = p:read("a")
  local _, _, rc = p:close()
  local body = h.slurp(bodyfile)
  os.remove(bodyfile)
  if infile then os.remove(infile) end
  return tonumber(code) or 0, body, rc
end

-- The same, the body decoded as JSON (nil when it is not JSON).
function M.http_json(method, url, opts)
  local status, body, rc = M.http(method, url, opts)
  local v = body ~= "" and json.decode(body, 1, json.null) or nil
  return status, v, body, rc
end

-- The control plane, with the API key.
function M.api(d, method, path, body, key)
  return M.http_json(method, d.url .. path, {
    body = body and json.encode(body) or nil,
    headers = { ["X-API-Key"] = key or "test-key" },
  })
end

function M.create(d, body, key)
  local status, v, raw = M.api(d, "POST", "/sandboxes", body or { templateID = "base", timeout = 60 }, key)
  assert(status == 201, "create: " .. status .. " " .. raw)
  return v
end

-- A Connect envelope: flag byte, 4-byte big-endian length, JSON.
function M.envelope(obj, flag)
  local s = type(obj) == "string" and obj or json.encode(obj)
  return string.pack(">B I4", flag or 0, #s) .. s
end

-- Splits bytes into envelopes: a list of {flag, len, body (raw), value
-- (decoded JSON or nil)} and the bytes left over after the last whole one.
function M.envelopes(bytes)
  local list, pos = {}, 1
  while #bytes - pos + 1 >= 5 do
    local flag, len = string.unpack(">B I4", bytes, pos)
    if #bytes - pos + 1 - 5 < len then break end
    local body = bytes:sub(pos + 5, pos + 4 + len)
    list[#list + 1] = { flag = flag, len = len, body = body, value = json.decode(body, 1, json.null) }
    pos = pos + 5 + len
  end
  return list, bytes:sub(pos)
end

-- envd request headers for a sandbox (as the SDK sends them).
function M.envd_headers(sb, extra)
  local hd = { ["E2b-Sandbox-Id"] = sb.sandboxID, ["E2b-Sandbox-Port"] = "49983" }
  if sb.envdAccessToken then hd["X-Access-Token"] = sb.envdAccessToken end
  for k, v in pairs(extra or {}) do hd[k] = v end
  return hd
end

-- process.Process/Start, read to its end (or max_time). Returns status,
-- envelopes, leftover bytes, curl's exit code.
function M.start_process(d, sb, request, opts)
  opts = opts or {}
  local headers = M.envd_headers(sb, { ["Content-Type"] = "application/connect+json", ["Connect-Protocol-Version"] = "1" })
  for k, v in pairs(opts.headers or {}) do headers[k] = v end
  local status, body, rc = M.http("POST", d.url .. "/process.Process/Start",
    { body = M.envelope(request), headers = headers, max_time = opts.max_time })
  local list, rest = M.envelopes(body)
  return status, list, rest, rc, body
end

-- The same in the background: returns a handle whose read() gives the
-- envelopes so far, and wait() waits for curl to end.
function M.start_process_bg(d, sb, request, extra_headers)
  local headers = M.envd_headers(sb, { ["Content-Type"] = "application/connect+json", ["Connect-Protocol-Version"] = "1" })
  for k, v in pairs(extra_headers or {}) do headers[k] = v end
  local infile, outfile = h.tmpfile(M.envelope(request)), h.tmpfile("")
  local args = { "curl -s -N -o " .. h.q(outfile), "-X POST --max-time 30" }
  for k, v in pairs(headers) do args[#args + 1] = "-H " .. h.q(k .. ": " .. v) end
  args[#args + 1] = "--data-binary @" .. h.q(infile)
  args[#args + 1] = h.q(d.url .. "/process.Process/Start")
  local pid = shell(table.concat(args, " ") .. " >/dev/null 2>&1 & echo $!"):match("%d+")
  local bg = {}
  function bg.read() return M.envelopes(h.slurp(outfile)) end
  function bg.until_(pred)
    for _ = 1, 400 do
      local list = bg.read()
      if pred(list) then return list end
      sleep(0.025)
    end
    error("timed out waiting on the stream: " .. h.slurp(outfile))
  end
  function bg.wait()
    for _ = 1, 800 do
      if not alive(pid) then break end
      sleep(0.025)
    end
    local list, rest = bg.read()
    os.remove(infile)
    os.remove(outfile)
    return list, rest
  end
  return bg
end

-- A unary call of process.Process (JSON).
function M.unary(d, sb, method, request, extra_headers)
  local headers = M.envd_headers(sb, { ["Content-Type"] = "application/json", ["Connect-Protocol-Version"] = "1" })
  for k, v in pairs(extra_headers or {}) do headers[k] = v end
  local body = next(request) == nil and "{}" or json.encode(request)
  return M.http_json("POST", d.url .. "/process.Process/" .. method, { body = body, headers = headers })
end

-- GET /_double/processes
function M.processes(d)
  local status, v = M.http_json("GET", d.url .. "/_double/processes")
  assert(status == 200)
  return v
end

function M.faults(d, f)
  local status, _, raw = M.http("POST", d.url .. "/_double/faults", { body = json.encode(f) })
  assert(status == 200, "faults: " .. status .. " " .. raw)
end

function M.clear_faults(d)
  assert(M.http("DELETE", d.url .. "/_double/faults") == 204)
end

-- Decoded base64 (the stdout/stderr of data events).
local b64 = {}
do
  local alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
  for i = 1, 64 do b64[alphabet:byte(i)] = i - 1 end
end
function M.unbase64(s)
  local out, bits, n = {}, 0, 0
  for i = 1, #s do
    local v = b64[s:byte(i)]
    if v then
      bits, n = (bits << 6) | v, n + 6
      if n >= 8 then
        n = n - 8
        out[#out + 1] = string.char((bits >> n) & 0xff)
        bits = bits & ((1 << n) - 1)
      end
    end
  end
  return table.concat(out)
end

-- The events of a stream: {kind = "start"|"data"|"end"|"keepalive", ...},
-- stdout and stderr joined, and the trailer (the flag-2 envelope's value).
function M.events(list)
  local r = { kinds = {}, stdout = "", stderr = "" }
  for _, e in ipairs(list) do
    if e.flag == 2 then
      r.trailer = e.value
    elseif e.value and e.value.event then
      local ev = e.value.event
      if ev.start then r.kinds[#r.kinds + 1] = "start"; r.pid = ev.start.pid
      elseif ev.data then
        r.kinds[#r.kinds + 1] = "data"
        if ev.data.stdout then r.stdout = r.stdout .. M.unbase64(ev.data.stdout) end
        if ev.data.stderr then r.stderr = r.stderr .. M.unbase64(ev.data.stderr) end
      elseif ev["end"] then r.kinds[#r.kinds + 1] = "end"; r["end"] = ev["end"]
      elseif ev.keepalive then r.kinds[#r.kinds + 1] = "keepalive"
      end
    end
  end
  return r
end

M.json = json
return M
