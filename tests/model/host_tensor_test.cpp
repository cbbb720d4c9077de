#include "model/host_tensor.hpp"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/model/model_test_util.hpp"

namespace ember::gpu {
namespace host_tensor_test {

using nlohmann::json;

TEST(KserveJson, DecodesFlatAndNestedData) {
  auto flat = tensor_from_kserve_json(json::parse(R"({"name":"x","datatype":"FP32","shape":[2,2],"data":[1,2,3,4.5]})"), "in");
  ASSERT_TRUE(flat.ok()) << flat.error().message();
  EXPECT_EQ(flat->desc.shape, (Shape{2, 2}));
  EXPECT_EQ(flat->as<float>()[3], 4.5f);
  auto nested = tensor_from_kserve_json(json::parse(R"({"name":"ids","datatype":"INT64","shape":[2,2],"data":[[1,2],[3,4]]})"), "in");
  ASSERT_TRUE(nested.ok());
  EXPECT_EQ(nested->desc.dtype, DType::i64);
  EXPECT_EQ(nested->as<int64_t>()[2], 3);
}

TEST(KserveJson, RoundTrips) {
  auto t = testing::random_tensor("y", {DType::f32, Shape{3, 5}}, 7);
  json j;
  tensor_to_kserve_json(t, j);
  auto back = tensor_from_kserve_json(j, "out");
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(testing::bitwise_equal(t, *back));
}

class KserveJsonErrors : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(KserveJsonErrors, AreInvalidArgumentsNamingTheTensor) {
  auto r = tensor_from_kserve_json(json::parse(GetParam().first), "inputs[0]");
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(r.error().code() == ErrorCode::invalid_argument || r.error().code() == ErrorCode::unsupported);
  EXPECT_NE(r.error().message().find(GetParam().second), std::string::npos) << r.error().message();
}

INSTANTIATE_TEST_SUITE_P(
    All, KserveJsonErrors,
    ::testing::Values(
        std::pair{R"([1])", "expected an object"},
        std::pair{R"({"datatype":"FP32","shape":[1],"data":[1]})", "field 'name'"},
        std::pair{R"({"name":"x","datatype":"FP99","shape":[1],"data":[1]})", "'x': field 'datatype'"},
        std::pair{R"({"name":"x","datatype":"FP32","shape":[2,2],"data":[1,2,3]})", "holds 3 values but shape [2, 2] needs 4"},
        std::pair{R"({"name":"x","datatype":"FP32","shape":[-1],"data":[1]})", "field 'shape'"},
        std::pair{R"({"name":"x","datatype":"FP32","shape":[1],"data":["a"]})", "must hold numbers"},
        std::pair{R"({"name":"x","datatype":"INT32","shape":[1],"data":[1.5]})", "element 0 (1.5) is not a valid INT32"},
        std::pair{R"({"name":"x","datatype":"INT32","shape":[1],"data":[3000000000]})", "not a valid INT32"},
        std::pair{R"({"name":"x","datatype":"FP32","shape":[1],"data":[1e300]})", "not a valid FP32"},
        std::pair{R"({"name":"x","datatype":"FP32","shape":[1]})", "field 'data' is missing"},
        std::pair{R"({"name":"x","datatype":"FP32","shape":[100000,100000,100000],"data":[1]})", "field 'shape'"}));

TEST(TensorFile, RoundTripsManyDtypes) {
  testing::TempDir dir;
  std::vector<HostTensor> ts = {testing::random_tensor("a", {DType::f32, Shape{4, 3}}, 1),
                                testing::random_tensor("b", {DType::i64, Shape{2, 7}}, 2, 0, 0, 50),
                                testing::random_tensor("c", {DType::i32, Shape{5}}, 3, 0, 0, 9)};
  ASSERT_TRUE(write_tensor_file(dir / "t.safetensors", ts).ok());
  auto back = read_tensor_file(dir / "t.safetensors");
  ASSERT_TRUE(back.ok()) << back.error().message();
  ASSERT_EQ(back->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*back)[i].name, ts[i].name);
    EXPECT_TRUE(testing::bitwise_equal((*back)[i], ts[i]));
  }
}

}  // namespace host_tensor_test
}  // namespace ember::gpu
