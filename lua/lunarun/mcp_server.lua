-- `lunarun mcp`: a Model Context Protocol server on stdio whose `run` tool
-- runs one program per call on the runtime the CLI made (core/lua_mcp.c
-- hands it over). Dual-era, as the specification's revision 2026-07-28
-- describes (basic/versioning.mdx): a request whose `_meta` names a protocol
-- version is served statelessly; `initialize` switches the process to the
-- legacy revisions (2025-11-25 and earlier) for requests without one.
-- One JSON-RPC message per line; only this file writes to the protocol's
-- descriptor.
local uv = require("luv")
local lunarun = require("lunarun")

local M = {}

local encode, decode, array, null = lunarun.json_encode, lunarun.json_decode, lunarun.array, lunarun.null

local MODERN_VERSIONS = { "2026-07-28" }
local LEGACY_VERSIONS = { "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05" }
local META_VERSION = "io.modelcontextprotocol/protocolVersion"
local META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
local META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"

local PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR =
  -32700, -32600, -32601, -32602, -32603
local UNSUPPORTED_PROTOCOL_VERSION = -32022

-- Runs at once beyond which calls wait their turn (in arrival order).
local MAX_CONCURRENT_RUNS = 4
-- Progress: logs are batched into one notification per interval; a run
-- that logs nothing still gets one every heartbeat, so the client (and
-- whoever watches it) sees that it is alive.
local PROGRESS_INTERVAL_MS = 250
local HEARTBEAT_MS = 10000
-- Longest message of one progress notification (the result has every log).
local PROGRESS_MESSAGE_MAX = 4000
-- Declarations longer than this are served by a `describe` tool instead of
-- sitting in the `run` tool's description.
local DESCRIPTION_INLINE_MAX = 8192
local LIMIT_KEYS = { "computeMs", "maxWallMs", "maxOutputBytes", "maxOldGenerationSizeMb" }
local LIMIT_MIN = { maxOutputBytes = 4 }
local KINDS = { "exception", "timeout", "abort", "worker-exit", "invalid-output", "output-limit", "invalid-arguments" }

local function contains(list, v)
  for _, x in ipairs(list) do
    if x == v then return true end
  end
  return false
end

