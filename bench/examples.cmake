# bench_examples runs the example runtimes' binaries (see bench/examples.cpp).
if(JITUNWIND_BUILD_EXAMPLES)
  target_compile_definitions(bench_examples PRIVATE
    JITUNWIND_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    TOY_JIT="$<TARGET_FILE:toy-jit>" TOY_INTERP="$<TARGET_FILE:toy-interp>"
    TOY_INTERP_NOPROBES="$<TARGET_FILE:toy-interp-noprobes>")
  add_dependencies(bench_examples toy-jit toy-interp toy-interp-noprobes)
  # toy-jit's code generator in-process, with the SDK the bench already links (static).
  target_link_libraries(bench_examples PRIVATE toyjit_codegen)
else()
  set_target_properties(bench_examples PROPERTIES EXCLUDE_FROM_ALL ON)
endif()
