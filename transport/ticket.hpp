// Data-plane tickets: a fetch of model bytes (or of a pipeline stage's tensors) must carry a ticket
// that a member of the cluster's authenticated control plane issued for that blob, that receiver
// and a time window; the serving peer checks it before it sends any byte.
//
// A ticket is (receiver, not_after, mac) with mac = HMAC-SHA256(K, "ember-ticket/1" NUL blob key
// NUL receiver NUL not_after as decimal), K being the cluster's ticket key (security.ticket_key_file,
// the same file on the manager and every node). The manager issues tickets for every source it gives
// a node (loads, chain hops and their splices, stage loads) inside its control-plane messages,
// which mutual TLS protects; a node issues one for the tensors it hands to the next pipeline stage.
// Scope and limits: the mac binds the blob key, the receiver's name and the expiry, so a ticket
// opens one blob until its window closes. By default the receiver's name is what it claims in the
// request, so within its window a ticket is a bearer capability for that blob (a listener on an
// unencrypted data plane could replay it). With TLS on the data plane and
// security.ticket_receiver: certificate, the server also requires the receiver's name to be the
// common name of the certificate the receiver presented (each member its own certificate, named as
// the member): a ticket then opens its blob to that member alone. The window is checked when a
// transfer starts or resumes; a transfer under way is not cut at expiry.
//
// Thread-safety: TicketKeys is immutable after load and shared between threads; the functions are
// pure but for the clock.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "base/status.hpp"

namespace ember::transport {

struct FetchRequest;

struct Ticket {
  std::string receiver;    // the node it was issued to
  uint64_t not_after = 0;  // unix seconds: refused after this
  std::string mac;         // 32 bytes, HMAC-SHA256 (see the header)

  bool empty() const { return mac.empty(); }
};

/// How long a ticket lasts by default: long enough for a cold start of a large model, with retries.
inline constexpr std::chrono::seconds kTicketLifetime{600};
/// Clock skew between hosts tolerated when checking not_after.
inline constexpr std::chrono::seconds kTicketSkew{60};

class TicketKeys {
 public:
  /// Reads the key file: the secret is its content, surrounding whitespace removed, at least 32
  /// characters (`openssl rand -hex 32`). Errors name the setting and the file.
  static Result<std::shared_ptr<const TicketKeys>> load(const std::string& path, const std::string& setting);
  /// A key from bytes (tests). At least 32 bytes.
  static Result<std::shared_ptr<const TicketKeys>> from_secret(std::string secret);

  /// A ticket for `key`, `receiver`, valid for `lifetime` from now.
  Ticket issue(const std::string& key, const std::string& receiver,
               std::chrono::seconds lifetime = kTicketLifetime) const;
  /// The same from `now` (unix seconds) given: for callers that keep the clock outside.
  Ticket issue_at(const std::string& key, const std::string& receiver, uint64_t now,
                  std::chrono::seconds lifetime = kTicketLifetime) const;
  /// OK, or permission_denied saying why: no ticket, a mac that does not match (forged, another
  /// blob, another cluster's key), expired. `now` in unix seconds.
  Status verify(const std::string& key, const Ticket& ticket, uint64_t now) const;

 private:
  explicit TicketKeys(std::string secret) : secret_(std::move(secret)) {}
  std::string mac(const std::string& key, const std::string& receiver, uint64_t not_after) const;

  std::string secret_;
};

/// The server's check of a decoded request (both transports): the request as is when `keys` is null
/// or its ticket verifies (and, with `peer_name`, names that peer: the common name of the
/// certificate it presented); otherwise the refusal (permission_denied), which the server sends as
/// its abort frame.
Result<FetchRequest> check_ticket(Result<FetchRequest> request, const TicketKeys* keys,
                                  const std::string* peer_name = nullptr);

/// Unix seconds now.
uint64_t unix_now();

}  // namespace ember::transport
