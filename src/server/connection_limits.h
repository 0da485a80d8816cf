// How many connections the server may hold: one file descriptor each, so the cap follows the
// process's open-file limit, which `raise_open_file_limit` lifts to its hard ceiling at start
// (the soft limit is often 1,024 while the hard one allows far more). A reserve stays for what
// else the process opens (package files, the GPU driver, log files).
#pragma once

#include <cstdint>

namespace flare::server {

// Raises RLIMIT_NOFILE's soft limit to its hard limit (at most 1,048,576); returns the soft limit
// in force afterwards. Failure to raise leaves the current limit, which is returned.
std::int64_t raise_open_file_limit();

// The connection cap for `open_file_limit` descriptors: everything above a reserve of 256 (or a
// quarter of a small limit), at most 65,536, at least 16.
std::int32_t connection_cap(std::int64_t open_file_limit);

}  // namespace flare::server
