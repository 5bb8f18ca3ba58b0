# cmake --install: headers, libraries, a CMake package (find_package(abide))
# and a pkg-config file.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(ABIDE_INSTALL_TARGETS abide_core)
if(TARGET abide_redis)
  list(APPEND ABIDE_INSTALL_TARGETS abide_redis)
endif()
if(TARGET abide_curl)
  list(APPEND ABIDE_INSTALL_TARGETS abide_curl)
endif()

install(TARGETS ${ABIDE_INSTALL_TARGETS} EXPORT abideTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(DIRECTORY include/abide DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT abideTargets NAMESPACE abide:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/abide)
if(TARGET abide_cli)
  install(TARGETS abide_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

configure_package_config_file(cmake/abideConfig.cmake.in
  ${PROJECT_BINARY_DIR}/abideConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/abide)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/abideConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/abideConfig.cmake ${PROJECT_BINARY_DIR}/abideConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/abide)

# The .pc file locates itself (${pcfiledir}), so `cmake --install --prefix DIR`
# works whatever prefix was configured.
file(RELATIVE_PATH ABIDE_PC_TO_PREFIX
  "${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "${CMAKE_INSTALL_PREFIX}")
string(REGEX REPLACE "/$" "" ABIDE_PC_TO_PREFIX "${ABIDE_PC_TO_PREFIX}")
configure_file(cmake/abide.pc.in ${PROJECT_BINARY_DIR}/abide.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/abide.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
