// Precompiled for every test executable (tests/CMakeLists.txt): Catch2's single header and the
// standard headers most tests include, parsed once per executable instead of once per file.
// Guarded because the executables also have C sources, for which CMake makes a C variant.
#pragma once
#ifdef __cplusplus
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>
#endif
