// actors/gateway/http/kserve_json: inference bodies in (good ones, optional fields, every kind of
// bad one with its exact message), replies, metadata, readiness and errors out.
#include "actors/gateway/http/kserve_json.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>

#include "model/architectures.hpp"
#include "model/tensor.hpp"

namespace ember {
namespace kserve_json_test {

using nlohmann::json;

// The JSON-only forms: no binary header, no output asked as raw bytes.
Result<infer_request> parse_infer_request(std::string_view body, const model_key& key) {
  EMBER_ASSIGN_OR_RETURN(HttpInferRequest parsed, parse_infer_http(body, std::nullopt, key));
  return std::move(parsed.request);
}
Result<std::string> render_infer_reply(const infer_reply& reply) {
  EMBER_ASSIGN_OR_RETURN(HttpInferReply r, render_infer_http(reply, HttpInferRequest{}));
  return std::move(r.body);
}

const model_key kKey{"mlp", 2};

template <class T>
std::vector<uint8_t> bytes_of(std::vector<T> values) {
  std::vector<uint8_t> out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

tensor_msg tensor(std::string name, gpu::DType dtype, std::vector<int64_t> shape, std::vector<uint8_t> data) {
  return {std::move(name), static_cast<uint8_t>(dtype), std::move(shape), std::move(data)};
}

std::string error_of(std::string_view body) {
  auto r = parse_infer_request(body, kKey);
  EXPECT_FALSE(r.ok()) << "accepted: " << body;
  return r.ok() ? std::string() : r.error().message();
}

TEST(KserveJson, AGoodInferenceBodyBecomesARequestForThePathsModel) {
  auto r = parse_infer_request(
      R"({"id": "req-7", "inputs": [{"name": "input", "datatype": "FP32", "shape": [1, 2], "data": [0.5, -1.5]},
                                    {"name": "ids", "datatype": "INT64", "shape": [2], "data": [[3], [4]]}],
          "outputs": [{"name": "fc3"}, {"name": "fc2", "parameters": {}}]})",
      kKey);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->model, kKey);
  EXPECT_EQ(r->id, "req-7");
  ASSERT_EQ(r->inputs.size(), 2u);
  EXPECT_EQ(r->inputs[0].name, "input");
  EXPECT_EQ(r->inputs[0].dtype, static_cast<uint8_t>(gpu::DType::f32));
  EXPECT_EQ(r->inputs[0].shape, (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(r->inputs[0].data, bytes_of<float>({0.5f, -1.5f}));
  EXPECT_EQ(r->inputs[1].dtype, static_cast<uint8_t>(gpu::DType::i64));
  EXPECT_EQ(r->inputs[1].data, bytes_of<int64_t>({3, 4}));
  EXPECT_EQ(r->outputs, (std::vector<std::string>{"fc3", "fc2"}));
}

TEST(KserveJson, IdAndOutputsAreOptional) {
  auto r = parse_infer_request(R"({"inputs": [{"name": "x", "datatype": "UINT8", "shape": [3], "data": [0, 7, 255]}]})",
                               kKey);
  ASSERT_TRUE(r.ok()) << r.error().message();
  EXPECT_EQ(r->id, "");
  EXPECT_TRUE(r->outputs.empty());
  EXPECT_EQ(r->inputs[0].data, (std::vector<uint8_t>{0, 7, 255}));
}

TEST(KserveJson, EveryKindOfBadInferenceBodyGetsItsOwnMessage) {
  EXPECT_EQ(error_of(""), "the request body is empty; an inference request is a JSON object with 'inputs'");
  EXPECT_EQ(error_of(" \r\n"), "the request body is empty; an inference request is a JSON object with 'inputs'");
  EXPECT_EQ(error_of(R"({"inputs": [)"), "not valid JSON");
  EXPECT_EQ(error_of(std::string(100, '[') + std::string(100, ']')), "JSON nested deeper than 64 levels");
  EXPECT_EQ(error_of("[1, 2]"), "the request body must be a JSON object");
  EXPECT_EQ(error_of(R"("text")"), "the request body must be a JSON object");
  const std::string input = R"({"name": "input", "datatype": "FP32", "shape": [1], "data": [1]})";
  EXPECT_EQ(error_of(R"({"id": 5, "inputs": [)" + input + "]}"), "field 'id' must be a string");
  EXPECT_EQ(error_of("{}"), "field 'inputs' must be a non-empty list of tensors");
  EXPECT_EQ(error_of(R"({"inputs": []})"), "field 'inputs' must be a non-empty list of tensors");
  EXPECT_EQ(error_of(R"({"inputs": {"name": "input"}})"), "field 'inputs' must be a non-empty list of tensors");
  EXPECT_EQ(error_of(R"({"inputs": [7]})"), "inputs[0]: expected an object with name, datatype, shape, data");
  EXPECT_EQ(error_of(R"({"inputs": [{"datatype": "FP32"}]})"), "inputs[0]: field 'name' must be a string");
  EXPECT_EQ(error_of(R"({"inputs": [{"name": "a", "datatype": "FP32", "shape": [2], "data": [1]}]})"),
            "inputs[0] 'a': field 'data' holds 1 values but shape [2] needs 2");
  EXPECT_EQ(error_of(R"({"inputs": [{"name": "a", "datatype": "FP32", "shape": [1]}]})"),
            "inputs[0] 'a': field 'data' is missing");
  EXPECT_EQ(error_of(R"({"inputs": [)" + input + R"(], "outputs": "fc3"})"), "field 'outputs' must be a list");
  EXPECT_EQ(error_of(R"({"inputs": [)" + input + R"(], "outputs": ["fc3"]})"),
            "field 'outputs' must hold objects with a 'name'");
  EXPECT_EQ(error_of(R"({"inputs": [)" + input + R"(], "outputs": [{"name": 3}]})"),
            "field 'outputs' must hold objects with a 'name'");
}

TEST(KserveJson, HalfPrecisionInputsAreRefusedAsUnsupported) {
  auto r = parse_infer_request(R"({"inputs": [{"name": "h", "datatype": "FP16", "shape": [1], "data": [1]}]})", kKey);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code(), ErrorCode::unsupported);
  EXPECT_EQ(r.error().message(),
            "inputs[0] 'h': field 'datatype': FP16 is not accepted in JSON; send FP32, or the tensor as binary data");
}

