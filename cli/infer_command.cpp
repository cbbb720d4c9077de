// `ember infer`: a command-line client of the KServe v2 HTTP API.
#include <httplib.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "base/json_text.hpp"
#include "cli/commands.hpp"
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

int run_infer(const InferOptions& o) {
  httplib::Client client(o.url);
  client.set_read_timeout(o.timeout_s, 0);
  client.set_connection_timeout(5, 0);
  client.set_tcp_nodelay(true);
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
    auto r = random_request(*parsed, o);
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
  return 0;
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
  cmd->callback([o, &runner] { runner = [o] { return run_infer(*o); }; });
}

}  // namespace ember::cli
