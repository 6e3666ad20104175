-- Ready-made bindings: a key-value store kept for the life of the runtime.
--
--   build/lunarun run --bindings bindings/kv.lua program.ts
--
--   await kv.set({ key: "user:1", value: { name: "Ada", tags: [] } });
--   await kv.get({ key: "user:1" });          // { name: "Ada", tags: [] }
--   await kv.list({ prefix: "user:" });        // ["user:1"]
--   await kv.delete({ key: "user:1" });        // true (it existed)
--
-- Lifetime: the store is a table of this file's chunk, and a runtime loads
-- each bindings file once, so every run of one runtime sees the same store
-- and nothing else does. The CLI (`lunarun run`) makes a runtime for its one
-- run: from the CLI the store starts empty every time. An embedder that keeps
-- a runtime and runs many programs on it shares the store between those runs.
-- Nothing is written to disk.
--
-- Values are any JSON value, kept as the decoded Lua value (arrays keep
-- their array mark, so [] comes back as [] and {} as {}). Storing null keeps
-- the key (it is listed) with a null value; use delete to remove a key.
-- get and list are read-only and may overlap; set and delete run alone, in
-- the order the program issued them.
local lunarun = require("lunarun")

-- Limits (edit to taste).
local MAX_KEYS = 10000            -- keys in the store at once
local MAX_KEY_BYTES = 1024        -- length of one key, in bytes of UTF-8
local MAX_VALUE_BYTES = 1048576   -- one value, measured as about the size of its JSON text

local store = {} -- key -> value (lunarun.null for a stored null)
local count = 0

local function fail(message)
  error({ message = message }, 0)
end

local function check_key(key)
  if key == "" then fail("key must not be empty") end
  if #key > MAX_KEY_BYTES then
    fail(string.format("key is %d bytes long; the limit is %d", #key, MAX_KEY_BYTES))
  end
end

-- About the size of v's JSON text (strings by their bytes, without escapes),
-- walked without recursion since values may be thousands of levels deep.
-- Stops counting once over the limit.
local function approx_size(v)
  local size, stack = 0, { v }
  while #stack > 0 do
    local x = table.remove(stack)
    local t = type(x)
    if t == "string" then
      size = size + #x + 2
    elseif t == "number" then
      size = size + 24
    elseif t == "boolean" then
      size = size + 5
    elseif rawequal(x, lunarun.null) then
      size = size + 4
    elseif t == "table" then
      size = size + 2
      for k, item in pairs(x) do
        if type(k) == "string" then size = size + #k + 4 else size = size + 1 end
        stack[#stack + 1] = item
      end
    end
    if size > MAX_VALUE_BYTES then break end
  end
  return size
end

-- Sorting by bytes, whatever the locale.
local byte_less = require("lunarun.schema").byte_less

local key_arg = { type = "string", description = "1 to " .. MAX_KEY_BYTES .. " bytes." }

return {
  global = "kv",
  description = "A key-value store of JSON values, shared by the runs of one runtime (from the CLI: one run) " ..
    "and kept in memory only. At most " .. MAX_KEYS .. " keys.",
  errorClass = { name = "KvError", memberNameProperty = "op" },
  functions = {
    get = {
      description = "The value stored under key, or null when there is none.",
      args = { type = "object", properties = { key = key_arg }, required = { "key" }, additionalProperties = false },
      result = { description = "Any JSON value." },
      readOnly = true,
      handler = function(args)
        local v = store[args.key]
        if v == nil then return lunarun.null end
        return v
      end,
    },

    set = {
      description = "Stores value (any JSON value) under key, replacing what was there. Resolves with null.",
      args = {
        type = "object",
        properties = { key = key_arg, value = { description = "Any JSON value." } },
        required = { "key", "value" },
        additionalProperties = false,
      },
      result = { type = "null" },
      handler = function(args)
        local key, value = args.key, args.value
        check_key(key)
        if store[key] == nil and count >= MAX_KEYS then
          fail(string.format("the store is full (%d keys); delete some first", MAX_KEYS))
        end
        if approx_size(value) > MAX_VALUE_BYTES then
          fail(string.format("value is larger than %d bytes", MAX_VALUE_BYTES))
        end
        if store[key] == nil then count = count + 1 end
        store[key] = value
        return lunarun.null
      end,
    },

    delete = {
      description = "Removes key; resolves with true when it existed, false otherwise.",
      args = { type = "object", properties = { key = key_arg }, required = { "key" }, additionalProperties = false },
      result = { type = "boolean" },
      handler = function(args)
        if store[args.key] == nil then return false end
        store[args.key] = nil
        count = count - 1
        return true
      end,
    },

    list = {
      description = "The stored keys that start with prefix (all keys without one), sorted by their bytes.",
      args = {
        type = { "object", "null" },
        properties = { prefix = { type = "string", description = "Only keys that start with this." } },
        additionalProperties = false,
      },
      result = { type = "array", items = { type = "string" } },
      readOnly = true,
      handler = function(args)
        local prefix = args ~= lunarun.null and args.prefix or ""
        local keys = lunarun.array()
        for k in pairs(store) do
          if k:sub(1, #prefix) == prefix then keys[#keys + 1] = k end
        end
        -- Byte order: `<` on strings uses strcoll, which is byte order only
        -- in the C locale (the host's default).
        if os.setlocale(nil, "collate") == "C" then
          table.sort(keys)
        else
          table.sort(keys, byte_less)
        end
        return keys
      end,
    },
  },
}
