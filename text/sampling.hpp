// Sampling: one token id from one row of logits, as a request's sampling parameters ask.
//
// Owns nothing shared. A Sampler is one request's (or one generation loop thread's): it keeps
// scratch buffers of the vocabulary's size between calls, so it is not thread-safe, but it holds no
// state that changes what it picks: sample() is a pure function of (params, seed, logits, counts,
// index). Never touches device memory, never blocks; its buffers grow to their largest in the
// first calls and are reused (only the returned logprobs list is new each call). No global random
// state: the seed comes in (the request's, or one the caller drew for it).
//
// Order of operations, as vLLM's sampler and Hugging Face's logits processors and warpers apply
// them:
//   1. penalties (vLLM's apply_penalties): the repetition penalty (HF's: a seen token's logit is
//      divided by it when positive, multiplied when negative; "seen" = in the prompt or generated),
//      then OpenAI's frequency and presence penalties over the generated tokens only:
//        logit[j] -= frequency_penalty * count[j] + presence_penalty * (count[j] > 0);
//   2. logit_bias: logit[j] += bias[j] (OpenAI's, added to the penalised logits);
//   3. temperature: z = (logit - max logit) / temperature. 0 means greedy: the highest logit, ties
//      to the lowest id, and steps 4-6 and the draw are skipped (they cannot change the argmax);
//   4. top-k: the k highest z, exactly k (ties at the k-th value go to the lower ids; HF keeps every
//      tie, vLLM keeps k);
//   5. top-p: of those, in descending probability (ties: lower id first), the shortest prefix whose
//      probability, renormalised over the top-k set, reaches top_p (the token that crosses it is
//      kept; at least one is kept), as HF's TopPLogitsWarper and vLLM;
//   6. min-p: of those, the tokens whose probability is at least min_p times the most likely one's;
//   7. the draw: one uniform u in [0, 1) per token from a counter-based generator of (seed, index)
//      (splitmix64's output function over the seed and the index: token i's draw depends on
//      nothing else), then the inverse CDF over the kept tokens in id order (a fixed order, so the
//      pick is deterministic, and no sort is needed).
//   Because the draw of token i depends only on (seed, i), a stream resumed on another replica from
//   the tokens already sent (counts rebuilt from them, index = the number sent) picks the same next
//   tokens, given the same logits.
//
// Log-probabilities (OpenAI's `logprobs` / `top_logprobs`) are of the final distribution: the kept
// tokens of steps 4-6, renormalised, at the request's temperature. A greedy request's final
// distribution is softmax of the step-2 logits (temperature 1, no filter: what a client asking for
// logprobs at temperature 0 expects, rather than a certain token). Alternatives are the n most
// likely tokens of that distribution (ties: lower id first); a token the filters removed is never
// listed, so fewer than n come back when fewer were kept.
//
// Weights are exp(z) by sampling_exp (below), in float, summed in double: a token more than e^87
// times less likely than the most likely one has weight 0 (never drawn, never listed).
//
// Cost, no full sort anywhere: a few vectorized passes over the row (the copy with the maximum, z,
// the weights, their sums per block of 256, which the draw walks before the tokens of one block).
// Top-k up to kSmallTopK is a streaming selection (tokens at or above the k-th best so far go to a
// buffer that nth_element trims), after which steps 5-7 run on the k candidates alone; a larger k
// is one nth_element over the row. Top-p without top-k histograms the mass over z (1/16 wide
// buckets) to find the bucket where the cut falls and ranks only that bucket's tokens. Penalties
// and bias cost O(distinct tokens seen + bias entries). bench/sampling_bench on a 128,256-token
// row of normal logits (standard deviation 3: a flatter row than a trained model's, so top-p keeps
// thousands of tokens), least microseconds per token on this project's shared 2-core build machine
// (AMD EPYC, SSE2 build): greedy 93, temperature 267, top_k 50 226, top_p 0.9 518,
// top_k 50 + top_p 0.95 217, min_p 0.05 259, temperature + 5 logprobs 370.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.hpp"

