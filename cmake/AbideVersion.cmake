# Generates abide/version.h from project(VERSION) into the build tree; it is
# installed with the core headers (cmake/AbideInstall.cmake).
foreach(part IN ITEMS MINOR PATCH)
  # ABIDE_VERSION packs the three parts as MMmmpp.
  if(PROJECT_VERSION_${part} GREATER 99)
    message(FATAL_ERROR "abide: version part ${part} (${PROJECT_VERSION_${part}}) must stay below 100")
  endif()
endforeach()
if(PROJECT_VERSION_PATCH STREQUAL "")
  message(FATAL_ERROR "abide: project(VERSION) must give MAJOR.MINOR.PATCH")
endif()
set(ABIDE_GENERATED_INCLUDE_DIR ${PROJECT_BINARY_DIR}/generated/include)
configure_file(${PROJECT_SOURCE_DIR}/cmake/version.h.in ${ABIDE_GENERATED_INCLUDE_DIR}/abide/version.h @ONLY)
