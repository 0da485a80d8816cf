// API-key checks (auth.h).
#include "server/auth.h"

#include <fstream>
#include <sstream>

#include "common/error.h"

namespace flare::server {

bool constant_time_equal(std::string_view a, std::string_view b) {
  // Walk the expected length whatever the input, so timing reveals neither contents nor prefix.
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  size_t n = b.size();
  for (size_t i = 0; i < n; ++i) {
    unsigned char left = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    diff = diff | (left ^ static_cast<unsigned char>(b[i]));
  }
  return diff == 0;
}

std::string read_api_key_file(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) fail_usage("cannot read the API key file {}", path);
  std::stringstream content;
  content << file.rdbuf();
  std::string key = content.str();
  const char* space = " \t\r\n";
  size_t begin = key.find_first_not_of(space);
  if (begin == std::string::npos) return {};
  size_t end = key.find_last_not_of(space);
  return key.substr(begin, end - begin + 1);
}

namespace {
std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}
}  // namespace

bool ApiKeyAuth::allows(std::string_view authorization_header, std::string_view x_api_key_header) const {
  if (!enabled()) return true;
  bool ok = false;
  std::string_view authorization = trim(authorization_header);
  if (authorization.size() > 7) {
    std::string scheme(authorization.substr(0, 7));
    for (char& c : scheme) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (scheme == "bearer ") ok = constant_time_equal(trim(authorization.substr(7)), key_);
  }
  std::string_view x_api_key = trim(x_api_key_header);
  if (!x_api_key.empty() && constant_time_equal(x_api_key, key_)) ok = true;
  return ok;
}

}  // namespace flare::server
