-- Bindings files: loading them into normalized namespaces (every misuse
-- names the file, the namespace and the field), and running one call of a
-- handler (argument check, hooks, the handler) inside the call's coroutine.
local M = {}

local schema = require("lunarun.schema")
local q = schema.json_quote

local NAMESPACE_KEYS = { global = true, description = true, errorClass = true, policy = true, hooks = true, functions = true }
local NAMESPACE_KEY_LIST = "global, description, errorClass, policy, hooks, functions"
local FUNCTION_KEYS = {
  handler = true, description = true, args = true, result = true,
  readOnly = true, timeoutMs = true, maxCalls = true, maxBusyMs = true,
}
local FUNCTION_KEY_LIST = "handler, description, args, result, readOnly, timeoutMs, maxCalls, maxBusyMs"
local POLICY_KEYS = { readOnly = true, timeoutMs = true, maxCalls = true, maxBusyMs = true }
local POLICY_KEY_LIST = "readOnly, timeoutMs, maxCalls, maxBusyMs"

local function fail(where, msg)
  error(where .. ": " .. msg, 0)
end

local function key_text(k)
  return type(k) == "string" and q(k) or type(k)
end

-- readOnly is a boolean, the rest positive safe integers.
local function check_policy_value(where, field, key, v)
  if key == "readOnly" then
    if type(v) ~= "boolean" then fail(where, "field " .. q(field) .. " must be a boolean, got " .. type(v)) end
    return v
  end
  local n = math.tointeger(v)
  if type(v) ~= "number" or not n or n < 1 or n > 2 ^ 53 - 1 then
    fail(where, "field " .. q(field) .. " must be a positive integer, got " .. tostring(v))
  end
  return n
end

