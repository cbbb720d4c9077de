#include "text/sampling.hpp"

#include <algorithm>
#include <bit>
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

constexpr float kInf = std::numeric_limits<float>::infinity();

// Sums of w in blocks of kBlock, each in eight float lanes folded into a double: a fixed order (so
// the same row always gives the same sums), and one the compiler vectorizes.
constexpr size_t kBlock = 256;
constexpr size_t kLanes = 8;
void block_sums(const std::vector<float>& w, std::vector<double>& sums) {
  const size_t n = w.size();
  sums.resize((n + kBlock - 1) / kBlock);
  for (size_t b = 0; b < sums.size(); ++b) {
    size_t i = b * kBlock;
    const size_t end = std::min(n, i + kBlock);
    float acc[kLanes] = {};
    for (; i + kLanes <= end; i += kLanes)
      for (size_t j = 0; j < kLanes; ++j) acc[j] += w[i + j];
    double sum = 0;
    for (float a : acc) sum += a;
    for (; i < end; ++i) sum += w[i];
    sums[b] = sum;
  }
}

inline float exp_le0(float z) {
  // Cephes' expf (Moshier): z = n ln2 + r with |r| <= ln2 / 2, exp(r) by a degree-7 polynomial, 2^n
  // written into the exponent bits. Branch-free, so the loops over a row vectorize; the rounding
  // trick needs strict IEEE float arithmetic, which this build has (no -ffast-math), and the selects
  // vectorize because text/CMakeLists.txt compiles with -fno-trapping-math.
  const bool underflow = !(z >= -87.0f);  // exp(-87) ~ 1.6e-38 is about the smallest normal float
  const float x = underflow ? -87.0f : z;
  const float n = (x * 1.44269504088896341f + 12582912.0f) - 12582912.0f;  // round(x / ln2)
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const float scale = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);  // n in [-126, 0]
  return underflow ? 0.0f : p * scale;
}

// The row's copy, its NaN/+inf check and its maximum, in eight lanes (vectorized).
float copy_max(const float* __restrict in, float* __restrict out, size_t n, bool& bad) {
  float lane_max[kLanes], lane_bad[kLanes];
  for (size_t j = 0; j < kLanes; ++j) lane_max[j] = -kInf, lane_bad[j] = 0;
  size_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (size_t j = 0; j < kLanes; ++j) {
      const float v = in[i + j];
      out[i + j] = v;
      lane_bad[j] = v < kInf ? lane_bad[j] : 1.0f;  // NaN or +inf
      lane_max[j] = v > lane_max[j] ? v : lane_max[j];
    }
  }
  float max = -kInf;
  bad = false;
  for (size_t j = 0; j < kLanes; ++j) max = std::max(max, lane_max[j]), bad |= lane_bad[j] != 0;
  for (; i < n; ++i) {
    out[i] = in[i];
    bad |= !(in[i] < kInf);
    max = std::max(max, in[i]);
  }
  return max;
}

// w = exp(z - shift) where z - shift >= cut, else 0 (vectorized).
void exp_row(const float* __restrict z, float* __restrict w, size_t n, float shift, float cut) {
  for (size_t i = 0; i < n; ++i) {
    const float x = z[i] - shift;
    const float e = exp_le0(x);
    w[i] = x >= cut ? e : 0.0f;
  }
}
}  // namespace

double sampling_uniform(uint64_t seed, uint64_t index) {
  // The index-th output of a splitmix64 stream whose state starts at mix64(seed): counter-based, so
  // any token's draw is computed without the ones before it. Mixing the seed first keeps streams of
  // seeds that differ by the stream's increment from being shifted copies of each other.
  const uint64_t bits = mix64(mix64(seed) + (index + 1) * 0x9e3779b97f4a7c15ULL);
  return static_cast<double>(bits >> 11) * 0x1.0p-53;
}

float sampling_exp(float z) { return exp_le0(z); }

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
  logits_.resize(vocab_);
  bool bad = false;
  float max = copy_max(logits.data(), logits_.data(), vocab_, bad);
  if (bad) {
    for (size_t k = 0; k < vocab_; ++k) {
      if (!(logits[k] < kInf))
        return internal_error("sampling: the model's logit for token " + std::to_string(k) + " is " + num(logits[k]));
    }
  }
  if (max == -kInf) return internal_error("sampling: every logit is -infinity, the model gave no distribution");
  int32_t argmax = static_cast<int32_t>(std::find(logits_.begin(), logits_.end(), max) - logits_.begin());
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
    max = *std::max_element(logits_.begin(), logits_.end());
    argmax = static_cast<int32_t>(std::find(logits_.begin(), logits_.end(), max) - logits_.begin());
  }
  if (max == -kInf) return internal_error("sampling: every logit is -infinity after the penalties and bias");
  max_logit_ = max;
  argmax_ = argmax;
  return Status::OK();
}

