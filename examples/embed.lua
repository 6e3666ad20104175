-- A Lua program that embeds lunarun: a runtime on luv's loop, a namespace
-- given as a Lua table, one run in a coroutine, then dispose.
--
--   LUA_CPATH="build/lua/?.so;;" lua5.4 examples/embed.lua ['TypeScript program']
local uv = require("luv")
local lunarun = require("lunarun")

local rt = lunarun.runtime({ computeMs = 5000 }) -- misuse (a bad key or value) raises

rt:add({
  global = "weather",
  functions = {
    -- A handler may wait (a timer here; HTTP or a process elsewhere)
    -- without blocking other calls or other runs.
    forecast = function(args)
      lunarun.sleep(20)
      return { city = args.city, sky = "clear", high = 21 }
    end,
  },
})

local program = arg[1] or [[
const f = await weather.forecast({ city: "Lisbon" });
console.log(`${f.city}: ${f.sky}`);
return f.high;
]]

local status = 2
coroutine.wrap(function()
  local r = rt:run(program, { -- yields until the run is over
    on_log = function(text) print("log: " .. text) end,
  })
  print(r.json) -- the result as JSON; r.ok, r.value, r.logs, r.error are Lua values
  status = r.ok and 0 or 1
  rt:dispose() -- yields until every sandbox is gone
end)()

uv.run() -- returns when nothing is left on the loop
os.exit(status)
