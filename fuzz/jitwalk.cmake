# The walker's decoders of foreign data (bpf/jitwalk/), compiled into its fuzz targets directly:
# they need neither BPF nor the skeleton.
set(_jw ${PROJECT_SOURCE_DIR}/bpf/jitwalk)
add_library(jitwalk_fuzz_support STATIC ${_jw}/common.cpp ${_jw}/rows.cpp ${_jw}/ehframe.cpp
            ${_jw}/native_tables.cpp ${_jw}/elf_file.cpp ${_jw}/jit_names.cpp
            ${_jw}/table_cache.cpp)
target_include_directories(jitwalk_fuzz_support PUBLIC ${PROJECT_SOURCE_DIR}/bpf)
target_compile_options(jitwalk_fuzz_support PRIVATE -fsanitize=fuzzer-no-link,address,undefined)
target_link_libraries(jitwalk_fuzz_support PUBLIC jitunwind_private_for_tests)
foreach(_t fuzz_cfi_decode fuzz_jitwalk_window fuzz_jitwalk_jitnames fuzz_elf_reader
           fuzz_jitwalk_table_cache)
  if(TARGET ${_t})
    target_link_libraries(${_t} PRIVATE jitwalk_fuzz_support)
  endif()
endforeach()
