-- Ready-made bindings: HTTP requests to an allow-list of hosts.
--
--   LUNARUN_HTTP_ALLOW=api.example.com,127.0.0.1:8080 \
--     build/lunarun run --bindings bindings/http.lua program.ts
--
--   const r = await http.get({ url: "https://api.example.com/items" });
--   const items = JSON.parse(r.body);
--   await http.request({ method: "POST", url: "http://127.0.0.1:8080/x",
--                        headers: { "content-type": "application/json" }, body: "{}" });
--
-- Policy: the locals below, each overridden by its environment variable of
-- the host (read once, when the runtime loads this file; a bad value makes
-- the file fail to load, which the CLI reports as misuse, exit 2).
-- LUNARUN_HTTP_ALLOW replaces ALLOW whenever it is set, even to ""; the
-- numbers replace theirs when set to something other than "".
--
--   LUNARUN_HTTP_ALLOW        comma-separated entries, "host" (any port) or
--                             "host:port"; IPv6 in brackets ("[::1]:8080").
--                             Names match exactly, case-insensitively: no
--                             wildcards, no subdomains. Empty = nothing.
--   LUNARUN_HTTP_MAX_BYTES    largest response body, in bytes (1 MiB).
--   LUNARUN_HTTP_TIMEOUT_MS   the whole call, redirects included (10000).
--
-- Every URL, the first and each redirect's, is parsed by the same parser the
-- client connects with and checked against the list; only http and https.
-- The check is on the name in the URL: a listed name that resolves to an
-- internal address is reached (list names you trust). Proxies from the
-- environment are never used.
--
-- Redirects (301, 302, 303, 307, 308 with a Location) are followed here, at
-- most MAX_REDIRECTS, relative Locations resolved against the current URL.
-- 303 (and 301/302 after a POST) turn into a GET without a body, as browsers
-- do; 307/308 repeat the method and body. Authorization, Cookie and
-- Proxy-Authorization headers are dropped when a redirect leaves the origin
-- (scheme, host, port). A 3xx without a Location is returned as it is.
--
-- The result is { status, headers, body, bodyEncoding, url }: header names
-- lowercased (a repeated header joined with ", "; a value that is not UTF-8
-- read as Latin-1), url the final one after redirects. A body that is valid
-- UTF-8 comes as text with bodyEncoding "utf8"; any other body comes as
-- base64 with bodyEncoding "base64" (so binary responses are usable, and the
-- program can tell).
--
-- A request body without a Content-Type header is sent as
-- "text/plain;charset=UTF-8" (as fetch does). Host, Content-Length and
-- Transfer-Encoding cannot be set; CONNECT, TRACE and TRACK are refused, and
-- a HEAD request cannot have a body.
--
-- get is read-only (calls of a run may overlap); request runs alone, in the
-- order the program issued it, since it may change things on the server.
local lunarun = require("lunarun")
local uv = require("luv")

-- ---- policy (edit here; the environment overrides) --------------------------

local ALLOW = ""              -- e.g. "api.example.com,127.0.0.1:8080"
local MAX_BYTES = 1048576     -- 1 MiB
local TIMEOUT_MS = 10000
local MAX_REDIRECTS = 5

-- Request headers the client sets itself (a program's value would break the
-- framing, or send the request to a host other than the checked one).
local REFUSED_HEADERS = { host = true, ["content-length"] = true, ["transfer-encoding"] = true }
-- Dropped when a redirect leaves the origin.
local CREDENTIAL_HEADERS = { authorization = true, cookie = true, ["proxy-authorization"] = true }
-- Methods that are not sent at all.
local REFUSED_METHODS = { CONNECT = true, TRACE = true, TRACK = true }

-- ---- loading the policy -----------------------------------------------------

local function load_fail(message)
  error(message, 0)
end

local function env_count(name, default)
  local text = os.getenv(name)
  if text == nil or text == "" then return default end
  local n = text:match("^%s*(%d+)%s*$")
  n = n and math.tointeger(tonumber(n))
  if not n or n < 1 or n > 2 ^ 53 - 1 then
    load_fail(string.format("%s must be a positive integer, got %q", name, text))
  end
  return n
