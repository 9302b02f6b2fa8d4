# bench_sframe_versions: the binutils vectors are read from ../shared (like the tests), and the
# toy-jit corpus comes from its code generator when the examples are built.
find_package(nlohmann_json 3 REQUIRED)
target_link_libraries(bench_sframe_versions PRIVATE nlohmann_json::nlohmann_json)
target_compile_definitions(bench_sframe_versions PRIVATE JITUNWIND_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
if(JITUNWIND_BUILD_EXAMPLES)
  target_link_libraries(bench_sframe_versions PRIVATE toyjit_codegen)
  target_compile_definitions(bench_sframe_versions PRIVATE JITUNWIND_BENCH_TOYJIT=1)
endif()
