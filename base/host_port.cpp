#include "base/host_port.hpp"

#include <cctype>

namespace ember {
namespace {

bool is_digit(char c) { return c >= '0' && c <= '9'; }

bool all_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!is_digit(c)) return false;
  }
  return true;
}

// Four parts 0..255, no leading zeros. Returns a reason on failure, empty on success.
std::string check_ipv4(std::string_view host) {
  int parts = 0;
  while (true) {
    const size_t dot = host.find('.');
    const std::string_view part = host.substr(0, dot);
    if (!all_digits(part) || part.size() > 3) return "is not an IPv4 address (four numbers 0..255)";
    if (part.size() > 1 && part[0] == '0') return "has a leading zero in an IPv4 part (ambiguous: octal?)";
    if (std::stoi(std::string(part)) > 255) return "has an IPv4 part above 255";
    ++parts;
    if (dot == std::string_view::npos) break;
    host.remove_prefix(dot + 1);
  }
  if (parts != 4) return "is not an IPv4 address (four numbers 0..255)";
  return {};
}

std::string check_hostname(std::string_view host) {
  if (host.size() > 253) return "is longer than 253 characters";
  while (true) {
    const size_t dot = host.find('.');
    const std::string_view label = host.substr(0, dot);
    if (label.empty()) return "has an empty label";
    if (label.size() > 63) return "has a label longer than 63 characters";
    if (label.front() == '-' || label.back() == '-') return "has a label starting or ending with '-'";
    for (char c : label) {
      if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_') {
        return "is neither an IPv4 address nor a hostname (letters, digits, '-', '_', '.')";
      }
    }
    if (dot == std::string_view::npos) break;
    host.remove_prefix(dot + 1);
  }
  return {};
}

}  // namespace

std::string HostPort::to_string() const {
  const std::string p = std::to_string(port);
  return host.find(':') != std::string::npos ? "[" + host + "]:" + p : host + ":" + p;
}

Result<std::vector<HostPort>> parse_host_port_list(std::string_view text) {
  std::vector<HostPort> out;
  size_t at = 0;
  while (true) {
    const size_t comma = text.find(',', at);
    const std::string_view item = text.substr(at, comma == std::string_view::npos ? text.npos : comma - at);
    auto hp = parse_host_port(item);
    if (!hp.ok()) {
      if (at == 0 && comma == std::string_view::npos) return hp.error();  // one: as parse_host_port says
      return hp.error().with_context("item " + std::to_string(out.size() + 1) + " of the list");
    }
    out.push_back(*hp);
    if (comma == std::string_view::npos) return out;
    at = comma + 1;
  }
}

Result<HostPort> parse_host_port(std::string_view text) {
  std::string quoted(1, '\'');  // built by appending: GCC 12 warns falsely on "'" + std::string (PR 105329)
  quoted.append(text).push_back('\'');
  auto fail = [&](std::string_view why) {
    return invalid_argument(quoted + " is not host:port: " + std::string(why) +
                            " (examples: 127.0.0.1:7070, gpu-03:7071)");
  };
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front()))) text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.remove_suffix(1);

  const size_t colon = text.rfind(':');
  if (colon == std::string_view::npos) return fail("no ':port'");
  const std::string_view host = text.substr(0, colon);
  const std::string_view port = text.substr(colon + 1);
  if (host.find(':') != std::string_view::npos || host.find('[') != std::string_view::npos) {
    return fail("IPv6 addresses are not supported; use an IPv4 address or a hostname");
  }
  if (host.empty()) return fail("the host is missing (0.0.0.0 listens on every interface)");
  if (!all_digits(port) || port.size() > 5) return fail("the port is not a number in 0..65535");
  const int port_value = std::stoi(std::string(port));
  if (port_value > 65535) return fail("the port is not a number in 0..65535");

  // RFC 1123 §2.1: a top-level label is never all digits, so such a name must be an IPv4 address.
  const size_t last_dot = host.rfind('.');
  const std::string_view last_label = last_dot == std::string_view::npos ? host : host.substr(last_dot + 1);
  const std::string why = all_digits(last_label) ? check_ipv4(host) : check_hostname(host);
  if (!why.empty()) return fail("the host " + why);
  return HostPort{std::string(host), static_cast<uint16_t>(port_value)};
}

}  // namespace ember
