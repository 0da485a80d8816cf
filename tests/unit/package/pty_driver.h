// Drives code that talks to a terminal: runs a function in a child process whose controlling
// terminal, stdin, stdout and stderr are a new pseudo-terminal (forkpty), answers prompts as they
// appear, and returns the exit status and everything the child printed.
#pragma once

#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"

namespace flare::testing {

struct PtyRun {
  int exit_status = -1;   // the child's exit status; -1 when it was killed (timeout)
  std::string transcript; // everything written to the terminal
  std::size_t n_answered = 0;
};

// `steps`: (text to wait for, line to type without the newline). Each expected text is searched
// after the point where the previous answer was typed.
inline PtyRun run_in_pty(const std::function<int()>& child,
                         const std::vector<std::pair<std::string, std::string>>& steps, int timeout_ms = 20000) {
  int master = -1;
  std::fflush(nullptr);
  const pid_t pid = forkpty(&master, nullptr, nullptr, nullptr);
  if (pid < 0) return {};
  if (pid == 0) {
    int status = 0;
    try {
      status = child();
    } catch (const Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      status = e.exit_status();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "exception: %s\n", e.what());
      status = 99;
    }
    std::fflush(nullptr);
    _exit(status);
  }
  PtyRun run;
  std::size_t search_from = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  bool timed_out = false;
  for (;;) {
    if (run.n_answered < steps.size()) {
      const auto& [expect, answer] = steps[run.n_answered];
      auto at = run.transcript.find(expect, search_from);
      if (at != std::string::npos) {
        const std::string line = answer + "\n";
        if (::write(master, line.data(), line.size()) != static_cast<ssize_t>(line.size())) break;
        search_from = at + expect.size();
        ++run.n_answered;
        continue;
      }
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fd{master, POLLIN, 0};
    if (::poll(&fd, 1, static_cast<int>(left.count())) <= 0) continue;
    char buffer[4096];
    ssize_t n = ::read(master, buffer, sizeof(buffer));
    if (n <= 0) break;  // EIO: the child closed the terminal
    run.transcript.append(buffer, static_cast<std::size_t>(n));
  }
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  ::close(master);
  run.exit_status = !timed_out && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

}  // namespace flare::testing
