-- Ready-made bindings: the wall clock and a way to wait.
--
--   build/lunarun run --bindings bindings/clock.lua program.ts
--
--   const { epochMs, iso } = await clock.now();   // iso: "2025-01-31T12:34:56.789Z"
--   await clock.sleep({ ms: 250 });                // resolves with null
--
-- Both functions are read-only (they change nothing), so calls of one run
-- may overlap: `await Promise.all([clock.sleep({ ms: 100 }), ...])` waits
-- about 100 ms, not the sum. Waiting in sleep is not charged to the
-- program's computeMs, but it does count against the run's maxWallMs.
local lunarun = require("lunarun")
local uv = require("luv")

-- The longest one sleep call may wait, in milliseconds (edit to taste).
local MAX_SLEEP_MS = 60000

local function fail(message)
  error({ message = message }, 0)
end

-- Milliseconds since 1970-01-01T00:00:00Z as an integer, and its ISO text.
local function now()
  local sec, usec = uv.gettimeofday()
  local ms = usec // 1000
  return {
    epochMs = sec * 1000 + ms,
    iso = os.date("!%Y-%m-%dT%H:%M:%S", sec) .. string.format(".%03dZ", ms),
  }
end

return {
  global = "clock",
  description = "The host's wall clock (UTC), and a way to wait.",
  errorClass = { name = "ClockError", memberNameProperty = "op" },
  policy = { readOnly = true },
  functions = {
    now = {
      description = "The current time: milliseconds since the Unix epoch, and the same instant as " ..
        "UTC ISO-8601 text with milliseconds (e.g. \"2025-01-31T12:34:56.789Z\").",
      args = { type = { "object", "null" }, additionalProperties = false },
      result = {
        type = "object",
        properties = {
          epochMs = { type = "integer", description = "Milliseconds since 1970-01-01T00:00:00Z." },
          iso = { type = "string", description = "UTC, YYYY-MM-DDTHH:mm:ss.sssZ." },
        },
        required = { "epochMs", "iso" },
        additionalProperties = false,
      },
      handler = function() return now() end,
    },

    sleep = {
      description = "Waits ms milliseconds (0 to " .. MAX_SLEEP_MS .. "), then resolves with null. " ..
        "Concurrent sleeps overlap.",
      args = {
        type = "object",
        properties = {
          ms = { type = "integer", description = "How long to wait, 0 to " .. MAX_SLEEP_MS .. " ms." },
        },
        required = { "ms" },
        additionalProperties = false,
      },
      result = { type = "null" },
      handler = function(args)
        local ms = args.ms
        if ms < 0 or ms > MAX_SLEEP_MS then
          fail(string.format("ms must be between 0 and %d, got %s", MAX_SLEEP_MS, tostring(ms)))
        end
        lunarun.sleep(ms)
        return lunarun.null
      end,
    },
  },
}
