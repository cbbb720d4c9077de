// `ember certs` (security/certs.hpp): a CA and certificates that OpenSSL verifies, with the subject,
// alternative names, key usages and file modes they promise; every bad request refused by name.
#include "security/certs.hpp"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <sys/stat.h>

#include <cstdio>
#include <memory>
#include <string>

#include "tests/gpu/test_util.hpp"

namespace ember::security {
namespace certs_test {

std::unique_ptr<X509, void (*)(X509*)> load(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  X509* x = f ? PEM_read_X509(f, nullptr, nullptr, nullptr) : nullptr;
  if (f) std::fclose(f);
  return {x, X509_free};
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  ::stat(path.c_str(), &st);
  return st.st_mode & 0777;
}

/// OpenSSL's verdict on `leaf` against `ca` alone, for `purpose` (X509_PURPOSE_SSL_SERVER, _CLIENT).
bool verifies(X509* ca, X509* leaf, int purpose) {
  std::unique_ptr<X509_STORE, void (*)(X509_STORE*)> store(X509_STORE_new(), X509_STORE_free);
  X509_STORE_add_cert(store.get(), ca);
  std::unique_ptr<X509_STORE_CTX, void (*)(X509_STORE_CTX*)> ctx(X509_STORE_CTX_new(), X509_STORE_CTX_free);
  X509_STORE_CTX_init(ctx.get(), store.get(), leaf, nullptr);
  X509_STORE_CTX_set_purpose(ctx.get(), purpose);
  return X509_verify_cert(ctx.get()) == 1;
}

TEST(Certs, AnIssuedCertificateVerifiesAgainstItsCaForServerAndClient) {
  gpu::testing::TempDir dir;
  ASSERT_TRUE(init_ca(dir.path(), "test CA", 30, false).ok());
  ASSERT_TRUE(
      issue_certificate(dir.path(), {"gw-0", "gateway", {"127.0.0.1", "gw-0.ember-gateway", "::1"}, 10, false}).ok());
  EXPECT_EQ(mode_of(dir / "ca.key"), 0600u);
  EXPECT_EQ(mode_of(dir / "gw-0.key"), 0600u);
  auto ca = load(dir / "ca.crt");
  auto gw = load(dir / "gw-0.crt");
  ASSERT_TRUE(ca && gw);
  EXPECT_TRUE(verifies(ca.get(), gw.get(), X509_PURPOSE_SSL_SERVER));
  EXPECT_TRUE(verifies(ca.get(), gw.get(), X509_PURPOSE_SSL_CLIENT));
  EXPECT_EQ(X509_check_ip_asc(gw.get(), "127.0.0.1", 0), 1);
  EXPECT_EQ(X509_check_ip_asc(gw.get(), "::1", 0), 1);
  EXPECT_EQ(X509_check_host(gw.get(), "gw-0.ember-gateway", 0, 0, nullptr), 1);
  EXPECT_NE(X509_check_host(gw.get(), "other.example", 0, 0, nullptr), 1);
  char subject[256];
  X509_NAME_oneline(X509_get_subject_name(gw.get()), subject, sizeof(subject));
  EXPECT_STREQ(subject, "/O=ember/OU=gateway/CN=gw-0");
  EXPECT_EQ(X509_check_ca(gw.get()), 0);
  EXPECT_GE(X509_check_ca(ca.get()), 1);
  // Another CA's certificate does not verify against this one.
  gpu::testing::TempDir other;
  ASSERT_TRUE(init_ca(other.path(), "other CA", 30, false).ok());
  ASSERT_TRUE(issue_certificate(other.path(), {"intruder", "node", {}, 10, false}).ok());
  auto intruder = load(other / "intruder.crt");
  EXPECT_FALSE(verifies(ca.get(), intruder.get(), X509_PURPOSE_SSL_CLIENT));
}

TEST(Certs, RotateMakesANewCaABundleAndEveryCertificateAgainWithItsNameRoleAndAddresses) {
  gpu::testing::TempDir dir;
  ASSERT_TRUE(init_ca(dir.path(), "test CA", 30, false).ok());
  ASSERT_TRUE(
      issue_certificate(dir.path(), {"manager", "manager", {"10.0.0.10", "ctl.example", "::1"}, 10, false}).ok());
  ASSERT_TRUE(issue_certificate(dir.path(), {"gpu-a", "node", {}, 10, false}).ok());
  gpu::testing::TempDir other;  // a certificate of another CA kept alongside is left alone
  ASSERT_TRUE(init_ca(other.path(), "other CA", 30, false).ok());
  ASSERT_TRUE(issue_certificate(other.path(), {"stranger", "client", {}, 10, false}).ok());
  ASSERT_EQ(std::rename((other / "stranger.crt").c_str(), (dir / "stranger.crt").c_str()), 0);
  auto old_ca = load(dir / "ca.crt");
  auto old_manager = load(dir / "manager.crt");

  auto r = rotate_ca(dir.path(), 20, 40, false);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->reissued, (std::vector<std::string>{"gpu-a", "manager"}));
  auto new_ca = load(dir / "next/ca.crt");
  auto manager = load(dir / "next/manager.crt");
  ASSERT_TRUE(old_ca && new_ca && manager && old_manager);
  EXPECT_TRUE(verifies(new_ca.get(), manager.get(), X509_PURPOSE_SSL_SERVER));
  EXPECT_FALSE(verifies(old_ca.get(), manager.get(), X509_PURPOSE_SSL_CLIENT));
  EXPECT_TRUE(verifies(old_ca.get(), old_manager.get(), X509_PURPOSE_SSL_CLIENT));  // untouched
  char subject[256];
  X509_NAME_oneline(X509_get_subject_name(manager.get()), subject, sizeof(subject));
  EXPECT_STREQ(subject, "/O=ember/OU=manager/CN=manager");
  EXPECT_EQ(X509_check_ip_asc(manager.get(), "10.0.0.10", 0), 1);
  EXPECT_EQ(X509_check_ip_asc(manager.get(), "::1", 0), 1);
  EXPECT_EQ(X509_check_host(manager.get(), "ctl.example", 0, 0, nullptr), 1);
  EXPECT_EQ(mode_of(dir / "next/manager.key"), 0600u);
  EXPECT_EQ(mode_of(dir / "next/ca.key"), 0600u);
  // The bundle trusts both: the old certificates and the new verify against it.
  std::unique_ptr<X509_STORE, void (*)(X509_STORE*)> store(X509_STORE_new(), X509_STORE_free);
  ASSERT_EQ(X509_STORE_load_file(store.get(), (dir / "next/ca-bundle.crt").c_str()), 1);
  for (X509* leaf : {manager.get(), old_manager.get()}) {
    std::unique_ptr<X509_STORE_CTX, void (*)(X509_STORE_CTX*)> ctx(X509_STORE_CTX_new(), X509_STORE_CTX_free);
    X509_STORE_CTX_init(ctx.get(), store.get(), leaf, nullptr);
    EXPECT_EQ(X509_verify_cert(ctx.get()), 1);
  }
  // Once under way, a second rotation is refused unless forced.
  auto again = rotate_ca(dir.path(), 20, 40, false);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message().find("under way"), std::string::npos) << again.error().message();
  EXPECT_TRUE(rotate_ca(dir.path(), 20, 40, true).ok());
}

