// Typed access to untrusted tokenizer files (text/json_fields.hpp): each wrong type or range is an
// error naming the field and what was there.
#include "text/json_fields.hpp"

#include <gtest/gtest.h>

namespace ember::text {
namespace json_fields_test {

TEST(JsonFields, ReadsPresentFieldsAndDefaultsAbsentOnes) {
  const nlohmann::json j = {{"s", "x"}, {"b", true}, {"i", 7}, {"n", nullptr}};
  EXPECT_EQ(*string_field(j, "s", "model"), "x");
  EXPECT_EQ(*optional_string_field(j, "n", "model"), std::nullopt);
  EXPECT_EQ(*optional_string_field(j, "missing", "model"), std::nullopt);
  EXPECT_TRUE(*bool_field(j, "b", false, "model"));
  EXPECT_FALSE(*bool_field(j, "n", false, "model"));  // null reads as absent
  EXPECT_EQ(*int_field(j, "i", 0, 10, "model"), 7);
  EXPECT_EQ(member(j, "n"), nullptr);
  EXPECT_EQ(member(nlohmann::json::array(), "s"), nullptr);
}

TEST(JsonFields, WrongTypesAndRangesNameTheField) {
  const nlohmann::json j = {{"s", 3}, {"b", "yes"}, {"i", 70}, {"f", 1.5}, {"big", 18446744073709551615ull}};
  auto s = string_field(j, "s", "decoder");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.error().message(), "decoder.s: expected a string, got integer");
  auto b = bool_field(j, "b", false, "");
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.error().message(), "b: expected a boolean, got string");
  auto i = int_field(j, "i", 0, 10, "x");
  ASSERT_FALSE(i.ok());
  EXPECT_EQ(i.error().message(), "x.i: 70 is outside [0, 10]");
  EXPECT_FALSE(int_field(j, "f", 0, 10, "x").ok());
  EXPECT_FALSE(int_field(j, "big", 0, 10, "x").ok());
  auto missing = string_field(j, "none", "x");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().message(), "x.none: missing");
}

}  // namespace json_fields_test
}  // namespace ember::text
