-- Bindings files: loading them into normalized namespaces (every misuse
-- names the file, the namespace and the field), and running one call of a
-- handler (argument check, hooks, the handler) inside the call's coroutine.
local M = {}

local policy_keys = { readOnly = "boolean", timeoutMs = "integer", maxCalls = "integer", maxBusyMs = "integer" }
local namespace_keys = { global = true, description = true, errorClass = true, policy = true, hooks = true,
  functions = true }
local function_keys = { handler = true, description = true, args = true, result = true }
for k in pairs(policy_keys) do function_keys[k] = true end

local function fail(where, field, msg)
  error(string.format("%s: field \"%s\" %s", where, field, msg), 0)
end

local function check_policy_value(where, field, key, value)
  local want = policy_keys[key]
  if want == "boolean" then
    if type(value) ~= "boolean" then fail(where, field, "must be true or false") end
  elseif math.type(value) ~= "integer" and not (type(value) == "number" and value == math.floor(value)) then
    fail(where, field, "must be a positive integer")
  elseif value < 1 or value > 9007199254740991 then
    fail(where, field, "must be a positive integer (1 .. 2^53-1)")
  end
  if want == "integer" then return math.tointeger(value) end
  return value
end

-- Only keys in `allowed` may appear; a typo must not silently drop a setting.
local function check_keys(t, allowed, where, prefix)
  for k in pairs(t) do
    if type(k) ~= "string" or not allowed[k] then
      local names = {}
      for name in pairs(allowed) do names[#names + 1] = name end
      table.sort(names)
      fail(where, prefix .. tostring(k), "is not known (known: " .. table.concat(names, ", ") .. ")")
    end
  end
end

local schema_mod
local function schema()
  schema_mod = schema_mod or require("lunarun.schema")
  return schema_mod
end

local function normalize_namespace(ns, where)
  if type(ns) ~= "table" then error(where .. " must be a table, got " .. type(ns), 0) end
  check_keys(ns, namespace_keys, where, "")
  if type(ns.global) ~= "string" then fail(where, "global", "must be a string") end
  where = where:gsub("namespace %d+$", "namespace \"" .. ns.global .. "\"")
  local out = { global = ns.global, members = {} }
  if ns.description ~= nil then
    if type(ns.description) ~= "string" then fail(where, "description", "must be a string") end
    out.description = ns.description
  end
  if ns.errorClass ~= nil then
    local ec = ns.errorClass
    if type(ec) ~= "table" then fail(where, "errorClass", "must be a table {name=..., memberNameProperty=...}") end
    check_keys(ec, { name = true, memberNameProperty = true }, where, "errorClass.")
    if type(ec.name) ~= "string" then fail(where, "errorClass.name", "must be a string") end
    if type(ec.memberNameProperty) ~= "string" then fail(where, "errorClass.memberNameProperty", "must be a string") end
    out.errorClass = { name = ec.name, memberNameProperty = ec.memberNameProperty }
  end
  local defaults = {}
  if ns.policy ~= nil then
    if type(ns.policy) ~= "table" then fail(where, "policy", "must be a table") end
    check_keys(ns.policy, policy_keys, where, "policy.")
    for k, v in pairs(ns.policy) do defaults[k] = check_policy_value(where, "policy." .. k, k, v) end
  end
  if ns.hooks ~= nil then
    if type(ns.hooks) ~= "table" then fail(where, "hooks", "must be a table {before=fn, after=fn}") end
    check_keys(ns.hooks, { before = true, after = true }, where, "hooks.")
    for k, v in pairs(ns.hooks) do
      if type(v) ~= "function" then fail(where, "hooks." .. k, "must be a function") end
    end
    out.hooks = { before = ns.hooks.before, after = ns.hooks.after }
  end
  if type(ns.functions) ~= "table" then fail(where, "functions", "must be a table of functions") end
  for name, f in pairs(ns.functions) do
    if type(name) ~= "string" then
      error(string.format("%s: field \"functions\" has a %s key; member names are strings", where, type(name)), 0)
    end
    if name:find("\0", 1, true) then fail(where, "functions", "has a member name with a NUL byte") end
    local field = "functions." .. name
    local m = { name = name, global = ns.global }
    if type(f) == "function" then
      m.handler = f
    elseif type(f) == "table" then
      check_keys(f, function_keys, where, field .. ".")
      if type(f.handler) ~= "function" then fail(where, field .. ".handler", "must be a function") end
      m.handler = f.handler
      if f.description ~= nil then
        if type(f.description) ~= "string" then fail(where, field .. ".description", "must be a string") end
        m.description = f.description
      end
      local label = where .. ": field \"" .. field
      if f.args ~= nil then m.args = schema().normalize(f.args, label .. ".args\"") end
      if f.result ~= nil then m.result = schema().normalize(f.result, label .. ".result\"") end
      for k in pairs(policy_keys) do
        if f[k] ~= nil then m[k] = check_policy_value(where, field .. "." .. k, k, f[k]) end
      end
    else
      fail(where, field, "must be a function or a table with a handler, got " .. type(f))
    end
    for k in pairs(policy_keys) do
      if m[k] == nil then m[k] = defaults[k] end
    end
    if m.readOnly == nil then m.readOnly = false end
    m.maxBusyMs = m.maxBusyMs or 1000
    m.hooks = out.hooks
    out.members[#out.members + 1] = m
  end
  table.sort(out.members, function(a, b) return a.name < b.name end)
  return out
end

-- Runs a bindings file; returns its namespaces, normalized.
function M.load(path)
  local chunk, err = loadfile(path, "t")
  if not chunk then error("bindings file " .. path .. ": " .. err, 0) end
  local ok, result = pcall(chunk)
  if not ok then
    local msg = type(result) == "string" and result or (type(result) == "table" and result.message) or tostring(result)
    error("bindings file " .. path .. " failed: " .. tostring(msg):match("[^\n]*"), 0)
  end
  if type(result) ~= "table" then
    error("bindings file " .. path .. " must return a namespace table or a list of them, got " .. type(result), 0)
  end
  local list = result.global ~= nil and { result } or result
  if #list == 0 then
    error("bindings file " .. path .. " returned a table with neither \"global\" nor a list of namespaces", 0)
  end
  local out = {}
  for i, ns in ipairs(list) do
    out[i] = normalize_namespace(ns, "bindings file " .. path .. ": namespace " .. i)
  end
  return out
end

local function report(what, err)
  io.stderr:write("lunarun: ", what, " hook failed: ", tostring(err), "\n")
end

local hrtime
local function now_ms()
  hrtime = hrtime or require("luv").hrtime
  return hrtime() / 1e6
end

-- One call, inside its coroutine: check the arguments, run the hooks around
-- the handler. Errors propagate as they are (tables keep their message).
function M.invoke(m, args, info)
  local lunarun = require("lunarun")
  if m.args then
    local ok, why = schema().check(m.args, args, "args", lunarun.null, lunarun.is_array)
    if not ok then
      error({ message = string.format("invalid arguments for \"%s.%s\": %s", m.global, m.name, why) }, 0)
    end
  end
  local hooks = m.hooks
  if hooks and hooks.before then
    info.args = args
    local ok, err = pcall(hooks.before, info)
    if not ok then report("before", err) end
  end
  local t0 = now_ms()
  info.startedMs = t0
  local res = table.pack(pcall(m.handler, args))
  if hooks and hooks.after then
    local outcome = { ok = res[1], durationMs = now_ms() - t0 }
    if res[1] then outcome.value = res[2] else
      outcome.message = type(res[2]) == "table" and res[2].message or tostring(res[2])
    end
    local ok, err = pcall(hooks.after, info, outcome)
    if not ok then report("after", err) end
  end
  if not res[1] then error(res[2], 0) end
  return res[2]
end

-- A call that ended without its handler finishing (timeout, run over).
function M.cancelled(m, info, reason)
  local hooks = m.hooks
  if hooks and hooks.after then
    local ok, err = pcall(hooks.after, info, { ok = false, message = reason, durationMs = info.startedMs and now_ms() - info.startedMs or 0,
      cancelled = true })
    if not ok then report("after", err) end
  end
end

return M
