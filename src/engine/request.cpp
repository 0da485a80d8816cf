// Names and messages for the plain-data request contract (request.h).
#include "engine/request.h"

namespace flare::engine {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::none: return "none";
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::abort: return "abort";
    case FinishReason::error: return "error";
  }
  return "error";
}

std::string AdmissionError::message() const {
  std::string text = "needs " + needed + "; has " + available + ".";
  if (!options.empty()) text += " Options: " + options + ".";
  return text;
}

}  // namespace flare::engine
