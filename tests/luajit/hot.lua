-- A hot loop with a Lua call chain main -> alpha -> beta -> gamma -> leaf, for the LuaJIT
-- module's test. Argument: seconds to run (default 2). LuaJIT inlines the chain into the
-- loop's trace; with -joff every call is an interpreter frame.
local seconds = tonumber(arg and arg[1]) or 2

local function leaf(x)
  local a = (x * 31 + 7) % 1009
  local b = (a * a + x) % 977
  return (a * b + 3) % 101
end

local function gamma(x) return leaf(x + 1) end
local function beta(x) return gamma(x + 1) end
local function alpha(x) return beta(x + 1) end

local function main()
  local deadline = os.clock() + seconds
  local total = 0
  while os.clock() < deadline do
    for n = 1, 100000 do total = total + alpha(n) end
  end
  return total
end

print(main())
