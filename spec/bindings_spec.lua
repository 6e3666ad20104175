-- Bindings from Lua files (SPEC §7, §10): calls, replies, error classes,
-- own-member lookup and exact values across Lua.
local h = require("spec.helper")

local tools = h.fixtures .. "tools.lua"
local plain = h.fixtures .. "plain.lua"

local function run(program, files)
  local r = h.run(program, { bindings = files or { tools } })
  h.assert_clean()
  return r
end

describe("bindings", function()
  it("answer calls with the handler's value", function()
    local r = run("return await tools.inc({ v: 41 })")
    assert.are.equal(42, r.result.value)
    assert.are.equal(1, r.result.stats.bindingCalls)
  end)

  it("handle many sequential and concurrent calls", function()
    local r = run([==[
let s = 0;
for (let i = 0; i < 500; i++) s += await tools.inc({ v: i });
const all = await Promise.all(Array.from({ length: 500 }, (_, i) => tools.inc({ v: i })));
return [s, all.length, all[499]];
]==])
    assert.are.same({ 125250, 500, 500 }, r.result.value)
    assert.are.equal(1000, r.result.stats.bindingCalls)
  end)

  it("reject with the namespace's error class, member name set", function()
    local r = run([==[
try { await tools.fail({ message: "nope" }); } catch (e: any) {
  return [e instanceof ToolCallError, e instanceof Error, e.name, e.message, e.toolName];
}]==])
    assert.are.same({ true, true, "ToolCallError", "nope", "fail" }, r.result.value)
  end)

  it("reject with a plain Error when no class is declared", function()
    local r = run([==[
try { await plain.boom(null); } catch (e: any) {
  return [e.constructor === Error, e.name, e.message];
}]==], { plain })
    assert.are.same({ true, "Error", "boom" }, r.result.value)
  end)

  it("turn every kind of Lua error into the call's rejection", function()
    local r = run([==[
const out: string[] = [];
try { await tools.failTable({ message: "from a table" }); } catch (e: any) { out.push(e.message); }
try { await tools.failOther(null); } catch (e: any) { out.push(e.message); }
try { await tools.failPlain(null); } catch (e: any) { out.push(e.message); }
try { await tools.fail({ message: "exact" }); } catch (e: any) { out.push(e.message); }
return out;]==])
    local v = r.result.value
    assert.are.equal("from a table", v[1])
    assert.are.equal('binding "tools.failOther" failed with a table error value', v[2])
    assert.truthy(v[3]:find("tools.lua:%d+: plain$"), v[3])
    assert.are.equal("exact", v[4])
  end)

  it("are only the declared members", function()
    local r = run("const t: any = tools; return [typeof t.nope, Object.keys(tools).length > 10]")
    assert.are.same({ "undefined", true }, r.result.value)
  end)

  it("look members up as own members only", function()
    local r = run([==[
return [
  await (tools as any)["__proto__"](null),
  await tools.constructor(null),
  await (tools as any)["has space"](null),
  Object.getPrototypeOf(tools),
  typeof (tools as any).toString,
];]==])
    assert.are.same({ "proto member", "constructor member", "space member", h.json.null, "undefined" },
      r.result.value)
  end)

  it("carry values exactly in both directions", function()
    local r = run([==[
const vals = [0.1, 0.30000000000000004, 1e21, 5e-324, 9007199254740991, -9007199254740991, 1.5,
  "esc \" \\ \n \t \u0001 \u2028", "astral 😀", "", true, false, null, [], {}, [[[]]], { a: { b: [1, "x"] } }];
const back = [];
for (const v of vals) back.push(await tools.echo(v));
return [JSON.stringify(back) === JSON.stringify(vals), back];
]==])
    assert.are.equal(true, r.result.value[1])
  end)

  it("give Lua integers, the null sentinel and marked arrays", function()
    local r = run([==[
return [
  await tools.luaType(1), await tools.luaType(1.5), await tools.luaType(2 ** 53),
  await tools.isNull(null), await tools.isArray([]), await tools.isArray({}),
  await tools.null(null), await tools.emptyArray(null), await tools.emptyObject(null),
  await tools.nothing(null), await tools.shared(null),
];]==])
    assert.truthy(r.stdout:find('"value":["integer","float","integer",true,true,false,null,[],{},null,{"a":[1],"b":[1]}]', 1, true),
      r.stdout)
  end)

  it("refuse lossy resolutions with 'binding resolution must be lossless JSON'", function()
    local r = run([==[
const out: string[] = [];
for (const f of ["bigInt", "nan", "inf", "fn", "mixed", "sparse", "badUtf8", "cycle"]) {
  try { await (tools as any)[f](null); out.push("passed " + f); } catch (e: any) { out.push(e.message); }
}
return out;]==])
    assert.are.equal(8, #r.result.value)
    for _, m in ipairs(r.result.value) do
      assert.are.equal("binding resolution must be lossless JSON", m)
    end
  end)

  it("carry depth 5000 both ways", function()
    local r = run([==[
let v: any = [];
for (let i = 0; i < 5000; i++) v = [v];
const back = await tools.echo(v);
let d = 0; let x = back; while (x.length) { x = x[0]; d++; }
const made = await tools.deep({ depth: 5000 });
let e = 0; x = made; while (x.length) { x = x[0]; e++; }
return [d, e];]==])
    assert.are.same({ 5000, 5000 }, r.result.value)
  end)

  it("fail the run with worker-exit when a reply would exceed maxFrameBytes (nothing is sent)", function()
    local r = h.run("try { await tools.big({ n: 5000 }); } catch {} return 1",
      { bindings = { tools }, sets = { "maxFrameBytes=1000", "maxOutputBytes=100" } })
    h.assert_clean()
    assert.are.equal("worker-exit", r.result.error.kind)
    assert.truthy(r.result.error.message:find("maxFrameBytes", 1, true) or r.result.error.message:find("frame", 1, true),
      r.result.error.message)
  end)

  it("send a missing argument as null", function()
    local r = run("return await (tools as any).isNull()")
    assert.are.equal(true, r.result.value)
  end)
end)
