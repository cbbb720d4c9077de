#include "coord/etcd_client.hpp"

#include <httplib.h>

#include <array>
#include <nlohmann/json.hpp>

namespace ember::coord {

using json = nlohmann::json;

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// An int64 etcd sends as a JSON string (or leaves out when 0).
int64_t int_of(const json& j, const char* field) {
  auto it = j.find(field);
  if (it == j.end()) return 0;
  if (it->is_string()) return std::stoll(it->get<std::string>());
  if (it->is_number_integer()) return it->get<int64_t>();
  return 0;
}

Result<KeyValue> key_value_of(const json& j) {
  KeyValue kv;
  EMBER_ASSIGN_OR_RETURN(kv.key, base64_decode(j.value("key", "")));
  EMBER_ASSIGN_OR_RETURN(kv.value, base64_decode(j.value("value", "")));
  kv.create_revision = int_of(j, "create_revision");
  kv.mod_revision = int_of(j, "mod_revision");
  kv.lease = int_of(j, "lease");
  return kv;
}

/// The JSON of an answer; internal naming the call when it is not JSON or says "error".
Result<json> parse(const std::string& text, const std::string& call) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return internal_error("etcd " + call + ": an answer that is not JSON");
  if (j.contains("error")) {
    const json& e = j["error"];
    const std::string message = e.is_object() ? e.value("message", e.dump()) : e.dump();
    return invalid_argument("etcd " + call + ": " + message);
  }
  return j;
}

json fence_compare(const std::string& fence, int64_t revision) {
  return {{"key", base64_encode(fence)}, {"target", "CREATE"}, {"create_revision", std::to_string(revision)}};
}

}  // namespace

std::string base64_encode(const std::string& bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    for (int s : {18, 12, 6, 0}) out += kAlphabet[(v >> s) & 63];
  }
  if (i + 1 == bytes.size()) {
    const uint32_t v = uint8_t(bytes[i]) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == bytes.size()) {
    const uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

Result<std::string> base64_decode(const std::string& text) {
  std::array<int, 256> value{};
  value.fill(-1);
  for (int k = 0; k < 64; ++k) value[static_cast<uint8_t>(kAlphabet[k])] = k;
  if (text.size() % 4 != 0) return invalid_argument("not base64: its length is not a multiple of 4");
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    uint32_t v = 0;
    int pad = 0;
    for (size_t k = 0; k < 4; ++k) {
      const char c = text[i + k];
      if (c == '=' && i + 4 == text.size() && k >= 2) {
        ++pad;
        v <<= 6;
        continue;
      }
      if (pad > 0 || value[static_cast<uint8_t>(c)] < 0) return invalid_argument("not base64 at offset " + std::to_string(i + k));
      v = (v << 6) | static_cast<uint32_t>(value[static_cast<uint8_t>(c)]);
    }
    out += static_cast<char>((v >> 16) & 0xff);
    if (pad < 2) out += static_cast<char>((v >> 8) & 0xff);
    if (pad < 1) out += static_cast<char>(v & 0xff);
  }
  return out;
}

EtcdClient::EtcdClient(std::vector<HostPort> endpoints, std::chrono::milliseconds timeout)
    : endpoints_(std::move(endpoints)), timeout_(timeout) {}

Result<std::string> EtcdClient::post(const std::string& path, const std::string& body) {
  std::string why;
  for (const auto& at : endpoints_) {
    httplib::Client client(at.host, at.port);
    client.set_connection_timeout(timeout_);
    client.set_read_timeout(timeout_);
    client.set_write_timeout(timeout_);
    // A streaming answer (lease keepalive) stays open for the next message: the first one is taken.
    std::string text;
    httplib::Request req;
    req.method = "POST";
    req.path = path;
    req.body = body;
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&text](const char* data, size_t n, uint64_t, uint64_t) {
      text.append(data, n);
      return text.find('\n') == std::string::npos;  // a stream's messages end with a newline
    };
    httplib::Response res;
    httplib::Error error = httplib::Error::Success;
    const bool sent = client.send(req, res, error);
    const std::string first = text.substr(0, text.find('\n'));
    if (!first.empty() && json::accept(first)) return first;  // etcd's refusals are JSON too ("error")
    if (sent && res.status >= 400) {
      return invalid_argument("etcd " + path + ": HTTP " + std::to_string(res.status) + ": " + text.substr(0, 300));
    }
    why += (why.empty() ? "" : "; ") + at.to_string() + ": " + (sent ? "an empty answer" : httplib::to_string(error));
  }
  return unavailable("no etcd endpoint answered " + path + " (" + why + ")");
}

Result<int64_t> EtcdClient::grant(int64_t ttl_s) {
  EMBER_ASSIGN_OR_RETURN(auto text, post("/v3/lease/grant", json{{"TTL", std::to_string(ttl_s)}}.dump()));
  EMBER_ASSIGN_OR_RETURN(auto j, parse(text, "lease grant"));
  const int64_t id = int_of(j, "ID");
  if (id == 0) return internal_error("etcd lease grant: no lease id in " + text);
  return id;
}

