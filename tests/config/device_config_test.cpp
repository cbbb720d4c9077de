#include "config/device_config.hpp"

#include <gtest/gtest.h>

namespace ember {
namespace {

TEST(DevicesConfig, DefaultsWhenSilent) {
  auto c = parse_devices_config("", "node.yaml");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->kind, DeviceKind::automatic);
  EXPECT_EQ(c->count, 1u);
  EXPECT_EQ(c->sim.memory_bytes, 8ull << 30);
  EXPECT_EQ(parse_devices_config("other: 1\n", "node.yaml")->count, 1u);
}

TEST(DevicesConfig, ReadsEveryKey) {
  auto c = parse_devices_config(
      "devices:\n  kind: sim\n  count: 4\n  memory: 2GiB\n  pcie_bandwidth: 16GB/s\n  compute_threads: 2\n", "node.yaml");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->kind, DeviceKind::sim);
  EXPECT_EQ(c->count, 4u);
  EXPECT_EQ(c->sim.memory_bytes, 2ull << 30);
  EXPECT_DOUBLE_EQ(c->sim.pcie_bytes_per_s, 16e9);
  EXPECT_EQ(c->sim.compute_threads, 2u);
}

struct BadCase {
  const char* yaml;
  const char* key_in_message;
};

class DevicesConfigErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(DevicesConfigErrors, NameTheFileAndKey) {
  auto c = parse_devices_config(GetParam().yaml, "node.yaml");
  ASSERT_FALSE(c.ok()) << GetParam().yaml;
  EXPECT_EQ(c.error().code(), ErrorCode::invalid_argument);
  EXPECT_NE(c.error().message().find("node.yaml"), std::string::npos) << c.error().message();
  EXPECT_NE(c.error().message().find(GetParam().key_in_message), std::string::npos) << c.error().message();
}

INSTANTIATE_TEST_SUITE_P(
    All, DevicesConfigErrors,
    ::testing::Values(BadCase{"devices:\n  kind: tpu\n", "devices.kind"},
                      BadCase{"devices:\n  count: 0\n", "devices.count"},
                      BadCase{"devices:\n  count: many\n", "devices.count"},
                      BadCase{"devices:\n  count: 65\n", "devices.count"},
                      BadCase{"devices:\n  memory: lots\n", "devices.memory"},
                      BadCase{"devices:\n  memory: 1KiB\n", "devices.memory"},
                      BadCase{"devices:\n  pcie_bandwidth: quick\n", "devices.pcie_bandwidth"},
                      BadCase{"devices:\n  memroy: 1GiB\n", "devices.memroy"},
                      BadCase{"devices:\n  memory: [1, 2]\n", "devices.memory"},
                      BadCase{"devices: 3\n", "devices"},
                      BadCase{"devices: [\n", "YAML"},
                      BadCase{"- a\n- b\n", "mapping"}));

}  // namespace
}  // namespace ember
