# Script mode: writes OUT, a C++ source defining abide::detail::builtin_profile_files():
# the name and text of every DIR/*.json file, sorted by name.
file(GLOB files ${DIR}/*.json)
list(SORT files)
set(body "")
foreach(f IN LISTS files)
  file(READ ${f} text)
  get_filename_component(name ${f} NAME)
  string(APPEND body "    {\"${name}\", R\"abide_json(${text})abide_json\"},\n")
endforeach()
file(WRITE ${OUT}.tmp
"// Generated from profiles/*.json by cmake/EmbedProfiles.cmake. Do not edit.
#include <span>
#include <string_view>
#include <utility>

namespace abide::detail {

std::span<const std::pair<std::string_view, std::string_view>> builtin_profile_files() noexcept {
  static constexpr std::pair<std::string_view, std::string_view> kFiles[] = {
${body}    {\"\", \"\"},
  };
  return {kFiles, sizeof(kFiles) / sizeof(kFiles[0]) - 1};
}

}  // namespace abide::detail
")
file(COPY_FILE ${OUT}.tmp ${OUT} ONLY_IF_DIFFERENT)
file(REMOVE ${OUT}.tmp)
