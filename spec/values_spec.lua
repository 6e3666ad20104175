-- Exact values across Lua (SPEC §6, the Lua paragraph; §7 reply messages),
-- through the real CLI: what a handler receives, every refusal in each
-- direction one by one, and round trips that JSON.stringify cannot tell apart.
local h = require("spec.helper")

local VALUES = h.fixtures .. "values.lua"

local function run(program)
  local r = h.run(program, { bindings = { VALUES } })
  h.assert_clean()
  assert.are.equal(0, r.code, r.stdout .. r.stderr)
  return r.result.value, r
end

describe("a handler receives", function()
  local function arrives(js, expected)
    it(js .. " as " .. expected, function()
      assert.are.equal(expected, run("return await values.describe(" .. js .. ")"))
    end)
  end

  arrives("null", "null")
  arrives("undefined", "null") -- a missing argument
  arrives("[null, { a: null }]", "array {[integer 1]=null, [integer 2]=object {a=null}}")
  arrives("[]", "array {}")
  arrives("{}", "object {}")
  arrives("[[], {}, [[]]]", "array {[integer 1]=array {}, [integer 2]=object {}, [integer 3]=array {[integer 1]=array {}}}")
  arrives("{ a: [], b: {} }", "object {a=array {}, b=object {}}")
  arrives("0", "integer 0")
  arrives("-1", "integer -1")
  arrives("2 ** 53", "integer 9007199254740992")
  arrives("-(2 ** 53)", "integer -9007199254740992")
  arrives("2 ** 53 - 1", "integer 9007199254740991")
  arrives("3.0", "integer 3")
  arrives("1e21", "float 1e+21")
  arrives("2 ** 53 + 2", "float 9007199254740994")
  arrives("1.5", "float 1.5")
  arrives("0.1", "float 0.10000000000000001")
  arrives("5e-324", "float 4.9406564584124654e-324")
  arrives("-1.5e-7", "float -1.4999999999999999e-07")
  arrives("true", "boolean true")
  arrives('"é😀"', "string c3a9f09f9880")
  arrives('"a\\u0000b"', "string 610062")
  -- A lone surrogate arrives as its three-byte (WTF-8) form: not valid UTF-8
  -- for utf8.len, but it goes back to the program unchanged (see below).
  arrives('"\\ud800"', "string eda080")
  arrives('"\\udc00\\ud800"', "string edb080eda080")
end)

