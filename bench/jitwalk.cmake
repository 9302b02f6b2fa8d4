# bench_jitwalk runs the walker (bpf/) on the test JIT (tests/jitwalk/): build them with it.
include(${PROJECT_SOURCE_DIR}/bpf/prerequisites.cmake)
if(TARGET bench_jitwalk)
  target_compile_definitions(bench_jitwalk PRIVATE
    JITWALK_BENCH_JITWALK="${PROJECT_BINARY_DIR}/bpf/jitwalk"
    JITWALK_BENCH_JIT_TARGET="${PROJECT_BINARY_DIR}/tests/jitwalk/jitwalk_jit_target"
    JITWALK_BENCH_TOY_JIT="${PROJECT_BINARY_DIR}/examples/toy-jit/toy-jit"
    JITWALK_BENCH_SPIN_TOY="${PROJECT_SOURCE_DIR}/examples/toy-jit/programs/spin.toy")
  if(JITWALK_CAN_BUILD AND JITUNWIND_BUILD_TESTS)
    add_dependencies(bench_jitwalk jitwalk jitwalk_jit_target)
    if(JITUNWIND_BUILD_EXAMPLES AND EXISTS ${PROJECT_SOURCE_DIR}/examples/toy-jit/CMakeLists.txt)
      add_dependencies(bench_jitwalk toy-jit)
    endif()
  endif()
endif()
