#include "text/sampling.hpp"

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>

namespace ember::text {

namespace {

std::string num(double v) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

Status out_of_range(const char* field, const char* range, double got) {
  return invalid_argument(std::string("sampling: ") + field + " must be " + range + ", got " + num(got));
}

// splitmix64's output function (Steele, Lea and Flood 2014; Vigna's reference constants).
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Candidates in the order the header fixes: higher z first, then lower id.
struct Ranked {
  template <class C>
  bool operator()(const C& a, const C& b) const {
    return a.z > b.z || (a.z == b.z && a.id < b.id);
  }
};

// The n highest of (value, id) pairs fed in id order, highest first, ties to the lower id: a small
// sorted array, since n <= kMaxTopLogprobs and almost every value fails the first comparison.
class TopN {
 public:
  explicit TopN(size_t n) : n_(n) { best_.reserve(n + 1); }
  void offer(float v, int32_t id) {
    if (n_ == 0 || (best_.size() == n_ && !(v > best_.back().z))) return;
    Item item{v, id};
    best_.insert(std::upper_bound(best_.begin(), best_.end(), item, Ranked{}), item);
    if (best_.size() > n_) best_.pop_back();
  }
  struct Item {
    float z;
    int32_t id;
  };
  const std::vector<Item>& best() const { return best_; }

