-- The declared-type language (docs/BINDINGS.md): normalize, check, to_ts.
local spec_dir = debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./"
package.path = spec_dir .. "../lua/?.lua;" .. spec_dir .. "../lua/?/init.lua;" .. package.path
local schema = require("lunarun.schema")

-- Stand-ins for what the host's `require "lunarun"` gives.
local null = setmetatable({}, { __name = "null" })
local array_mt = {}
local function array(t) return setmetatable(t or {}, array_mt) end
local function is_array(t) return getmetatable(t) == array_mt end

local function check(decl, value, path)
  return schema.check(schema.normalize(decl, "T", null), value, path, null, is_array)
end

local function refuses(decl, message)
  local ok, err = pcall(schema.normalize, decl, "bindings file x.lua: namespace \"kv\": functions.get.args", null)
  assert.is_false(ok, "expected a refusal: " .. message)
  assert.are.equal("bindings file x.lua: namespace \"kv\": functions.get.args" .. message, err)
end

describe("schema.normalize", function()
  it("accepts every documented form", function()
    local forms = {
      "string", "number", "integer", "boolean", "null", "any", "array", "object",
      {}, { type = "any" }, { type = "string", description = "d" },
      { type = "array", items = "number" },
      { type = "object", properties = { k = "string" }, required = { "k" }, additionalProperties = false },
      { type = "object", additionalProperties = { type = "integer" } },
      { type = { "string", "null" } },
      { enum = { "a", "b", 1, 2.5, true, null } },
      { const = "x" },
      { type = "string", enum = { "a", "b" } },
      { anyOf = { "string", { type = "array", items = "string" } } },
      { type = { "object", "null" }, properties = { k = "string" } },
    }
    for _, decl in ipairs(forms) do
      assert.is_table(schema.normalize(decl, "T", null))
    end
  end)

  it("reads a string as a type name", function()
    assert.are.same({ kind = "number" }, schema.normalize("number", "T"))
    assert.are.same({ kind = "any" }, schema.normalize({}, "T"))
  end)

  it("refuses an unknown type name, naming the path", function()
    refuses({ type = "object", properties = { key = { type = "strin" } } },
      '.properties.key.type: unknown type "strin"')
    refuses("strin", ': unknown type "strin"')
    refuses({ type = "object", properties = { k = "strng" } }, '.properties.k: unknown type "strng"')
  end)

  it("refuses unknown keys inside a type", function()
    refuses({ type = "string", minLength = 1 },
      ': unknown key "minLength" (known: type, description, items, properties, required, additionalProperties, enum, const, anyOf)')
    refuses({ type = "object", properties = { ["odd key"] = { typ = "string" } } },
      '.properties["odd key"]: unknown key "typ" (known: type, description, items, properties, required, additionalProperties, enum, const, anyOf)')
    refuses({ "string" }, ": unknown key a number key (known: type, description, items, properties, required, additionalProperties, enum, const, anyOf)")
  end)

  it("refuses a type that is neither a table nor a name", function()
    refuses(42, ": a type must be a table or a type name, got number")
    refuses({ type = "array", items = true }, ".items: a type must be a table or a type name, got boolean")
    refuses({ type = "array", items = null }, '.items: JSON null is not a type (the null type is written "null")')
  end)

  it("refuses a bad type list", function()
    refuses({ type = {} }, ".type: must be a type name or a non-empty list of them")
    refuses({ type = { "string", "strin" } }, '.type[1]: unknown type "strin"')
    refuses({ type = { "string", "string" } }, '.type[1]: "string" is listed twice')
    refuses({ type = { "any", "null" } }, '.type[0]: "any" cannot be one of several types')
    refuses({ type = { "string", 3 } }, ".type[1]: must be a type name, got number")
    refuses({ type = true }, ".type: must be a type name or a list of them, got boolean")
  end)

  it("refuses required naming an absent property", function()
    refuses({ type = "object", properties = { key = "string" }, required = { "key", "kye" } },
      '.required[1]: names "kye", which is not among the properties')
    refuses({ type = "object", required = { "key" } }, '.required[0]: names "key", which is not among the properties')
    refuses({ type = "object", properties = { key = "string" }, required = { "key", "key" } },
      '.required[1]: "key" is listed twice')
    refuses({ type = "object", properties = { key = "string" }, required = "key" },
      ".required: must be a list of property names")
    refuses({ type = "object", properties = { key = "string" }, required = { 1 } },
      ".required[0]: must be a property name, got number")
  end)

  it("refuses keywords of another type", function()
    refuses({ type = "string", items = "string" }, '.items: only applies to type "array", not string')
    refuses({ items = "string" }, '.items: only applies to type "array"; add type = "array"')
    refuses({ type = "array", properties = {} }, '.properties: only applies to type "object", not array')
    refuses({ type = { "string", "null" }, required = {} }, '.required: only applies to type "object", not string | null')
    refuses({ type = "number", additionalProperties = false },
      '.additionalProperties: only applies to type "object", not number')
  end)

  it("refuses properties that are not a name = type map", function()
    refuses({ type = "object", properties = "k" }, ".properties: must be a table of name = type, got string")
    refuses({ type = "object", properties = { "k" } }, ".properties: property names must be strings, got a number key")
  end)

  it("refuses enum and const members that are not JSON scalars", function()
    refuses({ enum = { "a", {} } }, ".enum[1]: member must be a string, number, boolean or null, got table")
    refuses({ enum = { print } }, ".enum[0]: member must be a string, number, boolean or null, got function")
    refuses({ const = {} }, ".const: member must be a string, number, boolean or null, got table")
    refuses({ enum = { 0 / 0 } }, ".enum[0]: member must be a finite number")
    refuses({ enum = { math.huge } }, ".enum[0]: member must be a finite number")
    refuses({ enum = { 1 << 60 } }, ".enum[0]: member is an integer beyond ±2^53, which JSON does not carry exactly")
    refuses({ enum = { "a", "a" } }, '.enum[1]: "a" is listed twice')
    refuses({ enum = {} }, ".enum: must be a non-empty list of values")
    refuses({ enum = "a" }, ".enum: must be a non-empty list of values")
    refuses({ enum = { "a" }, const = "a" }, ": enum and const cannot be used together")
    refuses({ type = "string", enum = { "a", 1 } }, '.enum[1]: 1 is not of type string')
    refuses({ type = "integer", const = 1.5 }, ".const: 1.5 is not of type integer")
  end)

  it("takes JSON null in an enum only as the sentinel it is given", function()
    assert.is_table(schema.normalize({ enum = { null } }, "T", null))
    local ok, err = pcall(schema.normalize, { enum = { null } }, "T")
    assert.is_false(ok)
    assert.are.equal("T.enum[0]: member must be a string, number, boolean or null, got table", err)
  end)

  it("refuses a bad anyOf", function()
    refuses({ anyOf = {} }, ".anyOf: must be a non-empty list of types")
    refuses({ anyOf = { "string", "nul" } }, '.anyOf[1]: unknown type "nul"')
    refuses({ type = "string", anyOf = { "null" } }, ".anyOf: cannot be combined with type, enum or const (put them in the options)")
  end)

  it("refuses a description that is not a string", function()
    refuses({ type = "string", description = 1 }, ".description: must be a string, got number")
  end)

  it("refuses a type that contains itself", function()
    local t = { type = "array" }
    t.items = t
    local ok, err = pcall(schema.normalize, t, "T")
    assert.is_false(ok)
    assert.matches("nested more than 64 levels deep", err, 1, true)
  end)

  it("defaults where", function()
    local ok, err = pcall(schema.normalize, "strin")
    assert.is_false(ok)
    assert.are.equal('type: unknown type "strin"', err)
  end)
end)

