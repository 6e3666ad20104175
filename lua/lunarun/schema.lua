-- The declared-type language of bindings files (docs/BINDINGS.md): a small
-- JSON-Schema subset, normalized once at load time, then used to check
-- arguments before a handler runs and to print TypeScript for `describe`.
--
-- A normalized type is a table with `kind` and, by kind:
--   any | string | number | integer | boolean | null   (nothing more)
--   array   items (a normalized type)
--   object  properties (name -> type), names (sorted list), required
--           (name -> true), additional (true = anything, false = nothing
--           else, or a normalized type)
--   enum    values (list of scalars; JSON null is schema.NULL)
--   union   options (list of normalized types)
-- plus an optional `description`.
--
-- Pure Lua 5.4, no dependency on the host: the caller passes the JSON null
-- sentinel and the array test to the functions that need them.

local schema = {}

-- How a normalized enum spells JSON null (the host's sentinel is only known
-- to the caller).
schema.NULL = setmetatable({}, { __name = "lunarun.schema.NULL", __tostring = function() return "null" end })

local SCALAR_TYPES = { string = true, number = true, integer = true, boolean = true, ["null"] = true }
local TYPE_NAMES = { "any", "array", "boolean", "integer", "null", "number", "object", "string" }
local KNOWN_TYPE = {}
for _, name in ipairs(TYPE_NAMES) do KNOWN_TYPE[name] = true end
local KNOWN_KEYS = {
  type = true, description = true, items = true, properties = true, required = true,
  additionalProperties = true, enum = true, const = true, anyOf = true,
}
local KNOWN_KEY_LIST = "type, description, items, properties, required, additionalProperties, enum, const, anyOf"
-- Which declared type each type-specific keyword belongs to.
local KEYWORD_TYPE = { items = "array", properties = "object", required = "object", additionalProperties = "object" }
-- Schemas are written by hand and shallow; a deeper one is a mistake (or a
-- table that contains itself).
local MAX_SCHEMA_DEPTH = 64

-- ---- text helpers ---------------------------------------------------------

local function is_identifier(s)
  return type(s) == "string" and s:match("^[A-Za-z_$][A-Za-z0-9_$]*$") ~= nil
end

-- A JSON string literal (also a valid TypeScript one): quotes, backslashes
-- and control characters escaped; everything else as it is (UTF-8).
local function json_quote(s)
  local out = s:gsub('[%c"\\]', function(c)
    if c == '"' then return '\\"' end
    if c == "\\" then return "\\\\" end
    if c == "\n" then return "\\n" end
    if c == "\r" then return "\\r" end
    if c == "\t" then return "\\t" end
    if c == "\b" then return "\\b" end
    if c == "\f" then return "\\f" end
    return string.format("\\u%04x", c:byte())
  end)
  return '"' .. out .. '"'
end
schema.json_quote = json_quote
schema.is_identifier = is_identifier