-- Checks one namespace as a bindings file gives it and returns it
-- normalized: { global, description, errorClass = {name, memberNameProperty},
-- hooks, members = { {name, handler, description, args, result, readOnly,
-- timeoutMs, maxCalls, maxBusyMs, global, hooks}, ... sorted by name } }.
-- Names are checked against SPEC §9 by the host when it adds the namespace.
local function normalize_namespace(ns, where, null_sentinel)
  if type(ns) ~= "table" then fail(where, "must be a table, got " .. type(ns)) end
  for k in pairs(ns) do
    if type(k) ~= "string" or not NAMESPACE_KEYS[k] then
      fail(where, "unknown field " .. key_text(k) .. " (known: " .. NAMESPACE_KEY_LIST .. ")")
    end
  end
  if type(ns.global) ~= "string" then fail(where, "field \"global\" must be a string, got " .. type(ns.global)) end
  where = where:gsub("namespace %d+$", "") .. "namespace " .. q(ns.global)
  if ns.description ~= nil and type(ns.description) ~= "string" then
    fail(where, "field \"description\" must be a string, got " .. type(ns.description))
  end
  local out = { global = ns.global, description = ns.description, members = {} }

  if ns.errorClass ~= nil then
    local ec = ns.errorClass
    if type(ec) ~= "table" then
      fail(where, "field \"errorClass\" must be a table {name=..., memberNameProperty=...}")
    end
    for k in pairs(ec) do
      if k ~= "name" and k ~= "memberNameProperty" then
        fail(where, "field \"errorClass\" has an unknown key " .. key_text(k) .. " (known: name, memberNameProperty)")
      end
    end
    if type(ec.name) ~= "string" then fail(where, "field \"errorClass.name\" must be a string, got " .. type(ec.name)) end
    if type(ec.memberNameProperty) ~= "string" then
      fail(where, "field \"errorClass.memberNameProperty\" must be a string, got " .. type(ec.memberNameProperty))
    end
    out.errorClass = { name = ec.name, memberNameProperty = ec.memberNameProperty }
  end

  local defaults = {}
  if ns.policy ~= nil then
    if type(ns.policy) ~= "table" then fail(where, "field \"policy\" must be a table, got " .. type(ns.policy)) end
    for k, v in pairs(ns.policy) do
      if not POLICY_KEYS[k] then
        fail(where, "field \"policy\" has an unknown key " .. key_text(k) .. " (known: " .. POLICY_KEY_LIST .. ")")
      end
      defaults[k] = check_policy_value(where, "policy." .. k, k, v)
    end
  end
  if ns.hooks ~= nil then
    if type(ns.hooks) ~= "table" then fail(where, "field \"hooks\" must be a table, got " .. type(ns.hooks)) end
    for k, v in pairs(ns.hooks) do
      if k ~= "before" and k ~= "after" then
        fail(where, "field \"hooks\" has an unknown key " .. key_text(k) .. " (known: before, after)")
      end
      if type(v) ~= "function" then fail(where, "field \"hooks." .. k .. "\" must be a function, got " .. type(v)) end
    end
    out.hooks = { before = ns.hooks.before, after = ns.hooks.after }
  end

  if type(ns.functions) ~= "table" then fail(where, "field \"functions\" must be a table of functions") end
  for name, f in pairs(ns.functions) do
    if type(name) ~= "string" then
      fail(where, "field \"functions\" has a " .. type(name) .. " key; member names are strings")
    end
    if name:find("\0", 1, true) or not utf8.len(name) then
      fail(where, "member name " .. q(name) .. " must be valid UTF-8 without NUL bytes")
    end
    local field = "functions" .. schema.path_key(name)
    local m = { name = name, global = ns.global, hooks = out.hooks }
    if type(f) == "table" then
      for k, v in pairs(f) do
        if type(k) ~= "string" or not FUNCTION_KEYS[k] then
          fail(where, "field " .. q(field) .. " has an unknown key " .. key_text(k) .. " (known: " .. FUNCTION_KEY_LIST .. ")")
        end
        if POLICY_KEYS[k] then m[k] = check_policy_value(where, field .. "." .. k, k, v) end
      end
      if type(f.handler) ~= "function" then
        fail(where, "field " .. q(field .. ".handler") .. " must be a function, got " .. type(f.handler))
      end
      if f.description ~= nil and type(f.description) ~= "string" then
        fail(where, "field " .. q(field .. ".description") .. " must be a string, got " .. type(f.description))
      end
      m.handler, m.description = f.handler, f.description
      if f.args ~= nil then m.args = schema.normalize(f.args, where .. ": " .. field .. ".args", null_sentinel) end
      if f.result ~= nil then m.result = schema.normalize(f.result, where .. ": " .. field .. ".result", null_sentinel) end
    elseif type(f) == "function" then
      m.handler = f
    else
      fail(where, "field " .. q(field) .. " must be a function or a table with a handler, got " .. type(f))
    end
    for k in pairs(POLICY_KEYS) do
      if m[k] == nil then m[k] = defaults[k] end
    end
    m.readOnly = m.readOnly or false
    m.maxBusyMs = m.maxBusyMs or 1000
    out.members[#out.members + 1] = m
  end
  table.sort(out.members, function(a, b) return schema.byte_less(a.name, b.name) end)
  return out
end

-- Normalizes what a bindings file returns (one namespace, or a list of
-- them); `where` names the source in messages ("bindings file x.lua").
function M.normalize(result, where)
  if type(result) ~= "table" then
    error(where .. " must return a namespace table or a list of them, got " .. type(result), 0)
  end
  local list = result.global ~= nil and { result } or result
  if #list == 0 then
    error(where .. " returned a table with neither \"global\" nor a list of namespaces", 0)
  end
  local out = {}
  local null = require("lunarun").null
  for i, ns in ipairs(list) do
    if type(ns) ~= "table" then
      error(where .. ": namespace " .. i .. " must be a table, got " .. type(ns), 0)
    end
    out[i] = normalize_namespace(ns, where .. ": namespace " .. i, null)
  end
  return out
end

-- Runs a bindings file; returns its namespaces, normalized.
function M.load(path)
  local chunk, err = loadfile(path, "t")
  if not chunk then error("bindings file " .. path .. ": " .. tostring(err), 0) end
  local ok, result = pcall(chunk)
  if not ok then
    local msg = type(result) == "string" and result or (type(result) == "table" and result.message) or tostring(result)
    error("bindings file " .. path .. " failed: " .. tostring(msg):match("[^\n]*"), 0)
  end
  return M.normalize(result, "bindings file " .. path)
end

-- Says what a hook raised as a handler's error would (a table's message),
-- and never raises itself (a __tostring may).
local function report(what, err)
  local msg = type(err) == "table" and type(rawget(err, "message")) == "string" and err.message
  if not msg then
    local ok, s = pcall(tostring, err)
    msg = ok and type(s) == "string" and s or ("a " .. type(err) .. " error value")
  end
  io.stderr:write("lunarun: ", what, " hook failed: ", msg, "\n")
end

local hrtime
local function now_ms()
  hrtime = hrtime or require("luv").hrtime
  return hrtime() / 1e6
end

-- One call, inside its coroutine: check the arguments, run the hooks around
-- the handler. Errors propagate as they are (tables keep their message).
local lunarun_module
function M.invoke(m, args, info)
  local lunarun = lunarun_module or require("lunarun")
  lunarun_module = lunarun
  if m.args then
    local ok, why = schema.check(m.args, args, "args", lunarun.null, lunarun.is_array)
    if not ok then
      local message = string.format("invalid arguments for \"%s.%s\": %s", m.global, m.name, why)
      info.args = args
      M.refused(m, info, message)
      error({ message = message }, 0)
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
  -- Only the handler's first value is the call's value.
  local done, value = pcall(m.handler, args)
  if hooks and hooks.after then
    local outcome = { ok = done, durationMs = now_ms() - t0 }
    if done then outcome.value = value else
      outcome.message = type(value) == "table" and value.message or tostring(value)
    end
    local ok, err = pcall(hooks.after, info, outcome)
    if not ok then report("after", err) end
  end
  if not done then error(value, 0) end
  return value
end

-- A call refused before its handler ran (declared arguments, maxCalls,
-- arguments that are not lossless JSON): only the after hook hears of it.
function M.refused(m, info, message)
  local hooks = m.hooks
  if hooks and hooks.after then
    local ok, err = pcall(hooks.after, info, { ok = false, message = message, durationMs = 0, refused = true })
    if not ok then report("after", err) end
  end
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