describe("schema.check", function()
  it("checks strings, numbers and booleans", function()
    assert.is_true(check("string", "x"))
    assert.are.same({ false, "args: expected string, got number" }, { check("string", 1) })
    assert.is_true(check("number", 1))
    assert.is_true(check("number", 1.5))
    assert.are.same({ false, "args: expected number, got string" }, { check("number", "1") })
    assert.is_true(check("boolean", false))
    assert.are.same({ false, "args: expected boolean, got null" }, { check("boolean", null) })
  end)

  it("takes floats without a fraction as integers", function()
    assert.is_true(check("integer", 3))
    assert.is_true(check("integer", 3.0))
    assert.is_true(check("integer", -0x20000000000000))
    assert.are.same({ false, "args: expected integer, got 3.5" }, { check("integer", 3.5) })
    assert.are.same({ false, "args: expected integer, got string" }, { check("integer", "3") })
  end)

  it("knows null by the sentinel (and a missing value)", function()
    assert.is_true(check("null", null))
    assert.is_true(check("null", nil))
    assert.are.same({ false, "args: expected null, got object" }, { check("null", {}) })
    assert.are.same({ false, "args: expected string, got null" }, { check("string", null) })
    assert.are.same({ false, "args: expected object, got null" }, { check("object", nil) })
  end)

  it("tells arrays from objects by is_array", function()
    assert.is_true(check("array", array()))
    assert.is_true(check("array", array({ 1, "x" })))
    assert.are.same({ false, "args: expected array, got object" }, { check("array", {}) })
    assert.are.same({ false, "args: expected array, got object" }, { check("array", { 1, 2 }) })
    assert.is_true(check("object", {}))
    assert.is_true(check("object", { a = 1 }))
    assert.are.same({ false, "args: expected object, got array" }, { check("object", array()) })
    assert.are.same({ false, "args: expected object, got array" }, { check("object", array({ 1 })) })
  end)

  it("checks array items, naming the index from 0", function()
    local decl = { type = "array", items = "string" }
    assert.is_true(check(decl, array({ "a", "b" })))
    assert.are.same({ false, "args[1]: expected string, got number" }, { check(decl, array({ "a", 2 })) })
    assert.are.same({ false, "args[0]: expected string, got null" }, { check(decl, array({ null })) })
  end)

  it("checks properties, required and additionalProperties", function()
    local decl = {
      type = "object",
      properties = { key = "string", n = "integer", ["has space"] = "boolean" },
      required = { "key" },
      additionalProperties = false,
    }
    assert.is_true(check(decl, { key = "k" }))
    assert.is_true(check(decl, { key = "k", n = 1, ["has space"] = true }))
    assert.are.same({ false, "args.key: expected string, got number" }, { check(decl, { key = 1 }) })
    assert.are.same({ false, 'args: missing required property "key"' }, { check(decl, { n = 1 }) })
    assert.are.same({ false, 'args["has space"]: expected boolean, got string' },
      { check(decl, { key = "k", ["has space"] = "yes" }) })
    assert.are.same({ false, "args.n: expected integer, got null" }, { check(decl, { key = "k", n = null }) })
    assert.are.same({ false, 'args: unexpected property "b"' }, { check(decl, { key = "k", b = 1, c = 2 }) })
  end)

  it("lets extra properties through unless told otherwise", function()
    assert.is_true(check({ type = "object", properties = { a = "string" } }, { a = "x", b = 1 }))
    local typed = { type = "object", properties = { a = "string" }, additionalProperties = "number" }
    assert.is_true(check(typed, { a = "x", b = 1, c = 2.5 }))
    assert.are.same({ false, "args.c: expected number, got string" }, { check(typed, { a = "x", b = 1, c = "no" }) })
    assert.are.same({ false, 'args["odd key"]: expected number, got boolean' }, { check(typed, { ["odd key"] = true }) })
  end)

  it("checks type lists and anyOf", function()
    local nullable = { type = { "string", "null" } }
    assert.is_true(check(nullable, "x"))
    assert.is_true(check(nullable, null))
    assert.are.same({ false, "args: expected string or null, got number" }, { check(nullable, 1) })
    local any_of = { anyOf = { "string", { type = "array", items = "integer" } } }
    assert.is_true(check(any_of, "x"))
    assert.is_true(check(any_of, array({ 1, 2 })))
    -- One option takes arrays: its own message says where it failed.
    assert.are.same({ false, "args[1]: expected integer, got 2.5" }, { check(any_of, array({ 1, 2.5 })) })
    assert.are.same({ false, "args: expected string or array, got boolean" }, { check(any_of, true) })
    local nullable_object = { type = { "object", "null" }, properties = { k = "string" }, required = { "k" } }
    assert.is_true(check(nullable_object, null))
    assert.are.same({ false, 'args: missing required property "k"' }, { check(nullable_object, {}) })
  end)

  it("checks enum and const members by type and value", function()
    local decl = { enum = { "a", 1, true, null } }
    assert.is_true(check(decl, "a"))
    assert.is_true(check(decl, 1))
    assert.is_true(check(decl, 1.0))
    assert.is_true(check(decl, true))
    assert.is_true(check(decl, null))
    assert.are.same({ false, 'args: expected one of "a", 1, true, null, got "b"' }, { check(decl, "b") })
    assert.are.same({ false, "args: expected one of \"a\", 1, true, null, got false" }, { check(decl, false) })
    assert.are.same({ false, 'args: expected one of "a", 1, true, null, got object' }, { check(decl, {}) })
    assert.are.same({ false, 'args.mode: expected "x", got "y"' },
      { check({ type = "object", properties = { mode = { const = "x" } } }, { mode = "y" }) })
    local long = string.rep("é", 40)
    local ok, err = check({ enum = { "a" } }, long)
    assert.is_false(ok)
    assert.is_truthy(utf8.len(err), "a cut value stays UTF-8")
  end)

  it("accepts anything for {} and 'any'", function()
    for _, v in ipairs({ "x", 1, true, null, {}, array() }) do
      assert.is_true(check({}, v))
      assert.is_true(check({ type = "any" }, v))
    end
  end)

  it("names the path it is given, and nested paths", function()
    local decl = { type = "object", properties = { a = { type = "object", properties = {
      list = { type = "array", items = { type = "object", properties = { v = "number" } } } } } } }
    assert.are.same({ false, "result.a.list[2].v: expected number, got string" },
      { check(decl, { a = { list = array({ {}, { v = 1 }, { v = "x" } }) } }, "result") })
  end)

  it("does not descend into values where the type is any", function()
    -- 5000 levels: a recursive walk of the value would exhaust the C stack.
    local deep = array()
    for _ = 1, 5000 do deep = array({ deep }) end
    local decl = { type = "object", properties = { blob = {}, list = { type = "array" } } }
    assert.is_true(check(decl, { blob = deep, list = deep }))
    assert.is_true(check({ type = "object", additionalProperties = { type = "any" } }, { x = deep }))
    assert.is_true(check({ type = "array", items = {} }, deep))
  end)

  it("works without a null sentinel or is_array", function()
    local norm = schema.normalize({ type = "array", items = { type = { "string", "null" } } }, "T")
    assert.is_true(schema.check(norm, { "a", "b" }))
    assert.are.same({ false, "args: expected array, got object" }, { schema.check(norm, { a = 1 }) })
  end)
end)

