-- The output ledger (SPEC §5), through real runs: each worked figure.
local h = require("spec.helper")

local function run(program, cap)
  local r = h.run(program, cap and { sets = { "maxOutputBytes=" .. cap } } or nil)
  h.assert_clean()
  return r
end

describe("the output ledger", function()
  it("lets cap 11 hold console.log('abc') and 'xy'", function()
    local r = run('console.log("abc"); return "xy"', 11)
    assert.are.equal(0, r.code)
    assert.are.equal("xy", r.result.value)
    assert.are.same({ "abc" }, r.result.logs)
    assert.are.equal(11, r.result.stats.outputBytes)
  end)

  it("fails cap 10 with output-limit and the message cut to 'outer '", function()
    local r = run('console.log("abc"); return "xy"', 10)
    assert.are.equal(1, r.code)
    assert.are.equal("output-limit", r.result.error.kind)
    assert.are.equal("outer ", r.result.error.message)
    assert.are.same({}, r.result.logs)
    assert.is_nil(r.result.value)
  end)

  it("fits '€' in 7 and not in 6", function()
    assert.are.equal("€", run('return "€"', 7).result.value)
    local r = run('return "€"', 6)
    assert.are.equal("output-limit", r.result.error.kind)
  end)

  it("holds 67108860 x's at the default cap and refuses one more", function()
    local r = run('return "x".repeat(67108860)')
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal(67108860, #r.result.value)
    assert.are.equal(67108864, r.result.stats.outputBytes)
    r = run('return "x".repeat(67108861)')
    assert.are.equal("output-limit", r.result.error.kind)
    assert.are.equal("outer output exceeded 67108864 bytes", r.result.error.message)
  end)

  it("keeps whole entries, then a prefix of the next, leaving room for the message", function()
    -- The message costs 33 as a JSON string, which leaves 67 for the logs.
    local r = run('console.log("aaaaaaaaaa"); console.log("bbbbbbbbbb"); console.log("c".repeat(100)); return 1', 100)
    assert.are.equal("output-limit", r.result.error.kind)
    assert.are.equal("outer output exceeded 100 bytes", r.result.error.message)
    local logs = r.result.logs
    assert.are.equal("aaaaaaaaaa", logs[1])
    assert.are.equal("bbbbbbbbbb", logs[2])
    assert.are.equal(3, #logs)
    assert.truthy(logs[3]:match("^c+$"))
    -- [ "a…", "b…", "c…" ] plus the message: exactly at the cap.
    local cost = 2 + 12 + 1 + 12 + 1 + (#logs[3] + 2) + (#r.result.error.message + 2)
    assert.are.equal(100, cost)
    assert.are.equal(100, r.result.stats.outputBytes)
  end)

  it("cuts a log prefix on a code point boundary", function()
    local r = run('console.log("€".repeat(50)); return 1', 60)
    assert.are.equal("output-limit", r.result.error.kind)
    local kept = r.result.logs[1] or ""
    assert.truthy(kept:match("^[\226\130\172]*$"))
    assert.are.equal(0, #kept % 3)
  end)

  it("counts a long string's escapes exactly (its cost comes from its JSON text)", function()
    -- 8 code points costing 1 + 2 + 2 + 2 + 6 + 2 + 3 + 4 = 22 bytes, 500 times: 11000,
    -- plus the quotes, plus the empty log list's 2.
    local program = 'return "a\\"\\\\\\n\\u0001é€😀".repeat(500)'
    local r = run(program, 11004)
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.are.equal(11004, r.result.stats.outputBytes)
    assert.are.equal(("a\"\\\n\1é€😀"):rep(500), r.result.value)
    assert.are.equal("output-limit", run(program, 11003).result.error.kind)
  end)

  it("counts escapes as JSON does", function()
    -- "\n" costs 2, a control 6: ["\n"] is 6 bytes, [\u0001] is 10.
    assert.are.equal(0, run('console.log("\\n"); return 1', 7).code)
    assert.are.equal(1, run('console.log("\\n"); return 1', 6).code)
    assert.are.equal(0, run('console.log("\\u0001"); return 1', 11).code)
    assert.are.equal(1, run('console.log("\\u0001"); return 1', 10).code)
  end)

  it("ends a log flood promptly with output-limit", function()
    local r = run('for (;;) console.log("x".repeat(100000))', 1000000)
    assert.are.equal("output-limit", r.result.error.kind)
  end)

  it("ends a flood written to the native stdout promptly with output-limit", function()
    local r = run('const fs = process.getBuiltinModule("fs"); for (;;) fs.writeSync(1, "x".repeat(100000));', 1000000)
    assert.are.equal("output-limit", r.result.error.kind)
    assert.is_true(r.result.stats.outputBytes <= 1000000)
  end)

  it("turns a failure whose message does not fit into output-limit", function()
    local r = run('throw "' .. string.rep("m", 100) .. '"', 50)
    assert.are.equal("output-limit", r.result.error.kind)
  end)
end)
