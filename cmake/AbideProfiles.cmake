# Vendor profiles are data (profiles/*.json) compiled into the core library:
# each file becomes a string in a generated source, read by the profiles module.
file(GLOB ABIDE_PROFILE_FILES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/profiles/*.json)
set(ABIDE_PROFILES_SOURCE ${PROJECT_BINARY_DIR}/generated/builtin_profiles.cpp)
add_custom_command(
  OUTPUT ${ABIDE_PROFILES_SOURCE}
  COMMAND ${CMAKE_COMMAND} -DOUT=${ABIDE_PROFILES_SOURCE} -DDIR=${PROJECT_SOURCE_DIR}/profiles
          -P ${PROJECT_SOURCE_DIR}/cmake/EmbedProfiles.cmake
  DEPENDS ${ABIDE_PROFILE_FILES} ${PROJECT_SOURCE_DIR}/cmake/EmbedProfiles.cmake
  COMMENT "Embedding vendor profiles")
