// Host memory as Linux reports it (/proc/meminfo): what preparation plans against and what the
// CPU backend sizes its KV pages from.
#pragma once

#include <cstdint>
#include <string_view>

namespace flare {

// A /proc/meminfo field in bytes ("MemAvailable", "MemTotal"); 0 when unreadable.
std::uint64_t host_memory_bytes(std::string_view field);

// This process's resident memory (/proc/self/statm); 0 when unreadable.
std::uint64_t process_resident_bytes();

}  // namespace flare
