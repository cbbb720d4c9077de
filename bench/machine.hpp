// What a benchmark prints about the machine it ran on (its figures are that machine's).
#pragma once

#include <fstream>
#include <string>

namespace ember::bench {

/// The CPU's model name from /proc/cpuinfo, or "unknown CPU".
inline std::string cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

}  // namespace ember::bench
