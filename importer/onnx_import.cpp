#include "importer/onnx_import.hpp"

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "importer/converter.hpp"
#include "importer/onnx_graph.hpp"
#include "model/model.hpp"
#include "model/safetensors.hpp"

namespace ember::importer {

namespace {

namespace fs = std::filesystem;

// model.json's model names: 1-128 characters of [A-Za-z0-9_.-] (model/manifest.hpp).
bool valid_model_name(const std::string& s) {
  if (s.empty() || s.size() > 128) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '.';
    if (!ok) return false;
  }
  return true;
}

std::string default_name(std::string_view source) {
  std::string stem = fs::path(source).stem().string().substr(0, 128);
  for (char& c : stem) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                    c == '-' || c == '.';
    if (!ok) c = '_';
  }
  return stem.empty() ? "model" : stem;
}

// Text from the file for model.json's description: printable ASCII, at most 64 characters (the
// file's strings need not be valid UTF-8, which JSON requires).
std::string printable(std::string_view s) {
  std::string out(s.substr(0, 64));
  for (char& c : out)
    if (c < 0x20 || c > 0x7e) c = '?';
  return out;
}

// Written to a temporary file renamed into place, as write_safetensors does, so a reader never
// sees half a manifest.
Status write_text(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  if (!f) return io_error(tmp + ": cannot create: " + std::strerror(errno));
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  if (std::fclose(f) != 0 || !ok) return io_error(tmp + ": write failed");
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return io_error(path + ": " + ec.message());
  return Status::OK();
}

}  // namespace

Status parse_input_shape(std::string_view spec, std::map<std::string, std::vector<int64_t>>& into) {
  const std::string where = "--input-shape '" + printable(std::string(spec)) + "'";
  const size_t eq = spec.rfind('=');
  if (eq == std::string_view::npos || eq == 0 || eq + 1 == spec.size()) {
    return invalid_argument(where + ": expected NAME=D0,D1,... (each D a size or ?)");
  }
  const std::string name(spec.substr(0, eq));
  std::vector<int64_t> dims;
  std::string_view rest = spec.substr(eq + 1);
  while (true) {
    const size_t comma = rest.find(',');
    const std::string_view d = rest.substr(0, comma);
    if (d == "?" || d == "-1") {
      dims.push_back(-1);
    } else {
      int64_t v = 0;
      bool ok = !d.empty() && d.size() <= 10;
      for (char c : d) ok = ok && c >= '0' && c <= '9';
      if (ok) v = std::stoll(std::string(d));
      if (!ok || v < 1 || v > INT32_MAX) return invalid_argument(where + ": dim '" + std::string(d) + "' is not a size or ?");
      dims.push_back(v);
    }
    if (comma == std::string_view::npos) break;
    rest = rest.substr(comma + 1);
  }
  if (dims.size() > static_cast<size_t>(gpu::Shape::kMaxRank)) return invalid_argument(where + ": at most 6 dims");
  if (!into.emplace(name, std::move(dims)).second) return invalid_argument(where + ": input '" + name + "' given twice");
  return Status::OK();
}

Result<Imported> convert_onnx(std::string_view bytes, const std::string& model_dir, const ImportOptions& options,
                              std::string_view source) {
  ImportOptions o = options;
  if (o.name.empty()) o.name = default_name(source);
  if (!valid_model_name(o.name)) {
    return invalid_argument("model name '" + o.name + "' must be 1-128 characters of A-Z a-z 0-9 _ . -");
  }
  if (o.batch_dim >= gpu::Shape::kMaxRank) {
    return invalid_argument("--batch-dim " + std::to_string(o.batch_dim) + ": inputs have at most 6 dims");
  }
  EMBER_ASSIGN_OR_RETURN(OnnxGraph graph, read_onnx(bytes, source));
  Converter converter(graph, o, model_dir, std::string(source));
  EMBER_ASSIGN_OR_RETURN(Imported imported, converter.run());
  std::string about = "imported from " + printable(fs::path(source).filename().string()) + " (ONNX opset " +
                      std::to_string(graph.opset);
  if (!graph.model.producer_name().empty()) {
    about += ", made by " + printable(graph.model.producer_name()) + " " + printable(graph.model.producer_version());
  }
  imported.manifest.description = about + ")";
  return imported;
}

Status write_model_dir(const Imported& imported, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return io_error(dir + ": cannot create directory: " + ec.message());
  std::vector<gpu::TensorToWrite> tensors;
  for (const auto& w : imported.weights) {
    const void* data = w.dtype == gpu::DType::f32 ? static_cast<const void*>(w.values->data()) : w.raw->data();
    tensors.push_back({w.tensor, {w.dtype, w.shape}, data});
  }
  const std::string weights = dir + "/" + gpu::kWeightsFile, manifest = dir + "/" + gpu::kManifestFile;
  EMBER_RETURN_IF_ERROR(gpu::write_safetensors(weights, tensors, {{"format", "pt"}, {"ember.importer", "onnx"}}));
  EMBER_RETURN_IF_ERROR(write_text(manifest, gpu::manifest_to_json(imported.manifest)));
  // What a node does when it loads the model, short of reading every byte.
  auto checked = gpu::Model::check_dir(dir);
  if (!checked.ok()) {
    fs::remove(weights, ec);
    fs::remove(manifest, ec);
    return internal_error("the imported model does not load (files removed): " + checked.error().message());
  }
  return Status::OK();
}

Result<Imported> import_onnx_file(const std::string& file, const std::string& dir, const ImportOptions& options) {
  std::error_code ec;
  const uint64_t size = fs::file_size(file, ec);
  if (ec) return not_found(file + ": " + ec.message());
  if (size > static_cast<uint64_t>(INT32_MAX)) {
    return unsupported(file + ": " + std::to_string(size) +
                       " bytes; one protobuf message holds at most 2 GiB (export the weights as external data)");
  }
  std::string bytes(size, '\0');
  std::ifstream in(file, std::ios::binary);
  in.read(bytes.data(), static_cast<std::streamsize>(size));
  if (!in || static_cast<uint64_t>(in.gcount()) != size) return io_error(file + ": cannot read");
  std::string folder = fs::path(file).parent_path().string();
  if (folder.empty()) folder = ".";
  EMBER_ASSIGN_OR_RETURN(Imported imported, convert_onnx(bytes, folder, options, file));
  EMBER_RETURN_IF_ERROR(write_model_dir(imported, dir));
  return imported;
}

}  // namespace ember::importer
