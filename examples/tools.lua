-- A bindings file: one namespace, `tools`, with three functions the program
-- can call. Each function receives the decoded argument and returns the
-- resolution; raising (a string or a table with `message`) rejects the call.
local lunarun = require("lunarun")

local inventory = { apples = 12, pears = 0, plums = 7 }

return {
  global = "tools",
  errorClass = { name = "ToolCallError", memberNameProperty = "toolName" },
  functions = {
    inc = function(args)
      return args.v + 1
    end,

    stock = function(args)
      local n = inventory[args.fruit]
      if n == nil then
        error({ message = "no such fruit: " .. tostring(args.fruit) })
      end
      return { fruit = args.fruit, count = n, available = n > 0 }
    end,

    fruits = function()
      local names = lunarun.array()
      for name in pairs(inventory) do names[#names + 1] = name end
      table.sort(names)
      return names
    end,
  },
}
