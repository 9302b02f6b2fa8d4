# Every target lists its source files by name (no globs: a file is part of the build because a
# CMakeLists.txt says so). The cost of explicit lists is a file added to the tree but to no list
# (a test that silently never runs); jitunwind_check_source_lists() makes that a configure error
# naming the file. It looks at the C and C++ files directly in every configured directory, and
# at every file under its `src/` folder and the folders its JITUNWIND_SOURCE_FOLDERS directory
# property names; sub-folders of optional programs (test targets, helpers) are not looked at.
# A file the directory does not compile itself (a custom command or a test compiles it, or an
# optional part is not built in this configuration) is named with jitunwind_not_built().
include_guard(GLOBAL)

# The files listed are not compiled by a target of the current directory, on purpose.
function(jitunwind_not_built)
  set_property(DIRECTORY APPEND PROPERTY JITUNWIND_NOT_BUILT ${ARGN})
endfunction()

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
    # Sources of this directory's targets and the files it says it does not build.
    set(_listed "")
    get_property(_targets DIRECTORY ${_dir} PROPERTY BUILDSYSTEM_TARGETS)
    foreach(_t IN LISTS _targets)
      get_target_property(_srcs ${_t} SOURCES)
      if(_srcs)
        list(APPEND _listed ${_srcs})
      endif()
    endforeach()
    get_property(_not_built DIRECTORY ${_dir} PROPERTY JITUNWIND_NOT_BUILT)
    list(APPEND _listed ${_not_built})
    set(_absolute "")
    foreach(_s IN LISTS _listed)
      if(NOT _s MATCHES "^\\$<")
        cmake_path(ABSOLUTE_PATH _s BASE_DIRECTORY ${_dir} NORMALIZE)
        list(APPEND _absolute ${_s})
      endif()
    endforeach()
    # The files this directory owns.
    file(GLOB _files LIST_DIRECTORIES false ${_dir}/*.c ${_dir}/*.cpp)
    get_property(_folders DIRECTORY ${_dir} PROPERTY JITUNWIND_SOURCE_FOLDERS)
    foreach(_f IN ITEMS src ${_folders})
      if(IS_DIRECTORY ${_dir}/${_f} AND NOT EXISTS ${_dir}/${_f}/CMakeLists.txt)
        file(GLOB_RECURSE _more LIST_DIRECTORIES false ${_dir}/${_f}/*.c ${_dir}/${_f}/*.cpp)
        list(APPEND _files ${_more})
      endif()
    endforeach()
    foreach(_f IN LISTS _files)
      if(NOT _f IN_LIST _absolute)
        file(RELATIVE_PATH _rel ${PROJECT_SOURCE_DIR} ${_f})
        list(APPEND _missing ${_rel})
      endif()
    endforeach()
  endforeach()
  if(_missing)
    list(JOIN _missing "\n  " _text)
    message(FATAL_ERROR "Source files that no target lists (add each to its directory's "
                        "CMakeLists.txt, or name it with jitunwind_not_built() if the directory "
                        "does not compile it):\n  ${_text}")
  endif()
endfunction()
