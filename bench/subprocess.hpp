// A child process spoken to through its stdin and stdout, one line per message. Used by
// benchmarks to drive a peer (PyTorch, a load generator) alternately with Ember in one run.
// Not thread-safe; the destructor closes stdin and reaps the child.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

namespace ember::bench {

class Subprocess {
 public:
  explicit Subprocess(const std::vector<std::string>& argv) {
    int in[2], out[2];
    if (::pipe(in) != 0 || ::pipe(out) != 0) throw std::runtime_error("pipe failed");
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::close(in[1]);
      ::close(out[0]);
      std::vector<char*> args;
      for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
      args.push_back(nullptr);
      ::execv(args[0], args.data());
      std::perror(("exec " + argv[0]).c_str());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    to_ = ::fdopen(in[1], "w");
    from_ = ::fdopen(out[0], "r");
  }

  ~Subprocess() {
    if (to_) std::fclose(to_);
    if (from_) std::fclose(from_);
    int status = 0;
    ::waitpid(pid_, &status, 0);
  }

  Subprocess(const Subprocess&) = delete;
  Subprocess& operator=(const Subprocess&) = delete;

  /// Asks the child to exit (SIGTERM); the destructor then reaps it.
  void terminate() { ::kill(pid_, SIGTERM); }
  pid_t pid() const { return pid_; }

  /// Sends one line and returns the reply line (without the newline); throws if the child died.
  std::string ask(const std::string& line) {
    std::fputs((line + "\n").c_str(), to_);
    std::fflush(to_);
    std::string reply;
    char buf[4096];
    while (std::fgets(buf, sizeof(buf), from_)) {
      reply += buf;
      if (!reply.empty() && reply.back() == '\n') {
        reply.pop_back();
        return reply;
      }
    }
    throw std::runtime_error("child process closed its output");
  }

 private:
  pid_t pid_ = -1;
  std::FILE* to_ = nullptr;
  std::FILE* from_ = nullptr;
};

}  // namespace ember::bench
