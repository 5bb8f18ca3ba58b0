# cmake --install: headers, libraries, a CMake package and pkg-config files.
#
# Each part is installed on its own, so that a consumer takes only what it asks
# for: find_package(abide) loads abide::core (which needs nothing but threads);
# find_package(abide COMPONENTS curl redis sqlite) loads each named part as well, with
# the dependencies of that part alone. A part that was not built is not
# installed at all: no library, no header, no CMake export, no .pc file.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ABIDE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/abide)
set(ABIDE_INSTALL_PCDIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
# The headers of the optional parts; every other header of include/abide/ is core.
set(ABIDE_CURL_HEADERS client.h loop_client.h)
set(ABIDE_REDIS_HEADERS redis_store.h)
set(ABIDE_SQLITE_HEADERS sqlite_store.h)

# The .pc files locate themselves (${pcfiledir}), so `cmake --install --prefix
# DIR` works whatever prefix was configured.
file(RELATIVE_PATH ABIDE_PC_TO_PREFIX "${CMAKE_INSTALL_PREFIX}/${ABIDE_INSTALL_PCDIR}" "${CMAKE_INSTALL_PREFIX}")
string(REGEX REPLACE "/$" "" ABIDE_PC_TO_PREFIX "${ABIDE_PC_TO_PREFIX}")

# One library and its export file (abide<Export>Targets.cmake). The include
# folder comes with abide::core (its INSTALL_INTERFACE), which every part links.
function(abide_install_library target export)
  install(TARGETS ${target} EXPORT abide${export}Targets
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
    LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  install(EXPORT abide${export}Targets NAMESPACE abide:: DESTINATION ${ABIDE_INSTALL_CMAKEDIR})
endfunction()

# ---- core ------------------------------------------------------------------
abide_install_library(abide_core Core)
# abide::testing (the manual clock) needs only the core: it comes with it.
install(TARGETS abide_testing EXPORT abideCoreTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY testing/include/abide/testing DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/abide)
set(_abide_exclude "")
foreach(header IN LISTS ABIDE_CURL_HEADERS ABIDE_REDIS_HEADERS ABIDE_SQLITE_HEADERS)
  list(APPEND _abide_exclude PATTERN ${header} EXCLUDE)
endforeach()
# Only include/abide/: the headers under src/ are the library's own.
install(DIRECTORY include/abide DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  FILES_MATCHING PATTERN "*.h" ${_abide_exclude})
install(FILES ${ABIDE_GENERATED_INCLUDE_DIR}/abide/version.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/abide)
configure_file(cmake/abide.pc.in ${PROJECT_BINARY_DIR}/abide.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/abide.pc DESTINATION ${ABIDE_INSTALL_PCDIR})

# ---- optional parts --------------------------------------------------------
# name: the component (curl); export: its export name (Curl); pc_requires: the
# pkg-config modules it links; the rest: a description for its .pc file.
function(abide_install_part target name export pc_requires)
  if(NOT TARGET ${target})
    return()
  endif()
  abide_install_library(${target} ${export})
  string(TOUPPER ${name} upper)
  list(TRANSFORM ABIDE_${upper}_HEADERS PREPEND ${PROJECT_SOURCE_DIR}/include/abide/ OUTPUT_VARIABLE headers)
  install(FILES ${headers} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/abide)
  # A static archive needs its dependencies on the link line; a shared library
  # brings them itself.
  get_target_property(type ${target} TYPE)
  set(ABIDE_PC_REQUIRES "Requires: abide = ${PROJECT_VERSION}")
  if(type STREQUAL "STATIC_LIBRARY")
    string(APPEND ABIDE_PC_REQUIRES ", ${pc_requires}")
  else()
    string(APPEND ABIDE_PC_REQUIRES "\nRequires.private: ${pc_requires}")
  endif()
  get_target_property(ABIDE_PC_LIB ${target} OUTPUT_NAME)
  set(ABIDE_PC_NAME abide-${name})
  string(JOIN " " ABIDE_PC_DESCRIPTION ${ARGN})
  configure_file(${PROJECT_SOURCE_DIR}/cmake/abide-part.pc.in ${PROJECT_BINARY_DIR}/${ABIDE_PC_NAME}.pc @ONLY)
  install(FILES ${PROJECT_BINARY_DIR}/${ABIDE_PC_NAME}.pc DESTINATION ${ABIDE_INSTALL_PCDIR})
endfunction()

abide_install_part(abide_curl curl Curl "libcurl, libnghttp2, libssl" "abide's" HTTP client over libcurl)
abide_install_part(abide_redis redis Redis hiredis "abide's" quota store over Redis)
abide_install_part(abide_sqlite sqlite Sqlite sqlite3 "abide's" quota store in a file shared by a machine's processes)

if(TARGET abide_cli)
  install(TARGETS abide_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# ---- the CMake package -----------------------------------------------------
configure_package_config_file(cmake/abideConfig.cmake.in
  ${PROJECT_BINARY_DIR}/abideConfig.cmake
  INSTALL_DESTINATION ${ABIDE_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/abideConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/abideConfig.cmake ${PROJECT_BINARY_DIR}/abideConfigVersion.cmake
  DESTINATION ${ABIDE_INSTALL_CMAKEDIR})
