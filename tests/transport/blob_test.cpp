#include "transport/blob.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/transport/transfer_test_util.hpp"

namespace ember::transport {
namespace blob_test {

std::string temp_path(const char* name) {
  return (std::filesystem::temp_directory_path() / (std::string("ember_") + name + "_" + std::to_string(::getpid())))
      .string();
}

TEST(MemoryBlob, ReadsAndDigest) {
  auto bytes = testing::random_bytes(10000, 1);
  auto blob = MemoryBlob::of(bytes);
  EXPECT_EQ(blob->size(), bytes.size());
  ASSERT_NE(blob->data(), nullptr);
  std::vector<uint8_t> out(100);
  ASSERT_TRUE(blob->read(9900, out.data(), 100).ok());
  EXPECT_TRUE(std::equal(out.begin(), out.end(), bytes.begin() + 9900));
  EXPECT_EQ(blob->read(9901, out.data(), 100).error().code(), ErrorCode::invalid_argument);
  auto d = blob->digest();
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(*d, Sha256::of(bytes.data(), bytes.size()));
}

TEST(MemoryBlob, KeepsItsOwnerAliveAndTrustsAKnownDigest) {
  auto owner = std::make_shared<std::vector<uint8_t>>(testing::random_bytes(64, 2));
  std::weak_ptr<std::vector<uint8_t>> watch = owner;
  Digest known{};
  known[0] = 42;  // not the real digest: proves it is used as given, never recomputed
  auto blob = std::make_shared<MemoryBlob>(owner, owner->data(), owner->size(), known);
  owner.reset();
  EXPECT_FALSE(watch.expired());
  EXPECT_EQ(*blob->digest(), known);
  blob.reset();
  EXPECT_TRUE(watch.expired());
}

TEST(MemoryBlob, DigestIsComputedOnceUnderConcurrency) {
  auto bytes = testing::random_bytes(8 << 20, 3);
  auto blob = MemoryBlob::of(bytes);
  const Digest want = Sha256::of(bytes.data(), bytes.size());
  std::vector<std::thread> threads;
  std::atomic<int> right{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      auto d = blob->digest();
      if (d.ok() && *d == want) ++right;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(right.load(), 8);
}

TEST(FileBlob, ReadsAndDigest) {
  auto bytes = testing::random_bytes((5 << 20) + 3, 4);
  const std::string path = temp_path("fileblob");
  std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  auto blob = FileBlob::open(path);
  ASSERT_TRUE(blob.ok()) << blob.error().to_string();
  EXPECT_EQ((*blob)->size(), bytes.size());
  EXPECT_EQ((*blob)->data(), nullptr);
  std::vector<uint8_t> out(1000);
  ASSERT_TRUE((*blob)->read(bytes.size() - 1000, out.data(), 1000).ok());
  EXPECT_TRUE(std::equal(out.begin(), out.end(), bytes.end() - 1000));
  EXPECT_EQ(*(*blob)->digest(), Sha256::of(bytes.data(), bytes.size()));
  std::filesystem::remove(path);
}

TEST(FileBlob, TrustsAKnownDigest) {
  const std::string path = temp_path("fileblob_known");
  std::ofstream(path, std::ios::binary) << "weights";
  Digest known{};
  known[31] = 7;  // not the file's digest: proves it is used as given, never computed
  auto blob = FileBlob::open(path, known);
  ASSERT_TRUE(blob.ok());
  EXPECT_EQ(*(*blob)->digest(), known);
  std::filesystem::remove(path);
}

TEST(FileBlob, AChangedSizeIsAStickyError) {
  const std::string path = temp_path("fileblob_grow");
  std::ofstream(path, std::ios::binary) << std::string(4096, 'a');
  auto blob = FileBlob::open(path);
  ASSERT_TRUE(blob.ok());
  std::ofstream(path, std::ios::binary | std::ios::app) << "more";
  uint8_t b = 0;
  auto st = (*blob)->read(0, &b, 1);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.error().code(), ErrorCode::corrupt);
  EXPECT_NE(st.error().message().find("changed size"), std::string::npos) << st.error().message();
  // Back to the old size: still an error, the blob's state was unknowable in between.
  std::filesystem::resize_file(path, 4096);
  EXPECT_FALSE((*blob)->read(0, &b, 1).ok());
  EXPECT_EQ((*blob)->digest().error().code(), ErrorCode::corrupt);
  std::filesystem::remove(path);
}

TEST(FileBlob, MissingFileIsNotFound) {
  auto blob = FileBlob::open("/nonexistent/ember/weights.safetensors");
  ASSERT_FALSE(blob.ok());
  EXPECT_EQ(blob.error().code(), ErrorCode::not_found);
  EXPECT_EQ(FileBlob::open("/tmp").error().code(), ErrorCode::io_error);  // a directory
}

}  // namespace blob_test
}  // namespace ember::transport
