// `ember certs init|issue|rotate`: the cluster's CA and its processes' certificates (security/certs.hpp).
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.hpp"
#include "security/certs.hpp"

namespace ember::cli {

namespace {

struct CertsOptions {
  std::string dir = "certs";
  std::string name;
  std::string role;
  std::vector<std::string> sans;
  uint32_t days = 0;
  uint32_t ca_days = 0;
  bool force = false;
};

}  // namespace

void add_certs_command(CLI::App& app, Runner& runner) {
  auto o = std::make_shared<CertsOptions>();
  auto* certs = app.add_subcommand("certs", "Make the cluster's certificate authority and its processes' certificates");
  certs->require_subcommand(1);
  auto* init = certs->add_subcommand("init", "Create DIR/ca.key and DIR/ca.crt, the cluster's CA (EC P-256)");
  init->add_option("--dir", o->dir, "Where the CA's files go")->capture_default_str();
  init->add_option("--name", o->name, "The CA's common name (default: ember cluster CA)");
  init->add_option("--days", o->days, "Validity in days (default 3650)");
  init->add_flag("--force", o->force, "Overwrite existing files");
  init->callback([o, &runner] {
    runner = [o] {
      const uint32_t days = o->days ? o->days : 3650;
      if (Status s = security::init_ca(o->dir, o->name.empty() ? "ember cluster CA" : o->name, days, o->force);
          !s.ok()) {
        return report(s.error());
      }
      std::cout << "wrote " << o->dir << "/ca.key (keep it secret) and " << o->dir << "/ca.crt, valid " << days
                << " days\n";
      return 0;
    };
  });
  auto* issue =
      certs->add_subcommand("issue", "Create DIR/NAME.key and DIR/NAME.crt for one process, signed by DIR/ca.key");
  issue->add_option("--dir", o->dir, "Where the CA's files are, and the new ones go")->capture_default_str();
  issue->add_option("--name", o->name, "The certificate's name (CN) and files' base name")->required();
  issue->add_option("--role", o->role, "manager, gateway, node, console or client")->required();
  issue->add_option("--san", o->sans, "Addresses and DNS names it serves, comma-separated (subjectAltName)")
      ->delimiter(',');
  issue->add_option("--days", o->days, "Validity in days (default 365)");
  issue->add_flag("--force", o->force, "Overwrite existing files (re-issue: rotation)");
  issue->callback([o, &runner] {
    runner = [o] {
      security::CertificateRequest r{o->name, o->role, o->sans, o->days ? o->days : 365, o->force};
      if (Status s = security::issue_certificate(o->dir, r); !s.ok()) return report(s.error());
      std::cout << "wrote " << o->dir << "/" << o->name << ".key and " << o->dir << "/" << o->name << ".crt ("
                << o->role << ", valid " << r.days << " days)\n";
      return 0;
    };
  });
  auto* rotate =
      certs->add_subcommand("rotate",
                            "Make a new CA and re-issue every certificate of DIR from it into DIR/next, with a bundle "
                            "trusting both CAs, for a rollout without downtime");
  rotate->add_option("--dir", o->dir, "Where the CA's files and the certificates are")->capture_default_str();
  rotate->add_option("--days", o->days, "Validity of the re-issued certificates in days (default 365)");
  rotate->add_option("--ca-days", o->ca_days, "Validity of the new CA in days (default 3650)");
  rotate->add_flag("--force", o->force, "Start again over an existing DIR/next");
  rotate->callback([o, &runner] {
    runner = [o] {
      auto r = security::rotate_ca(o->dir, o->days ? o->days : 365, o->ca_days ? o->ca_days : 3650, o->force);
      if (!r.ok()) return report(r.error());
      const std::string& n = r->next_dir;
      std::cout << "wrote " << n << "/ca.key (keep it secret), " << n << "/ca.crt, " << n
                << "/ca-bundle.crt (new CA, then the old) and " << r->reissued.size() << " certificate(s) in " << n
                << ":";
      for (const auto& name : r->reissued) std::cout << " " << name;
      std::cout << "\nRollout, one process at a time each, every member serving throughout:\n"
                << "  1. security.tls_ca: " << n << "/ca-bundle.crt (both CAs trusted); restart\n"
                << "  2. security.tls_certificate and tls_key: " << n << "/NAME.crt and .key; restart\n"
                << "  3. security.tls_ca: " << n << "/ca.crt (the old CA no longer trusted); restart\n";
      return 0;
    };
  });
}

}  // namespace ember::cli