namespace ember::text {

/// Limits a request may not exceed (invalid_argument beyond them).
inline constexpr uint32_t kMaxTopLogprobs = 20;       // OpenAI's top_logprobs maximum
inline constexpr size_t kMaxLogitBiasEntries = 1024;  // Ember's: bounds step 2's cost per token
inline constexpr float kMaxLogitBias = 100.0f;        // OpenAI's range is [-100, 100]
inline constexpr float kMaxPresenceFrequencyPenalty = 2.0f;  // OpenAI's range is [-2, 2]

struct SamplingParams {
  /// Softmax temperature, >= 0; 0 is greedy. Default 1 (OpenAI's).
  float temperature = 1.0f;
  /// Keep the k most likely tokens, k >= 0; 0 is off. A k at or above the vocabulary is off.
  int32_t top_k = 0;
  /// Nucleus: keep the most likely tokens whose probability reaches top_p, in (0, 1]; 1 is off.
  float top_p = 1.0f;
  /// Keep tokens at least min_p times as likely as the most likely one, in [0, 1]; 0 is off.
  float min_p = 0.0f;
  /// The request's seed; without one the caller draws one per request (Sampler::create's
  /// `fallback_seed`), so unseeded requests differ and no global generator exists.
  std::optional<uint64_t> seed;
  /// HF's multiplicative penalty over tokens seen in the prompt or generated, > 0; 1 is off.
  float repetition_penalty = 1.0f;
  /// OpenAI's, in [-2, 2]: subtracted once from each token generated at least once; 0 is off.
  float presence_penalty = 0.0f;
  /// OpenAI's, in [-2, 2]: subtracted per occurrence among the generated tokens; 0 is off.
  float frequency_penalty = 0.0f;
  /// OpenAI's logit_bias: token id -> bias in [-100, 100], added to the logit (step 2). At most
  /// kMaxLogitBiasEntries; ids must be below the vocabulary (checked by Sampler::create).
  std::map<int32_t, float> logit_bias;
  /// Return the chosen token's log-probability (OpenAI chat's `logprobs: true`).
  bool logprobs = false;
  /// And the n most likely alternatives, n in [0, kMaxTopLogprobs]; needs `logprobs`.
  uint32_t top_logprobs = 0;

  /// invalid_argument naming the field and the allowed range for any value out of range or not
  /// finite (NaN, infinity). Ids of logit_bias against the vocabulary are checked by Sampler::create.
  Status validate() const;
};

/// The tokens a sequence has seen, as the penalties read them: which appear in the prompt (for the
/// repetition penalty) and how often each was generated (all three). Kept by the generation loop,
/// one per sequence, growing by one add_generated per token; a resumed stream rebuilds it from the
/// prompt and the tokens already sent. Sparse: memory is O(distinct tokens).
class TokenCounts {
 public:
  void add_prompt(std::span<const int32_t> ids);
  void add_generated(int32_t id);
  uint32_t generated(int32_t id) const;
  bool in_prompt(int32_t id) const;
  size_t distinct() const { return entries_.size(); }
  void clear() { entries_.clear(); }

  struct Entry {
    uint32_t generated = 0;
    bool in_prompt = false;
  };
  const std::unordered_map<int32_t, Entry>& entries() const { return entries_; }

