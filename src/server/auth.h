// API-key authentication: `Authorization: Bearer KEY` or `x-api-key: KEY`, compared in
// constant time. An empty key disables authentication (spec: an empty --api-key-file).
#pragma once

#include <string>
#include <string_view>

namespace flare::server {

// Equal length and bytes, in time that depends only on the lengths, not on the contents.
bool constant_time_equal(std::string_view a, std::string_view b);

// Reads the key file; surrounding whitespace (a trailing newline) is not part of the key.
std::string read_api_key_file(const std::string& path);

class ApiKeyAuth {
 public:
  explicit ApiKeyAuth(std::string key) : key_(std::move(key)) {}
  bool enabled() const { return !key_.empty(); }
  // Header values as received (either may be empty).
  bool allows(std::string_view authorization_header, std::string_view x_api_key_header) const;

 private:
  std::string key_;
};

}  // namespace flare::server
