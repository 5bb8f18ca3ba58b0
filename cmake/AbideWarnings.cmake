# Warning flags for abide's own targets (not for third-party code).
function(abide_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wconversion -Wsign-conversion -Wshadow
    -Wnon-virtual-dtor -Wold-style-cast -Wcast-align
    -Wdouble-promotion -Wformat=2 -Wimplicit-fallthrough)
  if(ABIDE_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
