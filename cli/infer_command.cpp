// `ember infer`: a command-line client of the KServe v2 HTTP API. The request is a file, random
// inputs shaped from the model's metadata, or a picture (--image, cli/image_input.hpp); the answer is
// printed as values, or decoded into classes or text (--labels/--decode, cli/output_decoder.hpp).
#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>

#include "base/json_text.hpp"
#include "cli/commands.hpp"
#include "cli/image_input.hpp"
#include "cli/output_decoder.hpp"
#include "model/host_tensor.hpp"

namespace ember::cli {

namespace {

using nlohmann::json;

struct InferOptions {
  std::string url = "http://127.0.0.1:8000";
  std::string model;
  uint32_t version = 0;
  std::string input;
  int64_t batch = 1;
  int64_t seq_len = 16;
  uint64_t seed = 1;
  std::string output;
  int print = 8;
  int timeout_s = 120;
  std::string image;
  Normalisation norm;
  std::string labels;
  std::vector<std::string> add_labels;
  std::string decode;
  DecodeOptions decoding;
};

Result<json> read_request(const std::string& path) {
  if (path.size() > 12 && path.substr(path.size() - 12) == ".safetensors") {
    EMBER_ASSIGN_OR_RETURN(auto tensors, gpu::read_tensor_file(path));
    json req{{"inputs", json::array()}};
    for (const auto& t : tensors) {
      json j;
      gpu::tensor_to_kserve_json(t, j);
      req["inputs"].push_back(std::move(j));
    }
    return req;
  }
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found(path + ": cannot open");
  std::stringstream ss;
  ss << f.rdbuf();
  auto j = parse_json_text(ss.str());
  if (!j.ok()) return j.error().with_context(path);
  return std::move(*j);
}

/// Random inputs shaped from the model's metadata: -1 dims become the batch (first) or the
/// sequence length; floats uniform in [-1, 1), integers 0 or 1 (valid ids for any table).
Result<json> random_request(const json& metadata, const InferOptions& o) {
  std::mt19937_64 rng(o.seed);
  json req{{"inputs", json::array()}};
  for (const auto& in : metadata.value("inputs", json::array())) {
    std::vector<int64_t> shape = in.value("shape", std::vector<int64_t>{});
    int64_t n = 1;
    for (size_t i = 0; i < shape.size(); ++i) {
      if (shape[i] < 0) shape[i] = i == 0 ? o.batch : o.seq_len;
      n *= shape[i];
    }
    const std::string dtype = in.value("datatype", "FP32");
    json data = json::array();
    for (int64_t i = 0; i < n; ++i) {
      if (dtype == "FP32")
        data.push_back(std::uniform_real_distribution<float>(-1.f, 1.f)(rng));
      else
        data.push_back(static_cast<int64_t>(rng() % 2));
    }
    req["inputs"].push_back({{"name", in.value("name", "")}, {"datatype", dtype}, {"shape", shape}, {"data", data}});
  }
  return req;
}

/// The request for a picture: the model's one input, filled by ImageInput (its header says how).
Result<json> image_request(const json& metadata, const ImageInput& image, const InferOptions& o) {
  const json inputs = metadata.value("inputs", json::array());
  if (inputs.size() != 1) {
    return invalid_argument("--image fills a model's one input; '" + o.model + "' has " + std::to_string(inputs.size()));
  }
  const json& in = inputs[0];
  const std::string name = in.value("name", "");
  if (in.value("datatype", "") != "FP32") {
    return invalid_argument("--image fills an FP32 input; '" + name + "' is " + in.value("datatype", "?"));
  }
  auto tensor = image.to_tensor(in.value("shape", std::vector<int64_t>{}), o.norm);
  if (!tensor.ok()) return tensor.error().with_context("--image " + o.image + " for '" + o.model + "'");
  json t{{"name", name}, {"datatype", "FP32"}, {"shape", tensor->shape}};
  t["data"] = std::move(tensor->data);
  json req{{"inputs", json::array()}};
  req["inputs"].push_back(std::move(t));
  return req;
}

/// The decoder of --decode, its labels read: --labels' lines, then each --add-label.
Result<OutputDecoder> make_decoder(const InferOptions& o) {
  std::vector<std::string> labels;
  if (!o.labels.empty()) {
    EMBER_ASSIGN_OR_RETURN(labels, OutputDecoder::read_labels(o.labels));
  }
  labels.insert(labels.end(), o.add_labels.begin(), o.add_labels.end());
  DecodeOptions options = o.decoding;
  options.mode = o.decode == "ctc" ? DecodeMode::ctc : DecodeMode::top;
  auto decoder = OutputDecoder::create(std::move(labels), options);
  if (!decoder.ok()) return decoder.error().with_context("--decode " + o.decode);
  return decoder;
}

/// A response's data as floats, nested arrays (other servers' habit) flattened.
void flatten_into(const json& data, std::vector<float>& out) {
  if (data.is_array()) {
    for (const auto& v : data) flatten_into(v, out);
  } else if (data.is_number()) {
    out.push_back(data.get<float>());
  } else if (data.is_boolean()) {
    out.push_back(data.get<bool>() ? 1.f : 0.f);
  }
}

/// Prints the decoding of the response's first output, a line per row.
int print_decoded(const OutputDecoder& decoder, const json& body, const InferOptions& o) {
  const json outputs = body.value("outputs", json::array());
  if (outputs.empty()) return report(invalid_argument("--decode: the response has no outputs"));
  const json& out = outputs[0];
  std::vector<float> data;
  flatten_into(out.value("data", json::array()), data);
  auto rows = decoder.decode(out.value("shape", std::vector<int64_t>{}), data);
  if (!rows.ok()) {
    return report(rows.error().with_context("--decode " + o.decode + " of output '" + out.value("name", "") + "'" +
                                            (o.labels.empty() ? std::string() : " with --labels " + o.labels)));
  }
  for (size_t r = 0; r < rows->size(); ++r) {
    const DecodedRow& row = (*rows)[r];
    if (o.decode == "ctc") {
      std::printf("text[%zu]: %s (score %.3f)\n", r, json(row.text).dump().c_str(), row.score);
      continue;
    }
    std::printf("top[%zu]:", r);
    for (const auto& c : row.top) {
      std::printf(" %s %.4g (class %lld);", json(c.label).dump().c_str(), c.value, static_cast<long long>(c.index));
    }
    std::printf("\n");
  }
  return 0;
}

int run_infer(const InferOptions& o) {
  httplib::Client client(o.url);
  client.set_read_timeout(o.timeout_s, 0);
  client.set_connection_timeout(5, 0);
  client.set_tcp_nodelay(true);
  // Local input is checked before the server is asked.
  std::optional<OutputDecoder> decoder;
  if (!o.decode.empty()) {
    auto d = make_decoder(o);
    if (!d.ok()) return report(d.error());
    decoder.emplace(std::move(*d));
  }
  std::optional<ImageInput> image;
  if (!o.image.empty()) {
    auto read = ImageInput::read(o.image);
    if (!read.ok()) return report(read.error().with_context("--image"));
    image.emplace(std::move(*read));
  }
  const std::string base =
      "/v2/models/" + o.model + (o.version ? "/versions/" + std::to_string(o.version) : std::string());
  json request;
  if (!o.input.empty()) {
    auto r = read_request(o.input);
    if (!r.ok()) return report(r.error());
    request = std::move(*r);
  } else {
    auto meta = client.Get(base);
    if (!meta) return report(unavailable("cannot reach " + o.url + ": " + httplib::to_string(meta.error())));
    if (meta->status != 200) {
      std::fprintf(stderr, "error: HTTP %d: %s\n", meta->status, meta->body.c_str());
      return meta->status == 404 ? 2 : 1;
    }
    auto parsed = parse_json_text(meta->body);
    if (!parsed.ok()) return report(parsed.error().with_context("model metadata"));
    auto r = image ? image_request(*parsed, *image, o) : random_request(*parsed, o);
    if (!r.ok()) return report(r.error());
    request = std::move(*r);
  }
  const auto start = std::chrono::steady_clock::now();
  auto res = client.Post(base + "/infer", request.dump(), "application/json");
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!res) return report(unavailable("cannot reach " + o.url + ": " + httplib::to_string(res.error())));
  if (res->status != 200) {
    std::fprintf(stderr, "error: HTTP %d: %s\n", res->status, res->body.c_str());
    return res->status >= 500 ? 1 : 2;
  }
  if (!o.output.empty()) {
    std::ofstream(o.output) << res->body << "\n";
  }
  auto body = parse_json_text(res->body);
  if (!body.ok()) return report(body.error().with_context("response"));
  std::printf("model %s version %s: %.2f ms\n", body->value("model_name", "?").c_str(),
              body->value("model_version", "?").c_str(), ms);
  for (const auto& out : body->value("outputs", json::array())) {
    std::printf("output '%s' %s%s:", out.value("name", "").c_str(), out.value("datatype", "").c_str(),
                out.value("shape", json::array()).dump().c_str());
    const auto& data = out.value("data", json::array());
    for (size_t i = 0; i < std::min<size_t>(data.size(), static_cast<size_t>(o.print)); ++i) {
      std::printf(" %s", data[i].dump().c_str());
    }
    if (data.size() > static_cast<size_t>(o.print)) std::printf(" ...");
    std::printf("\n");
  }
  return decoder ? print_decoded(*decoder, *body, o) : 0;
}

}  // namespace