TEST(Certs, BadRequestsAreRefusedAndNothingIsOverwrittenWithoutForce) {
  gpu::testing::TempDir dir;
  auto issue = [&](CertificateRequest r) { return issue_certificate(dir.path(), r); };
  auto no_ca = issue({"n1", "node", {}, 10, false});
  ASSERT_FALSE(no_ca.ok());
  EXPECT_NE(no_ca.error().message().find("run `ember certs init` first"), std::string::npos);
  ASSERT_TRUE(init_ca(dir.path(), "CA", 30, false).ok());
  auto again = init_ca(dir.path(), "CA", 30, false);
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.error().message().find("exists already (--force to overwrite it)"), std::string::npos);
  struct Bad {
    CertificateRequest r;
    const char* error;
  };
  for (const Bad& b :
       {Bad{{"", "node", {}, 10, false}, "--name: ''"}, Bad{{"a/b", "node", {}, 10, false}, "--name: 'a/b'"},
        Bad{{".hidden", "node", {}, 10, false}, "not starting with '.'"},
        Bad{{"n1", "admin", {}, 10, false}, "--role: 'admin' is none of"},
        Bad{{"n1", "node", {"a b"}, 10, false}, "--san: 'a b'"},
        Bad{{"n1", "node", {}, 0, false}, "--days: 0 is outside 1..36500"}}) {
    auto s = issue(b.r);
    ASSERT_FALSE(s.ok()) << b.error;
    EXPECT_EQ(s.error().code(), ErrorCode::invalid_argument);
    EXPECT_NE(s.error().message().find(b.error), std::string::npos) << s.error().message();
  }
  ASSERT_TRUE(issue({"n1", "node", {}, 10, false}).ok());
  auto first = load(dir / "n1.crt");
  EXPECT_FALSE(issue({"n1", "node", {}, 10, false}).ok());
  ASSERT_TRUE(issue({"n1", "node", {}, 10, true}).ok());  // re-issued (rotation)
  auto second = load(dir / "n1.crt");
  EXPECT_NE(X509_cmp(first.get(), second.get()), 0);
  EXPECT_EQ(mode_of(dir / "n1.key"), 0600u);
}

}  // namespace certs_test
}  // namespace ember::security
