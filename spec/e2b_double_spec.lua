-- The E2B test double's raw protocol and its test controls (/_double/):
-- the bytes each fault mode produces, the process table (reparented orphans
-- included), vanish, timeouts, templates. spec/e2b_sdk_spec.lua checks the
-- double against E2B's own SDK; this one checks what the SDK cannot show.
local h = require("spec.helper")
local e2b = require("spec.e2b.helper")
local json = h.json

local function start_req(cmd, args, extra)
  local r = { process = { cmd = cmd, args = args or {} } }
  for k, v in pairs(extra or {}) do r[k] = v end
  return r
end
local function sh(script, extra) return start_req("/bin/sh", { "-c", script }, extra) end

local function pids_of(d, sandbox_id)
  local list = {}
  for _, p in ipairs(e2b.processes(d)) do
    if p.sandboxID == sandbox_id then list[#list + 1] = p end
  end
  return list
end

describe("the E2B double", function()
  local d

  setup(function() d = e2b.start({ api_key = "test-key" }) end)
  teardown(function() if d then d.stop() end end)
  after_each(function() e2b.clear_faults(d) end)

  describe("control plane", function()
    it("requires the API key (any case of the header name)", function()
      local status, v = e2b.http_json("POST", d.url .. "/sandboxes", { body = '{"templateID":"base"}' })
      assert.are.equal(401, status)
      assert.are.equal(401, v.code)
      status, v = e2b.api(d, "POST", "/sandboxes", { templateID = "base" }, "another-key")
      assert.are.equal(401, status)
      assert.are.equal(401, v.code)
      status = e2b.http_json("GET", d.url .. "/v2/sandboxes", { headers = { ["x-api-key"] = "test-key" } })
      assert.are.equal(200, status)
    end)

    it("creates (both paths), lists, sets the timeout, deletes", function()
      local a = e2b.create(d)
      assert.are.equal("base", a.templateID)
      assert.is_string(a.envdVersion)
      assert.is_nil(a.envdAccessToken)
      assert.are.equal(json.null, a.domain)
      local status, b = e2b.api(d, "POST", "/v2/sandboxes", { templateID = "base", secure = true })
      assert.are.equal(201, status)
      assert.is_string(b.envdAccessToken)
      local _, list = e2b.api(d, "GET", "/sandboxes")
      local seen = {}
      for _, s in ipairs(list) do seen[s.sandboxID] = s.state end
      assert.are.same("running", seen[a.sandboxID])
      assert.are.same("running", seen[b.sandboxID])
      assert.are.equal(204, (e2b.api(d, "POST", "/sandboxes/" .. a.sandboxID .. "/timeout", { timeout = 30 })))
      assert.are.equal(204, (e2b.api(d, "DELETE", "/sandboxes/" .. a.sandboxID)))
      assert.are.equal(204, (e2b.api(d, "DELETE", "/sandboxes/" .. b.sandboxID)))
      local status2, v = e2b.api(d, "DELETE", "/sandboxes/" .. a.sandboxID)
      assert.are.equal(404, status2)
      assert.are.equal(404, v.code)
      assert.are.equal(404, (e2b.api(d, "POST", "/sandboxes/" .. a.sandboxID .. "/timeout", { timeout = 30 })))
    end)

    it("answers an unknown template with 404 {code, message}", function()
      local status, v = e2b.api(d, "POST", "/sandboxes", { templateID = "nope" })
      assert.are.equal(404, status)
      assert.are.same({ code = 404, message = "template 'nope' not found" }, v)
    end)

    it("ends a sandbox at its timeout, with its processes (keepalives meanwhile)", function()
      local sb = e2b.create(d, { templateID = "base", timeout = 2 })
      local bg = e2b.start_process_bg(d, sb, start_req("sleep", { "100" }), { ["Keepalive-Ping-Interval"] = "1" })
      local ev = e2b.events(bg.until_(function(l) return e2b.events(l).kinds[2] == "keepalive" end))
      assert.are.equal("start", ev.kinds[1])
      local gone
      for _ = 1, 200 do
        gone = e2b.api(d, "GET", "/sandboxes/" .. sb.sandboxID) == 404
        if gone then break end
        e2b.sleep(0.05)
      end
      assert.is_true(gone)
      bg.wait()
      assert.are.same({}, pids_of(d, sb.sandboxID))
    end)

    it("logs requests with the key redacted", function()
      e2b.create(d)
      local _, log = e2b.http_json("GET", d.url .. "/_double/requests")
      local last
      for _, r in ipairs(log) do
        if r.method == "POST" and r.path == "/sandboxes" and r.status == 201 then last = r end
      end
      assert.are.equal("***", last.headers["x-api-key"])
      local _, _, raw = e2b.http_json("GET", d.url .. "/_double/requests")
      assert.is_nil(raw:find("test-key", 1, true))
    end)
  end)

  describe("envd", function()
    it("serves /health, chooses the sandbox by E2b-Sandbox-Id or Host, checks the access token", function()
      local sb = e2b.create(d, { templateID = "base", secure = true })
      assert.are.equal(204, (e2b.http("GET", d.url .. "/health", { headers = e2b.envd_headers(sb) })))
      assert.are.equal(204, (e2b.http("GET", d.url .. "/health",
        { headers = { Host = "49983-" .. sb.sandboxID .. ".e2b.local" } })))
      local status, v = e2b.http_json("POST", d.url .. "/process.Process/List",
        { body = "{}", headers = { ["E2b-Sandbox-Id"] = sb.sandboxID } })
      assert.are.equal(401, status)
      assert.are.equal("unauthenticated", v.code)
      status = e2b.unary(d, sb, "List", {})
      assert.are.equal(200, status)
      status = e2b.unary(d, sb, "List", {}, { ["X-Access-Token"] = "wrong" })
      assert.are.equal(401, status)
    end)

    it("streams start, stdout, stderr, end (zero values omitted) and a flag-2 trailer", function()
      local sb = e2b.create(d)
      local status, list, rest = e2b.start_process(d, sb, sh("echo out; echo err >&2; exit 3"))
      assert.are.equal(200, status)
      assert.are.equal("", rest)
      local ev = e2b.events(list)
      assert.are.equal("start", ev.kinds[1])
      assert.are.equal("end", ev.kinds[#ev.kinds])
      assert.are.equal("out\n", ev.stdout)
      assert.are.equal("err\n", ev.stderr)
      assert.are.same({ exitCode = 3, exited = true, status = "exit status 3", error = "exit status 3" }, ev["end"])
      assert.are.same({}, ev.trailer)
      assert.are.equal(2, list[#list].flag)
      _, list = e2b.start_process(d, sb, start_req("true"))
      assert.are.same({ exited = true, status = "exit status 0" }, e2b.events(list)["end"])
    end)

    it("runs in the sandbox folder with PATH, HOME and the request's envs", function()
      local sb = e2b.create(d)
      local _, list = e2b.start_process(d, sb,
        { process = { cmd = "/bin/sh", args = { "-c", 'pwd; echo "$HOME|$PATH|$X"; node --version' }, envs = { X = "y" } } })
      local lines = {}
      for l in e2b.events(list).stdout:gmatch("[^\n]+") do lines[#lines + 1] = l end
      local home = e2b.shell("realpath " .. h.q(d.root .. "/" .. sb.sandboxID)):gsub("\n$", "")
      assert.are.equal(home, lines[1])
      assert.are.equal(home .. "|" .. home .. "|" .. home .. "/.double-bin:/usr/local/bin:/usr/bin:/bin|y",
        lines[1] .. "|" .. lines[2])
      assert.truthy(lines[3]:match("^v%d+%."))
    end)

    it("gives template node18 a Node that says v18.19.0", function()
      local sb = e2b.create(d, { templateID = "node18", timeout = 60 })
      local _, list = e2b.start_process(d, sb, start_req("/bin/bash", { "-l", "-c", "node --version" }))
      assert.are.equal("v18.19.0\n", e2b.events(list).stdout)
      _, list = e2b.start_process(d, sb, start_req("/bin/bash", { "-l", "-c", "node -e 1" }))
      assert.are.equal(1, e2b.events(list)["end"].exitCode)
    end)

    it("refuses unknown request fields, answers an unknown pid with 404 not_found", function()
      local sb = e2b.create(d)
      local status, list = e2b.start_process(d, sb, { process = { cmd = "true" }, bogus = 1 })
      assert.are.equal(200, status)
      assert.are.equal(1, #list)
      assert.are.equal(2, list[1].flag)
      assert.are.equal("invalid_argument", list[1].value.error.code)
      local s2, v = e2b.unary(d, sb, "SendSignal", { process = { pid = 999999 }, signal = "SIGNAL_SIGKILL", extra = true })
      assert.are.equal(400, s2)
      assert.are.equal("invalid_argument", v.code)
      s2, v = e2b.unary(d, sb, "SendSignal", { process = { pid = 999999 }, signal = "SIGNAL_SIGKILL" })
      assert.are.equal(404, s2)
      assert.are.equal("not_found", v.code)
      s2, v = e2b.unary(d, sb, "SendInput", { process = { pid = 999999 }, input = { stdin = "eA==" } })
      assert.are.equal(404, s2)
      assert.are.equal("not_found", v.code)
    end)

    it("keeps stdin open for SendInput, closes it on CloseStdin", function()
      local sb = e2b.create(d)
      local bg = e2b.start_process_bg(d, sb, start_req("cat", {}, { stdin = true }))
      local pid = e2b.events(bg.until_(function(l) return #l >= 1 end)).pid
      assert.are.equal(200, (e2b.unary(d, sb, "SendInput", { process = { pid = pid }, input = { stdin = "aGVsbG8K" } })))
      bg.until_(function(l) return e2b.events(l).stdout == "hello\n" end)
      assert.are.equal(200, (e2b.unary(d, sb, "CloseStdin", { process = { pid = pid } })))
      local ev = e2b.events(bg.wait())
      assert.are.same({ exited = true, status = "exit status 0" }, ev["end"])
    end)

    it("kills a process at Connect-Timeout-Ms", function()
      local sb = e2b.create(d)
      local status, list = e2b.start_process(d, sb, start_req("sleep", { "100" }), { headers = { ["Connect-Timeout-Ms"] = "300" } })
      assert.are.equal(200, status)
      local ev = e2b.events(list)
      assert.are.equal("start", ev.kinds[1])
      assert.are.equal("deadline_exceeded", ev.trailer.error.code)
      for _ = 1, 100 do
        if #pids_of(d, sb.sandboxID) == 0 then break end
        e2b.sleep(0.02)
      end
      assert.are.same({}, pids_of(d, sb.sandboxID))
    end)

    it("uploads (octet-stream and multipart) and downloads files; 404 when missing", function()
      local sb = e2b.create(d)
      local status, v = e2b.http_json("POST", d.url .. "/files?path=a/b/c.txt",
        { body = "data!", headers = e2b.envd_headers(sb, { ["Content-Type"] = "application/octet-stream" }) })
      assert.are.equal(200, status)
      assert.are.equal("c.txt", v[1].name)
      assert.are.equal("file", v[1].type)
      local mp = "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"m.txt\"\r\n"
        .. "Content-Type: application/octet-stream\r\n\r\nmulti\r\n--XyZ--\r\n"
      status, v = e2b.http_json("POST", d.url .. "/files?path=m.txt",
        { body = mp, headers = e2b.envd_headers(sb, { ["Content-Type"] = "multipart/form-data; boundary=XyZ" }) })
      assert.are.equal(200, status)
      assert.are.equal("m.txt", v[1].name)
      local s, body = e2b.http("GET", d.url .. "/files?path=a/b/c.txt", { headers = e2b.envd_headers(sb) })
      assert.are.equal(200, s)
      assert.are.equal("data!", body)
      s, body = e2b.http("GET", d.url .. "/files?path=m.txt", { headers = e2b.envd_headers(sb) })
      assert.are.equal("multi", body)
      assert.are.equal(404, (e2b.http("GET", d.url .. "/files?path=nope", { headers = e2b.envd_headers(sb) })))
    end)
  end)

  describe("the process table", function()
    it("sees a reparented orphan, and vanish kills it", function()
      local sb = e2b.create(d)
      local bg = e2b.start_process_bg(d, sb, sh("sleep 1000 >/dev/null 2>&1 & echo $!; read x", { stdin = true }))
      local list = bg.until_(function(l) return e2b.events(l).stdout:match("%d+\n") end)
      local ev = e2b.events(list)
      local orphan = tonumber(ev.stdout:match("(%d+)"))
      -- SIGKILL to the sh: one pid, not its group, so the sleep lives on
      assert.are.equal(200, (e2b.unary(d, sb, "SendSignal", { process = { pid = ev.pid }, signal = "SIGNAL_SIGKILL" })))
      ev = e2b.events(bg.wait())
      assert.are.same({ exitCode = -1, status = "signal: killed", error = "signal: killed" }, ev["end"])
      assert.is_true(e2b.alive(orphan))
      local found
      for _, p in ipairs(e2b.processes(d)) do
        if p.pid == orphan then found = p end
      end
      assert.truthy(found, "the orphan is not listed")
      assert.are.equal(sb.sandboxID, found.sandboxID)
      assert.truthy(found.cmdline:find("sleep 1000", 1, true))
      -- the sandbox's VM dies
      assert.are.equal(204, (e2b.http("POST", d.url .. "/_double/sandboxes/" .. sb.sandboxID .. "/vanish")))
      assert.is_false(e2b.alive(orphan))
      assert.are.same({}, pids_of(d, sb.sandboxID))
      assert.are.equal(404, (e2b.api(d, "DELETE", "/sandboxes/" .. sb.sandboxID)))
      local status, v = e2b.http_json("GET", d.url .. "/health", { headers = e2b.envd_headers(sb) })
      assert.are.equal(502, status)
      assert.are.equal(502, v.code)
      assert.are.equal(502, (e2b.start_process(d, sb, start_req("true"))))
      assert.are.equal("", e2b.shell("ls -A " .. h.q(d.root) .. " | grep " .. sb.sandboxID))
    end)

    it("vanish destroys the open streams of the sandbox", function()
      local sb = e2b.create(d)
      local bg = e2b.start_process_bg(d, sb, start_req("sleep", { "100" }))
      bg.until_(function(l) return #l >= 1 end)
      e2b.http("POST", d.url .. "/_double/sandboxes/" .. sb.sandboxID .. "/vanish")
      local list = bg.wait()
      local ev = e2b.events(list)
      assert.is_nil(ev.trailer)
      assert.is_nil(ev["end"])
    end)
  end)

  describe("faults", function()
    local function sb_with_faults(f)
      local sb = e2b.create(d)
      e2b.faults(d, f)
      return sb
    end

    it("answers create with the status and raw body given, `times` times", function()
      e2b.faults(d, { create = { status = 429, body = '{"code":429,"message":"slow down"}', times = 2 } })
      for _ = 1, 2 do
        local status, v = e2b.api(d, "POST", "/sandboxes", { templateID = "base" })
        assert.are.equal(429, status)
        assert.are.same({ code = 429, message = "slow down" }, v)
      end
      e2b.create(d)
      e2b.faults(d, { create = { status = 201, body = "<html>" } })
      for _ = 1, 2 do
        local status, _, raw = e2b.api(d, "POST", "/v2/sandboxes", { templateID = "base" })
        assert.are.equal(201, status)
        assert.are.equal("<html>", raw)
      end
    end)

    it("covers delete, timeout, upload, health, sendInput, sendSignal", function()
      local sb = e2b.create(d)
      e2b.faults(d, {
        delete = { status = 500, body = "boom-delete", times = 1 },
        timeout = { status = 503, body = "boom-timeout", times = 1 },
        upload = { status = 507, body = "boom-upload", times = 1 },
        health = { status = 502, body = "boom-health", times = 1 },
        sendInput = { status = 500, body = "boom-input", times = 1 },
        sendSignal = { status = 401, body = "boom-signal", times = 1 },
      })
      local function check(want_status, want_body, status, body)
        assert.are.equal(want_status, status)
        assert.are.equal(want_body, body)
      end
      local _, _, raw
      local status
      status, _, raw = e2b.api(d, "DELETE", "/sandboxes/" .. sb.sandboxID)
      check(500, "boom-delete", status, raw)
      status, _, raw = e2b.api(d, "POST", "/sandboxes/" .. sb.sandboxID .. "/timeout", { timeout = 10 })
      check(503, "boom-timeout", status, raw)
      status, raw = e2b.http("POST", d.url .. "/files?path=x", { body = "x", headers = e2b.envd_headers(sb, { ["Content-Type"] = "application/octet-stream" }) })
      check(507, "boom-upload", status, raw)
      status, raw = e2b.http("GET", d.url .. "/health", { headers = e2b.envd_headers(sb) })
      check(502, "boom-health", status, raw)
      status, _, raw = e2b.unary(d, sb, "SendInput", { process = { pid = 1 }, input = { stdin = "" } })
      check(500, "boom-input", status, raw)
      status, _, raw = e2b.unary(d, sb, "SendSignal", { process = { pid = 1 }, signal = "SIGNAL_SIGTERM" })
      check(401, "boom-signal", status, raw)
      -- each applied once
      assert.are.equal(204, (e2b.http("GET", d.url .. "/health", { headers = e2b.envd_headers(sb) })))
      assert.are.equal(204, (e2b.api(d, "DELETE", "/sandboxes/" .. sb.sandboxID)))
    end)

    it("start with a status: that answer, no process", function()
      local sb = sb_with_faults({ start = { status = 503, body = "<html>", times = 1 } })
      local status, _, _, _, raw = e2b.start_process(d, sb, start_req("true"))
      assert.are.equal(503, status)
      assert.are.equal("<html>", raw)
      status = e2b.start_process(d, sb, start_req("true"))
      assert.are.equal(200, status)
    end)

    it("start, mode cut: the start event and early output, then the socket dies mid-envelope", function()
      local sb = sb_with_faults({ start = { mode = "cut" } })
      local status, list, rest, rc = e2b.start_process(d, sb, sh("echo first; sleep 100"))
      assert.are.equal(200, status)
      assert.are_not.equal(0, rc) -- curl saw the connection end mid-body
      local ev = e2b.events(list)
      assert.are.equal("start", ev.kinds[1])
      assert.are.equal("first\n", ev.stdout)
      assert.is_nil(ev.trailer)
      assert.is_true(#rest > 0 and #rest < 5 + string.unpack(">I4", rest, 2))
      -- the process still runs (the stream was cut, not the process) until the sandbox goes
      assert.is_true(#pids_of(d, sb.sandboxID) >= 1)
      assert.are.equal(204, (e2b.api(d, "DELETE", "/sandboxes/" .. sb.sandboxID)))
      assert.are.same({}, pids_of(d, sb.sandboxID))
    end)

    it("start, mode truncated: an envelope promising more bytes than follow, then a clean end", function()
      local sb = sb_with_faults({ start = { mode = "truncated" } })
      local status, list, rest, rc = e2b.start_process(d, sb, sh("sleep 100"))
      assert.are.equal(200, status)
      assert.are.equal(0, rc)
      assert.are.equal(1, #list)
      assert.are.equal("start", e2b.events(list).kinds[1])
      local len = string.unpack(">I4", rest, 2)
      assert.is_true(#rest - 5 < len)
      assert.are.equal(204, (e2b.api(d, "DELETE", "/sandboxes/" .. sb.sandboxID)))
      assert.are.same({}, pids_of(d, sb.sandboxID))
    end)

    it("start, mode oversized: an envelope header of length 0x7fffffff", function()
      local sb = sb_with_faults({ start = { mode = "oversized" } })
      local status, list, rest = e2b.start_process(d, sb, sh("sleep 100"))
      assert.are.equal(200, status)
      assert.are.equal("start", e2b.events(list).kinds[1])
      local flag, len = string.unpack(">B I4", rest)
      assert.are.equal(0, flag)
      assert.are.equal(0x7fffffff, len)
      assert.are.equal(204, (e2b.api(d, "DELETE", "/sandboxes/" .. sb.sandboxID)))
    end)

    it("start, mode error-end: a flag-2 envelope with an error after the start event", function()
      local sb = sb_with_faults({ start = { mode = "error-end" } })
      local status, list, rest, rc = e2b.start_process(d, sb, sh("sleep 100"))
      assert.are.equal(200, status)
      assert.are.equal(0, rc)
      assert.are.equal("", rest)
      assert.are.equal(2, #list)
      assert.are.equal("start", e2b.events(list).kinds[1])
      assert.are.equal(2, list[2].flag)
      assert.are.same({ error = { code = "internal", message = "double: injected" } }, list[2].value)
      assert.is_true(#pids_of(d, sb.sandboxID) >= 1)
      assert.are.equal(204, (e2b.api(d, "DELETE", "/sandboxes/" .. sb.sandboxID)))
      assert.are.same({}, pids_of(d, sb.sandboxID))
    end)

    it("refuses a malformed fault", function()
      assert.are.equal(400, (e2b.http("POST", d.url .. "/_double/faults", { body = '{"nope":{"status":500}}' })))
      assert.are.equal(400, (e2b.http("POST", d.url .. "/_double/faults", { body = '{"create":{"mode":"cut"}}' })))
      assert.are.equal(400, (e2b.http("POST", d.url .. "/_double/faults", { body = '{"start":{}}' })))
    end)
  end)
end)
