// Atomic file replacement, for every file Flare rewrites in place (cache entries, tuning tables,
// trust stores, configuration, default-version refs): the bytes go to a uniquely named temporary
// file beside the target (so concurrent writers, threads or processes, never share one), every
// byte is written and synced, and a rename puts it in place. Readers see the old file or the new
// one, never a part; a failure removes the temporary file.
#pragma once

#include <filesystem>
#include <string_view>

namespace flare {

// Throws flare::Error (failure) naming `path` when any step fails. The folder must exist.
void write_file_atomic(const std::filesystem::path& path, std::string_view bytes, unsigned mode = 0644);

}  // namespace flare