 private:
  std::unordered_map<int32_t, Entry> entries_;
};

struct TokenLogprob {
  int32_t id = 0;
  float logprob = 0;  // natural log, <= 0
};

struct SampledToken {
  int32_t id = 0;
  /// The chosen token's log-probability in the final distribution; set when params.logprobs.
  std::optional<float> logprob;
  /// The params.top_logprobs most likely tokens, most likely first (fewer when fewer were kept).
  std::vector<TokenLogprob> top;
};

/// Uniform in [0, 1) for token `index` of a stream seeded with `seed` (53 random bits): the draw
/// of step 7. Pure; exposed for tests and for anyone who must reproduce a pick.
double sampling_uniform(uint64_t seed, uint64_t index);

/// exp(z) for z <= 0 (0 below -87, where it leaves the normal floats), within 1 ulp of the
/// correctly rounded value (checked once over every float in [-87, 0]): the one exponential every
/// weight and log-probability uses, branch-free so a row's loop vectorizes, and the same bits on
/// every x86-64 replica running this build.
float sampling_exp(float z);

class Sampler {
 public:
  /// A sampler for rows of `vocab_size` logits. The seed is params.seed, or `fallback_seed` when
  /// the request gave none (the caller draws it per request, e.g. from std::random_device).
  /// invalid_argument for params that fail validate(), a logit_bias id outside [0, vocab_size), or
  /// a vocab_size of 0 or above INT32_MAX.
  static Result<Sampler> create(SamplingParams params, size_t vocab_size, uint64_t fallback_seed);

  /// Picks token `index` (0 for the first generated token, i for the one after i tokens) from
  /// `logits` (float32 [vocab_size]). invalid_argument when the row's size is not vocab_size;
  /// internal when a logit is NaN or +infinity, or every logit is -infinity (the model produced no
  /// distribution), naming the first bad id.
  Result<SampledToken> sample(std::span<const float> logits, const TokenCounts& counts, uint64_t index);

  const SamplingParams& params() const { return params_; }
  uint64_t seed() const { return seed_; }
  size_t vocab_size() const { return vocab_; }

 private:
  Sampler(SamplingParams params, size_t vocab, uint64_t seed)
      : params_(std::move(params)), vocab_(vocab), seed_(seed) {}

  struct Candidate {
    float z;  // the processed logit after temperature, relative to the maximum (<= 0)
    int32_t id;
  };
  /// A cut in rank order: a token is kept when it ranks at or above (z, id). The default keeps all.
  struct Threshold {
    float z = -std::numeric_limits<float>::infinity();
    int32_t id = std::numeric_limits<int32_t>::max();
    bool keeps(float token_z, int32_t token_id) const { return token_z > z || (token_z == z && token_id <= id); }
    bool keeps_all() const { return z == -std::numeric_limits<float>::infinity() && id == std::numeric_limits<int32_t>::max(); }
  };
  /// A top-k up to this size is selected by streaming into a small buffer and finished on the k
  /// candidates alone; a larger one by nth_element over the row.
  static constexpr size_t kSmallTopK = 1024;
  /// Top-p's histogram of mass over z: 1/16 wide buckets from 0 down to -64 (the last bucket holds
  /// everything below), monotone in z, so rank order across buckets is bucket order.
  static constexpr size_t kBuckets = 1024;
  static constexpr float kBucketsPerUnit = 16.0f;
  static size_t bucket(float z) {
    const float scaled = -z * kBucketsPerUnit;
    return scaled < static_cast<float>(kBuckets - 1) ? static_cast<size_t>(scaled) : kBuckets - 1;
  }

  Status process(std::span<const float> logits, const TokenCounts& counts);  // steps 1-2
  SampledToken greedy();
  void select_small_top_k(size_t k);               // step 4 into candidates_
  SampledToken draw_candidates(uint64_t index);    // steps 5-7 on them
  Threshold select_large_top_k(size_t k);          // step 4 on the row
  Threshold select_top_p(double total);            // step 5 on the row
  SampledToken draw_row(uint64_t index);           // steps 4-7 on the row

  SamplingParams params_;
  size_t vocab_ = 0;
  uint64_t seed_ = 0;
  std::vector<float> logits_;          // scratch: the row after steps 1-2, then z after step 3
  float max_logit_ = 0;                // the maximum after steps 1-2
  int32_t argmax_ = 0;                 // and the lowest id holding it
  std::vector<float> weights_;         // scratch: exp(z) of the tokens still kept, else 0
  std::vector<double> sums_;           // scratch: weights_ summed per block of 256
  std::vector<double> mass_;           // scratch: weight per bucket (top-p)
  std::vector<Candidate> candidates_;  // scratch: tokens being selected or ranked
};

}  // namespace ember::text