end

MAX_BYTES = env_count("LUNARUN_HTTP_MAX_BYTES", MAX_BYTES)
TIMEOUT_MS = env_count("LUNARUN_HTTP_TIMEOUT_MS", TIMEOUT_MS)

-- host -> true (any port) or { [port] = true }
local allow, allow_empty = {}, true
do
  local source = os.getenv("LUNARUN_HTTP_ALLOW") and "LUNARUN_HTTP_ALLOW" or "ALLOW"
  local text = os.getenv("LUNARUN_HTTP_ALLOW") or ALLOW
  for entry in text:gmatch("[^,]+") do
    entry = entry:match("^%s*(.-)%s*$"):lower()
    if entry ~= "" then
      local host, port = entry, nil
      local h, p = entry:match("^(.*):(%d+)$")
      if h and (h:sub(1, 1) == "[" or not h:find(":", 1, true)) then host, port = h, p end
      if not (host:match("^%[[%x:.]+%]$") or host:match("^[%w._-]+$")) then
        load_fail(string.format("%s: entry %q is not a host or host:port (IPv6 goes in brackets)", source, entry))
      end
      if port then
        port = math.tointeger(tonumber(port))
        if not port or port < 1 or port > 65535 then
          load_fail(string.format("%s: entry %q has a port outside 1..65535", source, entry))
        end
        if allow[host] ~= true then
          allow[host] = allow[host] or {}
          allow[host][port] = true
        end
      else
        allow[host] = true
      end
      allow_empty = false
    end
  end
end

-- ---- helpers ----------------------------------------------------------------

local function fail(message)
  error({ message = message }, 0)
end

local function now_ms()
  return uv.hrtime() / 1e6
end

-- The URL's parts if it is an http(s) URL to an allowed host and port;
-- otherwise nil and why.
local function check_url(url)
  local parts, err = lunarun.http_client.parse_url(url)
  if not parts then return nil, err end
  local rule = allow[parts.host]
  if rule == true or (rule and rule[parts.port]) then return parts end
  if allow_empty then
    return nil, string.format("host %q is not allowed (the allow-list is empty)", parts.host)
  elseif rule then
    return nil, string.format("port %d of host %q is not allowed", parts.port, parts.host)
  end
  return nil, string.format("host %q is not allowed", parts.host)
end

