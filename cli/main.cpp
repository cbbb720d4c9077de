// ember: the one binary. `ember --help` lists the subcommands.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "cli/commands.hpp"
#include "base/status.hpp"

namespace ember::cli {

int report(const Error& error) {
  std::cerr << "error: " << error.message() << " [" << to_string(error.code()) << "]\n";
  switch (error.code()) {
    case ErrorCode::invalid_argument:
    case ErrorCode::not_found:
    case ErrorCode::corrupt:
    case ErrorCode::unsupported:
      return 2;
    default:
      return 1;
  }
}

}  // namespace ember::cli

int main(int argc, char** argv) {
  CLI::App app{"Ember: serverless serving of deep-learning models on GPU clusters"};
  app.require_subcommand(1);
  app.fallthrough();  // --log-level may follow the subcommand
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error, off")->default_val("info");
  app.set_version_flag("--version", "ember 0.1.0");

  ember::cli::Runner runner;
  ember::cli::add_model_commands(app, runner);
  ember::cli::add_run_command(app, runner);
  ember::cli::add_devices_command(app, runner);
  ember::cli::add_workflow_command(app, runner);
  ember::cli::add_cluster_commands(app, runner);
  ember::cli::add_infer_command(app, runner);
  ember::cli::add_console_command(app, runner);
  ember::cli::add_certs_command(app, runner);
  ember::cli::add_sim_command(app, runner);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  spdlog::set_level(spdlog::level::from_str(log_level));
  spdlog::set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  return runner ? runner() : 0;
}
