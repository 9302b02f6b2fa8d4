-- jitunwind for LuaJIT: every trace LuaJIT compiles becomes a named, unwindable function for
-- perf, gdb and jitwalk, without changing LuaJIT. Load it before the code to profile:
--
--   LUA_PATH="/prefix/share/lua/5.1/?.lua;;" luajit -e 'require("jitunwind")' script.lua
--
-- It listens to LuaJIT's trace events (jit.attach) and, through LuaJIT's FFI, publishes each
-- compiled trace with the SDK's C API (jitunwind/c/embed.h) as a window over the trace's
-- machine code, which stays LuaJIT's: one function named
--   TRACE_<n> <chunk>:<line> (<how it ends>)        e.g. "TRACE_1 hot.lua:20 (loop)"
--   TRACE_<n> <chunk>:<line> (<parent>/<exit> ...)   for a side trace of trace <parent>
-- after the Lua source line the trace starts at (as `luajit -jv` names traces), with unwind rows
-- saying where the caller is: trace code runs inside the interpreter's C frame (see
-- docs/jitwalk.md, "LuaJIT", for the rule and how it was established). A flush of the trace
-- cache (jit.flush(), or LuaJIT running out of machine-code space) retires every window.
--
-- Configuration (environment): JITUNWIND_LIBRARY, the path of libjitunwind.so.1 (else the
-- library next to this module's install prefix, else the dynamic loader's search); the SDK's
-- own variables (JITUNWIND_PUBLISH, JITUNWIND_DIR, ...: docs/c-api.md) choose the publishers
-- and where the perf map goes (/tmp/perf-PID.map by default, which perf report reads).
--
-- The module returns a table: .traces() lists {number, name, address, size, rows} of the
-- published traces (after unpublishing those the GC freed since the last trace event);
-- .flush() writes the buffered perf map and jitdump now; .stop() detaches from the events and
-- ends the session (the windows go with it).
local ffi = require("ffi")
local jit = require("jit")
local jutil = require("jit.util")

if jit.arch ~= "x64" or jit.os ~= "Linux" then
  error("jitunwind: traces are described for LuaJIT on x64 Linux only (this is " .. jit.arch ..
        " " .. jit.os .. ")")
end

ffi.cdef [[
typedef int jitunwind_status;
typedef struct jitunwind_error { jitunwind_status status; char message[512]; } jitunwind_error;
typedef struct jitunwind_frame_row {
  uint32_t pc_offset; uint8_t cfa_base, ra_rule, fp_rule, ra_mangled;
  uint8_t cfa_reg, cfa_deref, ra_reg, fp_reg;
  int32_t cfa_offset, ra_offset, fp_offset; uint32_t reserved[2];
} jitunwind_frame_row;
typedef struct jitunwind_saved_register {
  uint32_t pc_offset; uint16_t dwarf_reg; uint8_t rule, reserved; int32_t cfa_offset;
} jitunwind_saved_register;
typedef struct jitunwind_function {
  uint64_t start; uint32_t size, pcmask_rep; const jitunwind_frame_row* rows;
  size_t row_count; const jitunwind_saved_register* saved_registers;
  size_t saved_register_count; uint32_t flags; uint8_t pauth_key, reserved8[3];
  uint64_t reserved[2];
} jitunwind_function;
typedef struct jitunwind_described_window_options {
  uint32_t struct_size, reserved; uint64_t text_start; size_t text_size, sframe_capacity;
} jitunwind_described_window_options;
typedef struct jitunwind_session jitunwind_session;
typedef struct jitunwind_window jitunwind_window;
jitunwind_status jitunwind_session_create_from_env(void* log, void* user,
    jitunwind_session** out, jitunwind_error* error);
void jitunwind_session_destroy(jitunwind_session* session);
size_t jitunwind_session_poll(jitunwind_session* session);
jitunwind_status jitunwind_session_flush(jitunwind_session* session, jitunwind_error* error);
jitunwind_status jitunwind_session_release(jitunwind_session* session, jitunwind_window* window,
    jitunwind_error* error);
void jitunwind_described_window_options_init(jitunwind_described_window_options* options);
jitunwind_status jitunwind_session_describe_window(jitunwind_session* session,
    const jitunwind_described_window_options* options, jitunwind_window** out,
    jitunwind_error* error);
jitunwind_status jitunwind_window_append(jitunwind_window* window, const char* name,
    const jitunwind_function* function, uint64_t moved_from, jitunwind_error* error);
jitunwind_status jitunwind_window_publish(jitunwind_window* window, jitunwind_error* error);
jitunwind_status jitunwind_window_retire(jitunwind_window* window, uint32_t grace_ms,
    void* on_grace_over, void* user, jitunwind_error* error);
]]

