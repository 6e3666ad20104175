-- The Lua module `require "lunarun"` (lunarun.so) as a rock, built by
-- CMake with LUNARUN_LUA_MODULE_ONLY (the module alone: no CLI, libraries
-- or tests). From a checkout:
--
--   luarocks --lua-version 5.4 make            # or --local, or --tree DIR
--
-- It needs Lua 5.4's headers, libuv, libcurl and luv for Lua 5.4 found by
-- pkg-config (Debian: liblua5.4-dev libuv1-dev libcurl4-openssl-dev
-- lua-luv-dev), CMake and a C compiler; at run time Node >= 22.13 (nodePath,
-- $LUNARUN_NODE or `node` on PATH), bubblewrap and util-linux's prlimit.
-- The version is CMakeLists.txt's project version (spec/rockspec_spec.lua
-- checks that they agree).
rockspec_format = "3.0"
package = "lunarun"
version = "0.1.0-1"
source = {
  -- No public repository yet: `luarocks make` builds the checkout it runs
  -- in and fetches nothing.
  url = "git+file://./lunarun",
}
description = {
  summary = "Run model-written TypeScript in a sandboxed Node worker, with host functions written in Lua",
  detailed = [[
lunarun runs one model-written TypeScript program per run in a fresh,
sandboxed Node worker and lets it call host functions ("bindings") written in
Lua. The module gives Lua programs runtimes on luv's loop:
lunarun.runtime(config), rt:add(namespace), rt:load(file), rt:run(program).
]],
}
dependencies = {
  "lua >= 5.4, < 5.5",
}
build = {
  type = "cmake",
  variables = {
    CMAKE_BUILD_TYPE = "Release",
    CMAKE_INSTALL_PREFIX = "$(PREFIX)",
    LUNARUN_LUA_MODULE_ONLY = "ON",
    LUNARUN_LUA_CMOD_DIR = "$(LIBDIR)",
  },
  -- The bindings that come with lunarun (clock, kv, http, mcp) and the
  -- docs, into the rock's folder (`luarocks show lunarun` names it).
  copy_directories = { "bindings", "docs" },
}
