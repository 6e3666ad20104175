-- `cmake --install` into a fresh prefix, then used as a new user would:
-- examples/embed.c and the README's C program built with pkg-config against
-- the installed header and library, the installed Lua module loaded by a
-- plain lua5.4 (examples/embed.lua and the README's script), the installed
-- CLI. The prefix is removed afterwards.
local h = require("spec.helper")
local json = h.json

local root = h.root_abs
local build = h.build_dir

-- Runs a shell command line in root with TMPDIR set to the spec's folder;
-- returns {code, stdout, stderr}.
local function sh(cmd)
  local out, err = h.tmpfile(), h.tmpfile()
  local _, _, code = os.execute("cd " .. h.q(root) .. " && (TMPDIR=" .. h.q(h.tmpdir) .. " " .. cmd ..
    ") >" .. out .. " 2>" .. err)
  local r = { code = code, stdout = h.slurp(out), stderr = h.slurp(err) }
  os.remove(out)
  os.remove(err)
  return r
end

-- The first fenced block of the given language after a heading of the README.
local function readme_block(heading, lang)
  local readme = h.slurp(root .. "/README.md")
  local at = readme:find("\n" .. heading .. "\n", 1, true)
  assert.is_truthy(at, "README has no " .. heading)
  local block = readme:match("```" .. lang .. "\n(.-)```", at)
  assert.is_truthy(block, "README has no " .. lang .. " block after " .. heading)
  return block
end

describe("the installed files", function()
  local prefix

  setup(function()
    prefix = h.tmpfile() .. "-prefix"
    local r = sh("cmake --install " .. h.q(build) .. " --prefix " .. h.q(prefix))
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
  end)

  teardown(function()
    if prefix then os.execute("rm -rf " .. h.q(prefix)) end
    h.assert_clean()
  end)

  local function cc(src, exe)
    local pc = "PKG_CONFIG_PATH=" .. h.q(prefix .. "/lib/pkgconfig")
    return sh("cc -Wall -Wextra -Werror " .. h.q(src) .. " $(" .. pc .. " pkg-config --cflags --libs lunarun)" ..
      " -Wl,-rpath," .. h.q(prefix .. "/lib") .. " -o " .. h.q(exe))
  end

  it("are in place: library, header, pkg-config file, Lua module, runner, CLI", function()
    for _, f in ipairs({ "bin/lunarun", "lib/liblunarun.so", "include/lunarun.h", "lib/pkgconfig/lunarun.pc",
      "lib/lua/5.4/lunarun.so", "share/lunarun/controller.mjs", "share/lunarun/worker.mjs", "share/lunarun/bindings/kv.lua" }) do
      assert.is_true(os.rename(prefix .. "/" .. f, prefix .. "/" .. f), f .. " is not installed")
    end
    local pc = "PKG_CONFIG_PATH=" .. h.q(prefix .. "/lib/pkgconfig") .. " pkg-config "
    local r = sh(pc .. "--modversion lunarun")
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("0.1.0\n", r.stdout)
    -- The pkg-config file names the prefix given at install time.
    r = sh(pc .. "--variable=libdir lunarun")
    assert.are.equal(prefix .. "/lib\n", r.stdout)
    r = sh(pc .. "--cflags --libs lunarun")
    assert.truthy(r.stdout:find("-I" .. prefix .. "/include", 1, true), r.stdout)
    assert.truthy(r.stdout:find("-L" .. prefix .. "/lib", 1, true), r.stdout)
    assert.truthy(r.stdout:find("-llunarun", 1, true), r.stdout)
  end)

  it("build examples/embed.c, which runs a program with a C binding and a Lua bindings file", function()
    local exe = h.tmpfile() .. "-embed"
    local r = cc("examples/embed.c", exe)
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    -- It uses the installed library, not the build tree's.
    r = sh("ldd " .. h.q(exe))
    assert.truthy(r.stdout:find(prefix .. "/lib/liblunarun.so", 1, true), r.stdout)

    r = sh(h.q(exe) .. " examples/tools.lua " ..
      h.q("console.log(await host.greeting(null));\nreturn await tools.inc({ v: 41 });"))
    h.assert_clean()
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    local res = json.decode(r.stdout)
    assert.are.equal(42, res.value)
    assert.are.same({ "hello from C" }, res.logs)
    assert.are.equal(2, res.stats.bindingCalls)

    r = sh(h.q(exe) .. " examples/tools.lua " .. h.q("await tools.stock({ fruit: 'kiwi' })"))
    h.assert_clean()
    assert.are.equal(1, r.code, r.stdout .. r.stderr)
    res = json.decode(r.stdout)
    assert.are.equal("exception", res.error.kind)
    assert.truthy(res.error.message:find("no such fruit: kiwi", 1, true), res.error.message)

    r = sh(h.q(exe) .. " /nonexistent/tools.lua 'return 1'")
    h.assert_clean()
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find("/nonexistent/tools.lua", 1, true), r.stderr)
    os.remove(exe)
  end)

  it("build the README's C program as written", function()
    local src = h.tmpfile(readme_block("### From C", "c"), ".c")
    local exe = h.tmpfile() .. "-hello"
    local r = cc(src, exe)
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    r = sh(h.q(exe))
    h.assert_clean()
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    local res = json.decode(r.stdout)
    assert.are.equal(42, res.value)
    assert.are.same({ "hi" }, res.logs)
    os.remove(src)
    os.remove(exe)
  end)

  it("load the Lua module from plain lua5.4: examples/embed.lua and the README's script", function()
    local cpath = "LUA_CPATH=" .. h.q(prefix .. "/lib/lua/5.4/?.so;;") .. " "
    local r = sh(cpath .. "lua5.4 examples/embed.lua")
    h.assert_clean()
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    local log, result = r.stdout:match("^log: ([^\n]*)\n({[^\n]*})\n$")
    assert.are.equal("Lisbon: clear", log, r.stdout)
    assert.are.equal(21, json.decode(result).value)

    local script = h.tmpfile(readme_block("### From Lua", "lua"), ".lua")
    r = sh(cpath .. "lua5.4 " .. h.q(script) ..
      " && " .. cpath .. "lua5.4 -e " .. h.q('print(package.searchpath("lunarun", package.cpath))'))
    os.remove(script)
    h.assert_clean()
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    local ok, value, res = r.stdout:match("^(%S+)\t(%S+)\t({[^\n]*})\n")
    assert.are.equal("true", ok, r.stdout)
    assert.are.equal("42", value)
    assert.are.equal(42, json.decode(res).value)
    -- The module that answered is the installed one.
    assert.truthy(r.stdout:find("\n" .. prefix .. "/lib/lua/5.4/lunarun.so\n", 1, true), r.stdout)
  end)

  it("include the CLI", function()
    local prog = h.tmpfile("return [1, 'two']", ".ts")
    local r = sh(h.q(prefix .. "/bin/lunarun") .. " run --json " .. h.q(prog))
    os.remove(prog)
    h.assert_clean()
    assert.are.equal(0, r.code, r.stdout .. r.stderr)
    assert.are.same({ 1, "two" }, json.decode(r.stdout).value)
  end)
end)
