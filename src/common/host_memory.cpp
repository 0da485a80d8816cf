#include "common/host_memory.h"

#include <unistd.h>

#include <fstream>
#include <string>

namespace flare {

std::uint64_t host_memory_bytes(std::string_view field) {
  std::ifstream in("/proc/meminfo");
  std::string name, unit;
  std::uint64_t kib = 0;
  while (in >> name >> kib) {
    if (name.size() == field.size() + 1 && name.back() == ':' && name.compare(0, field.size(), field) == 0)
      return kib * 1024;
    std::getline(in, unit);  // the rest of the line ("kB" or nothing)
  }
  return 0;
}

std::uint64_t process_resident_bytes() {
  std::ifstream in("/proc/self/statm");
  std::uint64_t size_pages = 0, resident_pages = 0;
  if (!(in >> size_pages >> resident_pages)) return 0;
  return resident_pages * static_cast<std::uint64_t>(sysconf(_SC_PAGESIZE));
}

}  // namespace flare
