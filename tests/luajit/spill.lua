-- More live values than registers in a hot loop: LuaJIT's traces for it spill, and need a stack
-- frame larger than the interpreter's (`add rsp, -n` at the head of the trace, `add rsp, n`
-- before a trace leaves for the interpreter). Argument: seconds to run (default 1).
local seconds = tonumber(arg and arg[1]) or 1
local function work(n)
  local a1, a2, a3, a4, a5, a6, a7, a8, a9, a10 = n, n+1, n+2, n+3, n+4, n+5, n+6, n+7, n+8, n+9
  local a11, a12, a13, a14, a15, a16, a17, a18, a19, a20 =
    n+10, n+11, n+12, n+13, n+14, n+15, n+16, n+17, n+18, n+19
  local b1, b2, b3, b4, b5, b6, b7, b8, b9, b10 =
    n*2, n*3, n*5, n*7, n*11, n*13, n*17, n*19, n*23, n*29
  local b11, b12, b13, b14, b15, b16, b17, b18, b19, b20 =
    n*31, n*37, n*41, n*43, n*47, n*53, n*59, n*61, n*67, n*71
  local s = 0
  for i = 1, 100 do
    s = s + (a1*i)%3 + (a2*i)%5 + (a3*i)%7 + (a4*i)%11 + (a5*i)%13
      + (a6*i)%17 + (a7*i)%19 + (a8*i)%23 + (a9*i)%29 + (a10*i)%31
      + (a11*i)%37 + (a12*i)%41 + (a13*i)%43 + (a14*i)%47 + (a15*i)%53
      + (a16*i)%59 + (a17*i)%61 + (a18*i)%67 + (a19*i)%71 + (a20*i)%73
      + (b1*i)%3 + (b2*i)%5 + (b3*i)%7 + (b4*i)%11 + (b5*i)%13
      + (b6*i)%17 + (b7*i)%19 + (b8*i)%23 + (b9*i)%29 + (b10*i)%31
      + (b11*i)%37 + (b12*i)%41 + (b13*i)%43 + (b14*i)%47 + (b15*i)%53
      + (b16*i)%59 + (b17*i)%61 + (b18*i)%67 + (b19*i)%71 + (b20*i)%73
  end
  return s
end
local deadline, total = os.clock() + seconds, 0
while os.clock() < deadline do for n = 1, 1000 do total = total + work(n) end end
print(total)
