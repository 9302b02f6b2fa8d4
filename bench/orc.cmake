# bench_orc_link (bench/orc/orc_link.cpp): the CFI -> rows conversion and the ORC plugin against
# LLVM's own link of the same function, and the preload's cost per __register_frame against the
# real call. Built with jitunwind::orc (LLVM 22) and the preload library.
if(TARGET jitunwind_orc AND TARGET jitunwind_preload)
  add_executable(bench_orc_link ${CMAKE_CURRENT_LIST_DIR}/orc/orc_link.cpp)
  target_link_libraries(bench_orc_link PRIVATE jitunwind_orc benchmark::benchmark ${CMAKE_DL_LIBS})
  target_compile_options(bench_orc_link PRIVATE -fno-exceptions)
  target_compile_definitions(bench_orc_link PRIVATE
    JITUNWIND_PRELOAD_PATH="$<TARGET_FILE:jitunwind_preload>")
  add_dependencies(bench_orc_link jitunwind_preload)
endif()