describe("a resolution that JSON cannot carry exactly is refused", function()
  local refused = {
    intAbove = "an integer above 2^53",
    intBelow = "an integer below -2^53",
    maxinteger = "math.maxinteger",
    mininteger = "math.mininteger",
    nan = "NaN",
    inf = "inf",
    negInf = "-inf",
    negZero = "-0.0",
    badByte = "a string with a byte that is not UTF-8",
    overlong = "an overlong UTF-8 sequence",
    beyondUnicode = "a code point beyond U+10FFFF",
    truncated = "a truncated UTF-8 sequence",
    surrogatePair = "a surrogate pair encoded as two three-byte sequences (CESU-8)",
    badKey = "an object key that is not UTF-8",
    mixed = "a table with both sequence and string keys",
    sparse = "a sparse table",
    sparseArray = "a sparse table marked as an array",
    zeroKey = "a table with the key 0",
    booleanKey = "a table with a boolean key",
    floatKey = "a table with a float key",
    markedWithKeys = "a table marked as an array with string keys",
    func = "a function",
    userdata = "a userdata (io.stdout)",
    coroutine = "a coroutine",
    cycle = "a table that contains itself",
    arrayCycle = "an array that contains itself",
    deepNaN = "NaN deep inside",
  }
  local names = {}
  for name in pairs(refused) do names[#names + 1] = name end
  table.sort(names)
  for _, name in ipairs(names) do
    it(refused[name], function()
      local v = run(string.format([[
try { return ["resolved", await values.give(%q)]; }
catch (e: any) { return [e.message, e instanceof ValuesError, e.fn]; }]], name))
      assert.are.same({ "binding resolution must be lossless JSON", true, "give" }, v)
    end)
  end
end)

describe("a resolution at the edges is carried", function()
  local carried = {
    { "int53", "9007199254740992" },
    { "negInt53", "-9007199254740992" },
    { "floatBig", "1152921504606847000" },
    { "floatIntegral", "3" },
    { "tiny", "5e-324" },
    { "null", "null" },
    { "nothing", "null" },
    { "emptyArray", "[]" },
    { "emptyObject", "{}" },
    { "sequence", '["a","b"]' },
    { "shared", '{"a":[1],"b":[1]}' },
    { "loneSurrogate", '"\\ud800"' },
    { "nulByte", '"a\\u0000b"' },
  }
  for _, c in ipairs(carried) do
    it(c[1] .. " as " .. c[2], function()
      assert.are.equal(c[2], run(string.format("return JSON.stringify(await values.give(%q))", c[1])))
    end)
  end
end)

describe("arguments that JSON cannot carry exactly are refused before any handler", function()
  local cases = {
    { "NaN", "NaN" },
    { "-0", "-0" },
    { "Infinity", "Infinity" },
    { "-Infinity", "-Infinity" },
    { "a bigint", "10n" },
    { "a sparse array", "(() => { const a: any[] = [1]; a[2] = 3; return a; })()" },
    { "an array with a hole", "[1, , 3]" },
    { "an array with an extra property", "Object.assign([1, 2], { extra: 1 })" },
    { "a Date", "new Date(0)" },
    { "a Map", "new Map([[1, 2]])" },
    { "a Set", "new Set([1])" },
    { "a typed array", "new Uint8Array(2)" },
    { "an Error", 'new Error("e")' },
    { "a class instance", "new (class Point { x = 1; })()" },
    { "a cycle", "(() => { const o: any = { a: 1 }; o.self = o; return o; })()" },
    { "undefined in an array", "[undefined]" },
    { "undefined in an object", "{ a: undefined }" },
    { "a getter that throws", '{ get x() { throw new Error("getter"); } }' },
    { "a symbol", 'Symbol("s")' },
    { "a symbol key", '{ [Symbol("k")]: 1 }' },
    { "a function", "() => 1" },
    { "NaN deep inside", "{ a: [{ b: [NaN] }] }" },
    { "-0 deep inside", "[[[-0]]]" },
  }
  for _, c in ipairs(cases) do
    it(c[1], function()
      local v = run(string.format([[
const args: any = %s;
let outcome: any;
try { outcome = ["passed", await values.echo(args)]; }
catch (e: any) { outcome = [e.message, e instanceof ValuesError, e.fn]; }
return [outcome, await values.handled(null)];]], c[2]))
      assert.are.same({ { "binding arguments must be lossless JSON", true, "echo" }, 0 }, v)
    end)
  end

  it("but a shared, acyclic reference is fine (and copied)", function()
    local v = run([[
const s = { n: 1 };
const back = await values.echo({ a: s, b: s });
return [back, back.a === back.b, await values.handled(null)];]])
    assert.are.same({ { a = { n = 1 }, b = { n = 1 } }, false, 1 }, v)
  end)
end)

describe("a value that goes program -> Lua -> program", function()
  -- Each value is echoed by a handler; the program compares JSON.stringify
  -- of what it sent and what came back.
  local function round_trips(what, list)
    it("comes back byte-identical: " .. what, function()
      local v = run(string.format([[
const values_: any[] = %s;
const out: any[] = [];
for (const x of values_) {
  const back = await values.echo(x);
  if (JSON.stringify(back) !== JSON.stringify(x)) out.push([JSON.stringify(x), JSON.stringify(back)]);
}
return [values_.length, out];]], list))
      assert.are.same({}, v[2])
      assert.is_true(v[1] > 0)
    end)
  end

  round_trips("numbers", [==[[0.1, 0.30000000000000004, 0.1 + 0.2, 1e21, 1e-7, 5e-324, -5e-324, -1.5e-7,
    2 ** 53 - 1, -(2 ** 53 - 1), 2 ** 53, 2 ** 53 + 2, 2 ** 60, 1.7976931348623157e308, 123456789.125,
    0, 1, -1, 3.0, 100, 1e300, 2.2250738585072014e-308, 4.35, 0.000001, 1e-6 * 3]]==])
  round_trips("escapes", [==[[Array.from({ length: 32 }, (_, i) => String.fromCharCode(i)).join(""),
    '"quotes" and \\backslash\\ and /slash/', "\u2028 and \u2029", "\u007f\u0080\u00ff", "tab\tnew\nline\r"]]==])
  round_trips("astral and other characters", [==[["😀", "𝄞 music", "\u{10FFFF}", "\u{10000}", "é and é",
    "日本語", "\uFEFF bom", "\uFFFF"]]==])
  round_trips("lone surrogates", [==[["\ud800", "\udfff", "a\udc00b", "\udbff", "\ud800\ud800", "\udc00\ud800",
    "x\ud83d", "\ude00y"]]==])
  round_trips("nested empty arrays and objects", [==[[[], {}, [[]], [{}], { a: [] }, { a: {} }, [[[[]]]],
    { "": { "": [] } }, [[], {}, [[], {}]], { a: { b: { c: {} } } }]]==])
  round_trips("keys of every kind", [==[[{ "": 1 }, { "\u0000": 1 }, { "é": 1, "😀": 2 }, { "a\"b": 1 },
    { "\ud800": 1 }]]==])

  it("keeps its object keys in their order when the handler returns it unchanged, at every depth", function()
    local v = run([[
const sent = { b: 1, a: 2, "10": 3, "2": 4, "é": 5, z: [3, 1, { y: 1, x: 2 }], m: { q: { s: 1, r: 2 }, p: null } };
const rows = Array.from({ length: 5 }, (_, i) => ({ zz: i, aa: i * 2, mm: [i] }));
const mixed = [{ b: 1, a: 2 }, { d: 1, c: 2 }, { b: 1, a: 2 }, { b: 1 }, { a: 1, b: 2 }];
const same = (x: unknown) => values.echo(x).then((back) => JSON.stringify(back) === JSON.stringify(x));
return [await same(sent), await same(rows), await same(mixed), JSON.stringify(await values.echo(sent))];]])
    assert.are.same({ true, true, true, '{"2":4,"10":3,"b":1,"a":2,"é":5,"z":[3,1,{"y":1,"x":2}],"m":{"q":{"s":1,"r":2},"p":null}}' }, v)
  end)

  it("keeps the remaining keys in order and puts new keys after them, sorted", function()
    local v = run([[return JSON.stringify(await values.addRemove({ c: 1, b: 2, a: 3 }));]])
    assert.are.equal('{"c":1,"a":3,"aNew":2,"zNew":1}', v)
  end)

  it("returns the keys of an object built in Lua sorted by their bytes", function()
    -- A Lua table has no order: a new table's keys come back sorted
    -- (integer-like keys are then put first by JavaScript itself).
    local v = run([[
return JSON.stringify(await values.copy({ b: 1, a: 2, "10": 3, "2": 4, "é": 5, "z": [3, 1, 2] }));]])
    assert.are.equal('{"2":4,"10":3,"a":2,"b":1,"z":[3,1,2],"é":5}', v)
  end)

  it("stays exact when the remembered order is tampered with", function()
    local v = run([[return JSON.stringify(await values.tampered({ c: 1, b: 2, a: 3 }));]])
    assert.are.equal('{"c":1,"b":2,"a":3}', v)
  end)

  it("keeps its order through lunarun.json_encode too, and shows as a lunarun.object", function()
    local v = run([[return [await values.encode({ c: 1, b: [{ y: 1, x: 2 }], a: null }), await values.typeName({ b: 1, a: 2 })];]])
    assert.are.same({ '{"c":1,"b":[{"y":1,"x":2}],"a":null}', "lunarun.object" }, v)
  end)
end)
