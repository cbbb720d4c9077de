#include "placement/chain_builder.hpp"

#include <algorithm>
#include <map>
#include <set>

namespace ember::placement {
namespace {

bool by_name(const ChainReceiver* a, const ChainReceiver* b) { return a->name < b->name; }

// Appends `hops` as ceil(len / max_len) contiguous parts, longer parts first, all fed by `source`.
void append_split(const std::string& source, const std::vector<std::string>& hops, uint32_t max_len,
                  std::vector<Chain>& out) {
  const size_t parts = max_len == 0 ? 1 : (hops.size() + max_len - 1) / max_len;
  const size_t base = hops.size() / parts;
  const size_t longer = hops.size() % parts;
  size_t pos = 0;
  for (size_t p = 0; p < parts; ++p) {
    const size_t len = base + (p < longer ? 1 : 0);
    out.push_back({source, std::vector<std::string>(hops.begin() + static_cast<std::ptrdiff_t>(pos),
                                                    hops.begin() + static_cast<std::ptrdiff_t>(pos + len))});
    pos += len;
  }
}

}  // namespace

Result<std::vector<Chain>> build_chains(const std::vector<ChainSource>& sources,
                                        const std::vector<ChainReceiver>& receivers,
                                        const ChainOptions& options) {
  // 1. Validation; receivers that already hold the bytes are dropped.
  std::set<std::string> source_names;
  for (const ChainSource& s : sources) {
    if (s.name.empty()) return invalid_argument("build_chains: a source has an empty name");
    if (!source_names.insert(s.name).second) return invalid_argument("build_chains: duplicate source '" + s.name + "'");
  }
  std::set<std::string> receiver_names;
  std::vector<const ChainReceiver*> todo;
  for (const ChainReceiver& r : receivers) {
    if (r.name.empty()) return invalid_argument("build_chains: a receiver has an empty name");
    if (!receiver_names.insert(r.name).second) {
      return invalid_argument("build_chains: duplicate receiver '" + r.name + "'");
    }
    if (!source_names.count(r.name)) todo.push_back(&r);
  }
  if (todo.empty()) return std::vector<Chain>{};

  // 2. Node sources first; the repository only when no node holds the bytes.
  const bool any_node = std::any_of(sources.begin(), sources.end(), [](const ChainSource& s) { return !s.repository; });
  std::vector<const ChainSource*> used;
  for (const ChainSource& s : sources) {
    if (!s.repository || !any_node) used.push_back(&s);
  }
  if (used.empty()) return unavailable("build_chains: " + std::to_string(todo.size()) + " receivers but no source");
  std::sort(used.begin(), used.end(), [](const ChainSource* a, const ChainSource* b) { return a->name < b->name; });

  // 3. Even sizes: q each, n % k sources one more.
  const size_t n = todo.size();
  const size_t k = used.size();
  const size_t q = n / k;
  size_t extras = n % k;
  std::vector<size_t> slots(k, q);
  std::vector<bool> has_extra(k, false);

  std::map<std::string, std::vector<size_t>> sources_in_rack;  // known racks only; indices in name order
  for (size_t i = 0; i < k; ++i) {
    if (!used[i]->rack.empty()) sources_in_rack[used[i]->rack].push_back(i);
  }
  std::map<std::string, std::vector<const ChainReceiver*>> receivers_in_rack;  // known racks only
  std::vector<const ChainReceiver*> unknown_rack;
  for (const ChainReceiver* r : todo) {
    if (r->rack.empty()) {
      unknown_rack.push_back(r);
    } else {
      receivers_in_rack[r->rack].push_back(r);
    }
  }
  for (auto& [rack, list] : receivers_in_rack) std::sort(list.begin(), list.end(), by_name);
  std::sort(unknown_rack.begin(), unknown_rack.end(), by_name);

  // 4. Extra slots go first where they keep a receiver in its rack.
  for (const auto& [rack, idx] : sources_in_rack) {
    auto it = receivers_in_rack.find(rack);
    const size_t here = it == receivers_in_rack.end() ? 0 : it->second.size();
    const size_t base = q * idx.size();
    const size_t excess = here > base ? here - base : 0;
    const size_t take = std::min({idx.size(), excess, extras});
    for (size_t j = 0; j < take; ++j) {
      ++slots[idx[j]];
      has_extra[idx[j]] = true;
    }
    extras -= take;
  }
  for (size_t i = 0; i < k && extras > 0; ++i) {
    if (has_extra[i]) continue;
    ++slots[i];
    has_extra[i] = true;
    --extras;
  }

  // 5. Same-rack receivers fill their rack's sources; the rest are leftovers, rack by rack.
  std::vector<std::vector<std::string>> hops(k);
  std::vector<const ChainReceiver*> leftovers;
  for (const auto& [rack, list] : receivers_in_rack) {
    size_t next = 0;
    auto it = sources_in_rack.find(rack);
    if (it != sources_in_rack.end()) {
      for (size_t i : it->second) {
        while (hops[i].size() < slots[i] && next < list.size()) hops[i].push_back(list[next++]->name);
      }
    }
    leftovers.insert(leftovers.end(), list.begin() + static_cast<std::ptrdiff_t>(next), list.end());
  }
  leftovers.insert(leftovers.end(), unknown_rack.begin(), unknown_rack.end());

  // 6. Leftovers fill the remaining slots sequentially, after each chain's same-rack part (7).
  size_t src = 0;
  for (const ChainReceiver* r : leftovers) {
    while (hops[src].size() >= slots[src]) ++src;  // total slots == n, so src stays < k
    hops[src].push_back(r->name);
  }

  // 8. Length cap.
  std::vector<Chain> out;
  for (size_t i = 0; i < k; ++i) {
    if (!hops[i].empty()) append_split(used[i]->name, hops[i], options.max_chain_length, out);
  }
  return out;
}

}  // namespace ember::placement
