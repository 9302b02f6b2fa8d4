# Helpers shared by the example runtimes (examples/toy-jit, examples/interpreter, toylang).
include_guard(GLOBAL)
include(CheckCXXSourceCompiles)

# Does the assembler emit SFrame (`as --gsframe`, binutils >= 2.40)? The examples' own native
# code (helpers, eval loop, runner) then carries a .sframe section, so an SFrame unwinder can walk
# from a native helper through JIT frames into the runner and main without frame pointers.
set(CMAKE_REQUIRED_FLAGS "-Wa,--gsframe")
check_cxx_source_compiles("int main() { return 0; }" TOY_ASSEMBLER_HAS_GSFRAME)
unset(CMAKE_REQUIRED_FLAGS)

# Adds -Wa,--gsframe to a target when available (records TOY_HAVE_SFRAME=0/1 for the sources).
function(toy_example_sframe target)
  if(TOY_ASSEMBLER_HAS_GSFRAME)
    target_compile_options(${target} PRIVATE -Wa,--gsframe)
    target_compile_definitions(${target} PRIVATE TOY_HAVE_SFRAME=1)
  else()
    target_compile_definitions(${target} PRIVATE TOY_HAVE_SFRAME=0)
  endif()
endfunction()
