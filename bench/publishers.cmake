# bench_publishers compares publication costs with assembling a function with asmjit.
find_package(asmjit REQUIRED)
target_link_libraries(bench_publishers PRIVATE asmjit::asmjit)