// Triton's binary tensor data extension: the JSON header, then each binary input's raw bytes in
// input order; asked-for outputs come back the same way after the reply's JSON.
TEST(KserveJson, BinaryTensorsInAndOut) {
  const std::string header =
      R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2], "parameters": {"binary_data_size": 8}},)"
      R"({"name": "h", "datatype": "FP16", "shape": [1], "parameters": {"binary_data_size": 2}}],)"
      R"("outputs": [{"name": "y", "parameters": {"binary_data": true}}, {"name": "z"}]})";
  const auto x = bytes_of<float>({1.5f, -2.0f});
  std::string body = header + std::string(x.begin(), x.end()) + std::string("\x00\x3c", 2);
  auto r = parse_infer_http(body, header.size(), kKey);
  ASSERT_TRUE(r.ok()) << r.error().message();
  ASSERT_EQ(r->request.inputs.size(), 2u);
  EXPECT_EQ(r->request.inputs[0].data, x);
  EXPECT_EQ(r->request.inputs[1].dtype, static_cast<uint8_t>(gpu::DType::f16));  // binary carries FP16
  EXPECT_EQ(r->request.outputs, (std::vector<std::string>{"y", "z"}));
  EXPECT_EQ(r->binary_outputs, (std::vector<std::string>{"y"}));
  EXPECT_FALSE(r->all_binary);

  infer_reply reply;
  reply.model = kKey;
  const auto y = bytes_of<float>({3.0f, 4.0f});
  reply.outputs = {tensor("y", gpu::DType::f32, {2}, y), tensor("z", gpu::DType::f32, {1}, bytes_of<float>({5.0f}))};
  auto out = render_infer_http(reply, *r);
  ASSERT_TRUE(out.ok()) << out.error().message();
  ASSERT_TRUE(out->json_bytes.has_value());
  const json j = json::parse(out->body.substr(0, *out->json_bytes));
  EXPECT_EQ(j["outputs"][0],
            json::parse(R"({"name": "y", "datatype": "FP32", "shape": [2], "parameters": {"binary_data_size": 8}})"));
  EXPECT_EQ(j["outputs"][1], json::parse(R"({"name": "z", "datatype": "FP32", "shape": [1], "data": [5.0]})"));
  EXPECT_EQ(out->body.substr(*out->json_bytes), std::string(y.begin(), y.end()));
  // Without the header, or with bytes the inputs do not account for: clear errors.
  EXPECT_NE(parse_infer_http(header, std::nullopt, kKey).error().message().find("needs the binary data"),
            std::string::npos);
  EXPECT_NE(parse_infer_http(body + "!", header.size(), kKey).error().message().find("1 bytes of binary data follow"),
            std::string::npos);
  EXPECT_NE(parse_infer_http(body, body.size() + 1, kKey).error().message().find("but the body has only"), std::string::npos);
}

