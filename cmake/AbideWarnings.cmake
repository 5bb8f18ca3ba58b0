# Warning flags for abide's own targets (not for third-party code).
function(abide_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wconversion -Wsign-conversion -Wshadow
    -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
    -Wdouble-promotion -Wformat=2 -Wimplicit-fallthrough)
  # The members each mutex guards (src/thread_annotations.h), checked by clang.
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    target_compile_options(${target} PRIVATE -Wthread-safety)
  endif()
  if(ABIDE_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
