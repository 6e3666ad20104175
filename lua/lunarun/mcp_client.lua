-- Upstream MCP servers as binding namespaces (bindings/mcp.lua uses this;
-- any bindings file may: require("lunarun.mcp_client").namespaces{...}).
--
-- Each server is a long-lived child process on the loop, spoken to over
-- stdio with the legacy handshake (initialize, 2025-11-25), which every
-- server speaks today, including `lunarun mcp`. It is started while the
-- bindings file loads (its tools become the namespace's members, their
-- inputSchema/outputSchema the declared types), kept for the calls of every
-- run, restarted for the next call when it dies, and stopped when the Lua
-- state closes (the runtime is disposed).
local uv = require("luv")
local lunarun = require("lunarun")
local schema = require("lunarun.schema")

local M = {}

local encode, decode, array, null = lunarun.json_encode, lunarun.json_decode, lunarun.array, lunarun.null
local close = lunarun.close_handle

local PROTOCOL_VERSION = "2025-11-25"
local DEFAULT_START_TIMEOUT_MS = 30000
local SERVER_KEYS = {
  command = true, args = true, env = true, cwd = true, description = true, errorClass = true,
  policy = true, hooks = true, tools = true, startTimeoutMs = true,
}
local SERVER_KEY_LIST = "command, args, env, cwd, description, errorClass, policy, hooks, tools, startTimeoutMs"

local function fail(message)
  error({ message = message }, 0)
end

-- ---- JSON Schema -> the declared-type language (lua/lunarun/schema.lua) ----

local TYPE_OK = { string = true, number = true, integer = true, boolean = true, ["null"] = true, array = true, object = true }

local function is_object(v)
  return type(v) == "table" and v ~= null and not lunarun.is_array(v)
end

local function is_scalar(v)
  local t = type(v)
  return v == null or t == "string" or t == "number" or t == "boolean"
end