TEST(KserveJson, AReplyRendersEveryDtypeJsonCarries) {
  infer_reply reply;
  reply.model = kKey;
  reply.id = "req-1";
  reply.outputs = {tensor("f", gpu::DType::f32, {2}, bytes_of<float>({1.5f, -2.0f})),
                   tensor("l", gpu::DType::i64, {1, 2}, bytes_of<int64_t>({int64_t{1} << 40, -3})),
                   tensor("i", gpu::DType::i32, {1}, bytes_of<int32_t>({-7})),
                   tensor("u", gpu::DType::u8, {2}, bytes_of<uint8_t>({0, 255}))};
  auto text = render_infer_reply(reply);
  ASSERT_TRUE(text.ok()) << text.error().message();
  const json j = json::parse(*text);
  EXPECT_EQ(j["model_name"], "mlp");
  EXPECT_EQ(j["model_version"], "2");
  EXPECT_EQ(j["id"], "req-1");
  ASSERT_EQ(j["outputs"].size(), 4u);
  EXPECT_EQ(j["outputs"][0], json::parse(R"({"name": "f", "datatype": "FP32", "shape": [2], "data": [1.5, -2.0]})"));
  EXPECT_EQ(j["outputs"][1],
            json::parse(R"({"name": "l", "datatype": "INT64", "shape": [1, 2], "data": [1099511627776, -3]})"));
  EXPECT_EQ(j["outputs"][2], json::parse(R"({"name": "i", "datatype": "INT32", "shape": [1], "data": [-7]})"));
  EXPECT_EQ(j["outputs"][3], json::parse(R"({"name": "u", "datatype": "UINT8", "shape": [2], "data": [0, 255]})"));
}

TEST(KserveJson, AReplyWithoutAnIdOmitsItAndAnEmptyReplyHasNoOutputs) {
  infer_reply reply;
  reply.model = {"m", 1};
  auto text = render_infer_reply(reply);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(json::parse(*text), json::parse(R"({"model_name": "m", "model_version": "1", "outputs": []})"));
}

TEST(KserveJson, OutputsJsonCannotCarryAreErrorsNotEmptyLists) {
  for (auto [dtype, word] : {std::pair{gpu::DType::f16, "FP16"}, std::pair{gpu::DType::bf16, "BF16"}}) {
    infer_reply reply;
    reply.outputs = {tensor("h", dtype, {1}, {0, 0})};
    auto text = render_infer_reply(reply);
    ASSERT_FALSE(text.ok());
    EXPECT_EQ(text.error().code(), ErrorCode::unsupported);
    EXPECT_EQ(text.error().message(),
              std::string("output 'h' has datatype ") + word + ", which the JSON API does not carry");
  }
  infer_reply reply;
  reply.outputs = {tensor("x", gpu::DType::f32, {}, {}), {"y", 200, {}, {}}};
  auto text = render_infer_reply(reply);
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.error().code(), ErrorCode::internal);
  EXPECT_EQ(text.error().message(), "output 'y' has an unknown dtype code 200");
}

