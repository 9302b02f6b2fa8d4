# Warnings for the project's own targets (not for third-party code).
function(jitunwind_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow
                         $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor>
                         -Wimplicit-fallthrough -Wno-missing-field-initializers)
endfunction()