Result<SampledToken> Sampler::sample(std::span<const float> logits, const TokenCounts& counts, uint64_t index) {
  EMBER_RETURN_IF_ERROR(process(logits, counts));
  if (params_.temperature == 0) return greedy();
  // Step 3 in place: logits_ becomes z = (logit - max) / temperature, <= 0, 0 at the argmax.
  const float max = max_logit_, temperature = params_.temperature;
  for (float& v : logits_) v = (v - max) / temperature;
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < vocab_ &&
      static_cast<size_t>(params_.top_k) <= kSmallTopK) {
    select_small_top_k(static_cast<size_t>(params_.top_k));
    return draw_candidates(index);
  }
  return draw_row(index);
}

SampledToken Sampler::greedy() {
  SampledToken out;
  out.id = argmax_;
  if (!params_.logprobs) return out;
  // The final distribution of a greedy request is softmax of the processed logits (header).
  weights_.resize(vocab_);
  exp_row(logits_.data(), weights_.data(), vocab_, max_logit_, -kInf);
  block_sums(weights_, sums_);
  double total = 0;
  for (double s : sums_) total += s;
  const double log_total = std::log(total);
  out.logprob = static_cast<float>(-log_total);
  if (params_.top_logprobs > 0) {
    TopN top(params_.top_logprobs);
    for (size_t i = 0; i < vocab_; ++i) {
      if (logits_[i] != -kInf) top.offer(logits_[i] - max_logit_, static_cast<int32_t>(i));
    }
    for (const auto& item : top.best()) out.top.push_back({item.id, static_cast<float>(item.z - log_total)});
  }
  return out;
}

// Step 4 for a small k, as a streaming selection: tokens at or above the running threshold (the
// k-th best so far) are gathered; when the buffer fills, nth_element keeps the best k and raises
// the threshold. Almost every token fails one comparison.
void Sampler::select_small_top_k(size_t k) {
  const size_t cap = k + 4096;
  candidates_.clear();
  float threshold = -kInf;
  auto compact = [&] {
    std::nth_element(candidates_.begin(), candidates_.begin() + static_cast<ptrdiff_t>(k - 1), candidates_.end(),
                     Ranked{});
    candidates_.resize(k);
    threshold = candidates_[k - 1].z;
  };
  for (size_t i = 0; i < vocab_; ++i) {
    const float z = logits_[i];
    if (z >= threshold && z != -kInf) {
      candidates_.push_back({z, static_cast<int32_t>(i)});
      if (candidates_.size() == cap) compact();
    }
  }
  if (candidates_.size() > k) compact();
}

// Steps 5-7 on the (at most kSmallTopK) candidates of a small top-k.
SampledToken Sampler::draw_candidates(uint64_t index) {
  std::sort(candidates_.begin(), candidates_.end(), Ranked{});
  size_t kept = candidates_.size();
  if (params_.top_p < 1.0f) {
    double total = 0;
    for (const Candidate& c : candidates_) total += exp_le0(c.z);
    const double target = static_cast<double>(params_.top_p) * total;
    double cum = 0;
    for (size_t i = 0; i < candidates_.size(); ++i) {
      cum += exp_le0(candidates_[i].z);
      if (cum >= target) {
        kept = i + 1;
        break;
      }
    }
  }
  if (params_.min_p > 0) {
    const float floor = std::log(params_.min_p);  // the first candidate's z is 0
    while (kept > 1 && candidates_[kept - 1].z < floor) --kept;
  }
  candidates_.resize(kept);
  SampledToken out;
  const size_t n_top = params_.logprobs ? std::min<size_t>(params_.top_logprobs, kept) : 0;
  for (size_t i = 0; i < n_top; ++i) out.top.push_back({candidates_[i].id, candidates_[i].z});  // z for now
  // Step 7 in id order, as on a whole row.
  std::sort(candidates_.begin(), candidates_.end(), [](const Candidate& a, const Candidate& b) { return a.id < b.id; });
  double total = 0;
  for (const Candidate& c : candidates_) total += exp_le0(c.z);
  const double target = sampling_uniform(seed_, index) * total;
  double cum = 0;
  const Candidate* pick = nullptr;
  for (const Candidate& c : candidates_) {
    const float w = exp_le0(c.z);
    if (w == 0) continue;
    pick = &c;
    cum += w;
    if (target < cum) break;
  }
  if (pick == nullptr) pick = &candidates_.front();  // every kept weight underflowed: not with z = 0 kept
  out.id = pick->id;
  if (params_.logprobs) {
    const double log_total = std::log(total);
    out.logprob = static_cast<float>(pick->z - log_total);
    for (TokenLogprob& t : out.top) t.logprob = static_cast<float>(t.logprob - log_total);
  }
  return out;
}

