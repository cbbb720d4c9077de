// `ember console`: administration of a running cluster through its manager (actors/console/).
// Interactive on a terminal (libedit: line editing, history in ~/.ember_history, tab completion of
// commands, node and model names); one-shot with -c (repeatable); otherwise it reads commands from
// stdin, one per line (scripts).
#include <editline/readline.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <atomic>
#include <caf/actor_system.hpp>
#include <caf/actor_system_config.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <thread>

#include "actors/actor_system.hpp"
#include "actors/console/console.hpp"
#include "base/host_port.hpp"
#include "base/token_file.hpp"
#include "cli/commands.hpp"

namespace ember::cli {

namespace {

struct ConsoleArgs {
  std::string manager = "127.0.0.1:7070";
  std::vector<std::string> commands;
  bool json = false;
  std::string token_file;
  ControlTlsFiles tls;  // the cluster's security.tls_*: the console is a member too
};

std::atomic<bool> g_interrupted{false};
Console* g_console = nullptr;  // for libedit's completion callbacks (one console per process)

void on_interrupt(int) { g_interrupted = true; }

char* completion_generator(const char* word, int state) {
  static std::vector<std::string> matches;
  static size_t next = 0;
  if (state == 0) {
    matches = g_console ? g_console->complete(std::string(rl_line_buffer, static_cast<size_t>(rl_point)), word)
                        : std::vector<std::string>{};
    next = 0;
  }
  if (next >= matches.size()) return nullptr;
  return strdup(matches[next++].c_str());
}

char** complete(const char* word, int, int) {
  rl_attempted_completion_over = 1;  // no file-name completion
  return rl_completion_matches(word, completion_generator);
}

/// `watch [TIMES]`: the models and nodes tables every second, TIMES times (0: until Ctrl-C).
int watch(Console& console, const std::vector<std::string>& words, bool tty) {
  long times = 0;
  if (words.size() > 2 || (words.size() == 2 && (times = std::strtol(words[1].c_str(), nullptr, 10)) <= 0)) {
    std::fprintf(stderr, "error: usage: watch [TIMES]\n");
    return 2;
  }
  g_interrupted = false;
  auto previous = std::signal(SIGINT, on_interrupt);
  int rc = 0;
  for (long i = 0; (times == 0 || i < times) && !g_interrupted; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::seconds(1));
    auto text = console.snapshot();
    if (!text.ok()) {
      rc = report(text.error());
      break;
    }
    if (tty) std::fputs("\033[H\033[2J", stdout);  // clear the screen: a live table
    std::fputs(text->c_str(), stdout);
    std::fflush(stdout);
  }
  std::signal(SIGINT, previous);
  return rc;
}

/// One line: 0 done, 1 it failed (said on stderr), -1 the user leaves.
int run_line(Console& console, const std::string& line, bool tty) {
  std::istringstream in(line);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  if (words.empty()) return 0;
  if (words[0] == "quit" || words[0] == "exit") return -1;
  if (words[0] == "watch") return watch(console, words, tty) == 0 ? 0 : 1;
  auto out = console.run(line);
  if (!out.ok()) {
    report(out.error());
    return 1;
  }
  std::fputs(out->c_str(), stdout);
  std::fflush(stdout);
  return 0;
}

std::string history_file() {
  const char* home = std::getenv("HOME");
  return home && *home ? std::string(home) + "/.ember_history" : std::string();
}

int run_console(const ConsoleArgs& a) {
  // Several managers sharing etcd (manager.etcd): only the leader listens, so the one that answers leads.
  auto managers = parse_host_port_list(a.manager);
  if (!managers.ok()) return report(managers.error().with_context("--manager"));
  ConsoleOptions options;
  options.json = a.json;
  options.auth.who = console_user();
  std::string token_file = a.token_file;
  if (token_file.empty()) {
    if (const char* env = std::getenv("EMBER_ADMIN_TOKEN_FILE")) token_file = env;
  }
  if (!token_file.empty()) {
    auto token = read_token_file(token_file, "--token-file");
    if (!token.ok()) return report(token.error());
    options.auth.token = *token;
  }
  ActorSystemOptions system;
  if (!a.tls.empty()) {
    auto tls = check_control_tls(a.tls, "--tls");
    if (!tls.ok()) return report(tls.error());
    system.tls = std::move(*tls);
  }
  caf::actor_system_config cfg;
  configure_actor_system(cfg, system);
  caf::actor_system sys{cfg};
  Result<std::unique_ptr<Console>> console = unavailable("no manager given");
  const HostPort* manager = nullptr;
  std::string why;
  for (const auto& m : *managers) {
    console = Console::connect(sys, m, options);
    if (console.ok()) {
      manager = &m;
      break;
    }
    why += (why.empty() ? "" : "; ") + console.error().message();
  }
  if (!console.ok()) return report(unavailable(why));
  if (managers->size() > 1) {  // on stderr: a command's JSON on stdout stays clean
    std::fprintf(stderr, "ember console: the manager at %s leads (of %zu given)\n", manager->to_string().c_str(),
                 managers->size());
  }

  if (!a.commands.empty()) {  // one-shot
    int rc = 0;
    for (const auto& c : a.commands) {
      const int r = run_line(**console, c, false);
      if (r < 0) break;
      if (r > 0) rc = 1;
    }
    return rc;
  }
  const bool tty = ::isatty(STDIN_FILENO) && ::isatty(STDOUT_FILENO);
  int rc = 0;
  if (!tty) {  // a script on stdin: every line, the exit code says whether one failed
    for (std::string line; std::getline(std::cin, line);) {
      const int r = run_line(**console, line, false);
      if (r < 0) break;
      if (r > 0) rc = 1;
    }
    return rc;
  }
  g_console = console->get();
  rl_attempted_completion_function = complete;
  const std::string history = history_file();
  using_history();
  if (!history.empty()) read_history(history.c_str());
  std::printf("ember console: manager %s (help lists the commands, Tab completes, Ctrl-D leaves)\n",
              manager->to_string().c_str());
  (void)(*console)->run("models");  // fills the completion lists
  (void)(*console)->run("nodes");
  while (char* raw = readline("ember> ")) {
    std::string line(raw);
    std::free(raw);
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    add_history(line.c_str());
    if (run_line(**console, line, true) < 0) break;
  }
  if (!history.empty()) write_history(history.c_str());
  g_console = nullptr;
  return 0;
}

}  // namespace

void add_console_command(CLI::App& app, Runner& runner) {
  auto a = std::make_shared<ConsoleArgs>();
  auto* c = app.add_subcommand("console", "Administer a running cluster through its manager");
  c->add_option("--manager", a->manager, "The manager, HOST:PORT (its manager.listen)")->capture_default_str();
  c->add_option("-c,--command", a->commands, "Run this command and leave (repeatable)");
  c->add_flag("--json", a->json, "Answer in JSON (one document per command) instead of tables");
  c->add_option("--token-file", a->token_file,
                "The admin token (manager.admin_token_file's content); default $EMBER_ADMIN_TOKEN_FILE");
  c->add_option("--tls-certificate", a->tls.certificate,
                "A cluster with security.tls_*: the console's certificate (PEM; ember certs issue console)");
  c->add_option("--tls-key", a->tls.key, "Its private key (PEM)");
  c->add_option("--tls-key-passphrase-file", a->tls.passphrase_file, "The key's passphrase, when it is encrypted");
  c->add_option("--tls-ca", a->tls.ca, "The cluster CA (PEM) the manager's certificate must chain to");
  c->callback([a, &runner] { runner = [a] { return run_console(*a); }; });
}

}  // namespace ember::cli
