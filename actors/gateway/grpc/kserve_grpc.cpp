// KServe v2 gRPC messages (see kserve_grpc.hpp).
#include "actors/gateway/grpc/kserve_grpc.hpp"

#include <cstring>
#include <limits>

#include "model/tensor.hpp"

namespace ember {

namespace {

using inference::InferTensorContents;

/// The datatypes Ember runs, by their KServe names only (the protocol has no other spelling).
Result<gpu::DType> kserve_dtype(const std::string& name, const std::string& where) {
  for (uint8_t i = 0; i < static_cast<uint8_t>(gpu::DType::count); ++i) {
    const auto t = static_cast<gpu::DType>(i);
    if (name == gpu::dtype_kserve_name(t)) return t;
  }
  return unsupported(where + ": datatype '" + name + "' is not one Ember runs (FP32, FP16, BF16, INT64, INT32, UINT8)");
}

/// Element count of `shape`, or why it is no tensor's shape. Bounded so that count * 8 bytes fits.
Result<uint64_t> element_count(const google::protobuf::RepeatedField<int64_t>& shape, const std::string& where) {
  if (shape.size() > gpu::Shape::kMaxRank) {
    return invalid_argument(where + ": shape has " + std::to_string(shape.size()) + " dimensions; at most " +
                            std::to_string(gpu::Shape::kMaxRank));
  }
  uint64_t n = 1;
  constexpr uint64_t kMaxElements = uint64_t{1} << 40;
  for (int64_t d : shape) {
    if (d < 0) return invalid_argument(where + ": shape has a negative dimension " + std::to_string(d));
    if (d != 0 && n > kMaxElements / static_cast<uint64_t>(d)) {
      return invalid_argument(where + ": shape has more than 2^40 elements");
    }
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

/// How many elements `c` holds over all its fields, and in which field they are (-1: none, -2: several).
struct ContentsUse {
  uint64_t total = 0;
  int field = -1;
};

ContentsUse contents_use(const InferTensorContents& c) {
  const int sizes[] = {c.bool_contents_size(), c.int_contents_size(),    c.int64_contents_size(),
                       c.uint_contents_size(), c.uint64_contents_size(), c.fp32_contents_size(),
                       c.fp64_contents_size(), c.bytes_contents_size()};
  ContentsUse u;
  for (int i = 0; i < static_cast<int>(std::size(sizes)); ++i) {
    if (sizes[i] == 0) continue;
    u.total += static_cast<uint64_t>(sizes[i]);
    u.field = u.field == -1 ? i + 1 : -2;
  }
  return u;
}

/// The InferTensorContents field number that carries `t` (0: none; FP16 and BF16).
int typed_field(gpu::DType t) {
  switch (t) {
    case gpu::DType::f32:
      return InferTensorContents::kFp32ContentsFieldNumber;
    case gpu::DType::i64:
      return InferTensorContents::kInt64ContentsFieldNumber;
    case gpu::DType::i32:
      return InferTensorContents::kIntContentsFieldNumber;
    case gpu::DType::u8:
      return InferTensorContents::kUintContentsFieldNumber;
    case gpu::DType::f16:
    case gpu::DType::bf16:
    case gpu::DType::count:
      break;
  }
  return 0;
}

const char* field_name(int field) {
  static const char* names[] = {"",
                                "bool_contents",
                                "int_contents",
                                "int64_contents",
                                "uint_contents",
                                "uint64_contents",
                                "fp32_contents",
                                "fp64_contents",
                                "bytes_contents"};
  return field >= 1 && field <= 8 ? names[field] : "contents";
}

template <class T, class Repeated>
void copy_values(const Repeated& values, std::vector<uint8_t>& out) {
  out.resize(static_cast<size_t>(values.size()) * sizeof(T));
  for (int i = 0; i < values.size(); ++i) {
    const T v = static_cast<T>(values.Get(i));
    std::memcpy(out.data() + static_cast<size_t>(i) * sizeof(T), &v, sizeof(T));
  }
}

Status decode_typed(const InferTensorContents& c, gpu::DType dtype, uint64_t count, const std::string& where,
                    std::vector<uint8_t>& out) {
  const int want = typed_field(dtype);
  const std::string type(gpu::dtype_kserve_name(dtype));
  if (want == 0) {
    return invalid_argument(where + ": " + type + " data has no typed contents field; send it in raw_input_contents");
  }
  const ContentsUse use = contents_use(c);
  if (use.field >= 0 && use.field != want) {
    return invalid_argument(where + ": " + type + " data goes in contents." + field_name(want) + ", not contents." +
                            field_name(use.field));
  }
  if (use.field == -2) return invalid_argument(where + ": contents has data in more than one field");
  if (use.total != count) {
    return invalid_argument(where + ": the shape holds " + std::to_string(count) + " elements but contents." +
                            field_name(want) + " has " + std::to_string(use.total));
  }
  switch (dtype) {
    case gpu::DType::f32:
      copy_values<float>(c.fp32_contents(), out);
      break;
    case gpu::DType::i64:
      copy_values<int64_t>(c.int64_contents(), out);
      break;
    case gpu::DType::i32:
      copy_values<int32_t>(c.int_contents(), out);
      break;
    case gpu::DType::u8:
      for (int i = 0; i < c.uint_contents_size(); ++i) {
        if (c.uint_contents(i) > 255) {
          return invalid_argument(where + ": contents.uint_contents[" + std::to_string(i) + "] is " +
                                  std::to_string(c.uint_contents(i)) + ", beyond UINT8");
        }
      }
      copy_values<uint8_t>(c.uint_contents(), out);
      break;
    default:
      break;
  }
  return Status::OK();
}

template <class T, class Repeated>
void append_values(const std::vector<uint8_t>& bytes, Repeated* out) {
  const size_t n = bytes.size() / sizeof(T);
  out->Reserve(static_cast<int>(n));
  for (size_t i = 0; i < n; ++i) {
    T v;
    std::memcpy(&v, bytes.data() + i * sizeof(T), sizeof(T));
    out->Add(v);
  }
}

}  // namespace

Result<uint32_t> parse_model_version(const std::string& text, const char* field) {
  if (text.empty()) return 0u;
  uint64_t v = 0;
  for (char ch : text) {
    if (ch < '0' || ch > '9' || v > std::numeric_limits<uint32_t>::max() / 10) {
      return invalid_argument(std::string(field) + " must be a version number, not '" + text + "'");
    }
    v = v * 10 + static_cast<uint64_t>(ch - '0');
  }
  if (v > std::numeric_limits<uint32_t>::max()) {
    return invalid_argument(std::string(field) + " must be a version number, not '" + text + "'");
  }
  return static_cast<uint32_t>(v);
}

Result<GrpcInferRequest> decode_infer_request(const inference::ModelInferRequest& in) {
  GrpcInferRequest out;
  infer_request& req = out.request;
  if (in.model_name().empty()) return invalid_argument("model_name is empty");
  req.model.name = in.model_name();
  EMBER_ASSIGN_OR_RETURN(req.model.version, parse_model_version(in.model_version(), "model_version"));
  req.id = in.id();
  if (in.inputs_size() == 0)
    return invalid_argument("inputs is empty; an inference request needs at least one input tensor");
  const bool raw = in.raw_input_contents_size() > 0;
  if (raw && in.raw_input_contents_size() != in.inputs_size()) {
    return invalid_argument("raw_input_contents has " + std::to_string(in.raw_input_contents_size()) + " entries for " +
                            std::to_string(in.inputs_size()) + " inputs");
  }
  req.inputs.reserve(static_cast<size_t>(in.inputs_size()));
  for (int i = 0; i < in.inputs_size(); ++i) {
    const auto& t = in.inputs(i);
    const std::string where = "inputs[" + std::to_string(i) + "] (" + t.name() + ")";
    if (t.name().empty()) return invalid_argument("inputs[" + std::to_string(i) + "] has no name");
    EMBER_ASSIGN_OR_RETURN(gpu::DType dtype, kserve_dtype(t.datatype(), where));
    EMBER_ASSIGN_OR_RETURN(uint64_t count, element_count(t.shape(), where));
    tensor_msg msg;
    msg.name = t.name();
    msg.dtype = static_cast<uint8_t>(dtype);
    msg.shape.assign(t.shape().begin(), t.shape().end());
    if (raw) {
      if (t.has_contents() && contents_use(t.contents()).total > 0) {
        return invalid_argument("raw_input_contents and inputs[" + std::to_string(i) +
                                "].contents are both set; send each input's data one way");
      }
      const std::string& bytes = in.raw_input_contents(i);
      const uint64_t want = count * gpu::dtype_size(dtype);
      if (bytes.size() != want) {
        return invalid_argument(where + ": raw_input_contents[" + std::to_string(i) + "] has " +
                                std::to_string(bytes.size()) + " bytes; the shape and datatype need " +
                                std::to_string(want));
      }
      msg.data.assign(bytes.begin(), bytes.end());
    } else {
      EMBER_RETURN_IF_ERROR(decode_typed(t.contents(), dtype, count, where, msg.data));
      out.typed_reply = true;
    }
    req.inputs.push_back(std::move(msg));
  }
  req.outputs.reserve(static_cast<size_t>(in.outputs_size()));
  for (int i = 0; i < in.outputs_size(); ++i) {
    if (in.outputs(i).name().empty()) return invalid_argument("outputs[" + std::to_string(i) + "] has no name");
    req.outputs.push_back(in.outputs(i).name());
  }
  return out;
}

Status encode_infer_reply(const infer_reply& reply, const GrpcInferRequest& asked, inference::ModelInferResponse& out) {
  out.set_model_name(reply.model.name);
  out.set_model_version(std::to_string(reply.model.version));
  out.set_id(reply.id);
  bool typed = asked.typed_reply;
  for (const auto& t : reply.outputs) {
    if (t.dtype >= static_cast<uint8_t>(gpu::DType::count)) {
      return internal_error("output '" + t.name + "' has an unknown dtype code " + std::to_string(t.dtype));
    }
    if (typed_field(static_cast<gpu::DType>(t.dtype)) == 0) typed = false;  // a reply cannot mix the two
  }
  for (const auto& t : reply.outputs) {
    const auto dtype = static_cast<gpu::DType>(t.dtype);
    auto* o = out.add_outputs();
    o->set_name(t.name);
    o->set_datatype(std::string(gpu::dtype_kserve_name(dtype)));
    o->mutable_shape()->Add(t.shape.begin(), t.shape.end());
    if (!typed) {
      out.add_raw_output_contents(reinterpret_cast<const char*>(t.data.data()), t.data.size());
      continue;
    }
    auto* c = o->mutable_contents();
    switch (dtype) {
      case gpu::DType::f32:
        append_values<float>(t.data, c->mutable_fp32_contents());
        break;
      case gpu::DType::i64:
        append_values<int64_t>(t.data, c->mutable_int64_contents());
        break;
      case gpu::DType::i32:
        append_values<int32_t>(t.data, c->mutable_int_contents());
        break;
      case gpu::DType::u8:
        append_values<uint8_t>(t.data, c->mutable_uint_contents());
        break;
      default:
        break;
    }
  }
  return Status::OK();
}

void encode_model_metadata(const std::string& name, const std::vector<uint32_t>& versions,
                           const ModelSignature& signature, inference::ModelMetadataResponse& out,
                           std::string_view platform) {
  out.set_name(name);
  for (uint32_t v : versions) out.add_versions(std::to_string(v));
  out.set_platform(std::string(platform));
  auto add = [](const gpu::TensorSpec& spec, inference::ModelMetadataResponse::TensorMetadata* t) {
    t->set_name(spec.name);
    t->set_datatype(std::string(gpu::dtype_kserve_name(spec.dtype)));
    for (int i = 0; i < spec.shape.rank; ++i) t->add_shape(spec.shape[i]);
  };
  for (const auto& s : signature.inputs) add(s, out.add_inputs());
  for (const auto& s : signature.outputs) add(s, out.add_outputs());
}

Result<uint32_t> decode_load_parameters(
    const google::protobuf::Map<std::string, inference::ModelRepositoryParameter>& parameters) {
  uint32_t replicas = 0;
  for (const auto& [name, value] : parameters) {
    if (name != "replicas") return invalid_argument("unknown load parameter '" + name + "' (Ember reads 'replicas')");
    if (value.parameter_choice_case() != inference::ModelRepositoryParameter::kInt64Param || value.int64_param() < 1 ||
        value.int64_param() > 1024) {
      return invalid_argument("parameter 'replicas' must be an int64_param in 1..1024");
    }
    replicas = static_cast<uint32_t>(value.int64_param());
  }
  return replicas;
}

}  // namespace ember