TEST(KserveJson, MetadataListsEveryVersionAndTheManifestsTensors) {
  auto builder = gpu::build_architecture("mlp", {true, 5, {}});
  ASSERT_TRUE(builder.ok());
  auto signature = parse_model_signature(gpu::manifest_to_json(builder->manifest()), "mlp/1/model.json");
  ASSERT_TRUE(signature.ok()) << signature.error().message();
  const json j = json::parse(render_model_metadata("mlp", {1, 2}, *signature));
  EXPECT_EQ(j["name"], "mlp");
  EXPECT_EQ(j["versions"], json::parse(R"(["1", "2"])"));
  EXPECT_EQ(j["platform"], "ember");
  ASSERT_EQ(j["inputs"].size(), 1u);
  EXPECT_EQ(j["inputs"][0], json::parse(R"({"name": "input", "datatype": "FP32", "shape": [-1, 16]})"));
  ASSERT_EQ(j["outputs"].size(), 1u);
  EXPECT_EQ(j["outputs"][0]["datatype"], "FP32");
}

TEST(KserveJson, AManifestThatDoesNotParseNamesItsFileAndRendersEmptyTensors) {
  auto signature = parse_model_signature("{not json", "broken/1/model.json");
  ASSERT_FALSE(signature.ok());
  EXPECT_NE(signature.error().message().find("broken/1/model.json"), std::string::npos) << signature.error().message();
  const json j = json::parse(render_model_metadata("broken", {1}, ModelSignature{}));
  EXPECT_EQ(j["inputs"], json::array());
  EXPECT_EQ(j["outputs"], json::array());
}

TEST(KserveJson, ReadinessSaysWhyAModelIsNotReady) {
  model_state s;
  s.model = {"m", 1};
  EXPECT_EQ(json::parse(render_model_readiness("m", true, s)), json::parse(R"({"name": "m", "ready": true})"));
  EXPECT_EQ(json::parse(render_model_readiness("m", false, s))["error"],
            "no warm replica (unloaded); the first request loads one");
  s.explicitly_unloaded = true;
  EXPECT_EQ(json::parse(render_model_readiness("m", false, s))["error"], "model is unloaded");
  s.state = ModelReadiness::failed;
  s.reason = "bad weights";
  EXPECT_EQ(json::parse(render_model_readiness("m", false, s))["error"], "model cannot load: bad weights");
}

TEST(KserveJson, ServerMetadataAndErrorsAreJson) {
  const json server = json::parse(render_server_metadata());
  EXPECT_EQ(server["name"], "ember");
  EXPECT_EQ(server["extensions"], json::parse(R"(["model_repository", "binary_tensor_data"])"));
  EXPECT_EQ(json::parse(render_error("a \"quoted\"\nline")), json::parse(R"({"error": "a \"quoted\"\nline"})"));
}