-- The library: $JITUNWIND_LIBRARY, else <prefix>/lib*/libjitunwind.so.1 when this file is
-- installed as <prefix>/share/lua/5.1/jitunwind.lua, else the loader's search.
local function load_library()
  local explicit = os.getenv("JITUNWIND_LIBRARY")
  if explicit and explicit ~= "" then return ffi.load(explicit) end
  local here = debug.getinfo(1, "S").source:match("^@(.*)/share/lua/5%.1/[^/]*$")
  if here then
    for _, dir in ipairs({"lib", "lib64", "lib/x86_64-linux-gnu"}) do
      local ok, lib = pcall(ffi.load, here .. "/" .. dir .. "/libjitunwind.so.1")
      if ok then return lib end
    end
  end
  local ok, lib = pcall(ffi.load, "libjitunwind.so.1")
  if ok then return lib end
  error("jitunwind: cannot load libjitunwind.so.1 (" .. tostring(lib) ..
        "); set JITUNWIND_LIBRARY to its path")
end

local C = load_library()

local function check(status, err, what)
  if status ~= 0 then
    error(string.format("jitunwind: %s failed: %s", what, ffi.string(err.message)), 3)
  end
end

-- The interpreter's C frame on x64 (LuaJIT's vm_x64.dasc / vm_x86.dasc, and the .eh_frame
-- entry of lj_vm): the return address is at CFA-8, the caller's rbp at CFA-16, and in the VM's
-- body and in trace code rsp = CFA - 80 (4 pushes + CFRAME_SPACE 40 + the return address).
-- A LuaJIT built with NO_UNWIND also pushes r13 and r12 (96): JITUNWIND_LUAJIT_CFRAME overrides.
local CFRAME = tonumber(os.getenv("JITUNWIND_LUAJIT_CFRAME") or "") or 80
-- BC_JLOOP (vm_x64.dasc, POSIX) enters a trace after `sub rsp, 16` to save r12 and r13, which
-- only compiled code uses; lj_vm_exit_interp adds them back. Trace code is 16 bytes deeper.
local ON_TRACE = CFRAME + 16

local session_box = ffi.new("jitunwind_session*[1]")
do
  local err = ffi.new("jitunwind_error")
  check(C.jitunwind_session_create_from_env(nil, nil, session_box, err), err, "session")
end
local session = session_box[0]

local published = {} -- trace number -> {window, name, address, size, spadjust, rows}
-- trace number -> {func, pc, parent, exit, stitched, functions, seen} of a trace being recorded
local starting = {}

-- Bytes of a trace's machine code (the copy jit.util.tracemc returns), by 0-based offset.
local function u8(code, offset)
  return code:byte(offset + 1)
end

local function s32(code, offset)
  local a, b, c, d = code:byte(offset + 1, offset + 4)
  local v = a + b * 0x100 + c * 0x10000 + d * 0x1000000
  return v >= 0x80000000 and v - 0x100000000 or v
end