// Step 4 for a large k: nth_element over every possible token (linear, but with a large constant;
// requests with k above kSmallTopK are rare).
Sampler::Threshold Sampler::select_large_top_k(size_t k) {
  candidates_.clear();
  for (size_t i = 0; i < vocab_; ++i) {
    if (logits_[i] != -kInf) candidates_.push_back({logits_[i], static_cast<int32_t>(i)});
  }
  if (candidates_.size() <= k) return {};
  std::nth_element(candidates_.begin(), candidates_.begin() + static_cast<ptrdiff_t>(k - 1), candidates_.end(), Ranked{});
  return {candidates_[k - 1].z, candidates_[k - 1].id};
}

// Step 5 on a whole row: a histogram of the mass over z (branch-free, every token adding its weight
// to its bucket) finds the bucket where the cut falls, and only that bucket's tokens are ranked, in
// growing batches (nth_element, then a sort of the batch), until the crossing token.
Sampler::Threshold Sampler::select_top_p(double total) {
  const double target = static_cast<double>(params_.top_p) * total;
  mass_.assign(kBuckets, 0.0);
  for (size_t i = 0; i < vocab_; ++i) mass_[bucket(logits_[i])] += weights_[i];
  double cum = 0;
  size_t b = 0;
  for (; b < kBuckets; ++b) {
    if (cum + mass_[b] >= target) break;
    cum += mass_[b];
  }
  if (b == kBuckets) return {};  // rounding kept the sum short of the target: keep everything
  candidates_.clear();
  for (size_t i = 0; i < vocab_; ++i) {
    if (bucket(logits_[i]) == b && weights_[i] > 0)
      candidates_.push_back({logits_[i], static_cast<int32_t>(i)});
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

// Steps 4 (a large k), 5, 6 and 7 on the whole row.
SampledToken Sampler::draw_row(uint64_t index) {
  const bool top_p = params_.top_p < 1.0f;
  // Step 6's floor: probability at least min_p times the most likely token's, whose z is 0.
  const float floor = params_.min_p > 0 ? std::log(params_.min_p) : -kInf;
  Threshold keep;
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < vocab_) keep = select_large_top_k(static_cast<size_t>(params_.top_k));
  // Weights of the top-k set: all of it for step 5's mass, or already cut by step 6 without it.
  const float cut = top_p ? -kInf : floor;
  weights_.resize(vocab_);
  if (keep.keeps_all()) {
    exp_row(logits_.data(), weights_.data(), vocab_, 0.0f, cut);
  } else {
    for (size_t i = 0; i < vocab_; ++i) {
      const float z = logits_[i];
      weights_[i] = z >= cut && keep.keeps(z, static_cast<int32_t>(i)) ? exp_le0(z) : 0.0f;
    }
  }
  block_sums(weights_, sums_);
  double total = 0;
  for (double s : sums_) total += s;
  if (top_p) {
    keep = select_top_p(total);
    // Kept: z at or above the cut's and min-p's floor (vectorized), then the ties at the cut's z
    // that rank below it (higher ids) dropped.
    const float lowest = std::max(keep.z, floor);
    float* w = weights_.data();
    const float* z = logits_.data();
    for (size_t i = 0; i < vocab_; ++i) w[i] = z[i] >= lowest ? w[i] : 0.0f;
    if (!keep.keeps_all()) {
      for (size_t i = static_cast<size_t>(keep.id) + 1; i < vocab_; ++i) {
        if (z[i] == keep.z) w[i] = 0;
      }
    }
    block_sums(weights_, sums_);
    total = 0;
    for (double s : sums_) total += s;
  }
  // Step 7 over the kept tokens in id order: the block whose sum crosses the target, then the token
  // within it. The most likely token is always kept with weight 1, so total >= 1.
  const double target = sampling_uniform(seed_, index) * total;
  double cum = 0;
  size_t pick = vocab_;
  for (size_t b = 0; b < sums_.size() && pick == vocab_; ++b) {
    if (!(target < cum + sums_[b]) && b + 1 < sums_.size()) {
      cum += sums_[b];
      continue;
    }
    // Rounding may keep the block's own walk short of the target: then its last kept token.
    for (size_t i = b * kBlock; i < std::min(vocab_, (b + 1) * kBlock); ++i) {
      if (weights_[i] == 0) continue;
      pick = i;
      cum += weights_[i];
      if (target < cum) break;
    }
  }
  if (pick == vocab_) pick = static_cast<size_t>(argmax_);  // the last block was empty (rounding)
  SampledToken out;
  out.id = static_cast<int32_t>(pick);
  if (params_.logprobs) {
    const double log_total = std::log(total);
    out.logprob = static_cast<float>(logits_[pick] - log_total);
    if (params_.top_logprobs > 0) {
      TopN top(params_.top_logprobs);
      for (size_t i = 0; i < vocab_; ++i) {
        if (weights_[i] > 0) top.offer(logits_[i], static_cast<int32_t>(i));
      }
      for (const auto& item : top.best()) out.top.push_back({item.id, static_cast<float>(item.z - log_total)});
    }
  }
  return out;
}

}  // namespace ember::text