-- Keeps what lunarun's subset can say (type, properties, required,
-- additionalProperties, items, enum, const, anyOf/oneOf, description) and
-- drops the rest ($ref, formats, bounds...): such a value is then checked
-- less strictly than the server will, never more.
local function convert(s, depth)
  if depth > 32 or not is_object(s) then return {} end
  local out = {}
  if type(s.description) == "string" then out.description = s.description end
  local alternatives = s.anyOf or s.oneOf
  if lunarun.is_array(alternatives) and #alternatives > 0 then
    out.anyOf = {}
    for i, sub in ipairs(alternatives) do out.anyOf[i] = convert(sub, depth + 1) end
    return out
  end
  if s.const ~= nil and is_scalar(s.const) then
    out.const = s.const
    return out
  end
  if lunarun.is_array(s.enum) and #s.enum > 0 then
    local values, seen = {}, {}
    for _, v in ipairs(s.enum) do
      if not is_scalar(v) then values = nil break end
      if not seen[v] then values[#values + 1] = v end
      seen[v] = true
    end
    if values then
      out.enum = values
      return out
    end
  end
  local names = {}
  if type(s.type) == "string" and TYPE_OK[s.type] then
    names = { s.type }
  elseif lunarun.is_array(s.type) then
    local seen = {}
    for _, n in ipairs(s.type) do
      if TYPE_OK[n] and not seen[n] then names[#names + 1] = n end
      seen[n] = true
    end
  elseif s.type == nil and is_object(s.properties) then
    names = { "object" }
  end
  if #names == 0 then return out end
  out.type = #names == 1 and names[1] or names
  for _, n in ipairs(names) do
    if n == "object" then
      if is_object(s.properties) then
        out.properties = {}
        for k, sub in pairs(s.properties) do out.properties[k] = convert(sub, depth + 1) end
      end
      if lunarun.is_array(s.required) then
        local req = {}
        for _, k in ipairs(s.required) do
          if type(k) == "string" and (not out.properties or out.properties[k]) then req[#req + 1] = k end
        end
        if #req > 0 then out.required = req end
      end
      if type(s.additionalProperties) == "boolean" then
        out.additionalProperties = s.additionalProperties
      elseif is_object(s.additionalProperties) then
        out.additionalProperties = convert(s.additionalProperties, depth + 1)
      end
    elseif n == "array" and is_object(s.items) then
      out.items = convert(s.items, depth + 1)
    end
  end
  return out
end

-- The declared type for a tool's JSON Schema, or nil when lunarun's subset
-- cannot hold it (then nothing is declared and nothing checked).
function M.declared_type(json_schema, null_for_empty)
  if not is_object(json_schema) then return nil end
  local decl = convert(json_schema, 0)
  -- Arguments that may all be left out may be omitted altogether
  -- (`await ns.tool()` sends null, which the call turns into {}).
  if null_for_empty and decl.type == "object" and not decl.required then
    decl = { anyOf = { decl, { type = "null" } } }
  end
  if not pcall(schema.normalize, decl, "schema", null) then return nil end
  return decl
end

-- ---- one server process -------------------------------------------------------

local Process = {}
Process.__index = Process

-- Every server process started in this state, for stop_blocking.
local processes = setmetatable({}, { __mode = "k" })

-- The environment of the server: lunarun's own plus the server's `env`.
local function environment(extra)
  if not extra then return nil end
  local env = uv.os_environ()
  for k, v in pairs(extra) do env[k] = v end
  local list = {}
  for k, v in pairs(env) do list[#list + 1] = k .. "=" .. tostring(v) end
  table.sort(list)
  return list
end

local function spawn(server)
  local proc = setmetatable({ server = server, pending = {}, next_id = 0, buffer = {} }, Process)
  proc.stdin, proc.stdout = uv.new_pipe(false), uv.new_pipe(false)
  local handle, pid = uv.spawn(server.command, {
    args = server.args,
    env = environment(server.env),
    cwd = server.cwd,
    stdio = { proc.stdin, proc.stdout, 2 }, -- its log lines go to lunarun's stderr
    detached = true,                         -- its own process group, ended as one
  }, function(code, signal)
    proc:exited(code, signal)
  end)
  if not handle then
    close(proc.stdin)
    close(proc.stdout)
    return nil, string.format("cannot start MCP server %q (%s): %s", server.name, server.command, tostring(pid))
  end
  proc.handle, proc.pid, proc.alive = handle, pid, true
  -- Made after the handles, so collected before them when the state closes
  -- (Lua finalizes in reverse order): ends the server and releases its
  -- handles while that is still safe.
  proc.sentinel = setmetatable({}, { __gc = function() proc:release() end })
  processes[proc] = true
  proc.stdout:read_start(function(err, data)
    if data then return proc:on_data(data) end
    close(proc.stdout)
  end)
  return proc
end

-- Writes without a request when the pipe takes the line at once (it
-- almost always does): a pending write's callback must not outlive the
-- state either.
function Process:send(msg)
  if not self.alive then return end
  local line = assert(encode(msg)) .. "\n"
  local n = self.stdin:try_write(line)
  if type(n) ~= "number" then n = 0 end
  if n < #line then self.stdin:write(line:sub(n + 1)) end
end

-- Sends a request; cb(err_message, result) once. Returns its id.
function Process:request(method, params, cb)
  self.next_id = self.next_id + 1
  local id = self.next_id
  if not self.alive then
    cb(self.death or "the MCP server is not running")
    return id
  end
  self.pending[id] = cb
  self:send({ jsonrpc = "2.0", id = id, method = method, params = params })
  return id
end

-- Gives up on a request: the server is told, its answer will be dropped.
function Process:cancel(id, reason)
  if self.pending[id] then
    self.pending[id] = nil
    self:send({ jsonrpc = "2.0", method = "notifications/cancelled", params = { requestId = id, reason = reason } })
  end
end

function Process:on_message(msg)
  if not is_object(msg) then return end
  if msg.method ~= nil and msg.id ~= nil then
    -- A request from the server (ping, roots/list...): only ping is ours.
    if msg.method == "ping" then
      self:send({ jsonrpc = "2.0", id = msg.id, result = {} })
    else
      self:send({ jsonrpc = "2.0", id = msg.id, error = { code = -32601, message = "Method not found" } })
    end
    return
  end
  if msg.id == nil then return end -- a notification
  local cb = self.pending[msg.id]
  if not cb then return end
  self.pending[msg.id] = nil
  if is_object(msg.error) then
    cb(string.format("MCP error %s: %s", tostring(msg.error.code), tostring(msg.error.message)))
  else
    cb(nil, msg.result)
  end
end

function Process:on_data(data)
  lunarun._lines(self.buffer, data, function(line)
    if not line:match("^%s*$") then
      local msg = decode(line)
      if msg ~= nil then self:on_message(msg) end
    end
  end)
end

function Process:exited(code, signal)
  self.alive = false
  self.death = string.format("MCP server %q exited (%s)", self.server.name,
    signal ~= 0 and ("signal " .. signal) or ("code " .. code))
  close(self.handle)
  close(self.stdin)
  local pending = self.pending
  self.pending = {}
  for _, cb in pairs(pending) do cb(self.death .. " before it answered") end
  if self.server.process == self then self.server.process = nil end
end

-- The state is closing: end the server's process group, let go of the
-- handles without callbacks.
function Process:release()
  if self.alive then
    self.alive = false
    uv.kill(-self.pid, "sigterm")
  end
  for _, h in ipairs({ self.stdin, self.stdout, self.handle }) do
    if not h:is_closing() then lunarun._release_handle(h) end
  end
end

function Process:stop()
  if self.alive then
    -- Closing its input is the protocol's way to ask; the group gets
    -- SIGTERM too, for servers that start helpers of their own.
    close(self.stdin)
    uv.kill(-self.pid, "sigterm")
  end
end

-- The handshake, then the tools (every page); cb(err, tools).
function Process:handshake(cb)
  self:request("initialize", {
    protocolVersion = PROTOCOL_VERSION,
    capabilities = {},
    clientInfo = { name = "lunarun", version = lunarun.version },
  }, function(err, result)
    if err then return cb(err) end
    if not is_object(result) then return cb("initialize returned no result") end
    self:send({ jsonrpc = "2.0", method = "notifications/initialized" })
    local tools = {}
    local function page(cursor)
      self:request("tools/list", cursor and { cursor = cursor } or {}, function(lerr, list)
        if lerr then return cb(lerr) end
        if not is_object(list) or not lunarun.is_array(list.tools) then return cb("tools/list returned no tools") end
        for _, t in ipairs(list.tools) do tools[#tools + 1] = t end
        if type(list.nextCursor) == "string" then return page(list.nextCursor) end
        cb(nil, tools)
      end)
    end
    page(nil)
  end)
end

-- ---- a server: its current process, restarted when needed ---------------------

local Server = {}
Server.__index = Server

-- Starts the process and waits for its tools, running the loop until then:
-- a bindings file loads before the loop runs (lunarun run, describe, mcp).
function Server:start_blocking()
  local proc, err = spawn(self)
  if not proc then
    uv.run("nowait") -- the failed spawn's close callbacks, before the state may close
    error(err, 0)
  end
  local done, tools
  proc:handshake(function(herr, list)
    done, err, tools = true, herr, list
  end)
  local timer = uv.new_timer()
  local timed_out = false
  timer:start(self.startTimeoutMs, 0, function() timed_out = true end)
  while not done and not timed_out do uv.run("once") end
  close(timer)
  -- Its close callback runs now: the state may be closed before the loop
  -- runs again (lunarun describe), and a luv callback must not outlive it.
  uv.run("nowait")
  if not done then err = string.format("no answer within %d ms", self.startTimeoutMs) end
  if err then
    proc:release()
    uv.run("nowait") -- close callbacks of a process that died, before the state may close
    error(string.format("MCP server %q: %s", self.name, err), 0)
  end
  proc.ready = true
  self.process = proc
  return tools
end

-- A live, initialized process for a call (inside the call's coroutine):
-- the one that runs, else a new one (the old one died).
function Server:ready_process()
  local proc = self.process
  if proc and proc.alive and proc.ready then return proc end
  if not proc or not proc.alive then
    local err
    proc, err = spawn(self)
    if not proc then fail(err) end
    self.process = proc
    proc.waiting = {}
    proc:handshake(function(herr)
      proc.ready = not herr
      proc.start_error = herr
      if herr then proc:stop() end
      local waiting = proc.waiting
      proc.waiting = {}
      for _, w in ipairs(waiting) do w() end
    end)
  end
  if not proc.ready then
    lunarun.wait(function(done)
      local waiter = function() done() end
      proc.waiting[#proc.waiting + 1] = waiter
      return function()
        for i, w in ipairs(proc.waiting) do
          if w == waiter then table.remove(proc.waiting, i) break end
        end
      end
    end)
    if not proc.ready then
      fail(string.format("MCP server %q could not be restarted: %s", self.name, tostring(proc.start_error or proc.death)))
    end
  end
  return proc
end

-- The text of a result's content blocks.
local function content_text(result)
  local parts = {}
  if lunarun.is_array(result.content) then
    for _, block in ipairs(result.content) do
      if is_object(block) and block.type == "text" and type(block.text) == "string" then parts[#parts + 1] = block.text end
    end
  end
  return table.concat(parts, "\n")
end

-- One tools/call, inside the binding call's coroutine.
function Server:call_tool(tool_name, args)
  local proc = self:ready_process()
  if args == nil or args == null then args = {} end
  local err, result = lunarun.wait(function(done)
    local id = proc:request("tools/call", { name = tool_name, arguments = args }, done)
    return function() proc:cancel(id, "the call was cancelled") end
  end)
  if err then fail(err) end
  if not is_object(result) then fail(string.format("MCP tool %q returned no result", tool_name)) end
  if result.isError == true then
    local text = content_text(result)
    fail(text ~= "" and text or string.format("MCP tool %q failed", tool_name))
  end
  if result.structuredContent ~= nil then return result.structuredContent end
  return content_text(result)
end

-- ---- the namespaces -------------------------------------------------------------

local function check_server(name, spec)
  local where = string.format("MCP server %q", tostring(name))
  if type(spec) ~= "table" then error(where .. " must be a table, got " .. type(spec), 0) end
  for k in pairs(spec) do
    if not SERVER_KEYS[k] then
      error(string.format("%s: unknown field %q (known: %s)", where, tostring(k), SERVER_KEY_LIST), 0)
    end
  end
  if type(spec.command) ~= "string" then error(where .. ": field \"command\" must be a string", 0) end
  if spec.args ~= nil and type(spec.args) ~= "table" then error(where .. ": field \"args\" must be a list of strings", 0) end
  if spec.env ~= nil and type(spec.env) ~= "table" then error(where .. ": field \"env\" must be a table", 0) end
end

local function default_error_class(name)
  return { name = name:sub(1, 1):upper() .. name:sub(2):gsub("_(%w)", string.upper) .. "Error", memberNameProperty = "tool" }
end

-- Ends every server process of this state and runs the loop until they have
-- exited (at most ms): for a state made only to describe the bindings,
-- whose loop nothing else uses, so no process is left unreaped.
function M.stop_blocking(ms)
  local left = {}
  for proc in pairs(processes) do
    if proc.alive then
      left[#left + 1] = proc
      proc:stop()
    end
  end
  if #left == 0 then return end
  local timer = uv.new_timer()
  local timed_out = false
  timer:start(ms or 2000, 0, function() timed_out = true end)
  local function all_gone()
    for _, proc in ipairs(left) do
      if proc.alive then return false end
    end
    return true
  end
  while not all_gone() and not timed_out do uv.run("once") end
  close(timer)
  uv.run("nowait")
end

-- The namespaces for servers = { name = { command, args = {...}, env =
-- {K = "v"}, cwd, description, errorClass, policy, hooks, tools = {
-- tool_name = { readOnly, timeoutMs, maxCalls, maxBusyMs } }, startTimeoutMs
-- } }: one namespace per server, named after it, one member per tool.
function M.namespaces(servers)
  if type(servers) ~= "table" then error("MCP servers must be a table {name = {command = ...}}", 2) end
  local names = {}
  for name, spec in pairs(servers) do
    check_server(name, spec)
    names[#names + 1] = name
  end
  table.sort(names)
  local list = {}
  for _, name in ipairs(names) do
    local spec = servers[name]
    local args = {}
    for i, a in ipairs(spec.args or {}) do args[i] = tostring(a) end
    local server = setmetatable({
      name = name, command = spec.command, args = args, env = spec.env, cwd = spec.cwd,
      startTimeoutMs = spec.startTimeoutMs or DEFAULT_START_TIMEOUT_MS,
    }, Server)
    local tools = server:start_blocking()
    local functions = {}
    for _, tool in ipairs(tools) do
      if is_object(tool) and type(tool.name) == "string" then
        local tool_name = tool.name
        local description = type(tool.description) == "string" and tool.description or nil
        if type(tool.title) == "string" and tool.title ~= "" then
          description = tool.title .. (description and (". " .. description) or "")
        end
        local annotations = is_object(tool.annotations) and tool.annotations or {}
        local fn = {
          description = description,
          args = M.declared_type(tool.inputSchema, true),
          result = M.declared_type(tool.outputSchema),
          readOnly = annotations.readOnlyHint == true or nil,
          handler = function(call_args)
            return server:call_tool(tool_name, call_args)
          end,
        }
        local override = spec.tools and spec.tools[tool_name]
        if type(override) == "table" then
          for k, v in pairs(override) do fn[k] = v end
        end
        functions[tool_name] = fn
      end
    end
    list[#list + 1] = {
      global = name,
      description = spec.description or string.format("The tools of the MCP server %q.", name),
      errorClass = spec.errorClass or default_error_class(name),
      policy = spec.policy,
      hooks = spec.hooks,
      functions = functions,
    }
  end
  return list
end

return M
