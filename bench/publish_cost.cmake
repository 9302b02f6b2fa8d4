# bench_publish_cost compares the SDK's publication cost with compiling a function with asmjit.
find_package(asmjit REQUIRED)
target_link_libraries(bench_publish_cost PRIVATE asmjit::asmjit)
