// The `ember` command line: one binary, one subcommand per job. Each subcommand registers its
// options on the CLI11 app and returns the function that runs it after parsing; the function
// returns the process exit code (0 ok, 1 the job failed, 2 bad usage or input).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

#include "base/status.hpp"

namespace ember::cli {

using Runner = std::function<int()>;

/// `ember model new|import|inspect|profile`.
void add_model_commands(CLI::App& app, Runner& runner);
/// `ember run DIR`.
void add_run_command(CLI::App& app, Runner& runner);
/// `ember devices`.
void add_devices_command(CLI::App& app, Runner& runner);
/// `ember workflow run DIR`: a workflow of the repository, run on one device (run_command.cpp).
void add_workflow_command(CLI::App& app, Runner& runner);
/// `ember serve`, `ember manager`, `ember gateway`, `ember node`.
void add_cluster_commands(CLI::App& app, Runner& runner);
/// `ember infer`.
void add_infer_command(CLI::App& app, Runner& runner);
/// `ember console`.
void add_console_command(CLI::App& app, Runner& runner);
/// `ember sim`: a trace on a simulated cluster (sim_command.cpp).
void add_sim_command(CLI::App& app, Runner& runner);
/// `ember certs init|issue`.
void add_certs_command(CLI::App& app, Runner& runner);

/// Prints "error: <message>" to stderr and returns the exit code for that error.
int report(const Error& error);

}  // namespace ember::cli
