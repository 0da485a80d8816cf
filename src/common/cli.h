// Command-line conventions shared by `ignition` and `flare` (spec cli-design sections 2, 3.2):
// one name per command; options before or after positional arguments; `--opt VALUE` and
// `--opt=VALUE`; `--help`, `-h` and `help CMD` anywhere, answered before anything else runs
// (no files opened, no configuration read, no GPU touched); usage errors on stderr, exit 2.
#pragma once

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

namespace flare {

// Options every command accepts.
struct GlobalOptions {
  std::optional<std::filesystem::path> config;  // --config PATH
  bool plain = false;                           // --plain: no styling
};

// A new application with Flare's conventions (help handled by run_cli, footer, formatting).
std::unique_ptr<CLI::App> make_app(const std::string& name, const std::string& description);

// Adds a subcommand whose action runs `action` after parsing; the action's return value is the
// exit status.
CLI::App* add_command(CLI::App& parent, const std::string& name, const std::string& description,
                      std::function<int()> action);

// Parses argv and runs the selected command. Help requests print help and return 0 before any
// parsing side effect; parse errors print "error: ..." to stderr and return 2; flare::Error
// returns its exit code; any other exception returns 1.
int run_cli(CLI::App& app, int argc, char** argv);

// The help text `run_cli` would print for `args` (exposed for tests), or nullopt when `args`
// do not ask for help.
std::optional<std::string> help_request(CLI::App& app, const std::vector<std::string>& args);

// Prints "error: <message>" (continuation lines kept as given) to stderr.
void print_error(const std::string& message);

}  // namespace flare