// Data lists read from the text (the default from 4 KiB on) against the JSON parser reading the
// whole body: the same tensors, bit for bit, for every way JSON writes a number, and the same error
// for every body the scanner declines or the checks refuse.
TEST(KserveJson, DataListsReadFromTheTextEqualTheParsersValuesAndErrors) {
  auto both = [](const std::string& body) {
    auto fast = parse_infer_http(body, std::nullopt, {"m", 1}, 0);
    auto whole = parse_infer_http(body, std::nullopt, {"m", 1}, SIZE_MAX);
    EXPECT_EQ(fast.ok(), whole.ok()) << body.substr(0, 200);
    if (!fast.ok() || !whole.ok()) {
      if (!fast.ok() && !whole.ok()) {
        EXPECT_EQ(fast.error().message(), whole.error().message()) << body.substr(0, 200);
      }
      return fast.ok() ? std::string() : fast.error().message();
    }
    EXPECT_EQ(fast->request.inputs.size(), whole->request.inputs.size());
    for (size_t i = 0; i < std::min(fast->request.inputs.size(), whole->request.inputs.size()); ++i) {
      const auto& a = fast->request.inputs[i];
      const auto& b = whole->request.inputs[i];
      EXPECT_TRUE(a.name == b.name && a.dtype == b.dtype && a.shape == b.shape && a.data == b.data)
          << "input " << i << " differs: " << body.substr(0, 200);
    }
    return std::string();
  };
  auto request = [](const std::string& datatype, const std::string& shape, const std::string& data,
                    const std::string& extra = "") {
    return R"({"id": "x", "inputs": [{"name": "a", "datatype": ")" + datatype + R"(", "shape": )" + shape +
           R"(, "data": )" + data + "}" + extra + R"(], "outputs": [{"name": "y"}]})";
  };
  // Every form of number JSON allows, flat and nested, in FP32 and the integer types.
  const std::string forms =
      "[0, -0, 1, -1, 0.5, -0.0, 1e3, 1E-3, 2.5e+2, 123456789012, 9007199254740993, "
      "18446744073709551615, 3.4028234663852886e38, 1e-50, 0.1]";
  EXPECT_EQ(both(request("FP32", "[15]", forms)), "");
  EXPECT_EQ(both(request("FP32", "[3, 5]", "[[0, -0, 1], [-1, 0.5, -0.0], [1e3, 1E-3, 2.5e+2], [7, 8, 9], [1, 2, 3]]")),
            "");
  EXPECT_EQ(both(request("INT64", "[3]", "[-9223372036854775808, 9223372036854775807, 0]")), "");
  EXPECT_EQ(both(request("INT32", "[2, 2]", " [ [1 ,2] ,\n\t[3,4] ] ")), "");
  EXPECT_EQ(both(request("UINT8", "[2]", "[0, 255]")), "");
  // Two inputs, the second one binary-less but given before a key named like the first's.
  EXPECT_EQ(both(request("FP32", "[2]", "[1, 2]",
                         R"(, {"name": "b", "data": [3, 4], "shape": [2], "datatype": "FP32", "x": {"data": "no"}})")),
            "");
  // Refused by the checks after the scan: the same messages.
  EXPECT_NE(both(request("FP32", "[2]", "[1, 2, 3]")), "");  // count
  EXPECT_NE(both(request("UINT8", "[2]", "[1, 256]")), "");  // range
  EXPECT_NE(both(request("INT32", "[2]", "[1, 2.5]")), "");  // not an integer
  EXPECT_NE(both(request("FP32", "[1]", "[1e39]")), "");     // beyond FP32
  EXPECT_NE(both(request("FP32", "[1]", "[1e400]")), "");    // beyond a double
  both(request("FP32", "[1]", "[1e-400]"));                  // below one: as the parser says
  both(request("FP32", "[1]", "[1" + std::string(400, '0') + "]"));
  EXPECT_NE(both(request("FP16", "[1]", "[1]")), "");  // not in JSON
  // Declined by the scanner, judged by the parser: the same messages.
  for (const char* data : {"[01]", "[+1]", "[1.]", "[.5]", "[NaN]", "[1,]", "[,1]", "[1 2]", "[[1]2]", "[true]",
                           "[\"1\"]", "[1", "[[[[[[[[1]]]]]]]]", "[-]", "[1e]", "[0x10]"}) {
    EXPECT_NE(both(request("FP32", "[1]", data)), "") << data;
  }
  // A key given twice: declined by the scanner; the parser takes the last, both ways alike.
  EXPECT_EQ(both(R"({"inputs": [{"name": "a", "datatype": "FP32", "shape": [1], "data": [1], "data": [2]}]})"), "");
  EXPECT_EQ(both(R"({"inputs": [], "inputs": [{"name": "a", "datatype": "FP32", "shape": [1], "data": [1]}]})"), "");
  EXPECT_NE(both(R"({"inputs": [{"name": "a", "datatype": "FP32", "shape": [1], "data": [1]}]} trailing)"), "");
  EXPECT_NE(both(std::string(100, '[')), "");
}

TEST(KserveJson, ALargeRequestsDataListIsReadFromTheText) {
  std::string data = "[";
  for (int k = 0; k < 4096; ++k) data += (k ? ", " : "") + std::to_string(k * 0.25);
  data += "]";
  const std::string body =
      R"({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4096], "data": )" + data + "}]}";
  ASSERT_GE(body.size(), 4096u);
  auto fast = parse_infer_http(body, std::nullopt, {"m", 1});  // the default: scanned
  auto whole = parse_infer_http(body, std::nullopt, {"m", 1}, SIZE_MAX);
  ASSERT_TRUE(fast.ok() && whole.ok());
  EXPECT_EQ(fast->request.inputs[0].data, whole->request.inputs[0].data);
  float last;
  std::memcpy(&last, fast->request.inputs[0].data.data() + 4095 * 4, 4);
  EXPECT_EQ(last, 1023.75f);
}

}  // namespace kserve_json_test
}  // namespace ember
