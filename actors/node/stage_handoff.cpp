#include "actors/node/stage_handoff.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "actors/node/blob_store.hpp"
#include "transport/checksum.hpp"
#include "transport/data_plane.hpp"

namespace ember {

namespace {

/// A handoff is fetched at once by the next stage: its ticket needs only a short window.
constexpr std::chrono::seconds kHandoffTicket{120};

/// Receives a handoff into one buffer of the size announced.
class HandoffSink final : public transport::BlobSink {
 public:
  explicit HandoffSink(uint64_t bytes) : bytes_(bytes) {}
  uint8_t* allocate(uint64_t blob_bytes) override {
    if (blob_bytes != bytes_) return nullptr;
    auto b = gpu::HostBuffer::allocate(std::max<uint64_t>(blob_bytes, 1));
    if (!b.ok()) return nullptr;
    buffer = std::move(*b);
    return buffer->data();
  }
  void on_chunk(uint64_t, uint64_t) override {}
  std::shared_ptr<gpu::HostBuffer> buffer;

 private:
  uint64_t bytes_;
};

}  // namespace

std::vector<tensor_msg> still_needed(const gpu::Model& whole, gpu::LayerRange range, std::vector<tensor_msg> carried,
                                     std::vector<tensor_msg> produced) {
  const gpu::Graph& g = whole.graph();
  std::vector<tensor_msg> out;
  for (auto* set : {&carried, &produced}) {
    for (tensor_msg& t : *set) {
      auto v = g.find(t.name);
      if (v && g.last_use[*v] >= static_cast<int64_t>(range.last)) out.push_back(std::move(t));
    }
  }
  return out;
}

Result<std::vector<tensor_msg>> answer_of(const gpu::Model& whole, std::vector<tensor_msg> carried,
                                          const std::vector<std::string>& wanted) {
  const gpu::Graph& g = whole.graph();
  std::vector<tensor_msg> out;
  for (uint32_t v : g.outputs) {
    const std::string& name = g.value_names[v];
    if (!wanted.empty() && std::find(wanted.begin(), wanted.end(), name) == wanted.end()) continue;
    auto it = std::find_if(carried.begin(), carried.end(), [&](const tensor_msg& t) { return t.name == name; });
    if (it == carried.end()) return internal_error("the pipeline lost output '" + name + "'");
    out.push_back(std::move(*it));
  }
  for (const std::string& name : wanted) {
    if (std::none_of(out.begin(), out.end(), [&](const tensor_msg& t) { return t.name == name; })) {
      return invalid_argument("model '" + whole.manifest().name + "' has no output '" + name + "'");
    }
  }
  return out;
}

Result<tensor_handoff> pack_handoff(BlobStore& store, const std::string& key, const HostPort& from,
                                    const transport::TicketKeys* tickets, const std::string& receiver,
                                    std::vector<tensor_msg>& tensors) {
  uint64_t total = 0;
  for (const tensor_msg& t : tensors) total += t.data.size();
  EMBER_ASSIGN_OR_RETURN(auto buffer, gpu::HostBuffer::allocate(std::max<uint64_t>(total, 1)));
  tensor_handoff h;
  uint64_t at = 0;
  for (tensor_msg& t : tensors) {
    if (!t.data.empty()) std::memcpy(buffer->data() + at, t.data.data(), t.data.size());
    at += t.data.size();
    h.sizes.push_back(t.data.size());
    std::vector<uint8_t>().swap(t.data);
  }
  const transport::Digest digest = transport::Sha256::of(buffer->data(), total);
  h.from = from;
  h.key = key;
  h.sha256 = transport::to_hex(digest);
  if (tickets) h.ticket = tickets->issue(h.key, receiver, kHandoffTicket);
  const uint8_t* data = buffer->data();
  store.put_handoff(h.key, std::make_shared<transport::MemoryBlob>(std::move(buffer), data, total, digest));
  return h;
}

Result<std::shared_ptr<gpu::HostBuffer>> fetch_handoff(TransportKind transport,
                                                       const std::shared_ptr<const transport::DataTls>& tls,
                                                       const tensor_handoff& h, uint64_t total) {
  transport::FetchOptions options;
  options.expected_bytes = total;
  options.total_timeout = std::chrono::seconds(60);
  options.ticket = h.ticket;
  options.tls = tls;
  HandoffSink sink(total);
  EMBER_ASSIGN_OR_RETURN(auto got, transport::fetch_blob(transport, h.from, h.key, options, sink));
  if (transport::to_hex(got.digest) != h.sha256) {
    return corrupt("the tensors handed over as " + h.key + " do not match their digest");
  }
  if (!sink.buffer) return gpu::HostBuffer::allocate(1);  // nothing was carried
  return sink.buffer;
}

}  // namespace ember
