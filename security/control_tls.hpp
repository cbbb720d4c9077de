// Mutual TLS on the control plane (CAF's OpenSSL module: manager, nodes, gateways, consoles), from
// the `security:` section of the config (config/cluster_config.hpp) or the console's flags.
//
// CAF 0.17 takes its TLS settings as paths and a passphrase in its config and opens the files only
// when the first connection comes in; a wrong path or passphrase then throws on the middleman's
// thread and aborts the process. So every file is opened and checked here first, with the same
// OpenSSL calls: the certificate chain, the key (with its passphrase), that the key is the
// certificate's, the CA, and that the CA signed the certificate. A process that fails any check
// does not start, and the error names the key and the file.
//
// Thread-safety: plain functions and data.
#pragma once

#include <string>

#include "base/status.hpp"

namespace ember {

/// The files as security.tls_* name them.
struct ControlTlsFiles {
  std::string certificate;      // PEM: this process's certificate, then its chain
  std::string key;              // PEM: its private key (may be encrypted)
  std::string passphrase_file;  // the key's passphrase (first line); empty: the key is not encrypted
  std::string ca;               // PEM: the cluster CA every peer's certificate must chain to

  bool empty() const { return certificate.empty() && key.empty() && ca.empty() && passphrase_file.empty(); }
};

/// What CAF's OpenSSL module is configured with, once checked.
struct ControlTls {
  std::string certificate;
  std::string key;
  std::string passphrase;  // read from passphrase_file; empty when the key is not encrypted
  std::string ca;
};

/// Checks `files` (see the header). `what` names the settings in errors ("security" for the config
/// section, "--tls" for the console's flags). invalid_argument or io_error naming the file.
Result<ControlTls> check_control_tls(const ControlTlsFiles& files, const std::string& what);

}  // namespace ember
