// tokenizer_bench: what encoding a long prompt costs with Ember's tokenizer (text/tokenizer.hpp) on real
// tokenizer files (issue 35: a 2,000-token prompt well under a millisecond per hundred tokens). Not a
// test: it prints figures. The prompt is synthetic prose of pseudo-random words (a fixed seed), with
// numbers, punctuation, code and newlines, cut to about --tokens tokens for each file. "cold" is the
// first encode after loading (an empty word cache: every word goes through BPE's merges); "warm" is the
// median of --repeat encodes after it (repeated words come from the cache, as in a server). Also the
// file's load time and a decode of the same ids.
//
//   tokenizer_bench [--tokenizer DIR]... [--tokens N] [--repeat N]
//
// Without --tokenizer it uses the @lenml/tokenizer-{gpt2,llama2,llama3} packages deploy/setup.sh installs
// under $EMBER_NPM_DIR (default ~/.cache/ember-npm), those present.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "text/tokenizer.hpp"

using Clock = std::chrono::steady_clock;

namespace {

double us_since(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

/// Prose of pseudo-random words: about `words` of them, from syllables, so few words repeat exactly.
std::string synthetic_text(size_t words, uint64_t seed) {
  static const char* syllables[] = {"ka", "lo",  "mi", "ter", "an",  "si",  "qu", "ber", "do", "ven", "ra", "tion",
                                    "ex", "pre", "al", "ly",  "ing", "str", "ou", "ph",  "ge", "nt",  "or", "is"};
  static const char* tails[] = {" ", " ", " ", " ", " ", ", ", ". ", ".\n", "; ", " (", ") ", ": ", "\n\n", " - "};
  std::mt19937_64 rng(seed);
  std::string s;
  for (size_t w = 0; w < words; ++w) {
    const int kind = static_cast<int>(rng() % 20);
    if (kind == 0) {
      s += std::to_string(rng() % 100000);
    } else if (kind == 1) {
      s += "x[i] += y(" + std::to_string(rng() % 64) + ")";
    } else {
      const int n = 1 + static_cast<int>(rng() % 3);
      for (int k = 0; k < n; ++k) s += syllables[rng() % std::size(syllables)];
      if (rng() % 8 == 0) s[s.size() - static_cast<size_t>(n) * 2] ^= 0x20;  // a capital now and then
    }
    s += tails[rng() % std::size(tails)];
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Encoding cost of Ember's tokenizer on real tokenizer files"};
  std::vector<std::string> dirs;
  size_t tokens = 2000;
  int repeat = 50;
  app.add_option("--tokenizer", dirs, "A folder with tokenizer.json (repeatable)");
  app.add_option("--tokens", tokens, "Prompt length in tokens (about)")->check(CLI::Range(size_t{10}, size_t{1} << 22));
  app.add_option("--repeat", repeat, "Warm encodes timed")->check(CLI::Range(1, 100000));
  CLI11_PARSE(app, argc, argv);
  if (dirs.empty()) {
    const char* env = std::getenv("EMBER_NPM_DIR");
    const char* home = std::getenv("HOME");
    const std::filesystem::path npm =
        env != nullptr ? std::filesystem::path(env) : std::filesystem::path(home ? home : "/") / ".cache/ember-npm";
    for (const char* name : {"gpt2", "llama2", "llama3"}) {
      const auto dir = npm / "node_modules/@lenml" / (std::string("tokenizer-") + name) / "models";
      if (std::filesystem::exists(dir / "tokenizer.json")) dirs.push_back(dir.string());
    }
    if (dirs.empty()) {
      std::fprintf(stderr, "tokenizer_bench: no --tokenizer and no @lenml tokenizer packages under %s\n", npm.c_str());
      return 2;
    }
  }

  std::printf("%-52s %8s %8s %10s %10s %12s %12s %10s\n", "tokenizer", "load ms", "tokens", "cold us", "warm us",
              "cold us/100", "warm us/100", "decode us");
  for (const std::string& dir : dirs) {
    const auto load_start = Clock::now();
    auto tok = ember::text::Tokenizer::load(dir);
    const double load_ms = us_since(load_start) / 1000;
    if (!tok.ok()) {
      std::fprintf(stderr, "tokenizer_bench: %s\n", tok.error().to_string().c_str());
      return 1;
    }
    // Cut the synthetic text to about `tokens` tokens for this file (measured with a scratch load, so
    // the timed tokenizer's cache starts empty).
    std::string text = synthetic_text(tokens, 35);
    {
      auto scratch = ember::text::Tokenizer::load(dir);
      size_t n = scratch->encode(text)->size();
      while (n > tokens && text.size() > 1) {
        text.resize(text.size() * tokens / n);
        while (!text.empty() && (static_cast<unsigned char>(text.back()) & 0xC0) == 0x80) text.pop_back();
        n = scratch->encode(text)->size();
      }
    }
    const auto cold_start = Clock::now();
    auto ids = tok->encode(text);
    const double cold_us = us_since(cold_start);
    if (!ids.ok()) {
      std::fprintf(stderr, "tokenizer_bench: %s\n", ids.error().to_string().c_str());
      return 1;
    }
    std::vector<double> warm;
    for (int r = 0; r < repeat; ++r) {
      const auto start = Clock::now();
      auto again = tok->encode(text);
      warm.push_back(us_since(start));
      if (!again.ok() || *again != *ids) {
        std::fprintf(stderr, "tokenizer_bench: a warm encode differs from the cold one\n");
        return 1;
      }
    }
    std::sort(warm.begin(), warm.end());
    const double warm_us = warm[warm.size() / 2];
    const auto decode_start = Clock::now();
    auto decoded = tok->decode(*ids, {.skip_special_tokens = true});
    const double decode_us = us_since(decode_start);
    if (!decoded.ok()) return 1;
    const double n = static_cast<double>(ids->size());
    std::printf("%-52s %8.1f %8zu %10.0f %10.0f %12.1f %12.1f %10.0f\n",
                dir.substr(dir.size() > 52 ? dir.size() - 52 : 0).c_str(), load_ms, ids->size(), cold_us, warm_us,
                cold_us / n * 100, warm_us / n * 100, decode_us);
  }
  return 0;
}
