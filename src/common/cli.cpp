#include "common/cli.h"

#include <cstdio>
#include <iostream>

#include "common/error.h"
#include "common/suggest.h"

namespace flare {
namespace {

std::vector<std::string> subcommand_names(CLI::App& app) {
  std::vector<std::string> names;
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) names.push_back(sub->get_name());
  return names;
}

CLI::App* find_subcommand(CLI::App& app, const std::string& name) {
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; }))
    if (sub->get_name() == name) return sub;
  return nullptr;
}

std::string command_path(CLI::App* app) {
  std::string path = app->get_name();
  for (CLI::App* parent = app->get_parent(); parent; parent = parent->get_parent())
    path = parent->get_name() + " " + path;
  return path;
}

// The innermost subcommand `args` select, following names that match subcommands.
CLI::App* deepest_command(CLI::App& app, const std::vector<std::string>& args, std::size_t begin) {
  CLI::App* current = &app;
  for (std::size_t i = begin; i < args.size(); ++i) {
    if (args[i] == "--") break;
    if (!args[i].empty() && args[i][0] == '-') continue;
    if (CLI::App* sub = find_subcommand(*current, args[i])) current = sub;
  }
  return current;
}

}  // namespace

std::unique_ptr<CLI::App> make_app(const std::string& name, const std::string& description) {
  auto app = std::make_unique<CLI::App>(description, name);
  app->set_help_flag("-h,--help", "Show this help and exit");
  app->get_formatter()->column_width(36);
  app->require_subcommand(0, 1);
  app->fallthrough(false);
  app->add_subcommand("help", "Show help for a command (help COMMAND)");
  return app;
}

CLI::App* add_command(CLI::App& parent, const std::string& name, const std::string& description,
                      std::function<int()> action) {
  CLI::App* command = parent.add_subcommand(name, description);
  command->set_help_flag("-h,--help", "Show this help and exit");
  command->allow_extras(false);
  command->positionals_at_end(false);
  command->final_callback([action = std::move(action)] {
    const int status = action();
    if (status != 0) throw CLI::RuntimeError(status);
  });
  return command;
}

std::optional<std::string> help_request(CLI::App& app, const std::vector<std::string>& args) {
  // `help [COMMAND...]` as the first word.
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (!args[i].empty() && args[i][0] == '-') continue;
    if (args[i] == "help") return deepest_command(app, args, i + 1)->help();
    break;
  }
  for (const auto& arg : args) {
    if (arg == "--") break;
    if (arg == "-h" || arg == "--help") return deepest_command(app, args, 0)->help();
  }
  return std::nullopt;
}

void print_error(const std::string& message) {
  std::fflush(stdout);
  std::fprintf(stderr, "error: %s\n", message.c_str());
}

int run_cli(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (auto help = help_request(app, args)) {
    std::fputs(help->c_str(), stdout);
    return 0;
  }
  if (args.empty()) {
    std::fputs(app.help().c_str(), stderr);
    return static_cast<int>(ExitCode::usage);
  }
  // An unknown first word is a mistyped command: suggest the closest one.
  for (const auto& arg : args) {
    if (!arg.empty() && arg[0] == '-') break;
    if (!find_subcommand(app, arg)) {
      std::string message = fmt::format("unknown command '{}'", arg);
      if (auto close = suggest_close_match(arg, subcommand_names(app))) message += fmt::format(" (did you mean '{}'?)", *close);
      print_error(message + fmt::format("\nRun '{} --help' for the commands.", app.get_name()));
      return static_cast<int>(ExitCode::usage);
    }
    break;
  }
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
    if (app.get_subcommands().empty()) {
      std::fputs(app.help().c_str(), stderr);
      return static_cast<int>(ExitCode::usage);
    }
    return 0;
  } catch (const CLI::RuntimeError& status) {
    return status.get_exit_code();
  } catch (const CLI::ParseError& error) {
    CLI::App* command = deepest_command(app, args, 0);
    print_error(fmt::format("{}\nRun '{} --help' for usage.", error.what(), command_path(command)));
    return static_cast<int>(ExitCode::usage);
  } catch (const Error& error) {
    print_error(error.what());
    return error.exit_status();
  } catch (const std::exception& error) {
    print_error(error.what());
    return static_cast<int>(ExitCode::failure);
  }
}

}  // namespace flare