void add_infer_command(CLI::App& app, Runner& runner) {
  auto o = std::make_shared<InferOptions>();
  auto* cmd = app.add_subcommand("infer", "Send an inference request to an Ember (or any KServe v2) server");
  cmd->add_option("--url", o->url, "Server address")->default_val("http://127.0.0.1:8000");
  cmd->add_option("--model", o->model, "Model name")->required();
  cmd->add_option("--version", o->version, "Model version (default: the latest)");
  cmd->add_option("--input", o->input, "A KServe v2 request .json or a .safetensors of inputs (default: random)");
  cmd->add_option("--batch", o->batch, "Batch size of random inputs")->default_val(1);
  cmd->add_option("--seq-len", o->seq_len, "Sequence length of random inputs")->default_val(16);
  cmd->add_option("--seed", o->seed, "Seed of random inputs")->default_val(1);
  cmd->add_option("--output", o->output, "Write the response body to this file");
  cmd->add_option("--print", o->print, "Values of each output to print")->default_val(8);
  cmd->add_option("--timeout", o->timeout_s, "Seconds to wait for the answer")->default_val(120);
  auto* image = cmd->add_option("--image", o->image,
                  "A picture for the model's one FP32 input [N, C, H, W] (NCHW): a binary PGM (P5) or PPM (P6), "
                  "8-bit; gray fills 3 channels replicated, RGB 1 channel with its luma; resized bilinearly "
                  "(half-pixel centres) to a fixed H, W, taken at its own size where they are free")
      ->excludes("--input");
  cmd->add_option("--mean", o->norm.mean,
                  "With --image: value = (pixel/255 - mean) / std, one value or one per channel; the defaults "
                  "map pixels onto [-1, 1] (PaddleOCR); ImageNet models: --mean 0.485,0.456,0.406 "
                  "--std 0.229,0.224,0.225")
      ->delimiter(',')
      ->default_str("0.5")
      ->needs(image);
  cmd->add_option("--std", o->norm.std_dev, "With --image: see --mean")->delimiter(',')->default_str("0.5")->needs(image);
  auto* decode = cmd->add_option("--decode", o->decode,
                  "Decode the first output: top (its [N, C] rows' --top classes, largest first) or ctc "
                  "(greedy CTC of an [N, T, C] output: best class per column, repeats collapsed, --blank "
                  "dropped, the others read as labels: class 1 is the first label when the blank is 0)")
      ->check(CLI::IsMember({"top", "ctc"}));
  cmd->add_option("--labels", o->labels, "With --decode: a text file, one label per line (UTF-8)")->needs(decode);
  cmd->add_option("--add-label", o->add_labels,
                  "With --decode: a label appended after the file's (repeatable, one per use); PaddleOCR's "
                  "recognisers need --add-label ' '")
      ->allow_extra_args(false)
      ->needs(decode);
  cmd->add_option("--top", o->decoding.top, "With --decode top: classes per row")->default_val(5)->needs(decode);
  cmd->add_option("--blank", o->decoding.blank, "With --decode ctc: the blank class")->default_val(0)->needs(decode);
  cmd->callback([o, &runner] { runner = [o] { return run_infer(*o); }; });
}

}  // namespace ember::cli
