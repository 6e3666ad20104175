-- Configuration rules (SPEC §2): misuse, refused before anything is spawned,
-- with a message that names the key.
local h = require("spec.helper")

local prog

local function set(...)
  local args = { "run" }
  for _, s in ipairs({ ... }) do args[#args + 1] = "--set " .. h.q(s) end
  args[#args + 1] = prog
  return h.cli(table.concat(args, " "))
end

describe("config", function()
  setup(function() prog = h.tmpfile("return 1", ".ts") end)
  teardown(function() os.remove(prog) end)

  local keys = { "computeMs", "maxWallMs", "maxOutputBytes", "maxOldGenerationSizeMb", "maxFrameBytes", "killGraceMs",
    "maxProcessMemoryMb" }

  for _, key in ipairs(keys) do
    it("refuses 0, negatives, fractions and beyond 2^53-1 for " .. key, function()
      for _, bad in ipairs({ "0", "-1", "1.5", "9007199254740992", "1e3", "", "x" }) do
        local r = set(key .. "=" .. bad)
        assert.are.equal(2, r.code, key .. "=" .. bad)
        assert.truthy(r.stderr:find(key, 1, true), r.stderr)
      end
      h.assert_clean()
    end)
  end

  it("accepts the largest safe integer", function()
    local r = set("computeMs=9007199254740991", "maxFrameBytes=9007199254740991")
    assert.are.equal(0, r.code, r.stderr)
  end)

  it("needs maxOutputBytes >= 4", function()
    assert.are.equal(2, set("maxOutputBytes=3").code)
    assert.are.equal(0, set("maxOutputBytes=4").code)
  end)

  it("needs maxWallMs <= 2147483647", function()
    local r = set("maxWallMs=2147483648")
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find("maxWallMs", 1, true))
    assert.are.equal(0, set("maxWallMs=2147483647").code)
  end)

  it("needs maxFrameBytes >= maxOutputBytes", function()
    local r = set("maxOutputBytes=1000", "maxFrameBytes=999")
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find("maxFrameBytes", 1, true))
    assert.truthy(r.stderr:find("maxOutputBytes", 1, true))
    assert.are.equal(0, set("maxOutputBytes=1000", "maxFrameBytes=1000").code)
  end)

  it("refuses an unknown key, naming it", function()
    local r = set("computeMS=5")
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find('"computeMS"', 1, true))
  end)

  it("refuses a nodePath that is not executable", function()
    local r = set("nodePath=/nonexistent/node")
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find("nodePath", 1, true))
  end)
end)
