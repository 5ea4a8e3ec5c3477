# gtrace_static_libraries(OUT name...): the full paths of lib<name>.a, in the order given (the
# link order: each library before the ones it uses). Fails at configure time, naming the
# missing archive and the Debian package that ships it, rather than at link time.
function(gtrace_static_libraries out)
  set(paths)
  foreach(name ${ARGN})
    find_library(GTRACE_STATIC_${name} NAMES lib${name}.a)
    if(NOT GTRACE_STATIC_${name})
      message(FATAL_ERROR "lib${name}.a not found: install its -dev package (scripts/setup.sh), or configure with -DGTRACE_STATIC=OFF")
    endif()
    list(APPEND paths ${GTRACE_STATIC_${name}})
  endforeach()
  set(${out} ${paths} PARENT_SCOPE)
endfunction()
