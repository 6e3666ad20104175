-- Ready-made bindings: the tools of upstream MCP servers, one namespace per
-- server, one function per tool.
--
--   LUNARUN_MCP_SERVERS=servers.lua build/lunarun run --bindings bindings/mcp.lua program.ts
--
-- where servers.lua returns the servers (or edit SERVERS below):
--
--   return {
--     github = {
--       command = "npx", args = { "-y", "@modelcontextprotocol/server-github" },
--       env = { GITHUB_PERSONAL_ACCESS_TOKEN = os.getenv("GITHUB_TOKEN") },
--       policy = { timeoutMs = 30000, maxCalls = 20 },      -- as for any namespace
--       tools = { create_issue = { maxCalls = 1 } },         -- per-tool overrides
--     },
--   }
--
--   const issue = await github.create_issue({ owner: "me", repo: "x", title: "t" });
--
-- Each server starts once per runtime (while this file loads: its tools and
-- their JSON Schemas become the functions and their declared types, which
-- `lunarun describe` prints and every call is checked against), and stays
-- up for every run. A tool marked readOnlyHint is read-only. A result with
-- isError rejects with the namespace's error class (GithubError, the tool's
-- name in `tool`); otherwise the call resolves with structuredContent when
-- there is one, else the text content. A server that dies fails the calls
-- it had in flight ("MCP server "github" exited ...") and is started again
-- for the next call. Fields: command, args, env (added to lunarun's own
-- environment), cwd, description, errorClass, policy, hooks, tools,
-- startTimeoutMs (default 30000). The same from any bindings file:
-- `return require("lunarun.mcp_client").namespaces(servers)`.
local SERVERS = nil

local servers = SERVERS
local file = os.getenv("LUNARUN_MCP_SERVERS")
if file and file ~= "" then
  local chunk, err = loadfile(file, "t")
  if not chunk then error("LUNARUN_MCP_SERVERS: " .. tostring(err), 0) end
  servers = chunk()
end
if type(servers) ~= "table" or next(servers) == nil then
  error("no MCP servers listed: set LUNARUN_MCP_SERVERS to a Lua file that returns them, or edit SERVERS in bindings/mcp.lua", 0)
end
return require("lunarun.mcp_client").namespaces(servers)
