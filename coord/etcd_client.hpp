// EtcdClient: the few calls of etcd's v3 API the control plane needs (issue 37: several managers
// sharing their state and electing a leader), over the JSON gateway etcd serves on its client port
// (/v3/kv/..., /v3/lease/...; Debian's etcd-server 3.4). Keys and values are bytes on the wire
// (base64 in the JSON); revisions and lease ids are int64 (strings in the JSON).
//
// The calls a leader lease is made of: grant a lease, keep it alive, revoke it; create a key only if
// it does not exist (a transaction comparing its create_revision with 0), bound to a lease; read a
// key; and put a key only while a fence key still has the create_revision the writer won it at (a
// transaction again): a writer that lost its lease (paused past its TTL, then resumed) cannot write
// over its successor's state, whatever it believes.
//
// Endpoints are tried in order until one answers (an etcd cluster's members all serve the API); an
// endpoint that answers with an HTTP error is not tried further. Errors: unavailable (no endpoint
// answered, naming each), internal (an answer that is not what etcd sends), invalid_argument (etcd
// refused the request, with its message). Blocking; thread-safe (each call makes its own connection,
// and the endpoints never change): a manager's lease thread and its actor share one. No CAF.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/host_port.hpp"
#include "base/status.hpp"

namespace ember::coord {

struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;
};

/// What create_if_absent found: `created` true when this call made the key; otherwise `existing`
/// holds the key as it is (its value, create_revision and lease). `revision`: the store's revision
/// after the call.
struct CreateOutcome {
  bool created = false;
  int64_t create_revision = 0;  // of the key, as it stands now (the new one when created)
  std::optional<KeyValue> existing;
  int64_t revision = 0;
};

class EtcdClient {
 public:
  explicit EtcdClient(std::vector<HostPort> endpoints,
                      std::chrono::milliseconds timeout = std::chrono::milliseconds(2000));

  /// A lease of `ttl_s` seconds: its id.
  Result<int64_t> grant(int64_t ttl_s);
  /// Renews `lease`: its TTL in seconds from now; not_found when it expired or was revoked.
  Result<int64_t> keep_alive(int64_t lease);
  /// Ends `lease` now; its keys go with it.
  Status revoke(int64_t lease);
  /// Puts `key` = `value` (bound to `lease`, 0: none) only when `key` does not exist.
  Result<CreateOutcome> create_if_absent(const std::string& key, const std::string& value, int64_t lease);
  /// The key, or none.
  Result<std::optional<KeyValue>> get(const std::string& key);
  /// Every key under `prefix`, in key order.
  Result<std::vector<KeyValue>> list(const std::string& prefix);
  /// Puts `key` = `value` only while `fence` exists with create_revision `fence_revision`: true when
  /// written, false when the fence moved (another holder won it since).
  Result<bool> put_fenced(const std::string& key, const std::string& value, const std::string& fence,
                          int64_t fence_revision);
  /// Deletes `key` only while `fence` holds `fence_revision` (as put_fenced).
  Result<bool> delete_fenced(const std::string& key, const std::string& fence, int64_t fence_revision);

  const std::vector<HostPort>& endpoints() const { return endpoints_; }

 private:
  /// POSTs `body` (JSON) to `path` at the first endpoint that answers: the JSON text of its answer
  /// (a streaming answer: its first message).
  Result<std::string> post(const std::string& path, const std::string& body);

  std::vector<HostPort> endpoints_;
  std::chrono::milliseconds timeout_;
};

/// Base64 (RFC 4648, with padding), as etcd's JSON carries bytes.
std::string base64_encode(const std::string& bytes);
/// The bytes of base64 `text`; invalid_argument when it is not base64.
Result<std::string> base64_decode(const std::string& text);

}  // namespace ember::coord
