// libcurl, opened at run time (like the CUDA libraries): the programs start on a machine without
// libcurl, and only a download needs it. The functions come from libcurl.so.4 through dlsym into
// one immutable table, initialised (with curl_global_init) the first time it is asked for; a
// machine without the library gets a fetch error saying what to install.
#pragma once

#include <curl/curl.h>

namespace flare::hub {

struct CurlLibrary {
  CURL* (*easy_init)();
  CURLcode (*easy_setopt)(CURL*, CURLoption, ...);
  CURLcode (*easy_perform)(CURL*);
  CURLcode (*easy_getinfo)(CURL*, CURLINFO, ...);
  void (*easy_cleanup)(CURL*);
  void (*easy_reset)(CURL*);
  const char* (*easy_strerror)(CURLcode);
  curl_slist* (*slist_append)(curl_slist*, const char*);
  void (*slist_free_all)(curl_slist*);
};

// Throws flare::Error(fetch) when libcurl cannot be opened.
const CurlLibrary& curl_library();

}  // namespace flare::hub