Result<int64_t> EtcdClient::keep_alive(int64_t lease) {
  EMBER_ASSIGN_OR_RETURN(auto text, post("/v3/lease/keepalive", json{{"ID", std::to_string(lease)}}.dump()));
  EMBER_ASSIGN_OR_RETURN(auto j, parse(text, "lease keepalive"));
  const json& r = j.contains("result") ? j["result"] : j;
  const int64_t ttl = int_of(r, "TTL");
  if (ttl <= 0) return not_found("etcd lease " + std::to_string(lease) + " expired or was revoked");
  return ttl;
}

Status EtcdClient::revoke(int64_t lease) {
  EMBER_ASSIGN_OR_RETURN(auto text, post("/v3/lease/revoke", json{{"ID", std::to_string(lease)}}.dump()));
  auto j = parse(text, "lease revoke");
  if (!j.ok() && j.error().message().find("not found") == std::string::npos) return j.error();
  return Status::OK();
}

Result<CreateOutcome> EtcdClient::create_if_absent(const std::string& key, const std::string& value, int64_t lease) {
  const std::string k = base64_encode(key);
  json put = {{"key", k}, {"value", base64_encode(value)}};
  if (lease != 0) put["lease"] = std::to_string(lease);
  const json txn = {{"compare", json::array({{{"key", k}, {"target", "CREATE"}, {"create_revision", "0"}}})},
                    {"success", json::array({{{"request_put", put}}, {{"request_range", {{"key", k}}}}})},
                    {"failure", json::array({{{"request_range", {{"key", k}}}}})}};
  EMBER_ASSIGN_OR_RETURN(auto text, post("/v3/kv/txn", txn.dump()));
  EMBER_ASSIGN_OR_RETURN(auto j, parse(text, "txn"));
  CreateOutcome out;
  out.created = j.value("succeeded", false);
  out.revision = int_of(j.value("header", json::object()), "revision");
  for (const auto& r : j.value("responses", json::array())) {
    if (!r.contains("response_range")) continue;
    for (const auto& kv : r["response_range"].value("kvs", json::array())) {
      EMBER_ASSIGN_OR_RETURN(auto found, key_value_of(kv));
      out.create_revision = found.create_revision;
      if (!out.created) out.existing = std::move(found);
    }
  }
  if (out.create_revision == 0) return internal_error("etcd txn: no key in the answer: " + text);
  return out;
}

Result<std::optional<KeyValue>> EtcdClient::get(const std::string& key) {
  EMBER_ASSIGN_OR_RETURN(auto text, post("/v3/kv/range", json{{"key", base64_encode(key)}}.dump()));
  EMBER_ASSIGN_OR_RETURN(auto j, parse(text, "range"));
  for (const auto& kv : j.value("kvs", json::array())) {
    EMBER_ASSIGN_OR_RETURN(auto found, key_value_of(kv));
    return std::optional<KeyValue>(std::move(found));
  }
  return std::optional<KeyValue>();
}

Result<std::vector<KeyValue>> EtcdClient::list(const std::string& prefix) {
  // range_end: the prefix with its last byte incremented (etcd's prefix convention).
  std::string end = prefix;
  while (!end.empty() && static_cast<uint8_t>(end.back()) == 0xff) end.pop_back();
  if (end.empty()) return invalid_argument("etcd list: an empty prefix");
  end.back() = static_cast<char>(static_cast<uint8_t>(end.back()) + 1);
  EMBER_ASSIGN_OR_RETURN(auto text, post("/v3/kv/range", json{{"key", base64_encode(prefix)},
                                                               {"range_end", base64_encode(end)}}.dump()));
  EMBER_ASSIGN_OR_RETURN(auto j, parse(text, "range"));
  std::vector<KeyValue> out;
  for (const auto& kv : j.value("kvs", json::array())) {
    EMBER_ASSIGN_OR_RETURN(auto found, key_value_of(kv));
    out.push_back(std::move(found));
  }
  return out;
}

Result<bool> EtcdClient::put_fenced(const std::string& key, const std::string& value, const std::string& fence,
                                    int64_t fence_revision) {
  const json txn = {
      {"compare", json::array({fence_compare(fence, fence_revision)})},
      {"success", json::array({{{"request_put", {{"key", base64_encode(key)}, {"value", base64_encode(value)}}}}})}};
  EMBER_ASSIGN_OR_RETURN(auto text, post("/v3/kv/txn", txn.dump()));
  EMBER_ASSIGN_OR_RETURN(auto j, parse(text, "txn"));
  return j.value("succeeded", false);
}

Result<bool> EtcdClient::delete_fenced(const std::string& key, const std::string& fence, int64_t fence_revision) {
  const json txn = {{"compare", json::array({fence_compare(fence, fence_revision)})},
                    {"success", json::array({{{"request_delete_range", {{"key", base64_encode(key)}}}}})}};
  EMBER_ASSIGN_OR_RETURN(auto text, post("/v3/kv/txn", txn.dump()));
  EMBER_ASSIGN_OR_RETURN(auto j, parse(text, "txn"));
  return j.value("succeeded", false);
}

}  // namespace ember::coord
