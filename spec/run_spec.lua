-- One run through the real CLI, the real runner and real Node: program
-- semantics (SPEC §3) and each failure kind (SPEC §4).
local h = require("spec.helper")

local tools = h.fixtures .. "tools.lua"

local function run(program, opts)
  local r = h.run(program, opts)
  h.assert_clean()
  return r
end

describe("a run", function()
  it("returns the program's value with exit 0", function()
    local r = run("return 1 + 1")
    assert.are.equal(0, r.code)
    assert.are.equal(2, r.result.value)
    assert.are.same({}, r.result.logs)
    assert.is_nil(r.result.error)
  end)

  it("has no value when the program returns nothing", function()
    local r = run('console.log("hi")')
    assert.are.equal(0, r.code)
    assert.is_nil(r.result.value)
    assert.truthy(r.stdout:find('^{"logs":%["hi"%]'))
  end)

  it("strips types, keeping top-level await and return", function()
    local r = run([[
interface P { x: number }
type Q = P & { y?: string };
function id<T>(v: T): T { return v; }
declare const nothing: unknown;
const p: P = { x: 1 } satisfies P;
const n = id<number>(await Promise.resolve(p.x as number))!;
return n + 1;
]])
    assert.are.equal(0, r.code)
    assert.are.equal(2, r.result.value)
  end)

  it("runs in strict mode", function()
    local r = run("undeclared = 1; return 1")
    assert.are.equal("exception", r.result.error.kind)
    assert.truthy(r.result.error.message:find("undeclared is not defined", 1, true))
  end)

  it("sees an empty environment", function()
    local r = run("return { env: process.env, keys: Object.keys(process.env).length }")
    assert.are.equal(0, r.code)
    assert.truthy(r.stdout:find('"value":{"env":{},"keys":0}', 1, true))
  end)

  it("gets namespaces and console as parameters, not globals", function()
    local r = run("return [typeof tools, typeof globalThis.tools, typeof ToolCallError, typeof globalThis.ToolCallError]",
      { bindings = { tools } })
    assert.are.same({ "object", "undefined", "function", "undefined" }, r.result.value)
  end)

  it("renders console arguments joined by a space, strings as they are", function()
    local r = run([[
console.log("a", 1, { b: [1, 2] }, "c");
console.info("info"); console.warn("warn"); console.error("error"); console.debug("debug");
console.log("%s stays", "x");
process.stdout.write("out\n"); process.stderr.write("err");
return null;
]])
    assert.are.equal(0, r.code)
    assert.are.same({ "a 1 { b: [ 1, 2 ] } c", "info", "warn", "error", "debug", "%s stays x",
      "out\n", "err" }, r.result.logs)
    assert.are.equal(h.json.null, r.result.value)
  end)

  it("keeps a byte order mark the program writes as bytes, as in a string", function()
    local r = run([[
process.stdout.write(new Uint8Array([0xEF, 0xBB, 0xBF, 0x78]));
process.stdout.write("\uFEFFy");
return null;
]])
    assert.are.same({ "\u{FEFF}x", "\u{FEFF}y" }, r.result.logs)
  end)

  describe("fails with kind", function()
    it("exception, with the program's line, when it throws", function()
      local r = run('const a = 1;\nconst b = 2;\nthrow new Error("boom " + (a + b));\n')
      assert.are.equal(1, r.code)
      assert.are.equal("exception", r.result.error.kind)
      assert.truthy(r.result.error.message:find("Error: boom 3", 1, true))
      assert.truthy(r.result.error.message:find("program.ts:3:7", 1, true), r.result.error.message)
    end)

    it("exception with String(x) for a non-Error throw", function()
      local r = run('throw { toString() { return "custom" } }')
      assert.are.equal("exception", r.result.error.kind)
      assert.are.equal("custom", r.result.error.message)
      r = run("throw 42")
      assert.are.equal("42", r.result.error.message)
    end)

    it("exception, before any sandbox starts, when the program does not strip", function()
      local marker = h.tmpfile()
      local r = run('let x = 1;\nenum Color { Red }\nawait marker.ready({ path: "' .. marker .. '" });',
        { bindings = { h.fixtures .. "marker.lua" } })
      assert.are.equal(1, r.code)
      assert.are.equal("exception", r.result.error.kind)
      assert.truthy(r.result.error.message:find("program.ts:2", 1, true), r.result.error.message)
      assert.truthy(r.result.error.message:find("enum", 1, true))
      assert.is_nil(io.open(marker))
    end)

    for _, case in ipairs({
      { "parameter properties", "class A { constructor(private x: number) {} }" },
      { "runtime namespace", "namespace N { export const x = 1 }" },
      { "import = require", 'import fs = require("fs");' },
      { "angle-bracket assertion", "const a = <number>(1 as unknown);" },
      { "a syntax error", "const a = (1 +;" },
    }) do
      it("exception for " .. case[1], function()
        local r = run("const ok = 1;\n" .. case[2] .. "\nreturn ok;")
        assert.are.equal("exception", r.result.error.kind)
        assert.truthy(r.result.error.message:find("program.ts:2", 1, true), r.result.error.message)
      end)
    end

    it("timeout (compute budget) for a hot loop", function()
      local r = run("for (;;) {}", { sets = { "computeMs=300" } })
      assert.are.equal(1, r.code)
      assert.are.equal("timeout", r.result.error.kind)
      assert.truthy(r.result.error.message:find("compute budget", 1, true))
      -- The budget was spent: the worker's busy time is at least the budget.
      assert.is_true(r.result.stats.computeMs >= 300, tostring(r.result.stats.computeMs))
    end)

    it("timeout (wall-clock) for a program that waits", function()
      local r = run("await new Promise((r) => setTimeout(r, 60000))", { sets = { "maxWallMs=700" } })
      assert.are.equal("timeout", r.result.error.kind)
      assert.truthy(r.result.error.message:find("wall-clock", 1, true))
    end)

    it("exception, with nothing spawned, for a program that is not UTF-8 text", function()
      local r = run('return "\xff\xfe"')
      assert.are.equal(1, r.code)
      assert.are.equal("exception", r.result.error.kind)
      assert.truthy(r.result.error.message:find("not valid UTF-8", 1, true), r.result.error.message)
    end)

    it("worker-exit when the sandbox cannot start", function()
      -- A "Node" that answers the version check, then fails to start.
      local broken = h.tmpfile('#!/bin/sh\n[ "$1" = --version ] && { echo v24.0.0; exit 0; }\nexit 1\n')
      os.execute("chmod +x " .. h.q(broken))
      local r = run("return 1", { sets = { "nodePath=" .. broken } })
      os.remove(broken)
      assert.are.equal(1, r.code, r.stderr)
      assert.are.equal("worker-exit", r.result.error.kind)
    end)

    it("worker-exit for process.exit", function()
      local r = run("process.exit(3)")
      assert.are.equal("worker-exit", r.result.error.kind)
    end)

    it("worker-exit for a heap out of memory", function()
      local r = run("const a: string[] = []; for (;;) a.push('x'.repeat(64) + a.length);",
        { sets = { "maxOldGenerationSizeMb=64" } })
      assert.are.equal("worker-exit", r.result.error.kind)
    end)

    it("worker-exit for a promise that never settles", function()
      local r = run("await new Promise(() => {})")
      assert.are.equal("worker-exit", r.result.error.kind)
      assert.truthy(r.result.error.message:find("never settled", 1, true))
    end)

    it("invalid-output for a value JSON cannot carry", function()
      for _, v in ipairs({ "undefined as any === undefined ? [undefined] : 0", "NaN", "-0", "Infinity",
        "1n", "new Date(0)", "new Map()", "[1, , 3]", "{ f() {} }", "Symbol('s')", "new Uint8Array(2)",
        "(() => { const a: any = {}; a.a = a; return a })()", "new (class K {})()", "new Error('e')" }) do
        local r = run("return " .. v)
        assert.are.equal("invalid-output", r.result.error and r.result.error.kind, v)
      end
    end)

    for _, sig in ipairs({ "INT", "TERM" }) do
      it("abort when the CLI gets SIG" .. sig .. ", still printing the result, exit 1", function()
        local marker = h.tmpfile()
        local out = h.tmpfile()
        -- The log travels before the call on the same channel, so once the
        -- marker exists the host has the log entry.
        local prog = h.tmpfile('console.log("started"); await marker.ready({ path: "' .. marker .. '" });'
          .. " await new Promise((r) => setTimeout(r, 60000));", ".ts")
        -- One shell starts the CLI, waits until the program runs, signals
        -- the CLI and reports its exit status.
        local script = string.format([[
TMPDIR=%s %s run --json --bindings %s %s >%s 2>&1 &
pid=$!
for i in $(seq 400); do [ -s %s ] && break; sleep 0.025; done
kill -%s $pid
wait $pid
exit $?]], h.q(h.tmpdir), h.q(h.bin), h.q(h.fixtures .. "marker.lua"), h.q(prog), out, marker, sig)
        local _, _, code = os.execute(script)
        local text = h.slurp(out)
        local result = h.json.decode(text, 1, h.json.null)
        assert.are.equal(1, code)
        assert.are.equal("abort", result.error.kind, text)
        assert.are.same({ "started" }, result.logs)
        h.assert_clean()
        os.remove(marker); os.remove(out); os.remove(prog)
      end)
    end
  end)
end)
