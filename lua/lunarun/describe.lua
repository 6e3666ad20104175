-- `lunarun describe`: the TypeScript declarations (and a short usage note)
-- that tell a model what its program may call. The output compiles with
-- `tsc --strict --lib es2022` next to a program wrapped in an async function.

local schema = require("lunarun.schema")

local describe = {}

local q = schema.json_quote

-- ---- rendering --------------------------------------------------------------

local USAGE = [[
// How to write a program for lunarun
//
// - The program is the body of an async function: top-level `await` works,
//   and `return value` ends it with that value.
// - Call a binding as `await ns.fn(args)` with exactly one argument (omitting
//   it sends null). It returns a promise.
// - Arguments and results are plain JSON: null, booleans, finite numbers,
//   strings, arrays and plain objects. No undefined, NaN, Infinity, -0,
//   bigint, Date, Map, Set, functions or class instances.
%s
// - Independent calls may run together: `await Promise.all([...])`.
// - What comes back is the `console.log` output (one entry per call) and the
//   returned value, which must be plain JSON too.
]]

local CONSOLE = [[
// The program's console: each call is one log entry, arguments joined by a space.
interface Console {
  log(...data: unknown[]): void;
  info(...data: unknown[]): void;
  warn(...data: unknown[]): void;
  error(...data: unknown[]): void;
  debug(...data: unknown[]): void;
}
declare var console: Console;
]]

-- The doc comment text of a function: its description, then what the
-- policy means for a caller.
local function function_doc(fn)
  local notes = {}
  if fn.readOnly then notes[#notes + 1] = "Read-only." end
  if fn.maxCalls then notes[#notes + 1] = string.format("Limit: %d calls per run.", fn.maxCalls) end
  if fn.timeoutMs then notes[#notes + 1] = string.format("Times out after %d ms.", fn.timeoutMs) end
  local text = fn.description
  if #notes > 0 then
    local note = table.concat(notes, " ")
    if not text or text == "" then
      text = note
    else
      text = text:gsub("%s+$", "")
      text = text .. (text:find("\n") and "\n" or " ") .. note
    end
  end
  return text
end

local function render_class(out, ns)
  local c = { name = ns.errorClass.name, member = ns.errorClass.memberNameProperty }
  out[#out + 1] = schema.doc_comment(string.format(
    "A failed %s.* call rejects with this; `%s` names the function that failed.", ns.global, c.member), "")
  out[#out + 1] = string.format("declare class %s extends Error {\n  readonly name: %s;\n  readonly %s: string;\n}\n",
    c.name, q(c.name), schema.ts_name(c.member))
end

local function render_namespace(out, ns)
  if ns.description and ns.description ~= "" then out[#out + 1] = schema.doc_comment(ns.description, "") end
  out[#out + 1] = "declare const " .. ns.global .. ": {\n"
  for _, fn in ipairs(ns.members) do
    local doc = function_doc(fn)
    if doc and doc ~= "" then out[#out + 1] = schema.doc_comment(doc, "  ") end
    -- A missing argument arrives as null: optional exactly when null is fine.
    local param
    if not fn.args then
      param = "args?: unknown"
    elseif schema.accepts_null(fn.args) then
      param = "args?: " .. schema.to_ts(fn.args, "  ")
    else
      param = "args: " .. schema.to_ts(fn.args, "  ")
    end
    local result = fn.result and schema.to_ts(fn.result, "  ") or "unknown"
    out[#out + 1] = string.format("  %s(%s): Promise<%s>;\n", schema.ts_name(fn.name), param, result)
  end
  out[#out + 1] = "};\n"
end

-- The declarations for a list of namespaces, as lunarun.loader normalizes
-- them (names already checked against SPEC §9 by the host).
function describe.render(namespaces)
  if type(namespaces) ~= "table" then error("describe.render: expected a list of namespaces", 2) end
  local classes = {}
  for _, ns in ipairs(namespaces) do
    if ns.errorClass then classes[#classes + 1] = ns.errorClass.name end
  end

  local class_note = "// - A failed call rejects with an Error: catch it with try/catch around the\n//   await."
  if #classes > 0 then
    local c = classes[1]
    class_note = "// - A failed call rejects: catch it with try/catch around the await. A\n" ..
      "//   namespace with an error class (declared below) rejects with an instance\n" ..
      "//   of it (`e instanceof " .. c .. "`, `e.name === \"" .. c .. "\"`, and the failed\n" ..
      "//   function's name in the property the class declares); the others with a\n" ..
      "//   plain Error."
  end

  local out = { string.format(USAGE, class_note) }
  if #namespaces == 0 then out[#out + 1] = "//\n// No bindings are available to this program.\n" end
  out[#out + 1] = "\n" .. CONSOLE
  for _, ns in ipairs(namespaces) do
    out[#out + 1] = "\n"
    if ns.errorClass then
      render_class(out, ns)
      out[#out + 1] = "\n"
    end
    render_namespace(out, ns)
  end
  return table.concat(out)
end

return describe
