#include "transport/fetch_request.hpp"

#include <capnp/message.h>
#include <capnp/serialize.h>

#include <cstring>

#include "transport/frame.capnp.h"

namespace ember::transport {

namespace {
constexpr size_t kWords = kMaxFetchRequestBytes / sizeof(capnp::word);

Status check_key(size_t bytes) {
  if (bytes == 0) return corrupt("fetch request has an empty key");
  if (bytes > kMaxFetchKeyBytes) {
    return corrupt("fetch request key of " + std::to_string(bytes) + " bytes exceeds " + std::to_string(kMaxFetchKeyBytes));
  }
  return Status::OK();
}
}  // namespace

Result<std::vector<uint8_t>> encode_fetch_request(const FetchRequest& request) {
  if (Status st = check_key(request.key.size()); !st.ok()) return invalid_argument(st.error().message());
  // One zeroed segment that holds any valid request, so the flat array is a single segment.
  capnp::word scratch[kWords];
  std::memset(scratch, 0, sizeof(scratch));
  capnp::MallocMessageBuilder message(kj::arrayPtr(scratch, kWords));
  auto r = message.initRoot<wire::FetchRequest>();
  r.setTransferId(request.transfer_id);
  r.setKey(capnp::Text::Reader(request.key.data(), request.key.size()));
  r.setOffset(request.offset);
  r.setLength(request.length);
  if (request.ticket.receiver.size() > kMaxTicketReceiverBytes || request.ticket.mac.size() > kMaxTicketMacBytes) {
    return invalid_argument("a fetch request's ticket is too long");
  }
  if (!request.ticket.empty()) {
    r.setTicketReceiver(capnp::Text::Reader(request.ticket.receiver.data(), request.ticket.receiver.size()));
    r.setTicketNotAfter(request.ticket.not_after);
    r.setTicketMac(capnp::Data::Reader(reinterpret_cast<const capnp::byte*>(request.ticket.mac.data()),
                                       request.ticket.mac.size()));
  }
  kj::Array<capnp::word> flat = capnp::messageToFlatArray(message);
  const auto bytes = flat.asBytes();
  std::vector<uint8_t> out(4 + bytes.size());
  const auto n = static_cast<uint32_t>(bytes.size());
  for (int i = 0; i < 4; ++i) out[static_cast<size_t>(i)] = static_cast<uint8_t>(n >> (8 * i));
  std::memcpy(out.data() + 4, bytes.begin(), bytes.size());
  return out;
}

Result<FetchRequest> decode_fetch_request(const uint8_t* data, size_t available, size_t& consumed) {
  consumed = 4;
  if (available < 4) return not_found("need more bytes");
  uint32_t n = 0;
  for (int i = 3; i >= 0; --i) n = (n << 8) | data[i];
  if (n == 0 || n % 8 != 0 || n > kMaxFetchRequestBytes) {
    return corrupt("fetch request length " + std::to_string(n) + " is not a multiple of 8 in 8.." +
                   std::to_string(kMaxFetchRequestBytes));
  }
  consumed = 4 + size_t{n};
  if (available < consumed) return not_found("need more bytes");

  capnp::word words[kWords];  // the reader needs word alignment; a request is small, so copy it
  std::memcpy(words, data + 4, n);
  FetchRequest request;
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = kWords;
    options.nestingLimit = 4;
    capnp::FlatArrayMessageReader reader(kj::arrayPtr(words, n / sizeof(capnp::word)), options);
    auto r = reader.getRoot<wire::FetchRequest>();
    request.transfer_id = r.getTransferId();
    auto key = r.getKey();
    EMBER_RETURN_IF_ERROR(check_key(key.size()));
    request.key.assign(key.begin(), key.size());
    request.offset = r.getOffset();
    request.length = r.getLength();
    auto receiver = r.getTicketReceiver();
    auto mac = r.getTicketMac();
    if (receiver.size() > kMaxTicketReceiverBytes || mac.size() > kMaxTicketMacBytes) {
      return corrupt("fetch request's ticket is longer than a ticket can be");
    }
    request.ticket.receiver.assign(receiver.begin(), receiver.size());
    request.ticket.not_after = r.getTicketNotAfter();
    request.ticket.mac.assign(reinterpret_cast<const char*>(mac.begin()), mac.size());
  } catch (const kj::Exception& e) {
    return corrupt(std::string("fetch request does not parse: ") + e.getDescription().cStr());
  }
  return request;
}

}  // namespace ember::transport
