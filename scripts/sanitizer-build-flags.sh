# Sourced by the sanitizer and fuzzer stages (scripts/test.d/2*.sh, 30-fuzz.sh): the CMake
# settings of their builds. -O1 -g1 instead of RelWithDebInfo's -O2 -g halves their compile time
# (measured on tests/window/lifecycle_test.cpp under ASan+UBSan: 101 s -> 48 s), which keeps CI
# within its budget; -O1 is what the sanitizers' own documentation suggests, and -g1 keeps the
# file:line information their reports print.
SANITIZER_BUILD_FLAGS=(
  -DCMAKE_BUILD_TYPE=RelWithDebInfo
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
)