-- `add rsp, imm8/imm32` (48 83 C4 ib / 48 81 C4 id: LuaJIT's emit_spsub adds the negated size)
-- ending at `offset`: its signed immediate, or nil.
local function rsp_add_before(code, offset)
  if offset >= 4 and u8(code, offset - 4) == 0x48 and u8(code, offset - 3) == 0x83 and
      u8(code, offset - 2) == 0xC4 then
    local v = u8(code, offset - 1)
    return v >= 0x80 and v - 0x100 or v
  end
  if offset >= 7 and u8(code, offset - 7) == 0x48 and u8(code, offset - 6) == 0x81 and
      u8(code, offset - 5) == 0xC4 then
    return s32(code, offset - 4)
  end
  return nil
end

-- The stack adjustment at the head of a trace (lj_asm.c, asm_head_root / asm_head_side): the
-- trace stores its number in the VM state (`mov dword [r14+disp], traceno`), and a trace that
-- needs more spill slots than the interpreter's frame holds (or than its parent trace used)
-- lowers rsp right before. Returns the offset after that `add rsp, -n` and n, or nil.
local function head_adjustment(code, size, traceno)
  local limit = math.min(size - 8, 512)
  for p = 0, limit do
    if u8(code, p) == 0x41 and u8(code, p + 1) == 0xC7 then
      local modrm, imm_at = u8(code, p + 2), nil
      if modrm == 0x86 then imm_at = p + 7 elseif modrm == 0x46 then imm_at = p + 4 end
      if imm_at and imm_at + 4 <= size and s32(code, imm_at) == traceno then
        local added = rsp_add_before(code, p)
        if added and added < 0 then return p, -added end
        return nil
      end
    end
  end
  return nil
end

-- The tail of a trace that leaves through the interpreter or another trace (asm_tail_fixup):
-- `add rsp, spadjust` then `jmp` (E9 rel32, or FF 25 rel32), then NOP padding. Returns the
-- offset after the `add`, or nil.
local function tail_adjustment(code, size, spadjust)
  for p = math.max(size - 24, 4), size - 5 do
    local jmp_len = (u8(code, p) == 0xE9 and 5) or
                    (u8(code, p) == 0xFF and u8(code, p + 1) == 0x25 and 6) or nil
    if jmp_len and p + jmp_len <= size and rsp_add_before(code, p) == spadjust then
      local padded = true
      for q = p + jmp_len, size - 1 do padded = padded and u8(code, q) == 0x90 end
      if padded then return p end
    end
  end
  return nil
end

local function row(offset, spadjust)
  local r = ffi.new("jitunwind_frame_row")
  r.pc_offset, r.cfa_base, r.cfa_offset = offset, 0, ON_TRACE + spadjust
  r.ra_rule, r.ra_offset = 0, -8
  r.fp_rule, r.fp_offset = 1, -16
  return r
end

-- Rows of one trace: rsp is CFA - ON_TRACE, lowered by the trace's stack adjustment between its
-- head's `add rsp, -n` and its tail's `add rsp, n` (a side trace enters with its parent's
-- adjustment). Calls from a trace to C (lj_tab_*, lj_str_* ...) leave rsp as it is here.
local function trace_rows(traceno, code, size, entry_adjust, loops)
  local rows = {row(0, entry_adjust)}
  local spadjust = entry_adjust
  local after_head, delta = head_adjustment(code, size, traceno)
  if after_head then
    spadjust = entry_adjust + delta
    if after_head == 0 then rows = {} end
    rows[#rows + 1] = row(after_head, spadjust)
  end
  if spadjust ~= 0 and not loops then
    local after_add = tail_adjustment(code, size, spadjust)
    if after_add and after_add > rows[#rows].pc_offset then rows[#rows + 1] = row(after_add, 0) end
  end
  return rows, spadjust
end

local function shortloc(func, pc)
  local fi = jutil.funcinfo(func, pc)
  local loc = fi.loc or (fi.source and (fi.source .. ":" .. (fi.currentline or 0))) or "?"
  return (loc:gsub("^@", ""):gsub("^.*/", ""))
end

-- The name of a Lua function for trace names: what its source line says after `function`
-- (`local function alpha(x)`, `function M.run()`) or before `= function`, else where it is
-- defined. A heuristic (Lua functions have no names of their own), cached per definition.
local source_lines, function_names = {}, {}
local function function_name(func)
  local fi = jutil.funcinfo(func)
  if not fi.linedefined then return nil end -- a C function or a fast function
  local key = tostring(fi.source) .. ":" .. fi.linedefined
  if function_names[key] then return function_names[key] end
  local name
  local path = fi.source and fi.source:match("^@(.*)$")
  if path and fi.linedefined > 0 then
    local lines = source_lines[path]
    if lines == nil then
      lines = false
      local f = io.open(path, "r")
      if f then
        lines = {}
        for line in f:lines() do lines[#lines + 1] = line end
        f:close()
      end
      source_lines[path] = lines
    end
    local line = lines and lines[fi.linedefined]
    if line then
      name = line:match("function%s+([%w_.:]+)%s*%(") or line:match("([%w_.]+)%s*=%s*function%s*%(")
    end
  end
  if fi.linedefined == 0 then name = "(main chunk)" end
  name = name or (fi.loc and fi.loc:gsub("^.*/", ""))
  function_names[key] = name
  return name
end

-- "TRACE_1 hot.lua:20 (loop) main>alpha>beta>gamma>leaf": where the trace starts, how it ends
-- (as `luajit -jv` says), then the Lua functions it recorded, in order of first appearance
-- (those beyond the first are inlined into the trace's machine code).
local function trace_name(traceno, start, info)
  local ending = info.linktype or "?"
  if ending == "root" or (info.link and info.link ~= 0 and info.link ~= traceno) then
    ending = "-> " .. tostring(info.link)
  end
  if start.stitched then
    ending = start.parent .. "/stitch " .. ending
  elseif start.parent then
    ending = start.parent .. "/" .. start.exit .. " " .. ending
  end
  local name = string.format("TRACE_%d %s (%s)", traceno, shortloc(start.func, start.pc), ending)
  if #start.functions > 0 then name = name .. " " .. table.concat(start.functions, ">") end
  return name
end

local function publish(traceno)
  local start = starting[traceno]
  starting[traceno] = nil
  local code, address = jutil.tracemc(traceno)
  if not start or not code or #code == 0 then return end
  local size = #code
  local info = jutil.traceinfo(traceno) or {}
  local parent = not start.stitched and start.parent and published[start.parent]
  local rows, spadjust = trace_rows(traceno, code, size, parent and parent.spadjust or 0,
                                    info.linktype == "loop")
  local name = trace_name(traceno, start, info)
  local err = ffi.new("jitunwind_error")
  local box = ffi.new("jitunwind_window*[1]")
  local range = ffi.new("jitunwind_described_window_options")
  C.jitunwind_described_window_options_init(range)
  range.text_start, range.text_size = address, size
  check(C.jitunwind_session_describe_window(session, range, box, err), err,
        "describing " .. name)
  local fn = ffi.new("jitunwind_function")
  local array = ffi.new("jitunwind_frame_row[?]", #rows)
  for i, r in ipairs(rows) do array[i - 1] = r end
  fn.start, fn.size, fn.rows, fn.row_count = address, size, array, #rows
  check(C.jitunwind_window_append(box[0], name, fn, 0, err), err, "appending " .. name)
  check(C.jitunwind_window_publish(box[0], err), err, "publishing " .. name)
  local shape = {}
  for i, r in ipairs(rows) do
    shape[i] = string.format("%d:CFA=rsp+%d", r.pc_offset, r.cfa_offset)
  end
  published[traceno] = {window = box[0], name = name, address = address, size = size,
                        spadjust = spadjust, rows = table.concat(shape, " ")}
end

local function retire(traceno, err)
  local t = published[traceno]
  check(C.jitunwind_window_retire(t.window, 0, nil, nil, err), err, "retiring " .. t.name)
  check(C.jitunwind_session_release(session, t.window, err), err, "releasing " .. t.name)
  published[traceno] = nil
end

-- Traces the GC freed since (jit.util.traceinfo gives nil for them) are unpublished.
local function retire_freed()
  local err = ffi.new("jitunwind_error")
  for traceno in pairs(published) do
    if not jutil.traceinfo(traceno) then retire(traceno, err) end
  end
end

-- Every trace is gone (lj_trace_flushall): unpublish them all before LuaJIT reuses the memory.
local function retire_all()
  local err = ffi.new("jitunwind_error")
  for traceno in pairs(published) do retire(traceno, err) end
  starting = {}
  C.jitunwind_session_poll(session)
end

local function on_trace(what, traceno, func, pc, otr, oex)
  if what == "start" then
    -- LuaJIT frees the root traces of a prototype the GC collects (lj_trace_flushproto) with
    -- no event, and reuses their numbers: a number starting again means the old trace is gone.
    -- Its machine code stays until the next full flush (only lj_mcode_clear frees it).
    if published[traceno] then retire(traceno, ffi.new("jitunwind_error")) end
    -- A stitched trace (exit -1) is a root trace that continues its "parent" after a call.
    starting[traceno] = {func = func, pc = pc, parent = otr, exit = oex, stitched = oex == -1,
                         functions = {}, seen = {}}
  elseif what == "stop" then
    retire_freed()
    publish(traceno)
    C.jitunwind_session_poll(session)
  elseif what == "abort" then
    starting[traceno] = nil
  elseif what == "flush" then
    retire_all()
  end
end

-- Bytecode being recorded into trace `traceno`, in `func` (called `depth` frames deep).
local function on_record(traceno, func)
  local start = starting[traceno]
  if not start or start.seen[func] then return end
  start.seen[func] = true
  local name = function_name(func)
  if name and name ~= start.functions[#start.functions] then
    start.functions[#start.functions + 1] = name
  end
end

jit.attach(on_trace, "trace")
jit.attach(on_record, "record")

local M = {}

function M.traces()
  retire_freed()
  local list = {}
  for traceno, t in pairs(published) do
    list[#list + 1] = {number = traceno, name = t.name, address = t.address, size = t.size,
                       rows = t.rows}
  end
  table.sort(list, function(a, b) return a.number < b.number end)
  return list
end

function M.flush()
  local err = ffi.new("jitunwind_error")
  check(C.jitunwind_session_flush(session, err), err, "flush")
end

function M.stop()
  if session == nil then return end
  jit.attach(on_trace)
  jit.attach(on_record)
  published, starting = {}, {}
  C.jitunwind_session_destroy(session)
  session = nil
end

-- The session ends (perf map and jitdump flushed) when the Lua state closes.
M._anchor = ffi.gc(ffi.new("char[1]"), function() M.stop() end)

return M
