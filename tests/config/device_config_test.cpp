#include "config/device_config.hpp"
#include "tests/config/bad_case.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace ember {
namespace device_config_test {

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
      "devices:\n  kind: sim\n  count: 4\n  memory: 2GiB\n  pcie_bandwidth: 16GB/s\n  compute_threads: 2\n"
      "  compute_dilation: 2.5\n",
      "node.yaml");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_EQ(c->kind, DeviceKind::sim);
  EXPECT_EQ(c->count, 4u);
  EXPECT_EQ(c->sim.memory_bytes, 2ull << 30);
  EXPECT_DOUBLE_EQ(c->sim.pcie_bytes_per_s, 16e9);
  EXPECT_EQ(c->sim.compute_threads, 2u);
  EXPECT_DOUBLE_EQ(c->sim.compute_dilation, 2.5);
  EXPECT_DOUBLE_EQ(parse_devices_config("", "node.yaml")->sim.compute_dilation, 0) << "off unless asked for";
}

TEST(DevicesConfig, ReadsTheTopology) {
  auto c = parse_devices_config(
      "devices:\n  count: 3\n  pcie_bandwidth: 16GB/s\n  pageable_bandwidth: 6GB/s\n"
      "  pcie_switch: [0, 0, 7]\n  switch_bandwidth: 24GB/s\n"
      "  links:\n    - [0, 50GB/s, 0]\n    - [50GB/s, 0, 25GB/s]\n    - [0, 25GB/s, 0]\n",
      "node.yaml");
  ASSERT_TRUE(c.ok()) << c.error().message();
  EXPECT_DOUBLE_EQ(c->sim.pageable_bytes_per_s, 6e9);
  EXPECT_EQ(c->pcie_switch, (std::vector<uint32_t>{0, 0, 7}));
  EXPECT_DOUBLE_EQ(c->switch_bytes_per_s, 24e9);
  ASSERT_EQ(c->link_bytes_per_s.size(), 3u);
  EXPECT_EQ(c->link_bytes_per_s[1], (std::vector<double>{50e9, 0, 25e9}));
  EXPECT_DOUBLE_EQ(c->link_bytes_per_s[2][1], 25e9);
}

TEST(DevicesConfig, TopologyDefaultsAndEmptyLists) {
  auto silent = parse_devices_config("devices:\n  count: 2\n", "node.yaml");
  ASSERT_TRUE(silent.ok()) << silent.error().message();
  EXPECT_TRUE(silent->pcie_switch.empty());
  EXPECT_TRUE(silent->link_bytes_per_s.empty());
  EXPECT_EQ(silent->sim.pageable_bytes_per_s, 0);
  EXPECT_EQ(silent->switch_bytes_per_s, 0);
  auto empty = parse_devices_config(
      "devices:\n  pcie_switch: []\n  links: []\n  pageable_bandwidth: 0\n  switch_bandwidth: 0\n", "node.yaml");
  ASSERT_TRUE(empty.ok()) << empty.error().message();
  EXPECT_TRUE(empty->pcie_switch.empty());
  EXPECT_TRUE(empty->link_bytes_per_s.empty());
  // Block-style lists read the same as flow-style ones.
  auto block = parse_devices_config("devices:\n  count: 2\n  pcie_switch:\n    - 3\n    - 3\n", "node.yaml");
  ASSERT_TRUE(block.ok()) << block.error().message();
  EXPECT_EQ(block->pcie_switch, (std::vector<uint32_t>{3, 3}));
}

TEST(DevicesConfig, ValidateChecksProgrammaticTopology) {
  DevicesConfig c;
  c.count = 2;
  c.link_bytes_per_s = {{0, 1e9}, {1e9, 0}};
  EXPECT_TRUE(validate(c, "x").ok());
  c.link_bytes_per_s[1][0] = 2e9;
  auto st = validate(c, "x");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.error().message().find("devices.links[0][1]"), std::string::npos) << st.error().message();
  EXPECT_NE(st.error().message().find("devices.links[1][0]"), std::string::npos) << st.error().message();
  c.link_bytes_per_s.clear();
  c.sim.pageable_bytes_per_s = -1;
  EXPECT_FALSE(validate(c, "x").ok());
}

using testing::BadCase;

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
                      BadCase{"devices:\n  compute_dilation: 0.5\n", "devices.compute_dilation"},
                      BadCase{"devices:\n  compute_dilation: -3\n", "devices.compute_dilation"},
                      BadCase{"devices:\n  compute_dilation: 1e9\n", "devices.compute_dilation"},
                      BadCase{"devices:\n  compute_dilation: fast\n", "compute_dilation"},
                      BadCase{"devices:\n  memory: 1KiB\n", "devices.memory"},
                      BadCase{"devices:\n  pcie_bandwidth: quick\n", "devices.pcie_bandwidth"},
                      BadCase{"devices:\n  memroy: 1GiB\n", "devices.memroy"},
                      BadCase{"devices:\n  memory: [1, 2]\n", "devices.memory"},
                      BadCase{"devices: 3\n", "devices"},
                      BadCase{"devices:\n  pageable_bandwidth: slow\n", "devices.pageable_bandwidth"},
                      BadCase{"devices:\n  pageable_bandwidth: -1GB/s\n", "devices.pageable_bandwidth"},
                      BadCase{"devices:\n  pageable_bandwidth: [1]\n", "devices.pageable_bandwidth"},
                      BadCase{"devices:\n  switch_bandwidth: fast\n", "devices.switch_bandwidth"},
                      BadCase{"devices:\n  switch_bandwidth: -2GB/s\n", "devices.switch_bandwidth"},
                      BadCase{"devices:\n  pcie_switch: 0\n", "devices.pcie_switch"},
                      BadCase{"devices:\n  pcie_switch:\n", "devices.pcie_switch"},
                      BadCase{"devices:\n  count: 2\n  pcie_switch: [0, -1]\n", "devices.pcie_switch[1]"},
                      BadCase{"devices:\n  count: 2\n  pcie_switch: [0, x]\n", "devices.pcie_switch[1]"},
                      BadCase{"devices:\n  count: 2\n  pcie_switch: [0, [1]]\n", "devices.pcie_switch[1]"},
                      BadCase{"devices:\n  count: 2\n  pcie_switch: [0, 4294967296]\n", "devices.pcie_switch[1]"},
                      BadCase{"devices:\n  count: 3\n  pcie_switch: [0, 0]\n", "devices.pcie_switch"},
                      BadCase{"devices:\n  count: 2\n  links: 50GB/s\n", "devices.links"},
                      BadCase{"devices:\n  count: 2\n  links: [0, 0]\n", "devices.links[0]"},
                      BadCase{"devices:\n  count: 2\n  links: [[0, fast], [0, 0]]\n", "devices.links[0][1]"},
                      BadCase{"devices:\n  count: 3\n  links: [[0, 0], [0, 0]]\n", "devices.links"},
                      BadCase{"devices:\n  count: 2\n  links: [[0, 0], [0]]\n", "devices.links[1]"},
                      BadCase{"devices:\n  count: 2\n  links: [[0, -1GB/s], [-1GB/s, 0]]\n", "devices.links[0][1]"},
                      BadCase{"devices:\n  count: 2\n  links: [[1GB/s, 0], [0, 0]]\n", "devices.links[0][0]"},
                      BadCase{"devices:\n  count: 2\n  links: [[0, 50GB/s], [0, 0]]\n", "devices.links[0][1]"},
                      BadCase{"devices: [\n", "YAML"},
                      BadCase{"- a\n- b\n", "mapping"}));

}  // namespace device_config_test
}  // namespace ember
