// One error type for the whole project. Every failure a user can see carries the exit code
// the command line reports (spec cli-design section 5.1) and a message written for the user.
// HTTP adapters map the same codes onto each API's own error shape.
#pragma once

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace flare {

enum class ExitCode : int {
  ok = 0,
  failure = 1,      // a runtime failure that is none of the classes below (verification, I/O)
  usage = 2,        // bad command line, unknown model, invalid configuration
  fetch = 3,        // a checkpoint or package could not be obtained
  capacity = 4,     // the model or request does not fit (spec section 6 form)
  preparation = 5,  // preparation failed (bad checkpoint, compile error, ...)
};

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, std::string message) : std::runtime_error(std::move(message)), code_(code) {}
  ExitCode code() const noexcept { return code_; }
  int exit_status() const noexcept { return static_cast<int>(code_); }

 private:
  ExitCode code_;
};

template <typename... Args>
[[noreturn]] void fail(ExitCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void fail_usage(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(ExitCode::usage, fmt::format(format, std::forward<Args>(args)...));
}

// Invalid bytes or structure from outside the process (files, packages, requests).
template <typename... Args>
[[noreturn]] void fail_input(fmt::format_string<Args...> format, Args&&... args) {
  throw Error(ExitCode::failure, fmt::format(format, std::forward<Args>(args)...));
}

}  // namespace flare
