#include "transport/ticket.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <fstream>
#include <sstream>

#include "transport/fetch_request.hpp"

namespace ember::transport {

namespace {

constexpr size_t kMinSecret = 32;

std::string trim(std::string s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return {};
  const auto last = s.find_last_not_of(" \t\r\n");
  return s.substr(first, last - first + 1);
}

}  // namespace

Result<std::shared_ptr<const TicketKeys>> TicketKeys::load(const std::string& path, const std::string& setting) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error(setting + " (" + path + "): cannot read");
  std::ostringstream s;
  s << in.rdbuf();
  auto keys = from_secret(trim(s.str()));
  if (!keys.ok()) return invalid_argument(setting + " (" + path + "): " + keys.error().message());
  return keys;
}

Result<std::shared_ptr<const TicketKeys>> TicketKeys::from_secret(std::string secret) {
  if (secret.size() < kMinSecret) {
    return invalid_argument("a ticket key needs at least " + std::to_string(kMinSecret) + " characters (has " +
                            std::to_string(secret.size()) + "; make one with `openssl rand -hex 32`)");
  }
  return std::shared_ptr<const TicketKeys>(new TicketKeys(std::move(secret)));
}

std::string TicketKeys::mac(const std::string& key, const std::string& receiver, uint64_t not_after) const {
  std::string data = "ember-ticket/1";
  data.push_back('\0');
  data += key;
  data.push_back('\0');
  data += receiver;
  data.push_back('\0');
  data += std::to_string(not_after);
  unsigned char out[EVP_MAX_MD_SIZE];
  size_t len = 0;
  if (!EVP_Q_mac(nullptr, "HMAC", nullptr, "SHA256", nullptr, secret_.data(), secret_.size(),
                 reinterpret_cast<const unsigned char*>(data.data()), data.size(), out, sizeof(out), &len)) {
    return {};  // verify() refuses an empty mac; issue() then hands out a ticket every server refuses
  }
  return std::string(reinterpret_cast<const char*>(out), len);
}

Ticket TicketKeys::issue(const std::string& key, const std::string& receiver, std::chrono::seconds lifetime) const {
  return issue_at(key, receiver, unix_now(), lifetime);
}

Ticket TicketKeys::issue_at(const std::string& key, const std::string& receiver, uint64_t now,
                            std::chrono::seconds lifetime) const {
  Ticket t;
  t.receiver = receiver;
  t.not_after = now + static_cast<uint64_t>(lifetime.count());
  t.mac = mac(key, receiver, t.not_after);
  return t;
}

Status TicketKeys::verify(const std::string& key, const Ticket& ticket, uint64_t now) const {
  if (ticket.empty()) return permission_denied("a fetch of " + key + " without a ticket: this data plane needs one");
  const std::string expected = mac(key, ticket.receiver, ticket.not_after);
  if (expected.empty() || expected.size() != ticket.mac.size() ||
      CRYPTO_memcmp(expected.data(), ticket.mac.data(), expected.size()) != 0) {
    return permission_denied("the ticket of " + ticket.receiver + " for " + key +
                             " is not valid here (forged, for another blob, or from another cluster's key)");
  }
  if (now > ticket.not_after + static_cast<uint64_t>(kTicketSkew.count())) {
    return permission_denied("the ticket of " + ticket.receiver + " for " + key + " expired " +
                             std::to_string(now - ticket.not_after) + " s ago");
  }
  return Status::OK();
}

Result<FetchRequest> check_ticket(Result<FetchRequest> request, const TicketKeys* keys,
                                  const std::string* peer_name) {
  if (!keys || !request.ok()) return request;
  if (Status s = keys->verify(request->key, request->ticket, unix_now()); !s.ok()) return s.error();
  if (peer_name && request->ticket.receiver != *peer_name) {
    return permission_denied("the ticket of " + request->ticket.receiver + " for " + request->key +
                             " was presented with the certificate of " +
                             (peer_name->empty() ? std::string("no name") : "'" + *peer_name + "'") +
                             ": here a ticket opens its blob only to the member its certificate names");
  }
  return request;
}

uint64_t unix_now() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count());
}

}  // namespace ember::transport
