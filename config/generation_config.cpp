// The `generation:` section of the config file: parse_generation reads it, validate_generation
// checks its ranges (declared in config/config_detail.hpp). GenerationConfig and the meaning of each
// key are in config/cluster_config.hpp. Only cluster_config.cpp calls these two.
#include <charconv>
#include <string>
#include <system_error>

#include "base/units.hpp"
#include "config/cluster_config.hpp"
#include "config/config_detail.hpp"
#include "config/yaml_section.hpp"

namespace ember::config_detail {
namespace {

constexpr uint32_t kMaxSeqs = 65536, kMaxBatchedTokens = 1u << 20, kMaxWaiting = 1'000'000;

/// kv_cache: "NN%" of the model pool (above 0, at most 100) or a byte size above 0.
struct KvCacheBound {
  double fraction = 0;
  uint64_t bytes = 0;
};

Result<KvCacheBound> parse_kv_cache(std::string_view text) {
  if (!text.empty() && text.back() == '%') {
    double pct = 0;
    const auto r = std::from_chars(text.data(), text.data() + text.size() - 1, pct);
    if (r.ec != std::errc() || r.ptr != text.data() + text.size() - 1 || !(pct > 0 && pct <= 100)) {
      return invalid_argument("'" + std::string(text) + "' is not a share in (0%, 100%] of the model pool");
    }
    return KvCacheBound{pct / 100, 0};
  }
  auto bytes = parse_bytes(text);
  if (!bytes.ok() || *bytes == 0) {
    return invalid_argument("'" + std::string(text) + "' is neither a share of the model pool (50%) nor a size above 0 (2GiB)");
  }
  return KvCacheBound{0, *bytes};
}

}  // namespace

Status parse_generation(const config_yaml::YamlSection& s, GenerationConfig& c) {
  EMBER_RETURN_IF_ERROR(s.check_unique_keys());
  EMBER_RETURN_IF_ERROR(
      s.check_keys({"max_num_seqs", "max_num_batched_tokens", "max_waiting", "kv_cache", "kv_swap_space"}));
  EMBER_RETURN_IF_ERROR(s.read_uint_as("max_num_seqs", kMaxSeqs, c.max_num_seqs));
  EMBER_RETURN_IF_ERROR(s.read_uint_as("max_num_batched_tokens", kMaxBatchedTokens, c.max_num_batched_tokens));
  EMBER_RETURN_IF_ERROR(s.read_uint_as("max_waiting", kMaxWaiting, c.max_waiting));
  KvCacheBound kv{c.kv_cache_fraction, c.kv_cache_bytes};
  EMBER_RETURN_IF_ERROR(s.read("kv_cache", kv, parse_kv_cache));
  c.kv_cache_fraction = kv.bytes ? c.kv_cache_fraction : kv.fraction;
  c.kv_cache_bytes = kv.bytes;
  EMBER_RETURN_IF_ERROR(s.read("kv_swap_space", c.kv_swap_space, parse_bytes));
  return Status::OK();
}

Status validate_generation(const GenerationConfig& g, const std::string& at) {
  if (g.max_num_seqs < 1 || g.max_num_seqs > kMaxSeqs) {
    return invalid_argument(at + ": generation.max_num_seqs: " + std::to_string(g.max_num_seqs) + " is outside 1.." +
                            std::to_string(kMaxSeqs));
  }
  if (g.max_num_batched_tokens < g.max_num_seqs || g.max_num_batched_tokens > kMaxBatchedTokens) {
    return invalid_argument(at + ": generation.max_num_batched_tokens: " + std::to_string(g.max_num_batched_tokens) +
                            " is outside max_num_seqs (" + std::to_string(g.max_num_seqs) + ").." +
                            std::to_string(kMaxBatchedTokens) + ": a step must hold one token of every sequence");
  }
  if (g.max_waiting < 1 || g.max_waiting > kMaxWaiting) {
    return invalid_argument(at + ": generation.max_waiting: " + std::to_string(g.max_waiting) + " is outside 1.." +
                            std::to_string(kMaxWaiting));
  }
  if (g.kv_cache_bytes == 0) {
    EMBER_RETURN_IF_ERROR(check_number(at, "generation.kv_cache (a share)", g.kv_cache_fraction, 0, 1, true));
  }
  return Status::OK();
}

}  // namespace ember::config_detail
