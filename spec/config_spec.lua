-- Configuration rules (SPEC §2): misuse, refused before anything is spawned,
-- with a message that names the key.
local h = require("spec.helper")

local prog

local function set(...)
  local args = { "run" }
  for _, s in ipairs({ ... }) do args[#args + 1] = "--set " .. h.q(s) end
  args[#args + 1] = prog
  return h.cli(table.concat(args, " "))
end

describe("config", function()
  setup(function() prog = h.tmpfile("return 1", ".ts") end)
  teardown(function() os.remove(prog) end)

  local keys = { "computeMs", "maxWallMs", "maxOutputBytes", "maxOldGenerationSizeMb", "maxFrameBytes", "killGraceMs",
    "maxProcessMemoryMb", "tmpMb", "maxProcesses", "poolIdleMs" }

  for _, key in ipairs(keys) do
    it("refuses 0, negatives, fractions and beyond 2^53-1 for " .. key, function()
      for _, bad in ipairs({ "0", "-1", "1.5", "9007199254740992", "1e3", "", "x" }) do
        local r = set(key .. "=" .. bad)
        assert.are.equal(2, r.code, key .. "=" .. bad)
        assert.truthy(r.stderr:find(key, 1, true), r.stderr)
      end
      h.assert_clean()
    end)
  end

  it("accepts the largest safe integer", function()
    local r = set("computeMs=9007199254740991", "maxFrameBytes=9007199254740991")
    assert.are.equal(0, r.code, r.stderr)
  end)

  it("needs maxOutputBytes >= 4", function()
    assert.are.equal(2, set("maxOutputBytes=3").code)
    assert.are.equal(0, set("maxOutputBytes=4").code)
  end)

  it("needs maxWallMs <= 2147483647", function()
    local r = set("maxWallMs=2147483648")
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find("maxWallMs", 1, true))
    assert.are.equal(0, set("maxWallMs=2147483647").code)
  end)

  it("needs maxFrameBytes >= maxOutputBytes", function()
    local r = set("maxOutputBytes=1000", "maxFrameBytes=999")
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find("maxFrameBytes", 1, true))
    assert.truthy(r.stderr:find("maxOutputBytes", 1, true))
    assert.are.equal(0, set("maxOutputBytes=1000", "maxFrameBytes=1000").code)
  end)

  it("refuses an unknown key, naming it", function()
    local r = set("computeMS=5")
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find('"computeMS"', 1, true))
  end)

  it("takes poolSize 0 and refuses negatives and fractions for it", function()
    assert.are.equal(0, set("poolSize=0").code)
    for _, bad in ipairs({ "-1", "1.5", "9007199254740992", "", "x" }) do
      local r = set("poolSize=" .. bad)
      assert.are.equal(2, r.code, bad)
      assert.truthy(r.stderr:find("poolSize must be a non-negative safe integer", 1, true), r.stderr)
    end
  end)

  it("takes isolation, network and allowChildProcesses as their words only", function()
    assert.are.equal(0, set("isolation=none", "network=host", "allowChildProcesses=false").code)
    assert.are.equal(0, set("isolation=bwrap", "network=none", "allowChildProcesses=true").code)
    local cases = {
      { "isolation=docker", 'config: isolation must be "bwrap" or "none", got "docker"' },
      { "network=all", 'config: network must be "none" or "host", got "all"' },
      { "allowChildProcesses=yes", 'config: allowChildProcesses must be a boolean (true or false), got "yes"' },
      { "mounts=/x", "config: mounts must be a list of" },
    }
    for _, c in ipairs(cases) do
      local r = set(c[1])
      assert.are.equal(2, r.code, c[1])
      assert.truthy(r.stderr:find(c[2], 1, true), r.stderr)
    end
    h.assert_clean()
  end)

  it("lists the new keys when a key is unknown", function()
    local r = set("tmpMB=5")
    assert.are.equal(2, r.code)
    for _, k in ipairs({ "isolation", "network", "tmpMb", "maxProcesses", "allowChildProcesses", "mounts", "poolSize",
      "poolIdleMs" }) do
      assert.truthy(r.stderr:find(k, 1, true), k .. ": " .. r.stderr)
    end
  end)

  describe("mounts (in a config file)", function()
    local function with_config(text)
      local cfg = h.tmpfile(text, ".lua")
      local r = h.cli("run --config " .. h.q(cfg) .. " " .. h.q(prog))
      os.remove(cfg)
      return r
    end

    it("takes a list of { host, at, write }", function()
      local r = with_config(string.format('return { mounts = { { host = %q, at = "/data" }, ' ..
        '{ host = %q, at = "/srv/out", write = true } } }', h.tmpdir, h.tmpdir))
      assert.are.equal(0, r.code, r.stderr)
    end)

    local cases = {
      { 'return { mounts = { { host = "relative", at = "/data" } } }', 'mounts[1]: host "relative" must be an absolute path' },
      { 'return { mounts = { { host = "/nonexistent-lunarun", at = "/data" } } }', 'mounts[1]: host "/nonexistent-lunarun" does not exist' },
      { 'return { mounts = { { host = "/usr", at = "data" } } }', 'mounts[1]: at "data" must be an absolute path' },
      { 'return { mounts = { { host = "/usr", at = "/" } } }', 'mounts[1]: at "/" is not allowed' },
      { 'return { mounts = { { host = "/usr", at = "/tmp" } } }', 'mounts[1]: at "/tmp" is not allowed' },
      { 'return { mounts = { { host = "/usr", at = "/a/../tmp" } } }', 'mounts[1]: at "/a/../tmp" must be an absolute path' },
      { 'return { mounts = { { host = "/usr", at = "/proc/x" } } }', 'at "/proc/x" is not allowed (under /proc' },
      { 'return { mounts = { { host = "/usr", at = "/dev" } } }', 'at "/dev" is not allowed (under /dev' },
      { 'return { mounts = { { host = "/usr", at = "/usr/local/x" } } }', 'is not allowed (under /usr' },
      { 'return { mounts = { { host = "/usr", at = "/opt/lunarun" } } }', 'is not allowed (under /opt/lunarun' },
      { 'return { mounts = { { host = "/usr", at = "/opt/node/bin" } } }', 'is not allowed (under /opt/node' },
      { 'return { mounts = { { host = "/usr", at = "/data", writable = true } } }', 'mounts[1]: unknown field "writable"' },
      { 'return { mounts = { { host = "/usr", at = "/data", write = "yes" } } }', "mounts[1].write must be a boolean" },
      { 'return { mounts = { { host = "/usr" } } }', "mounts[1] needs at" },
      { 'return { mounts = { "/usr" } }', "mounts[1] must be a table" },
      { 'return { mounts = { x = { host = "/usr", at = "/data" } } }', "mounts must be a list" },
      { 'return { mounts = "/usr" }', "mounts must be a list of" },
      { 'return { allowChildProcesses = "false" }', 'allowChildProcesses must be a boolean (true or false), got string "false"' },
      { 'return { isolation = true }', 'isolation must be "bwrap" or "none", got a boolean' },
      { 'return { tmpMb = true }', "tmpMb must be a number, got a boolean" },
    }
    for _, c in ipairs(cases) do
      it("refuses " .. c[1], function()
        local r = with_config(c[1])
        assert.are.equal(2, r.code, r.stderr)
        assert.truthy(r.stderr:find(c[2], 1, true), r.stderr)
      end)
    end
  end)

  it("refuses a nodePath that is not executable", function()
    local r = set("nodePath=/nonexistent/node")
    assert.are.equal(2, r.code)
    assert.truthy(r.stderr:find("nodePath", 1, true))
  end)
end)