-- RFC 3986 §5.2.4: "/a/b/../c/./d" -> "/a/c/d".
local function remove_dots(path)
  local input, out = {}, {}
  for seg in (path .. "/"):gmatch("([^/]*)/") do input[#input + 1] = seg end
  for i = 2, #input do
    local seg = input[i]
    if seg == "." or seg == ".." then
      if seg == ".." and #out > 0 then out[#out] = nil end
      if i == #input then out[#out + 1] = "" end
    else
      out[#out + 1] = seg
    end
  end
  return "/" .. table.concat(out, "/")
end

-- Resolves a Location against the URL it came from (RFC 3986 §5.2; the
-- fragment is dropped: it never reaches a server).
local function resolve(base, ref)
  ref = ref:gsub("#.*$", "")
  if ref:match("^%a[%w+.-]*:") then return ref end
  local scheme, authority, bpath, bquery = base:match("^(%a[%w+.-]*)://([^/?#]*)([^?#]*)(%??[^#]*)")
  if not scheme then return ref end -- cannot happen: base passed the parser
  if ref:sub(1, 2) == "//" then return scheme .. ":" .. ref end
  local rpath, rquery = ref:match("^([^?]*)(.*)$")
  local path
  if rpath == "" then
    path = bpath ~= "" and bpath or "/"
    if rquery == "" then rquery = bquery end
  elseif rpath:sub(1, 1) == "/" then
    path = remove_dots(rpath)
  else
    local dir = bpath:match("^(.*/)") or "/"
    path = remove_dots(dir .. rpath)
  end
  return scheme .. "://" .. authority .. path .. rquery
end

-- A header value as UTF-8: as it is when valid, else read as Latin-1.
local function header_text(v)
  if utf8.len(v) then return v end
  return (v:gsub("[\128-\255]", function(c) return utf8.char(c:byte()) end))
end

local B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local B64_PAIR = {} -- 12 bits -> two characters
for i = 0, 4095 do
  local a, b = i >> 6, i & 63
  B64_PAIR[i] = B64:sub(a + 1, a + 1) .. B64:sub(b + 1, b + 1)
end

-- Base64 of s. A large body is encoded in slices with a zero-length wait
-- between them, so the handler never runs long without waiting (maxBusyMs).
local SLICE = 3 * 65536
local function base64(s)
  local parts = {}
  local n = #s
  local full = n - n % 3
  local byte = string.byte
  local i = 1
  while i <= full do
    local stop = math.min(i + SLICE - 1, full)
    local out = {}
    for j = i, stop, 3 do
      local a, b, c = byte(s, j, j + 2)
      local v = (a << 16) | (b << 8) | c
      out[#out + 1] = B64_PAIR[v >> 12]
      out[#out + 1] = B64_PAIR[v & 4095]
    end
    parts[#parts + 1] = table.concat(out)
    i = stop + 1
    if i <= full then lunarun.sleep(0) end
  end
  local rest = n - full
  if rest == 1 then
    local v = byte(s, n) << 16
    parts[#parts + 1] = B64_PAIR[v >> 12] .. "=="
  elseif rest == 2 then
    local a, b = byte(s, n - 1, n)
    local v = (a << 16) | (b << 8)
    parts[#parts + 1] = B64_PAIR[v >> 12] .. B64_PAIR[v & 4095]:sub(1, 1) .. "="
  end
  return table.concat(parts)
end

local STANDARD_METHODS = { DELETE = true, GET = true, HEAD = true, OPTIONS = true, PATCH = true, POST = true, PUT = true }
local REDIRECTS = { [301] = true, [302] = true, [303] = true, [307] = true, [308] = true }

-- One call: check, send, follow redirects, shape the result.
local function fetch(args)
  local method = args.method or "GET"
  if not method:match("^[%w!#%$%%&'%*%+%-%.%^_`|~]+$") or #method > 64 then
    fail(string.format("method %q is not an HTTP method", method))
  end
  if STANDARD_METHODS[method:upper()] then method = method:upper() end
  if REFUSED_METHODS[method:upper()] then fail(string.format("method %q is not allowed", method:upper())) end
  local body = args.body
  if body and method == "HEAD" then fail("a HEAD request cannot have a body") end

  local headers = {}
  for name, value in pairs(args.headers or {}) do
    if not name:match("^[%w!#%$%%&'%*%+%-%.%^_`|~]+$") then
      fail(string.format("header name %q is not valid", name))
    end
    if REFUSED_HEADERS[name:lower()] then
      fail(string.format("header %q is set by the client and cannot be given", name))
    end
    if value:find("[\0\r\n]") then
      fail(string.format("header %q has a line break or a NUL byte in its value", name))
    end
    headers[name] = value
  end

  -- As fetch() does: a string body is text unless the program says otherwise
  -- (curl would label it application/x-www-form-urlencoded).
  if body then
    local typed = false
    for name in pairs(headers) do
      if name:lower() == "content-type" then typed = true end
    end
    if not typed then headers["Content-Type"] = "text/plain;charset=UTF-8" end
  end

  local url = args.url
  local parts, why = check_url(url)
  if not parts then fail(why) end

  local deadline = now_ms() + TIMEOUT_MS
  local redirects = 0
  while true do
    local left = math.ceil(deadline - now_ms())
    if left <= 0 then fail(string.format("request timed out after %d ms", TIMEOUT_MS)) end
    local res, err, code = lunarun.http({
      method = method, url = url, headers = headers, body = body, timeoutMs = left, maxBytes = MAX_BYTES,
    })
    if not res then
      if code == "ETIMEDOUT" then err = string.format("request timed out after %d ms", TIMEOUT_MS) end
      fail(err)
    end

    local location = res.headers.location
    if not (REDIRECTS[res.status] and location) then
      local out_headers = {}
      for k, v in pairs(res.headers) do out_headers[k] = header_text(v) end
      local text, encoding = res.body, "utf8"
      if not utf8.len(text) then text, encoding = base64(text), "base64" end
      return { status = res.status, headers = out_headers, body = text, bodyEncoding = encoding, url = url }
    end

    if redirects == MAX_REDIRECTS then
      fail(string.format("too many redirects (more than %d)", MAX_REDIRECTS))
    end
    redirects = redirects + 1
    local next_url = resolve(url, header_text(location))
    local next_parts, refused = check_url(next_url)
    if not next_parts then fail(string.format("redirect to %q refused: %s", next_url, refused)) end
    if res.status == 303 and method ~= "HEAD" or (res.status == 301 or res.status == 302) and method == "POST" then
      method, body = "GET", nil
      for name in pairs(headers) do
        local l = name:lower()
        if l == "content-type" or l == "content-encoding" or l == "content-language" or l == "content-location" then
          headers[name] = nil
        end
      end
    end
    if next_parts.scheme ~= parts.scheme or next_parts.host ~= parts.host or next_parts.port ~= parts.port then
      for name in pairs(headers) do
        if CREDENTIAL_HEADERS[name:lower()] then headers[name] = nil end
      end
    end
    url, parts = next_url, next_parts
  end
end

-- ---- the namespace ----------------------------------------------------------

-- The allowed hosts, for the description a model reads.
local allowed_note
if allow_empty then
  allowed_note = "No host is allowed at present."
else
  local names = {}
  for host, rule in pairs(allow) do
    if rule == true then
      names[#names + 1] = host
    else
      for port in pairs(rule) do names[#names + 1] = host .. ":" .. port end
    end
  end
  table.sort(names)
  allowed_note = "Allowed: " .. table.concat(names, ", ") .. "."
end

local response_type = {
  type = "object",
  properties = {
    status = { type = "integer", description = "The HTTP status of the final response." },
    headers = {
      type = "object", additionalProperties = { type = "string" },
      description = "Response headers, names lowercased; a repeated header is joined with \", \".",
    },
    body = { type = "string", description = "The body: text when bodyEncoding is \"utf8\", else base64." },
    bodyEncoding = { enum = { "utf8", "base64" }, description = "\"base64\" when the body is not valid UTF-8." },
    url = { type = "string", description = "The final URL, after redirects." },
  },
  required = { "status", "headers", "body", "bodyEncoding", "url" },
  additionalProperties = false,
}

local limits = string.format("Only allow-listed hosts (host or host:port), http and https. " ..
  "Redirects are followed (at most %d). A response body may be at most %d bytes; a call times out after %d ms. %s",
  MAX_REDIRECTS, MAX_BYTES, TIMEOUT_MS, allowed_note)

return {
  global = "http",
  description = "HTTP requests to the hosts the operator allows. " .. limits,
  errorClass = { name = "HttpError", memberNameProperty = "op" },
  functions = {
    request = {
      description = "Sends a request and resolves with the final response (any status, 4xx and 5xx " ..
        "included); rejects when the host is not allowed, on a network error, a timeout or a body over the limit.",
      args = {
        type = "object",
        properties = {
          method = { type = "string", description = "GET (the default), POST, PUT, PATCH, DELETE, HEAD, OPTIONS, ..." },
          url = { type = "string", description = "An absolute http:// or https:// URL." },
          headers = {
            type = "object", additionalProperties = { type = "string" },
            description = "Request headers (not Host, Content-Length or Transfer-Encoding).",
          },
          body = { type = "string", description = "The request body, sent as UTF-8 text." },
        },
        required = { "url" },
        additionalProperties = false,
      },
      result = response_type,
      handler = fetch,
    },

    get = {
      description = "GET url; resolves like request.",
      args = {
        type = "object",
        properties = { url = { type = "string", description = "An absolute http:// or https:// URL." } },
        required = { "url" },
        additionalProperties = false,
      },
      result = response_type,
      readOnly = true,
      handler = function(args) return fetch({ url = args.url }) end,
    },
  },
}
