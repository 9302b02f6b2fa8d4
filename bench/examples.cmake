# bench_examples runs the example runtimes' binaries (see bench/examples.cpp).
if(JITUNWIND_BUILD_EXAMPLES)
  target_compile_definitions(bench_examples PRIVATE
    JITUNWIND_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    TOY_JIT="$<TARGET_FILE:toy-jit>" TOY_INTERP="$<TARGET_FILE:toy-interp>"
    TOY_INTERP_NOPROBES="$<TARGET_FILE:toy-interp-noprobes>")
  # The interpreter's layout variants (examples/interpreter/CMakeLists.txt), comma-separated.
  set(_interp "$<TARGET_FILE:toy-interp>")
  set(_noprobes "$<TARGET_FILE:toy-interp-noprobes>")
  set(_names "0")
  get_target_property(_pads toy-interp JITUNWIND_LAYOUT_PADS)
  foreach(_pad IN LISTS _pads)
    string(APPEND _interp ",$<TARGET_FILE:toy-interp-layout${_pad}>")
    string(APPEND _noprobes ",$<TARGET_FILE:toy-interp-noprobes-layout${_pad}>")
    string(APPEND _names ",${_pad}")
    add_dependencies(bench_examples toy-interp-layout${_pad} toy-interp-noprobes-layout${_pad})
  endforeach()
  target_compile_definitions(bench_examples PRIVATE TOY_INTERP_LAYOUTS="${_interp}"
    TOY_INTERP_NOPROBES_LAYOUTS="${_noprobes}" TOY_INTERP_LAYOUT_NAMES="${_names}")
  add_dependencies(bench_examples toy-jit toy-interp toy-interp-noprobes)
  # toy-jit's code generator in-process, with the SDK the bench already links (static).
  target_link_libraries(bench_examples PRIVATE toyjit_codegen)
else()
  set_target_properties(bench_examples PROPERTIES EXCLUDE_FROM_ALL ON)
endif()
