# Every target lists its source files by name (no globs: a file is part of the build because a
# CMakeLists.txt says so). The cost of explicit lists is a file added to the tree but to no list
# (a test that silently never runs); jitunwind_check_source_lists() makes that a configure error.
# It looks at the C and C++ files of every configured directory (and its sub-folders that are not
# CMake directories or build trees of their own) and fails naming each one no target of that
# directory uses.
# Files a directory compiles otherwise (custom commands) are named in its
# JITUNWIND_NOT_A_TARGET_SOURCE directory property.
include_guard(GLOBAL)

function(_jitunwind_configured_dirs dir out)
  set(_all ${dir})
  get_property(_subs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(_s IN LISTS _subs)
    _jitunwind_configured_dirs(${_s} _more)
    list(APPEND _all ${_more})
  endforeach()
  set(${out} ${_all} PARENT_SCOPE)
endfunction()

function(jitunwind_check_source_lists)
  _jitunwind_configured_dirs(${PROJECT_SOURCE_DIR} _dirs)
  set(_missing "")
  foreach(_dir IN LISTS _dirs)
    # Sources of this directory's targets, as absolute paths.
    set(_listed "")
    get_property(_targets DIRECTORY ${_dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(_t IN LISTS _targets)
      get_target_property(_srcs ${_t} SOURCES)
      if(NOT _srcs)
        continue()
      endif()
      foreach(_s IN LISTS _srcs)
        if(_s MATCHES "^\\$<")
          continue()
        endif()
        cmake_path(ABSOLUTE_PATH _s BASE_DIRECTORY ${_dir} NORMALIZE)
        list(APPEND _listed ${_s})
      endforeach()
    endforeach()
    get_property(_exempt DIRECTORY ${_dir} PROPERTY JITUNWIND_NOT_A_TARGET_SOURCE)
    foreach(_s IN LISTS _exempt)
      cmake_path(ABSOLUTE_PATH _s BASE_DIRECTORY ${_dir} NORMALIZE)
      list(APPEND _listed ${_s})
    endforeach()
    # The files this directory owns: its own and those of sub-folders without a CMakeLists.txt.
    file(GLOB_RECURSE _files LIST_DIRECTORIES false ${_dir}/*.c ${_dir}/*.cpp)
    foreach(_f IN LISTS _files)
      cmake_path(IS_PREFIX PROJECT_BINARY_DIR ${_f} _in_build)
      if(_in_build)
        continue()
      endif()
      cmake_path(GET _f PARENT_PATH _p)
      set(_owned ON)
      while(NOT _p STREQUAL _dir)
        if(EXISTS ${_p}/CMakeLists.txt OR EXISTS ${_p}/CMakeCache.txt)  # another build tree
          set(_owned OFF)
          break()
        endif()
        cmake_path(GET _p PARENT_PATH _p)
      endwhile()
      if(_owned AND NOT _f IN_LIST _listed)
        file(RELATIVE_PATH _rel ${PROJECT_SOURCE_DIR} ${_f})
        list(APPEND _missing ${_rel})
      endif()
    endforeach()
  endforeach()
  if(_missing)
    list(JOIN _missing "\n  " _text)
    message(FATAL_ERROR "Source files that no target lists (add each to its directory's "
                        "CMakeLists.txt, or to its JITUNWIND_NOT_A_TARGET_SOURCE if a custom "
                        "command compiles it):\n  ${_text}")
  endif()
endfunction()
