#include "hub/curl_library.h"

#include <dlfcn.h>

#include <string>

#include "common/error.h"

namespace flare::hub {
namespace {

struct Loaded {
  CurlLibrary functions{};
  std::string error;  // empty when every symbol was found
};

template <typename T>
bool bind(void* handle, const char* name, T& slot, std::string& error) {
  slot = reinterpret_cast<T>(dlsym(handle, name));
  if (!slot && error.empty()) error = std::string("libcurl lacks ") + name;
  return slot != nullptr;
}

Loaded load() {
  Loaded loaded;
  void* handle = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    loaded.error = "cannot open libcurl.so.4 (install the Debian package libcurl4)";
    return loaded;
  }
  CurlLibrary& f = loaded.functions;
  std::string& e = loaded.error;
  CURLcode (*global_init)(long) = nullptr;
  bind(handle, "curl_global_init", global_init, e);
  bind(handle, "curl_easy_init", f.easy_init, e);
  bind(handle, "curl_easy_setopt", f.easy_setopt, e);
  bind(handle, "curl_easy_perform", f.easy_perform, e);
  bind(handle, "curl_easy_getinfo", f.easy_getinfo, e);
  bind(handle, "curl_easy_cleanup", f.easy_cleanup, e);
  bind(handle, "curl_easy_reset", f.easy_reset, e);
  bind(handle, "curl_easy_strerror", f.easy_strerror, e);
  bind(handle, "curl_slist_append", f.slist_append, e);
  bind(handle, "curl_slist_free_all", f.slist_free_all, e);
  if (e.empty() && global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) e = "curl_global_init failed";
  // The handle stays open for the life of the process: the table points into it.
  return loaded;
}

}  // namespace

const CurlLibrary& curl_library() {
  static const Loaded loaded = load();  // thread-safe initialisation, immutable afterwards
  if (!loaded.error.empty()) fail(ExitCode::fetch, "downloads need libcurl: {}", loaded.error);
  return loaded.functions;
}

}  // namespace flare::hub
