-- Checks of the LuaJIT module without a profiler (run by tests/luajit/run.sh with LUA_PATH,
-- JITUNWIND_LIBRARY and JITUNWIND_DIR set): traces are published with their names and rows,
-- trace numbers LuaJIT reuses after the GC freed a prototype's traces are republished, the
-- perf map names the traces, and a flush retires them all. Argument: the tests/luajit directory.
local dir = assert(arg[1], "usage: check_module.lua TESTS_LUAJIT_DIR")
local J = require("jitunwind")
local jutil = require("jit.util")

local function fail(fmt, ...)
  io.stderr:write("luajit: FAILED: ", string.format(fmt, ...), "\n")
  os.exit(1)
end

local chunks = {}
local function run(script, seconds)
  chunks[script] = assert(loadfile(dir .. "/" .. script))
  chunks[script](tostring(seconds))
end

local function named(pattern)
  local found = {}
  for _, t in ipairs(J.traces()) do
    if not t.name:match("^TRACE_%d+ [%w_.]+:%d+ %([^)]+%)") then
      fail("badly named trace %q", t.name)
    end
    if t.name:match(pattern) then found[#found + 1] = t end
  end
  return found
end

run("hot.lua", 0.2)
-- Normally main's inner loop (hot.lua:20) with alpha..leaf inlined: "main>alpha>...>leaf".
-- LuaJIT's hot counters are shared by bytecodes whose addresses collide in a small hash, so
-- now and then a callee gets hot first and has a trace of its own ("alpha>beta>gamma>leaf")
-- that main's trace links to: the five functions are then named across the traces. No hot.lua
-- trace needs a stack frame of its own: all are CFA = rsp + 96.
local hot = named("hot%.lua:")
if #hot == 0 then fail("no trace of hot.lua among %d traces", #J.traces()) end
local names, longest = {}, hot[1]
for _, t in ipairs(hot) do
  if t.rows ~= "0:CFA=rsp+96" then fail("%s: rows %s, not CFA=rsp+96", t.name, t.rows) end
  names[#names + 1] = t.name
  if #t.name > #longest.name then longest = t end
end
names = " " .. table.concat(names, " ") .. " "
for _, f in ipairs({"main", "alpha", "beta", "gamma", "leaf"}) do
  if not names:find("[ >]" .. f .. "[ >]") then fail("no hot.lua trace names %s:%s", f, names) end
end
print("luajit: published " .. #J.traces() .. " traces, e.g. " .. longest.name)

-- hot.lua's prototypes become garbage: collecting them frees their traces (LuaJIT sends no
-- event) and LuaJIT reuses their numbers. A trace with a stack frame of its own: the rows
-- follow its head's and tail's rsp changes.
chunks["hot.lua"] = nil
collectgarbage()
collectgarbage()
run("spill.lua", 0.3)
local adjusted = 0
local spill = named("spill%.lua")
-- hot.lua's traces went with its prototypes: only live traces, at their addresses, are published.
for _, t in ipairs(J.traces()) do
  local _, address = jutil.tracemc(t.number)
  if address ~= t.address then fail("%s is published but LuaJIT freed it", t.name) end
end
if #spill ~= #J.traces() then fail("%d traces published, %d of spill.lua", #J.traces(), #spill) end
for _, t in ipairs(spill) do
  if t.rows:match("CFA=rsp%+(%d+)") ~= "96" or t.rows:match(" ") then adjusted = adjusted + 1 end
end
if adjusted == 0 then fail("no spill.lua trace has a stack adjustment in its rows") end
print("luajit: " .. adjusted .. " spill.lua traces have rows for their stack adjustment")

J.flush()
local mapname = (os.getenv("JITUNWIND_DIR") or "/tmp") .. "/perf-" ..
                  io.open("/proc/self/stat"):read("*l"):match("^(%d+)") .. ".map"
local map = io.open(mapname):read("*a")
for _, t in ipairs(J.traces()) do
  local line = string.format("%x %x %s\n", t.address, t.size, t.name)
  if not map:find(line, 1, true) then fail("%s has no line %q", mapname, line) end
end
print("luajit: the perf map names every published trace")

jit.flush()
if #J.traces() ~= 0 then fail("%d traces still published after jit.flush()", #J.traces()) end
print("luajit: jit.flush() retired every trace")
