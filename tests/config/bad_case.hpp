// A config text that must be refused, and the check every such case gets: parse_cluster_config
// fails with invalid_argument, and the message starts with the file name and names the key.
#pragma once

#include <gtest/gtest.h>

#include <ostream>
#include <string>

#include "config/cluster_config.hpp"

namespace ember::testing {

struct BadCase {
  const char* yaml;
  const char* key_in_message;
};

inline void PrintTo(const BadCase& c, std::ostream* os) { *os << '"' << c.yaml << '"'; }

inline void expect_refused_naming_file_and_key(const BadCase& bad) {
  auto c = parse_cluster_config(bad.yaml, "ember.yaml");
  ASSERT_FALSE(c.ok()) << bad.yaml;
  EXPECT_EQ(c.error().code(), ErrorCode::invalid_argument);
  EXPECT_TRUE(c.error().message().starts_with("ember.yaml: ")) << c.error().message();
  EXPECT_NE(c.error().message().find(bad.key_in_message), std::string::npos) << c.error().message();
}

}  // namespace ember::testing