 private:
  size_t n_;
  std::vector<Item> best_;
};

}  // namespace

double sampling_uniform(uint64_t seed, uint64_t index) {
  // The index-th output of a splitmix64 stream whose state starts at mix64(seed): counter-based, so
  // any token's draw is computed without the ones before it. Mixing the seed first keeps streams of
  // seeds that differ by the stream's increment from being shifted copies of each other.
  const uint64_t bits = mix64(mix64(seed) + (index + 1) * 0x9e3779b97f4a7c15ULL);
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

Status SamplingParams::validate() const {
  if (!std::isfinite(temperature) || temperature < 0) return out_of_range("temperature", "a finite number >= 0", temperature);
  if (top_k < 0) return out_of_range("top_k", ">= 0 (0 is off)", top_k);
  if (!(top_p > 0 && top_p <= 1)) return out_of_range("top_p", "in (0, 1] (1 is off)", top_p);
  if (!(min_p >= 0 && min_p <= 1)) return out_of_range("min_p", "in [0, 1] (0 is off)", min_p);
  if (!std::isfinite(repetition_penalty) || repetition_penalty <= 0)
    return out_of_range("repetition_penalty", "a finite number > 0 (1 is off)", repetition_penalty);
  if (!(std::fabs(presence_penalty) <= kMaxPresenceFrequencyPenalty))
    return out_of_range("presence_penalty", "in [-2, 2] (0 is off)", presence_penalty);
  if (!(std::fabs(frequency_penalty) <= kMaxPresenceFrequencyPenalty))
    return out_of_range("frequency_penalty", "in [-2, 2] (0 is off)", frequency_penalty);
  if (logit_bias.size() > kMaxLogitBiasEntries)
    return invalid_argument("sampling: logit_bias has " + std::to_string(logit_bias.size()) + " entries, at most " +
                            std::to_string(kMaxLogitBiasEntries) + " are allowed");
  for (const auto& [id, bias] : logit_bias) {
    if (id < 0) return invalid_argument("sampling: logit_bias token id " + std::to_string(id) + " is negative");
    if (!(std::fabs(bias) <= kMaxLogitBias))
      return invalid_argument("sampling: logit_bias for token " + std::to_string(id) + " must be in [-100, 100], got " +
                              num(bias));
  }
  if (top_logprobs > kMaxTopLogprobs)
    return out_of_range("top_logprobs", "in [0, 20]", top_logprobs);
  if (top_logprobs > 0 && !logprobs) return invalid_argument("sampling: top_logprobs needs logprobs to be on");
  return Status::OK();
}

void TokenCounts::add_prompt(std::span<const int32_t> ids) {
  for (int32_t id : ids) entries_[id].in_prompt = true;
}

void TokenCounts::add_generated(int32_t id) { ++entries_[id].generated; }

uint32_t TokenCounts::generated(int32_t id) const {
  auto it = entries_.find(id);
  return it == entries_.end() ? 0 : it->second.generated;
}

bool TokenCounts::in_prompt(int32_t id) const {
  auto it = entries_.find(id);
  return it != entries_.end() && it->second.in_prompt;
}

Result<Sampler> Sampler::create(SamplingParams params, size_t vocab_size, uint64_t fallback_seed) {
  EMBER_RETURN_IF_ERROR(params.validate());
  if (vocab_size == 0 || vocab_size > static_cast<size_t>(INT32_MAX))
    return invalid_argument("sampling: vocabulary size " + std::to_string(vocab_size) + " is out of (0, 2^31)");
  for (const auto& entry : params.logit_bias) {
    if (static_cast<size_t>(entry.first) >= vocab_size)
      return invalid_argument("sampling: logit_bias token id " + std::to_string(entry.first) +
                              " is outside the vocabulary of " + std::to_string(vocab_size));
  }
  const uint64_t seed = params.seed.value_or(fallback_seed);
  return Sampler(std::move(params), vocab_size, seed);
}

Status Sampler::process(std::span<const float> logits, const TokenCounts& counts) {
  if (logits.size() != vocab_)
    return invalid_argument("sampling: logits row has " + std::to_string(logits.size()) + " entries, the vocabulary " +
                            std::to_string(vocab_));
  constexpr float inf = std::numeric_limits<float>::infinity();
  logits_.resize(vocab_);
  bool bad = false;
  float max = -inf;
  int32_t argmax = -1;
  for (size_t i = 0; i < vocab_; ++i) {
    const float v = logits[i];
    bad |= !(v < inf);  // NaN or +inf
    logits_[i] = v;
    if (v > max) max = v, argmax = static_cast<int32_t>(i);
  }
  if (bad) {
    for (size_t i = 0; i < vocab_; ++i) {
      if (!(logits[i] < inf))
        return internal_error("sampling: the model's logit for token " + std::to_string(i) + " is " + num(logits[i]));
    }
  }
  // Steps 1 and 2 touch few entries; the maximum is rescanned only when they lower its holder. A
  // penalised or biased logit is kept finite (a tiny repetition penalty could overflow it).
  bool lowered_max = false;
  auto adjust = [&](int32_t id, float v) {
    v = std::min(v, FLT_MAX);
    logits_[static_cast<size_t>(id)] = v;
    if (id == argmax && v < max) lowered_max = true;
    if (v > max || (v == max && id < argmax)) max = v, argmax = id;
  };
  const float rep = params_.repetition_penalty;
  if (rep != 1.0f || params_.presence_penalty != 0 || params_.frequency_penalty != 0) {
    for (const auto& [id, entry] : counts.entries()) {
      if (id < 0 || static_cast<size_t>(id) >= vocab_)
        return invalid_argument("sampling: a counted token id " + std::to_string(id) + " is outside the vocabulary of " +
                                std::to_string(vocab_));
      float v = logits_[static_cast<size_t>(id)];
      if (rep != 1.0f && (entry.in_prompt || entry.generated > 0)) v = v > 0 ? v / rep : v * rep;
      if (entry.generated > 0)
        v -= params_.frequency_penalty * static_cast<float>(entry.generated) + params_.presence_penalty;
      adjust(id, v);
    }
  }
  for (const auto& [id, bias] : params_.logit_bias) adjust(id, logits_[static_cast<size_t>(id)] + bias);
  if (lowered_max) {
    max = -inf, argmax = -1;
    for (size_t i = 0; i < vocab_; ++i) {
      if (logits_[i] > max) max = logits_[i], argmax = static_cast<int32_t>(i);
    }
  }
  if (argmax < 0) return internal_error("sampling: every logit is -infinity, the model gave no distribution");
  max_logit_ = max;
  argmax_ = argmax;
  return Status::OK();
}

Result<SampledToken> Sampler::sample(std::span<const float> logits, const TokenCounts& counts, uint64_t index) {
  EMBER_RETURN_IF_ERROR(process(logits, counts));
  if (params_.temperature == 0) return greedy();
  return draw(index);
}

SampledToken Sampler::greedy() {
  SampledToken out;
  out.id = argmax_;
  if (!params_.logprobs) return out;
  // The final distribution of a greedy request is softmax of the processed logits (header).
  double total = 0;
  TopN top(params_.top_logprobs);
  for (size_t i = 0; i < vocab_; ++i) {
    const float z = logits_[i] - max_logit_;
    total += std::exp(z);
    if (z != -std::numeric_limits<float>::infinity()) top.offer(z, static_cast<int32_t>(i));
  }
  const double log_total = std::log(total);
  out.logprob = static_cast<float>(-log_total);
  for (const auto& item : top.best()) out.top.push_back({item.id, static_cast<float>(item.z - log_total)});
  return out;
}

size_t Sampler::bucket(float z) {
  const float scaled = -z * kBucketsPerUnit;
  return scaled < static_cast<float>(kBuckets - 1) ? static_cast<size_t>(scaled) : kBuckets - 1;
}

// Step 4 as a selection: the bucket that holds the k-th most likely token, from the histogram of
// counts, then nth_element among that bucket's tokens only.
Sampler::Threshold Sampler::select_top_k(size_t k) {
  size_t above = 0, b = 0;
  for (; b < kBuckets; ++b) {
    if (above + counts_[b] >= k) break;
    above += counts_[b];
  }
  if (b == kBuckets) return {};  // fewer than k tokens are possible at all
  candidates_.clear();
  for (size_t i = 0; i < vocab_; ++i) {
    const float z = logits_[i];
    if (z != -std::numeric_limits<float>::infinity() && bucket(z) == b) candidates_.push_back({z, static_cast<int32_t>(i)});
  }
  const size_t r = k - above;  // in [1, counts_[b]]
  std::nth_element(candidates_.begin(), candidates_.begin() + static_cast<ptrdiff_t>(r - 1), candidates_.end(), Ranked{});
  return {candidates_[r - 1].z, candidates_[r - 1].id};
}

// Step 5 as a selection: the bucket in which the mass, most likely first, reaches `target`, from
// the histogram of mass, then that bucket's tokens ranked in growing batches (nth_element, then a
// sort of the batch) until the crossing token.
Sampler::Threshold Sampler::select_top_p(double target) {
  double cum = 0;
  size_t b = 0;
  for (; b < kBuckets; ++b) {
    if (cum + mass_[b] >= target) break;
    cum += mass_[b];
  }
  if (b == kBuckets) {  // rounding kept the sum short of the target: keep everything
    return {};
  }
  candidates_.clear();
  for (size_t i = 0; i < vocab_; ++i) {
    if (weights_[i] > 0 && bucket(logits_[i]) == b) candidates_.push_back({logits_[i], static_cast<int32_t>(i)});
  }
  auto first = candidates_.begin();
  size_t ranked = 0;
  for (size_t batch = 64; ranked < candidates_.size(); batch *= 8) {
    const size_t end = std::min(candidates_.size(), ranked + batch);
    if (end < candidates_.size())
      std::nth_element(first + static_cast<ptrdiff_t>(ranked), first + static_cast<ptrdiff_t>(end), candidates_.end(),
                       Ranked{});
    std::sort(first + static_cast<ptrdiff_t>(ranked), first + static_cast<ptrdiff_t>(end), Ranked{});
    for (size_t i = ranked; i < end; ++i) {
      cum += weights_[static_cast<size_t>(candidates_[i].id)];
      if (cum >= target) return {candidates_[i].z, candidates_[i].id};
    }
    ranked = end;
  }
  return {};  // rounding again: the whole bucket crosses it
}

SampledToken Sampler::draw(uint64_t index) {
  const float temperature = params_.temperature;
  const bool top_k = params_.top_k > 0 && static_cast<size_t>(params_.top_k) < vocab_;
  const bool top_p = params_.top_p < 1.0f;
  // Step 6's floor: probability at least min_p times the most likely token's, whose z is 0.
  const float floor = params_.min_p > 0 ? std::log(params_.min_p) : -std::numeric_limits<float>::infinity();
  // Step 3 in place: logits_ becomes z. Step 4 needs every z before any weight.
  Threshold keep;
  if (top_k) {
    counts_.assign(kBuckets, 0);
    for (size_t i = 0; i < vocab_; ++i) {
      const float z = (logits_[i] - max_logit_) / temperature;
      logits_[i] = z;
      if (z != -std::numeric_limits<float>::infinity()) ++counts_[bucket(z)];
    }
    keep = select_top_k(static_cast<size_t>(params_.top_k));
  }
  // The weights of the top-k set: all of it for step 5's mass, or already cut by step 6 without it.
  if (top_p) mass_.assign(kBuckets, 0.0);
  weights_.resize(vocab_);
  double total = 0;
  for (size_t i = 0; i < vocab_; ++i) {
    const float z = top_k ? logits_[i] : (logits_[i] - max_logit_) / temperature;
    logits_[i] = z;
    float w = 0;
    if (keep.keeps(z, static_cast<int32_t>(i)) && (top_p || z >= floor)) w = std::exp(z);
    weights_[i] = w;
    total += w;
    if (top_p) mass_[bucket(z)] += w;
  }
  if (top_p) {
    keep = select_top_p(static_cast<double>(params_.top_p) * total);
    total = 0;
    for (size_t i = 0; i < vocab_; ++i) {
      if (weights_[i] > 0 && !(keep.keeps(logits_[i], static_cast<int32_t>(i)) && logits_[i] >= floor)) weights_[i] = 0;
      total += weights_[i];
    }
  }
  // Step 7 over the kept tokens in id order. The most likely token is always kept with weight 1,
  // so total >= 1.
  const double target = sampling_uniform(seed_, index) * total;
  double cum = 0;
  size_t pick = vocab_, last_kept = static_cast<size_t>(argmax_);
  for (size_t i = 0; i < vocab_; ++i) {
    if (weights_[i] == 0) continue;
    last_kept = i;
    cum += weights_[i];
    if (target < cum) {
      pick = i;
      break;
    }
  }
  if (pick == vocab_) pick = last_kept;  // rounding kept the sum short of the target
  SampledToken out;
  out.id = static_cast<int32_t>(pick);
  if (params_.logprobs) {
    const double log_total = std::log(total);
    out.logprob = static_cast<float>(logits_[pick] - log_total);
    TopN top(params_.top_logprobs);
    if (params_.top_logprobs > 0) {
      for (size_t i = 0; i < vocab_; ++i) {
        if (weights_[i] > 0) top.offer(logits_[i], static_cast<int32_t>(i));
      }
    }
    for (const auto& item : top.best()) out.top.push_back({item.id, static_cast<float>(item.z - log_total)});
  }
  return out;
}

}  // namespace ember::text