-- Byte order, whatever the C locale says (`<` on strings uses strcoll), so
-- sorted output is the same everywhere.
local function byte_less(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = a:byte(i), b:byte(i)
    if x ~= y then return x < y end
  end
  return #a < #b
end
schema.byte_less = byte_less

-- A number as JSON / TypeScript prints it: integers without ".0", floats in
-- the shortest text that reads back the same.
local function number_text(n)
  if math.type(n) == "integer" then return string.format("%d", n) end
  if n == math.floor(n) and math.abs(n) < 2 ^ 63 then return string.format("%d", math.tointeger(n)) end
  for digits = 1, 17 do
    local s = string.format("%." .. digits .. "g", n)
    if tonumber(s) == n then return s end
  end
  return string.format("%.17g", n)
end

-- One segment of a path: `.name` for identifiers, `["odd name"]` otherwise.
local function path_key(name)
  if is_identifier(name) then return "." .. name end
  return "[" .. json_quote(name) .. "]"
end
schema.path_key = path_key

-- A scalar as it appears in messages and TypeScript literal types.
local function literal_text(v)
  if v == schema.NULL then return "null" end
  if type(v) == "string" then return json_quote(v) end
  if type(v) == "number" then return number_text(v) end
  return tostring(v)
end

-- ---- normalize ------------------------------------------------------------

local function is_sequence(t)
  local n = 0
  for k in pairs(t) do
    if math.type(k) ~= "integer" or k < 1 then return false end
    n = n + 1
  end
  return n == #t
end

-- Normalizes one enum/const member: JSON scalars only.
local function normalize_literal(v, null_sentinel, fail, at)
  if null_sentinel ~= nil and rawequal(v, null_sentinel) then return schema.NULL end
  local t = type(v)
  if t == "string" then
    if not utf8.len(v) then fail(at, "member is not valid UTF-8") end
    return v
  end
  if t == "boolean" then return v end
  if t == "number" then
    if v ~= v or v == math.huge or v == -math.huge then fail(at, "member must be a finite number") end
    if math.type(v) == "integer" and (v > 2 ^ 53 or v < -2 ^ 53) then
      fail(at, "member is an integer beyond ±2^53, which JSON does not carry exactly")
    end
    return v
  end
  fail(at, "member must be a string, number, boolean or null, got " .. t)
end

-- Does a literal belong to a declared scalar type name?
local function literal_has_type(v, name)
  if name == "null" then return v == schema.NULL end
  if name == "integer" then
    return type(v) == "number" and (math.type(v) == "integer" or v == math.floor(v))
  end
  if name == "number" or name == "string" or name == "boolean" then return type(v) == name end
  return false
end

local normalize_node

local function normalize_object(decl, path, ctx)
  local node = { kind = "object", properties = {}, names = {}, required = {}, additional = true }
  local props = decl.properties
  if props ~= nil then
    if type(props) ~= "table" then
      ctx.fail(path .. ".properties", "must be a table of name = type, got " .. type(props))
    end
    for name, sub in pairs(props) do
      if type(name) ~= "string" then
        ctx.fail(path .. ".properties", "property names must be strings, got a " .. type(name) .. " key")
      end
      if not utf8.len(name) then ctx.fail(path .. ".properties", "a property name is not valid UTF-8") end
      node.properties[name] = normalize_node(sub, path .. ".properties" .. path_key(name), ctx)
      node.names[#node.names + 1] = name
    end
    table.sort(node.names, byte_less)
  end
  local req = decl.required
  if req ~= nil then
    if type(req) ~= "table" or not is_sequence(req) then
      ctx.fail(path .. ".required", "must be a list of property names")
    end
    for i, name in ipairs(req) do
      local at = path .. ".required[" .. (i - 1) .. "]"
      if type(name) ~= "string" then ctx.fail(at, "must be a property name, got " .. type(name)) end
      if node.properties[name] == nil then
        ctx.fail(at, "names " .. json_quote(name) .. ", which is not among the properties")
      end
      if node.required[name] then ctx.fail(at, json_quote(name) .. " is listed twice") end
      node.required[name] = true
    end
  end
  local add = decl.additionalProperties
  if add == false or add == true then
    node.additional = add
  elseif add ~= nil then
    node.additional = normalize_node(add, path .. ".additionalProperties", ctx)
  end
  return node
end

-- The normalized node of one declared type name, with its keywords.
local function normalize_typed(name, decl, path, ctx)
  if name == "array" then
    local items = { kind = "any" }
    if decl.items ~= nil then items = normalize_node(decl.items, path .. ".items", ctx) end
    return { kind = "array", items = items }
  elseif name == "object" then
    return normalize_object(decl, path, ctx)
  end
  return { kind = name }
end

-- Collapses a list of options into one node: a single option as it is.
local function union_of(options)
  if #options == 1 then return options[1] end
  return { kind = "union", options = options }
end

normalize_node = function(decl, path, ctx)
  ctx.depth = ctx.depth + 1
  if ctx.depth > MAX_SCHEMA_DEPTH then
    ctx.fail(path, "nested more than " .. MAX_SCHEMA_DEPTH .. " levels deep (does a type contain itself?)")
  end
  local node
  if ctx.null ~= nil and rawequal(decl, ctx.null) then
    -- The sentinel is an empty table, which would otherwise read as "any".
    ctx.fail(path, 'JSON null is not a type (the null type is written "null")')
  elseif type(decl) == "string" then
    -- Shorthand: "number" is { type = "number" }.
    if not KNOWN_TYPE[decl] then ctx.fail(path, "unknown type " .. json_quote(decl)) end
    node = normalize_typed(decl, {}, path, ctx)
  elseif type(decl) ~= "table" then
    ctx.fail(path, "a type must be a table or a type name, got " .. type(decl))
  else
    for k in pairs(decl) do
      if type(k) ~= "string" or not KNOWN_KEYS[k] then
        local shown = type(k) == "string" and json_quote(k) or ("a " .. type(k) .. " key")
        ctx.fail(path, "unknown key " .. shown .. " (known: " .. KNOWN_KEY_LIST .. ")")
      end
    end
    if decl.description ~= nil and type(decl.description) ~= "string" then
      ctx.fail(path .. ".description", "must be a string, got " .. type(decl.description))
    end

    -- The declared type names, as a list (nil when `type` is absent).
    local names
    local t = decl.type
    if type(t) == "string" then
      if not KNOWN_TYPE[t] then ctx.fail(path .. ".type", "unknown type " .. json_quote(t)) end
      names = { t }
    elseif type(t) == "table" then
      if not is_sequence(t) or #t == 0 then ctx.fail(path .. ".type", "must be a type name or a non-empty list of them") end
      local seen = {}
      for i, name in ipairs(t) do
        local at = path .. ".type[" .. (i - 1) .. "]"
        if type(name) ~= "string" then ctx.fail(at, "must be a type name, got " .. type(name)) end
        if not KNOWN_TYPE[name] then ctx.fail(at, "unknown type " .. json_quote(name)) end
        if name == "any" then ctx.fail(at, '"any" cannot be one of several types') end
        if seen[name] then ctx.fail(at, json_quote(name) .. " is listed twice") end
        seen[name] = true
      end
      names = t
    elseif t ~= nil then
      ctx.fail(path .. ".type", "must be a type name or a list of them, got " .. type(t))
    end

    -- Keywords that belong to one type need that type among the declared ones.
    for _, kw in ipairs({ "items", "properties", "required", "additionalProperties" }) do
      if decl[kw] ~= nil then
        local owner = KEYWORD_TYPE[kw]
        local ok = false
        for _, name in ipairs(names or {}) do
          if name == owner then ok = true end
        end
        if not ok then
          ctx.fail(path .. "." .. kw, "only applies to type " .. json_quote(owner) ..
            (names and (", not " .. table.concat(names, " | ")) or "; add type = " .. json_quote(owner)))
        end
      end
    end

    if decl.anyOf ~= nil then
      if names or decl.enum ~= nil or decl.const ~= nil then
        ctx.fail(path .. ".anyOf", "cannot be combined with type, enum or const (put them in the options)")
      end
      local list = decl.anyOf
      if type(list) ~= "table" or not is_sequence(list) or #list == 0 then
        ctx.fail(path .. ".anyOf", "must be a non-empty list of types")
      end
      local options = {}
      for i, sub in ipairs(list) do
        options[i] = normalize_node(sub, path .. ".anyOf[" .. (i - 1) .. "]", ctx)
      end
      node = union_of(options)
    elseif decl.enum ~= nil or decl.const ~= nil then
      if decl.enum ~= nil and decl.const ~= nil then ctx.fail(path, "enum and const cannot be used together") end
      local values = {}
      if decl.const ~= nil then
        values[1] = normalize_literal(decl.const, ctx.null, ctx.fail, path .. ".const")
      else
        local list = decl.enum
        if type(list) ~= "table" or not is_sequence(list) or #list == 0 then
          ctx.fail(path .. ".enum", "must be a non-empty list of values")
        end
        for i, v in ipairs(list) do
          local at = path .. ".enum[" .. (i - 1) .. "]"
          local lit = normalize_literal(v, ctx.null, ctx.fail, at)
          for j = 1, #values do
            if values[j] == lit then ctx.fail(at, literal_text(lit) .. " is listed twice") end
          end
          values[#values + 1] = lit
        end
      end
      -- With a type too, every member must be of it (else it could never match).
      if names then
        for i, v in ipairs(values) do
          local fits = false
          for _, name in ipairs(names) do
            if literal_has_type(v, name) then fits = true end
          end
          if not fits then
            local at = decl.const ~= nil and (path .. ".const") or (path .. ".enum[" .. (i - 1) .. "]")
            ctx.fail(at, literal_text(v) .. " is not of type " .. table.concat(names, " | "))
          end
        end
      end
      node = { kind = "enum", values = values }
    elseif names then
      local options = {}
      for i, name in ipairs(names) do options[i] = normalize_typed(name, decl, path, ctx) end
      node = union_of(options)
    else
      node = { kind = "any" }
    end
    if decl.description ~= nil then
      -- Every node above is freshly built, so annotating it touches no other.
      node.description = decl.description
    end
  end
  ctx.depth = ctx.depth - 1
  return node
end

-- Normalizes a declared type. `where` prefixes every message, and the path
-- of the bad field follows it ("<where>.properties.key.type: unknown type
-- ..."). `null_sentinel`, when given, is accepted as JSON null in enum/const.
function schema.normalize(decl, where, null_sentinel)
  where = where or "type"
  local ctx = { depth = 0, null = null_sentinel }
  ctx.fail = function(path, msg)
    error(where .. path .. ": " .. msg, 0)
  end
  return normalize_node(decl, "", ctx)
end

-- ---- check ----------------------------------------------------------------

-- The JSON kind of a decoded value, for messages.
local function json_kind(v, null_sentinel, is_array)
  if v == nil or rawequal(v, null_sentinel) then return "null" end
  local t = type(v)
  if t == "table" then return is_array(v) and "array" or "object" end
  if t == "string" or t == "number" or t == "boolean" then return t end
  return t -- not JSON at all (function, userdata...): named as Lua sees it
end

-- A short rendering of a value that failed an enum.
local function value_text(v, kind)
  if kind == "string" then
    -- Cut long strings at a character boundary (the message must stay UTF-8).
    local chars = utf8.len(v)
    if chars and chars > 40 then
      v = v:sub(1, utf8.offset(v, 38) - 1) .. "..."
    elseif not chars and #v > 40 then
      v = v:sub(1, 37) .. "..."
    end
    return json_quote(v)
  end
  if kind == "number" then return number_text(v) end
  if kind == "boolean" or kind == "null" then return tostring(kind == "null" and "null" or v) end
  return kind
end

-- The JSON kinds a node accepts at its top level (for "expected X or Y").
local function accepted_kinds(node, out)
  out = out or {}
  local k = node.kind
  if k == "union" then
    for _, o in ipairs(node.options) do accepted_kinds(o, out) end
  elseif k == "enum" then
    for _, v in ipairs(node.values) do
      local kind = v == schema.NULL and "null" or type(v)
      out[kind] = true
    end
  elseif k == "integer" then
    out.number = true
  else
    out[k] = true
  end
  return out
end

local function expected_text(node)
  local k = node.kind
  if k == "union" then
    local parts, seen = {}, {}
    for _, o in ipairs(node.options) do
      local text = expected_text(o)
      if not seen[text] then
        seen[text] = true
        parts[#parts + 1] = text
      end
    end
    return table.concat(parts, " or ")
  elseif k == "enum" then
    local parts = {}
    for i, v in ipairs(node.values) do parts[i] = literal_text(v) end
    return (#parts == 1 and "" or "one of ") .. table.concat(parts, ", ")
  end
  return k
end

local check_node

local function check_object(node, value, path, null_sentinel, is_array)
  for _, name in ipairs(node.names) do
    local v = rawget(value, name)
    if v == nil then
      if node.required[name] then
        return false, path .. ": missing required property " .. json_quote(name)
      end
    else
      local ok, err = check_node(node.properties[name], v, path .. path_key(name), null_sentinel, is_array)
      if not ok then return false, err end
    end
  end
  local additional = node.additional
  if additional == true then return true end
  -- Extra keys in a stable order, so the same value gives the same message.
  local extras = {}
  for k in pairs(value) do
    if node.properties[k] == nil then extras[#extras + 1] = k end
  end
  if #extras == 0 then return true end
  table.sort(extras, function(a, b) return byte_less(tostring(a), tostring(b)) end)
  if additional == false then
    return false, path .. ": unexpected property " .. json_quote(tostring(extras[1]))
  end
  if additional.kind == "any" then return true end
  for _, k in ipairs(extras) do
    local ok, err = check_node(additional, rawget(value, k), path .. path_key(tostring(k)), null_sentinel, is_array)
    if not ok then return false, err end
  end
  return true
end

check_node = function(node, value, path, null_sentinel, is_array)
  local k = node.kind
  -- `any` never looks inside: the value may be thousands of levels deep.
  if k == "any" then return true end
  local kind = json_kind(value, null_sentinel, is_array)
  if k == "union" then
    -- The first option that accepts the value wins. When exactly one option
    -- takes this kind of value, its own (deeper) message is the useful one.
    local candidates, first_err = 0, nil
    for _, option in ipairs(node.options) do
      local ok, err = check_node(option, value, path, null_sentinel, is_array)
      if ok then return true end
      if accepted_kinds(option)[kind] then
        candidates = candidates + 1
        first_err = first_err or err
      end
    end
    if candidates == 1 then return false, first_err end
    -- The kind explains the mismatch unless some option takes that kind.
    local got = candidates > 0 and value_text(value, kind) or kind
    return false, path .. ": expected " .. expected_text(node) .. ", got " .. got
  elseif k == "enum" then
    for _, v in ipairs(node.values) do
      if v == schema.NULL then
        if kind == "null" then return true end
      elseif type(v) == type(value) and v == value then
        return true
      end
    end
    return false, path .. ": expected " .. expected_text(node) .. ", got " .. value_text(value, kind)
  elseif k == "integer" then
    if kind == "number" and (math.type(value) == "integer" or value == math.floor(value)) then return true end
    return false, path .. ": expected integer, got " .. (kind == "number" and value_text(value, kind) or kind)
  end
  if kind ~= k then
    return false, path .. ": expected " .. k .. ", got " .. kind
  end
  if k == "array" then
    local items = node.items
    if items.kind ~= "any" then
      for i = 1, #value do
        local ok, err = check_node(items, rawget(value, i), path .. "[" .. (i - 1) .. "]", null_sentinel, is_array)
        if not ok then return false, err end
      end
    end
  elseif k == "object" then
    return check_object(node, value, path, null_sentinel, is_array)
  end
  return true
end

-- Without the host's array marker, a non-empty sequence is taken for an array.
local function default_is_array(t)
  return #t > 0 and is_sequence(t)
end

-- Checks a decoded value against a normalized type: true, or false and a
-- message naming the path ("args.key: expected string, got number").
function schema.check(norm, value, path, null_sentinel, is_array)
  return check_node(norm, value, path or "args", null_sentinel, is_array or default_is_array)
end

-- Does the type accept JSON null (so a missing argument is fine)?
function schema.accepts_null(norm)
  local k = norm.kind
  if k == "any" or k == "null" then return true end
  if k == "union" then
    for _, o in ipairs(norm.options) do
      if schema.accepts_null(o) then return true end
    end
  elseif k == "enum" then
    for _, v in ipairs(norm.values) do
      if v == schema.NULL then return true end
    end
  end
  return false
end

-- ---- TypeScript -----------------------------------------------------------

-- A doc comment, one line when it fits, `*/` defused.
local function doc_comment(text, indent)
  text = text:gsub("%*/", "*\\/"):gsub("%s+$", "")
  if not text:find("\n") then return indent .. "/** " .. text .. " */\n" end
  local out = { indent .. "/**\n" }
  for line in (text .. "\n"):gmatch("(.-)\r?\n") do
    line = line:gsub("%s+$", "")
    out[#out + 1] = indent .. (line == "" and " *" or (" * " .. line)) .. "\n"
  end
  out[#out + 1] = indent .. " */\n"
  return table.concat(out)
end
schema.doc_comment = doc_comment

-- A property or method name as TypeScript reads it. `new(` would start a
-- construct signature, so it is quoted too.
local function ts_name(name)
  if is_identifier(name) and name ~= "new" then return name end
  return json_quote(name)
end
schema.ts_name = ts_name

local to_ts

-- Joins union members, dropping repeats (integer and number are both number).
local function join_union(parts)
  local out, seen = {}, {}
  for _, p in ipairs(parts) do
    if not seen[p] then
      seen[p] = true
      out[#out + 1] = p
    end
  end
  if seen.unknown then return "unknown" end
  return table.concat(out, " | ")
end

local function object_ts(node, indent)
  local inner = indent .. "  "
  local lines = {}
  local index_parts = {}
  local any_optional = false
  for _, name in ipairs(node.names) do
    local prop = node.properties[name]
    if prop.description then lines[#lines + 1] = doc_comment(prop.description, inner) end
    local optional = not node.required[name]
    if optional then any_optional = true end
    local text = to_ts(prop, inner)
    index_parts[#index_parts + 1] = text
    lines[#lines + 1] = inner .. ts_name(name) .. (optional and "?: " or ": ") .. text .. ";\n"
  end
  local additional = node.additional
  if type(additional) == "table" then
    -- Every declared property must fit the index signature, so it widens to
    -- theirs (and to undefined for optional ones).
    local parts = { to_ts(additional, inner) }
    for _, p in ipairs(index_parts) do parts[#parts + 1] = p end
    if any_optional then parts[#parts + 1] = "undefined" end
    lines[#lines + 1] = inner .. "[key: string]: " .. join_union(parts) .. ";\n"
  elseif #node.names == 0 then
    -- No properties: any object, or only the empty one.
    return additional and "{ [key: string]: unknown }" or "{ [key: string]: never }"
  end
  return "{\n" .. table.concat(lines) .. indent .. "}"
end

-- Parenthesized when it is a union that `[]` would otherwise bind into.
local function array_item_ts(node, indent)
  local text = to_ts(node, indent)
  if (node.kind == "union" or node.kind == "enum") and text:find(" | ", 1, true) then
    return "(" .. text .. ")"
  end
  return text
end

to_ts = function(node, indent)
  local k = node.kind
  if k == "any" then return "unknown" end
  if k == "string" or k == "boolean" or k == "null" or k == "number" then return k end
  if k == "integer" then return "number" end
  if k == "array" then return array_item_ts(node.items, indent) .. "[]" end
  if k == "object" then return object_ts(node, indent) end
  if k == "enum" then
    local parts = {}
    for i, v in ipairs(node.values) do parts[i] = literal_text(v) end
    return join_union(parts)
  end
  if k == "union" then
    local parts = {}
    for i, o in ipairs(node.options) do parts[i] = to_ts(o, indent) end
    return join_union(parts)
  end
  error("schema.to_ts: not a normalized type (kind " .. tostring(k) .. ")", 2)
end

-- TypeScript text of a normalized type. `indent` is the indentation of the
-- line the type starts on; nested lines of object types go deeper.
function schema.to_ts(norm, indent)
  return to_ts(norm, indent or "")
end

return schema
