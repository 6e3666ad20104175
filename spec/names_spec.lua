-- Name rules (SPEC §9): misuse, naming the file and what is wrong.
local h = require("spec.helper")

local prog

local function load(file)
  return h.cli("run --bindings " .. h.q(h.fixtures .. file) .. " " .. prog)
end

describe("names", function()
  setup(function() prog = h.tmpfile("return 1", ".ts") end)
  teardown(function() os.remove(prog) end)

  for _, case in ipairs({
    { "bad/reserved.lua", "reserved word", '"class"' },
    { "bad/python.lua", "reserved word", '"lambda"' },
    { "bad/underscore.lua", "reserved word", '"_"' },
    { "bad/classreserved.lua", "reserved word", '"None"' },
    { "bad/console.lua", "console", '"console"' },
    { "bad/badchar.lua", "[A-Za-z_]", '"my-tools"' },
    { "bad/dupglobal.lua", "already used", '"a"' },
    { "bad/dupclass.lua", "already used", '"Err"' },
    { "bad/classglobal.lua", "already used", '"a"' },
    { "bad/memberprop.lua", "memberNameProperty", '"message"' },
    { "bad/dunder.lua", "__x__", '"__tool__"' },
    { "bad/emptyprop.lua", "memberNameProperty", nil },
  }) do
    it("refuses " .. case[1], function()
      local r = load(case[1])
      assert.are.equal(2, r.code, r.stderr)
      assert.truthy(r.stderr:find(case[1], 1, true), r.stderr)
      assert.truthy(r.stderr:find(case[2], 1, true), r.stderr)
      if case[3] then assert.truthy(r.stderr:find(case[3], 1, true), r.stderr) end
      h.assert_clean()
    end)
  end

  it("accepts any string as a member name", function()
    local r = h.run('return await (tools as any)["has space"](null)', { bindings = { h.fixtures .. "tools.lua" } })
    assert.are.equal("space member", r.result.value)
  end)
end)
