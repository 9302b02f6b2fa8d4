# bench_sframe's --size-report compiles sources relative to the source tree (include paths).
target_compile_definitions(bench_sframe PRIVATE JITUNWIND_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
# The program --size-report compiles at run time.
jitunwind_not_built(sframe_sample.c)
