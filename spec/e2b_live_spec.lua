-- A live smoke test of the E2B backend against E2B's real service. It runs
-- only when $E2B_API_KEY is set (and $E2B_API_URL does not point elsewhere):
-- this machine has no network, so the test suite skips it and says so.
-- $LUNARUN_E2B_TEMPLATE names a template with Node >= 22.13 (README, "E2B").
local h = require("spec.helper")

local key = os.getenv("E2B_API_KEY")
local redirected = (os.getenv("E2B_API_URL") or "") ~= "" or (os.getenv("E2B_SANDBOX_URL") or "") ~= ""

describe("the e2b backend against E2B's service", function()
  if not key or key == "" or redirected then
    pending("skipped: $E2B_API_KEY is not set (or E2B_API_URL points elsewhere), and there is no network here; "
      .. "set it to run the demo on E2B")
    return
  end

  it("runs the demo with its bindings", function()
    local template = os.getenv("LUNARUN_E2B_TEMPLATE") or "base"
    local args = "run --json --set backend=e2b --set e2bTemplate=" .. h.q(template) .. " --bindings "
      .. h.q(h.root .. "examples/tools.lua") .. " " .. h.q(h.root .. "examples/demo.ts")
    local remote, here = h.cli(args), h.cli(args:gsub("%-%-set backend=e2b ", ""))
    assert.are.equal(0, remote.code, remote.stdout .. remote.stderr)
    local a, b = h.json.decode(remote.stdout), h.json.decode(here.stdout)
    for _, k in ipairs({ "wallMs", "computeMs", "isolation" }) do a.stats[k], b.stats[k] = nil, nil end
    assert.are.same(b, a)
    assert.falsy(remote.stdout:find(key, 1, true))
  end)
end)