describe("schema.accepts_null", function()
  it("says whether a missing argument would pass", function()
    local function accepts(decl) return schema.accepts_null(schema.normalize(decl, "T", null)) end
    assert.is_true(accepts({}))
    assert.is_true(accepts("null"))
    assert.is_true(accepts({ type = { "object", "null" } }))
    assert.is_true(accepts({ enum = { "a", null } }))
    assert.is_true(accepts({ anyOf = { "string", {} } }))
    assert.is_false(accepts("object"))
    assert.is_false(accepts({ enum = { "a" } }))
  end)
end)

describe("schema.to_ts", function()
  local function ts(decl, indent) return schema.to_ts(schema.normalize(decl, "T", null), indent) end

  it("maps scalar types", function()
    assert.are.equal("string", ts("string"))
    assert.are.equal("number", ts("number"))
    assert.are.equal("number", ts("integer"))
    assert.are.equal("boolean", ts("boolean"))
    assert.are.equal("null", ts("null"))
    assert.are.equal("unknown", ts({}))
    assert.are.equal("unknown", ts("any"))
  end)

  it("maps unions, enums and arrays", function()
    assert.are.equal("string | null", ts({ type = { "string", "null" } }))
    assert.are.equal("number", ts({ type = { "integer", "number" } }))
    assert.are.equal('"a" | "b\\"c" | 1 | 2.5 | -3 | true | null', ts({ enum = { "a", 'b"c', 1, 2.5, -3, true, null } }))
    assert.are.equal('"x"', ts({ const = "x" }))
    assert.are.equal("1", ts({ const = 1.0 }))
    assert.are.equal("string | number[]", ts({ anyOf = { "string", { type = "array", items = "number" } } }))
    assert.are.equal("unknown", ts({ anyOf = { "string", {} } }))
    assert.are.equal("unknown[]", ts("array"))
    assert.are.equal("(string | null)[]", ts({ type = "array", items = { type = { "string", "null" } } }))
    assert.are.equal('("a" | "b")[][]', ts({ type = "array", items = { type = "array", items = { enum = { "a", "b" } } } }))
  end)

  it("prints objects over several lines, with doc comments and ?", function()
    local decl = {
      type = "object",
      properties = {
        key = { type = "string", description = "The key." },
        ["has space"] = "number",
        ["quo\"te\n"] = "boolean",
        limit = { type = "integer", description = "At most\nthis many." },
        nested = { type = "object", properties = { a = "string" }, required = { "a" } },
        new = "string",
      },
      required = { "key" },
    }
    assert.are.equal(table.concat({
      "{",
      '    "has space"?: number;',
      "    /** The key. */",
      "    key: string;",
      "    /**",
      "     * At most",
      "     * this many.",
      "     */",
      "    limit?: number;",
      "    nested?: {",
      "      a: string;",
      "    };",
      '    "new"?: string;',
      '    "quo\\"te\\n"?: boolean;',
      "  }",
    }, "\n"), ts(decl, "  "))
  end)

  it("prints index signatures, widened to cover the declared properties", function()
    assert.are.equal("{\n  [key: string]: number;\n}", ts({ type = "object", additionalProperties = "number" }))
    assert.are.equal("{\n  a: string;\n  b?: boolean;\n  [key: string]: number | string | boolean | undefined;\n}",
      ts({ type = "object", properties = { a = "string", b = "boolean" }, required = { "a" }, additionalProperties = "number" }))
    assert.are.equal("{ [key: string]: unknown }", ts("object"))
    assert.are.equal("{ [key: string]: never }", ts({ type = "object", additionalProperties = false }))
    assert.are.equal("{\n  a: string;\n}", ts({ type = "object", properties = { a = "string" }, required = { "a" },
      additionalProperties = false }))
  end)

  it("keeps a */ in a description from ending the comment", function()
    local out = ts({ type = "object", properties = { a = { type = "string", description = "a */ b" } } })
    assert.are.equal("{\n  /** a *\\/ b */\n  a?: string;\n}", out)
  end)
end)