local function concat_lists(a, b)
  local out = {}
  for _, x in ipairs(a) do out[#out + 1] = x end
  for _, x in ipairs(b) do out[#out + 1] = x end
  return out
end

-- ---- the catalog of the loaded bindings --------------------------------------

-- Runs in a Lua state of its own (core/lua_mcp.c): the declarations of the
-- bindings files, all at once and per namespace, and what the tool's
-- annotations need, as JSON text for the server's state.
function M.catalog(paths)
  local loader = require("lunarun.loader")
  local describe = require("lunarun.describe")
  local all, namespaces = {}, {}
  local read_only = true
  for _, path in ipairs(paths) do
    for _, ns in ipairs(loader.load(path)) do
      all[#all + 1] = ns
      local ns_read_only = true
      for _, m in ipairs(ns.members) do
        if not m.readOnly then ns_read_only = false end
      end
      read_only = read_only and ns_read_only
      namespaces[#namespaces + 1] = {
        global = ns.global,
        description = ns.description or "",
        members = #ns.members,
        readOnly = ns_read_only,
        declarations = describe.render({ ns }),
      }
    end
  end
  -- MCP servers started by bindings/mcp.lua for this look are ended now,
  -- while this state's own loop can still reap them.
  if package.loaded["lunarun.mcp_client"] then require("lunarun.mcp_client").stop_blocking() end
  return assert(encode({
    declarations = describe.render(all),
    namespaces = array(namespaces),
    readOnly = read_only,
  }))
end

-- ---- the tools ----------------------------------------------------------------

local function run_description(catalog)
  local intro = "Runs one TypeScript program in a fresh sandbox and returns what it returned and logged. " ..
    "The program is the body of an async function: use `await` and `return value`; the value must be " ..
    "plain JSON. Host functions are called as `await ns.fn(args)`. Nothing survives from one call to " ..
    "the next. The result has `value` (when it succeeded), `logs`, `error` {kind, message} (when it " ..
    "failed) and `stats`."
  if #catalog.declarations <= DESCRIPTION_INLINE_MAX then
    return intro .. " What the program may call (TypeScript declarations):\n\n" .. catalog.declarations
  end
  local lines = { intro, "", "Namespaces the program may use (call the `describe` tool with a namespace's name " ..
    "for its TypeScript declarations before writing a program that uses it):" }
  for _, ns in ipairs(catalog.namespaces) do
    local d = ns.description ~= "" and (": " .. ns.description:match("[^\n]*")) or ""
    lines[#lines + 1] = string.format("- %s (%d functions)%s", ns.global, ns.members, d)
  end
  return table.concat(lines, "\n")
end

local function integer_schema(description, minimum, maximum)
  return { type = "integer", minimum = minimum, maximum = maximum, description = description }
end

local function run_input_schema(limits)
  local props = {}
  local docs = {
    computeMs = "Busy time the program may spend (ms).",
    maxWallMs = "Wall-clock ceiling of the run (ms).",
    maxOutputBytes = "Cap on the serialized logs plus the value or failure message (bytes).",
    maxOldGenerationSizeMb = "Heap cap of the program (MiB).",
  }
  for _, k in ipairs(LIMIT_KEYS) do
    props[k] = integer_schema(docs[k] .. " At most the server's own setting, " .. limits[k] .. ".",
      LIMIT_MIN[k] or 1, limits[k])
  end
  return {
    type = "object",
    properties = {
      code = { type = "string", description = "The TypeScript program (erasable type syntax only)." },
      limits = {
        type = "object",
        description = "Lower limits for this run than the server's own.",
        properties = props,
        additionalProperties = false,
      },
    },
    required = array({ "code" }),
    additionalProperties = false,
  }
end

-- The result object of `lunarun run --json` (SPEC §4), which is also the
-- shape of a refused call: clients check structuredContent against it even
-- when isError is set.
local function run_output_schema()
  return {
    type = "object",
    properties = {
      value = { description = "What the program returned (absent when it returned nothing or failed)." },
      logs = { type = "array", items = { type = "string" }, description = "Console output, one entry per call." },
      error = {
        type = "object",
        properties = { kind = { type = "string", enum = array(KINDS) }, message = { type = "string" } },
        required = array({ "kind", "message" }),
      },
      stats = { type = "object" },
    },
    required = array({ "logs" }),
  }
end

local function tools_of(state)
  local catalog = state:catalog()
  local open_world = state.network_host or #catalog.namespaces > 0
  local tools = {
    {
      name = "run",
      title = "Run a TypeScript program",
      description = run_description(catalog),
      inputSchema = run_input_schema(state.limits),
      outputSchema = run_output_schema(),
      annotations = {
        readOnlyHint = catalog.readOnly,
        destructiveHint = not catalog.readOnly,
        idempotentHint = false,
        openWorldHint = open_world,
      },
    },
  }
  if #catalog.declarations > DESCRIPTION_INLINE_MAX then
    local names = {}
    for _, ns in ipairs(catalog.namespaces) do names[#names + 1] = ns.global end
    tools[#tools + 1] = {
      name = "describe",
      title = "TypeScript declarations of a namespace",
      description = "The TypeScript declarations of one namespace the `run` tool's programs may call.",
      inputSchema = {
        type = "object",
        properties = { namespace = { type = "string", enum = array(names) } },
        required = array({ "namespace" }),
        additionalProperties = false,
      },
      annotations = { readOnlyHint = true, openWorldHint = false },
    }
  end
  return array(tools)
end

-- ---- the wire -------------------------------------------------------------------

local Server = {}
Server.__index = Server

-- The loaded bindings (M.catalog's table), made on first use.
function Server:catalog()
  if not self.catalog_table then self.catalog_table = assert(decode(self.make_catalog())) end
  return self.catalog_table
end

function Server:tools()
  if not self.tool_list then self.tool_list = tools_of(self) end
  return self.tool_list
end

-- Writes one message (its JSON text, without the newline).
function Server:send(text)
  if self.output_closed then return end
  local line = text .. "\n"
  if self.out_pipe then
    self.out_pipe:write(line)
  else
    uv.fs_write(self.output_fd, line, -1)
  end
end

local function id_text(id)
  if id == nil then return "null" end
  return assert(encode(id))
end

function Server:send_error(id, code, message, data)
  local err = { code = code, message = message }
  if data ~= nil then err.data = data end
  self:send('{"jsonrpc":"2.0","id":' .. id_text(id) .. ',"error":' .. assert(encode(err)) .. "}")
end

-- result_text: the result object's JSON text.
function Server:send_result_text(id, result_text)
  self:send('{"jsonrpc":"2.0","id":' .. id_text(id) .. ',"result":' .. result_text .. "}")
end

-- A modern result carries resultType and the server's identity; a legacy one
-- is what those revisions defined.
function Server:decorate(result, modern)
  if modern then
    result.resultType = "complete"
    result._meta = { [META_SERVER_INFO] = self.server_info }
  end
  return result
end

function Server:send_result(id, result, modern)
  self:send_result_text(id, assert(encode(self:decorate(result, modern))))
end

local function id_key(id)
  return type(id) .. ":" .. tostring(id)
end

-- ---- tools/call: run ------------------------------------------------------------

-- A call refused before any run: a result with isError, shaped as a failed run.
function Server:refuse_call(id, modern, message)
  local object = { logs = array({}), error = { kind = "invalid-arguments", message = message } }
  local text = assert(encode(object))
  self:send_result(id, {
    content = array({ { type = "text", text = text } }),
    structuredContent = object,
    isError = true,
  }, modern)
end

-- Checks the arguments of `run`; returns code and a config, or nil and why.
function Server:run_arguments(args)
  if args == nil or args == null then return nil, "missing the argument \"code\"" end
  if type(args) ~= "table" or lunarun.is_array(args) then return nil, "the arguments must be an object" end
  for k in pairs(args) do
    if k ~= "code" and k ~= "limits" then return nil, string.format("unknown argument %q (known: code, limits)", k) end
  end
  if type(args.code) ~= "string" then return nil, "the argument \"code\" must be a string" end
  local config = {}
  if args.limits ~= nil and args.limits ~= null then
    if type(args.limits) ~= "table" or lunarun.is_array(args.limits) then return nil, "\"limits\" must be an object" end
    for k, v in pairs(args.limits) do
      local own = self.limits[k]
      if not own then
        return nil, string.format("unknown limit %q (known: %s)", k, table.concat(LIMIT_KEYS, ", "))
      end
      if math.type(v) ~= "integer" or v < (LIMIT_MIN[k] or 1) then
        return nil, string.format("limits.%s must be an integer of at least %d", k, LIMIT_MIN[k] or 1)
      end
      if v > own then
        return nil, string.format("limits.%s may only lower the server's setting, %d (got %d)", k, own, v)
      end
      config[k] = v
    end
  end
  return args.code, config
end

-- Progress for one call: logs batched per interval, a heartbeat, nothing
-- once the call has its response.
local function start_progress(server, call)
  call.pending_logs = {}
  call.progress = 0
  call.last_sent = uv.now()
  call.timer = uv.new_timer()
  call.timer:start(PROGRESS_INTERVAL_MS, PROGRESS_INTERVAL_MS, function()
    if call.finished then return end
    local now = uv.now()
    local message
    if #call.pending_logs > 0 then
      message = table.concat(call.pending_logs, "\n")
      if #message > PROGRESS_MESSAGE_MAX then
        -- Cut on a UTF-8 boundary.
        local cut = PROGRESS_MESSAGE_MAX
        while cut > 0 and (message:byte(cut + 1) or 0) & 0xC0 == 0x80 do cut = cut - 1 end
        message = message:sub(1, cut) .. "…"
      end
      call.pending_logs = {}
    elseif now - call.last_sent >= HEARTBEAT_MS then
      message = string.format("running (%d s)", (now - call.started) // 1000)
    else
      return
    end
    call.progress = call.progress + 1
    call.last_sent = now
    server:send('{"jsonrpc":"2.0","method":"notifications/progress","params":' .. assert(encode({
      progressToken = call.progress_token, progress = call.progress, message = message,
    })) .. "}")
  end)
end

local function stop_progress(call)
  if call.timer then
    lunarun.close_handle(call.timer)
    call.timer = nil
  end
end

function Server:start_run(call)
  self.running = self.running + 1
  call.started = uv.now()
  if call.progress_token ~= nil then start_progress(self, call) end
  local opts = {
    config = call.config,
    on_log = function(text)
      if call.pending_logs and not call.finished then call.pending_logs[#call.pending_logs + 1] = text end
    end,
  }
  local ok, handle = pcall(self.runtime.run, self.runtime, call.code, opts, function(r)
    self:finish_run(call, r)
  end)
  if not ok then
    -- Misuse of the runtime (disposed under us): an internal error.
    self.running = self.running - 1
    call.finished = true
    stop_progress(call)
    self.calls[call.key] = nil
    if not call.cancelled then self:send_error(call.id, INTERNAL_ERROR, tostring(handle)) end
    self:start_queued()
    return
  end
  call.handle = handle
  if call.cancelled then handle:abort() end
end

function Server:finish_run(call, r)
  self.running = self.running - 1
  call.finished = true
  call.handle = nil
  stop_progress(call)
  self.calls[call.key] = nil
  if not call.cancelled and not self.closing then
    local result = {
      content = array({ { type = "text", text = r.json } }),
      isError = not r.ok,
    }
    self:decorate(result, call.modern)
    -- structuredContent is the result object's own text: numbers and key
    -- order exactly as `lunarun run --json` prints them.
    local text = assert(encode(result))
    text = text:sub(1, -2) .. ',"structuredContent":' .. r.json .. "}"
    self:send_result_text(call.id, text)
  end
  self:start_queued()
end

function Server:start_queued()
  while self.running < MAX_CONCURRENT_RUNS and #self.queue > 0 and not self.closing do
    local call = table.remove(self.queue, 1)
    if not call.cancelled then self:start_run(call) end
  end
  if self.closing then self:maybe_finish() end
end

function Server:call_run(id, params, modern)
  local code, config = self:run_arguments(params.arguments)
  if not code then return self:refuse_call(id, modern, config) end
  local meta = type(params._meta) == "table" and params._meta or {}
  local token = meta.progressToken
  if token ~= nil and type(token) ~= "string" and math.type(token) ~= "integer" then token = nil end
  local call = {
    id = id, key = id_key(id), modern = modern, code = code, config = config, progress_token = token,
  }
  self.calls[call.key] = call
  if self.running < MAX_CONCURRENT_RUNS then
    self:start_run(call)
  else
    self.queue[#self.queue + 1] = call
  end
end

function Server:call_describe(id, params, modern)
  local args = params.arguments
  local name = type(args) == "table" and args.namespace
  for _, ns in ipairs(self:catalog().namespaces) do
    if ns.global == name then
      return self:send_result(id, { content = array({ { type = "text", text = ns.declarations } }) }, modern)
    end
  end
  local names = {}
  for _, ns in ipairs(self:catalog().namespaces) do names[#names + 1] = ns.global end
  self:send_result(id, {
    content = array({ { type = "text", text = string.format("unknown namespace %s (known: %s)",
      type(name) == "string" and string.format("%q", name) or "(none given)", table.concat(names, ", ")) } }),
    isError = true,
  }, modern)
end

-- ---- requests ---------------------------------------------------------------------

local function server_capabilities()
  return { tools = { listChanged = false } }
end

local handlers = {}

function handlers.initialize(self, id, params)
  local requested = params.protocolVersion
  local version = contains(LEGACY_VERSIONS, requested) and requested or LEGACY_VERSIONS[1]
  self.legacy_version = version
  self:send_result(id, {
    protocolVersion = version,
    capabilities = server_capabilities(),
    serverInfo = self.server_info,
    instructions = self.instructions,
  }, false)
end

function handlers.ping(self, id)
  self:send_result_text(id, "{}")
end

handlers["server/discover"] = function(self, id)
  self:send_result(id, {
    supportedVersions = array({ table.unpack(MODERN_VERSIONS) }),
    capabilities = server_capabilities(),
    instructions = self.instructions,
    ttlMs = 0,
    cacheScope = "public",
  }, true)
end

handlers["tools/list"] = function(self, id, params, modern)
  local result = { tools = self:tools() }
  if modern then
    result.ttlMs = 0
    result.cacheScope = "public"
  end
  self:send_result(id, result, modern)
end

handlers["tools/call"] = function(self, id, params, modern)
  local name = params.name
  if type(name) ~= "string" then return self:send_error(id, INVALID_PARAMS, "tools/call needs a tool name") end
  if name == "run" then return self:call_run(id, params, modern) end
  if name == "describe" and #self:tools() > 1 then return self:call_describe(id, params, modern) end
  self:send_error(id, INVALID_PARAMS, "Unknown tool: " .. name)
end

-- Which era serves each method: legacy-only methods need no _meta.
local LEGACY_ONLY = { initialize = true, ping = true }
local MODERN_ONLY = { ["server/discover"] = true }

function Server:handle_request(id, method, params)
  local handler = handlers[method]
  if not handler then return self:send_error(id, METHOD_NOT_FOUND, "Method not found: " .. method) end
  if params == nil then params = {} end
  if type(params) ~= "table" or lunarun.is_array(params) then
    return self:send_error(id, INVALID_PARAMS, "params must be an object")
  end
  local meta = params._meta
  local version = type(meta) == "table" and not lunarun.is_array(meta) and meta[META_VERSION] or nil
  if LEGACY_ONLY[method] then
    if version ~= nil and method ~= "initialize" then
      return self:send_error(id, METHOD_NOT_FOUND, "Method not found: " .. method .. " (not in revision 2026-07-28)")
    end
    return handler(self, id, params, false)
  end
  if version == nil then
    -- No version in _meta: a legacy session's request, or a malformed modern one.
    if self.legacy_version and not MODERN_ONLY[method] then return handler(self, id, params, false) end
    return self:send_error(id, INVALID_PARAMS, "missing _meta \"" .. META_VERSION .. "\" (or an initialize first)")
  end
  if type(version) ~= "string" then
    return self:send_error(id, INVALID_PARAMS, "_meta \"" .. META_VERSION .. "\" must be a string")
  end
  if not contains(MODERN_VERSIONS, version) then
    return self:send_error(id, UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version", {
      supported = array(concat_lists(MODERN_VERSIONS, LEGACY_VERSIONS)),
      requested = version,
    })
  end
  local caps = meta[META_CAPABILITIES]
  if type(caps) ~= "table" or lunarun.is_array(caps) then
    return self:send_error(id, INVALID_PARAMS, "missing _meta \"" .. META_CAPABILITIES .. "\"")
  end
  return handler(self, id, params, true)
end

function Server:handle_notification(method, params)
  if method == "notifications/cancelled" and type(params) == "table" then
    local call = self.calls[id_key(params.requestId)]
    if call and not call.finished then
      -- Nothing more is sent for it: its result is dropped when it comes.
      call.cancelled = true
      stop_progress(call)
      if call.handle then call.handle:abort() end
      self.calls[call.key] = nil
    end
  end
  -- notifications/initialized and anything else: nothing to do.
end

function Server:handle_line(line)
  if line:match("^%s*$") then return end
  local msg, why = decode(line)
  if msg == nil then return self:send_error(nil, PARSE_ERROR, "Parse error: " .. tostring(why)) end
  if type(msg) ~= "table" or lunarun.is_array(msg) then
    return self:send_error(nil, INVALID_REQUEST, "Invalid Request: one JSON-RPC object per line (no batches)")
  end
  local id = msg.id
  local valid_id = id == nil or type(id) == "string" or math.type(id) == "integer"
  if msg.jsonrpc ~= "2.0" or (msg.method ~= nil and type(msg.method) ~= "string") or not valid_id then
    return self:send_error(valid_id and id or nil, INVALID_REQUEST, "Invalid Request")
  end
  if msg.method == nil then return end -- a response: this server sends no requests
  if id == nil then return self:handle_notification(msg.method, msg.params) end
  local ok, err = xpcall(self.handle_request, debug.traceback, self, id, msg.method, msg.params)
  if not ok then
    io.stderr:write("lunarun mcp: internal error: ", tostring(err), "\n")
    self:send_error(id, INTERNAL_ERROR, "Internal error")
  end
end

-- ---- the streams, and the end ------------------------------------------------------

function Server:on_input(data)
  lunarun._lines(self.buffer, data, function(line) self:handle_line(line) end)
end

-- A pipe or a socket is read on the loop; libuv cannot poll a file (epoll
-- refuses it).
local function pollable(fd)
  local kind = uv.guess_handle(fd)
  return kind == "pipe" or kind == "tcp" or kind == "udp"
end

function Server:read_input()
  local pipe
  if uv.guess_handle(self.input_fd) == "tty" then
    -- A person typing: a thread-pool read would block the exit on a signal.
    pipe = uv.new_tty(self.input_fd, true)
  elseif pollable(self.input_fd) then
    pipe = uv.new_pipe(false)
    if not pipe:open(self.input_fd) then
      lunarun.close_handle(pipe)
      pipe = nil
    end
  end
  if pipe then
    self.in_pipe = pipe
    pipe:read_start(function(err, data)
      if data then return self:on_input(data) end
      if err then io.stderr:write("lunarun mcp: reading standard input: ", err, "\n") end
      self:shutdown()
    end)
    return
  end
  -- Not a pipe, socket or terminal (a file, /dev/null): read it through the
  -- thread pool.
  local function next_chunk()
    uv.fs_read(self.input_fd, 65536, -1, function(err, data)
      if self.closing then return end
      if data and #data > 0 then
        self:on_input(data)
        return next_chunk()
      end
      self:shutdown()
    end)
  end
  next_chunk()
end

function Server:open_output()
  local pipe = pollable(self.output_fd) and uv.new_pipe(false)
  if pipe and pipe:open(self.output_fd) then
    self.out_pipe = pipe
  elseif pipe then
    lunarun.close_handle(pipe)
  end
  -- Otherwise (a file, a terminal) writes are synchronous.
end

-- Standard input ended or a signal came: abort what runs, dispose the
-- runtime (no sandbox is left), flush the output, close every handle.
function Server:shutdown()
  if self.closing then return end
  self.closing = true
  for _, call in pairs(self.calls) do
    call.cancelled = true
    stop_progress(call)
  end
  self.queue = {}
  if self.in_pipe then
    lunarun.close_handle(self.in_pipe)
    self.in_pipe = nil
  end
  for _, s in ipairs(self.signals) do lunarun.close_handle(s) end
  self.signals = {}
  self.runtime:dispose(function()
    self.disposed = true
    self:maybe_finish()
  end)
end

function Server:maybe_finish()
  if not self.disposed or self.finished then return end
  self.finished = true
  local pipe = self.out_pipe
  self.out_pipe = nil
  self.output_closed = true
  if pipe then
    -- Replies already written leave before the pipe closes.
    pipe:shutdown(function() lunarun.close_handle(pipe) end)
  end
end

-- opts (core/lua_mcp.c): runtime, catalog (a function returning M.catalog's
-- JSON text), input_fd, output_fd,
-- limits {computeMs, maxWallMs, maxOutputBytes, maxOldGenerationSizeMb},
-- network_host.
function M.serve(opts)
  local self = setmetatable({
    runtime = opts.runtime,
    make_catalog = opts.catalog,
    input_fd = opts.input_fd,
    output_fd = opts.output_fd,
    limits = opts.limits,
    network_host = opts.network_host,
    server_info = { name = "lunarun", version = lunarun.version },
    calls = {},
    queue = {},
    running = 0,
    buffer = {},
    signals = {},
  }, Server)
  self.instructions = "Write one TypeScript program per task and run it with the `run` tool: it can call " ..
    "every host function listed in that tool's description, loop, branch and combine results, and " ..
    "returns only what you return and log."
  self:open_output()
  for _, signum in ipairs({ "sigterm", "sigint" }) do
    local s = uv.new_signal()
    s:start(signum, function() self:shutdown() end)
    self.signals[#self.signals + 1] = s
  end
  self:read_input()
end

return M
