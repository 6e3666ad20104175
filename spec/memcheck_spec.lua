-- The host under valgrind (the sandbox's Node processes run natively): no
-- invalid access and no definite leak, on the paths a run can take.
local h = require("spec.helper")

local tools = h.fixtures .. "tools.lua"
local async = h.fixtures .. "async.lua"

local function memcheck(program, args)
  local prog = h.tmpfile(program, ".ts")
  local log = h.tmpfile()
  local r = h.cli_wrapped("valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite "
    .. "--show-leak-kinds=definite --trace-children=no --log-file=" .. log,
    "run --json " .. (args or "") .. " " .. h.q(prog))
  -- Valgrind 3.19 does not know pidfd_open (434) and pidfd_send_signal
  -- (424): it warns, the call fails with ENOSYS, and the host then awaits bwrap
  -- alone. The warning is not a finding about the host.
  local report = h.slurp(log):gsub("%-%-%d+%-%- WARNING: unhandled amd64%-linux syscall: 4[23]4\n", "")
    :gsub("%-%-%d+%-%- [^\n]*\n", "")
  os.remove(prog)
  os.remove(log)
  h.assert_clean()
  assert.are_not.equal(99, r.code, report)
  assert.are.equal("", report)
  return r
end

describe("the host under valgrind", function()
  it("is clean for a run that calls bindings and returns", function()
    local r = memcheck('console.log("x"); return await tools.inc({ v: 1 })', "--bindings " .. h.q(tools))
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
  end)

  it("is clean for failures: exception, lossy resolution, handler error", function()
    local r = memcheck([[
try { await tools.fn(null); } catch {}
try { await tools.failTable({ message: "m" }); } catch {}
throw new Error("boom");]], "--bindings " .. h.q(tools))
    assert.are.equal(1, r.code)
  end)

  it("is clean for a timeout with a waiting handler cancelled", function()
    local r = memcheck("await slow.forever(null)", "--bindings " .. h.q(async) .. " --set maxWallMs=500")
    assert.are.equal(1, r.code)
    assert.truthy(r.stdout:find('"kind":"timeout"', 1, true), r.stdout)
  end)

  it("is clean for output-limit and a program that does not strip", function()
    assert.are.equal(1, memcheck('console.log("abc"); return "xy"', "--set maxOutputBytes=10").code)
    assert.are.equal(1, memcheck("enum E { A }").code)
  end)

  it("is clean for concurrent waiting handlers and a runaway one", function()
    local r = memcheck([[
const r = await Promise.all(Array.from({ length: 50 }, (_, i) => slow.wait10({ i })));
try { await slow.spin(null); } catch {}
return r.length;]], "--bindings " .. h.q(async))
    assert.are.equal(0, r.code, r.stdout)
  end)
end)
