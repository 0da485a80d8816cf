// Open-file limit and the connection cap derived from it (connection_limits.h).
#include "server/connection_limits.h"

#include <sys/resource.h>

#include <algorithm>

namespace flare::server {

std::int64_t raise_open_file_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  constexpr rlim_t kCeiling = 1u << 20;
  const rlim_t target = limit.rlim_max == RLIM_INFINITY ? kCeiling : std::min(limit.rlim_max, kCeiling);
  if (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= target) {
    return limit.rlim_cur == RLIM_INFINITY ? static_cast<std::int64_t>(kCeiling) : static_cast<std::int64_t>(limit.rlim_cur);
  }
  rlimit raised = limit;
  raised.rlim_cur = target;
  if (setrlimit(RLIMIT_NOFILE, &raised) == 0) return static_cast<std::int64_t>(target);
  return static_cast<std::int64_t>(limit.rlim_cur);
}

std::int32_t connection_cap(std::int64_t open_file_limit) {
  const std::int64_t reserve = std::min<std::int64_t>(256, open_file_limit / 4);
  return static_cast<std::int32_t>(std::clamp<std::int64_t>(open_file_limit - reserve, 16, 65'536));
}

}  // namespace flare::server
