-- A notebook the program can read and write, with policy around it
-- (README, "Policy"). The notes live in this file's table: they last as long
-- as the runtime (from the CLI, one run).
local lunarun = require("lunarun")

local notes = { groceries = "milk, eggs", todo = "call the plumber" }

local function fail(message)
  error({ message = message }, 0) -- a table with `message`: no position prefix
end

local title = { type = "string", description = "The note's title (1 to 100 characters)." }

return {
  global = "notes",
  description = "A notebook: short text notes under unique titles.",
  errorClass = { name = "NotesError", memberNameProperty = "op" },

  -- Defaults for every function below; each may override them.
  policy = { timeoutMs = 1000, maxBusyMs = 200 },

  -- Audit: one line on stderr per call (refused ones too).
  hooks = {
    after = function(call, outcome)
      io.stderr:write(string.format("audit run=%d call=%d %s.%s %s %.1fms\n", call.run, call.id,
        call.namespace, call.name, outcome.ok and "ok" or ("failed: " .. outcome.message), outcome.durationMs))
    end,
  },

  functions = {
    list = {
      description = "The titles of all notes, sorted.",
      result = { type = "array", items = "string" },
      readOnly = true, -- read-only calls may overlap
      handler = function()
        local titles = lunarun.array() -- stays [] when there are no notes
        for t in pairs(notes) do titles[#titles + 1] = t end
        table.sort(titles)
        return titles
      end,
    },

    read = {
      description = "The text of one note. Fails when there is no note with that title.",
      args = { type = "object", properties = { title = title }, required = { "title" }, additionalProperties = false },
      result = "string",
      readOnly = true,
      handler = function(args)
        return notes[args.title] or fail("no note titled " .. args.title)
      end,
    },

    write = {
      description = "Creates or replaces a note.",
      args = {
        type = "object",
        properties = { title = title, text = { type = "string", description = "At most 10000 bytes." } },
        required = { "title", "text" },
        additionalProperties = false,
      },
      result = "null",
      maxCalls = 5,     -- per run
      timeoutMs = 2000, -- overrides the namespace's 1000
      handler = function(args) -- not read-only: runs alone, in the order the program issued it
        local n = utf8.len(args.title, 1, -1, true) -- lax: a lone surrogate counts as one
        if n == 0 or n > 100 then fail("a title has 1 to 100 characters") end
        if #args.text > 10000 then fail("a note holds at most 10000 bytes") end
        notes[args.title] = args.text
        return lunarun.null
      end,
    },

    remove = {
      description = "Deletes a note; resolves with true when it existed.",
      args = { type = "object", properties = { title = title }, required = { "title" }, additionalProperties = false },
      result = "boolean",
      maxCalls = 5,
      handler = function(args)
        local existed = notes[args.title] ~= nil
        notes[args.title] = nil
        return existed
      end,
    },
  },
}
