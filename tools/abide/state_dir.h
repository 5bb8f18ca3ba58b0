// Where abide keeps what outlives a process on this machine (the secret of
// its quota keys, key_secret.h; the file quota store): one directory per
// user, as the XDG Base Directory specification places state.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

#include "abide/result.h"

namespace abide::cli {

// The name of the directory under the state home.
inline constexpr const char* kStateDirName = "abide";

// The state directory from the two variables that decide it:
// `$XDG_STATE_HOME/abide` when XDG_STATE_HOME is set and absolute (the
// specification says to ignore a relative one), else `$HOME/.local/state/abide`
// when HOME is absolute; an error naming both when neither is usable.
// With `create`, the directory is made with its missing parents, mode 0700
// (parents made here too: the specification's mode for the state home), and
// an existing path that is not a directory is an error naming it. Nothing is
// created or checked without `create`.
[[nodiscard]] Result<std::filesystem::path, ErrorMessage> state_dir_from(const std::optional<std::string>& xdg_state_home,
                                                                        const std::optional<std::string>& home,
                                                                        bool create);

// state_dir_from() with this process's XDG_STATE_HOME and HOME.
[[nodiscard]] Result<std::filesystem::path, ErrorMessage> state_dir(bool create);

}  // namespace abide::cli
