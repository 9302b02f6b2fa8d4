# bench_jitwalk runs the walker (bpf/) on the test JIT (tests/jitwalk/): build them with it.
include(${PROJECT_SOURCE_DIR}/bpf/prerequisites.cmake)
if(TARGET bench_jitwalk)
  target_compile_definitions(bench_jitwalk PRIVATE
    JITWALK_BENCH_JITWALK="${PROJECT_BINARY_DIR}/bpf/jitwalk"
    JITWALK_BENCH_JIT_TARGET="${PROJECT_BINARY_DIR}/tests/jitwalk/jitwalk_jit_target")
  if(JITWALK_CAN_BUILD AND JITUNWIND_BUILD_TESTS)
    add_dependencies(bench_jitwalk jitwalk jitwalk_jit_target)
  endif()
endif()
