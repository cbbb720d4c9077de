#include "model/model.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "model/sample_inputs.hpp"

namespace ember::gpu {

ByteRange Model::range_bytes(LayerRange range) const {
  if (range.empty()) return {range.first < layer_bytes_.size() ? layer_bytes_[range.first].offset : data_bytes(), 0};
  const uint64_t begin = layer_bytes_[range.first].offset;
  return {begin, layer_bytes_[range.last - 1].end() - begin};
}

Result<std::shared_ptr<const Model>> Model::load(const std::string& dir) {
  const std::string manifest_path = dir + "/" + kManifestFile;
  const std::string weights_path = dir + "/" + kWeightsFile;
  auto manifest = HostBuffer::read_file(manifest_path, kMaxManifestBytes);
  if (!manifest.ok()) return manifest.error();
  auto weights = HostBuffer::read_file(weights_path, UINT64_MAX);
  if (!weights.ok()) return weights.error();
  std::string_view text(reinterpret_cast<const char*>((*manifest)->data()), (*manifest)->size());
  return from_memory(text, std::move(*weights), dir);
}

Result<std::shared_ptr<const Model>> Model::from_memory(std::string_view manifest_json,
                                                        std::shared_ptr<const HostBuffer> weights_file,
                                                        std::string_view source) {
  // model.json first: its errors are the ones a user should see first.
  const std::string dir(source);
  EMBER_ASSIGN_OR_RETURN(Manifest manifest, parse_manifest(manifest_json, dir + "/" + kManifestFile));
  EMBER_ASSIGN_OR_RETURN(auto index, parse_safetensors(weights_file->data(), weights_file->size(),
                                                       weights_file->size(), dir + "/" + kWeightsFile));
  return assemble(std::move(manifest), std::move(index), std::move(weights_file), source);
}

Result<uint64_t> Model::check_dir(const std::string& dir) {
  const std::string wfile = dir + "/" + kWeightsFile;
  EMBER_ASSIGN_OR_RETURN(auto manifest_text, HostBuffer::read_file(dir + "/" + kManifestFile, kMaxManifestBytes));
  std::string_view text(reinterpret_cast<const char*>(manifest_text->data()), manifest_text->size());
  EMBER_ASSIGN_OR_RETURN(Manifest manifest, parse_manifest(text, dir + "/" + kManifestFile));
  // Only the weights file's header is read: the layout checks need offsets, not values.
  std::ifstream f(wfile, std::ios::binary);
  if (!f) return not_found(wfile + ": no such file");
  f.seekg(0, std::ios::end);
  const auto file_size = static_cast<uint64_t>(f.tellg());
  f.seekg(0);
  std::vector<uint8_t> prefix(kSafetensorsPrefixBytes);
  f.read(reinterpret_cast<char*>(prefix.data()), static_cast<std::streamsize>(prefix.size()));
  const size_t got = static_cast<size_t>(f.gcount());
  EMBER_ASSIGN_OR_RETURN(uint64_t n, read_safetensors_header_length(prefix.data(), got, file_size, wfile));
  prefix.resize(kSafetensorsPrefixBytes + n);
  f.read(reinterpret_cast<char*>(prefix.data() + kSafetensorsPrefixBytes), static_cast<std::streamsize>(n));
  if (static_cast<uint64_t>(f.gcount()) != n) return io_error(wfile + ": cannot read the header");
  EMBER_ASSIGN_OR_RETURN(auto index, parse_safetensors(prefix.data(), prefix.size(), file_size, wfile));
  EMBER_RETURN_IF_ERROR(assemble(std::move(manifest), std::move(index), nullptr, dir));
  return file_size;
}

Result<std::shared_ptr<const Model>> Model::assemble(Manifest manifest, SafetensorsIndex index,
                                                     std::shared_ptr<const HostBuffer> weights_file,
                                                     std::string_view source) {
  const std::string dir(source);
  const std::string mfile = dir + "/" + kManifestFile;
  const std::string wfile = dir + "/" + kWeightsFile;
  std::shared_ptr<Model> m(new Model());
  m->source_ = dir;
  m->manifest_ = std::move(manifest);
  EMBER_ASSIGN_OR_RETURN(m->graph_, build_graph(m->manifest_, mfile));
  m->index_ = std::move(index);
  m->file_ = std::move(weights_file);

  // Bind every layer's weight roles to tensors, check their dtype and shape, and check the layout
  // rule: layer after layer, each layer's tensors one contiguous run, nothing unclaimed.
  std::map<std::string, const TensorInfo*, std::less<>> by_name;
  for (const auto& t : m->index_.tensors) by_name[t.name] = &t;
  std::map<std::string, std::string, std::less<>> owner;  // tensor -> layer that uses it
  uint64_t cursor = 0;
  const uint32_t n = m->num_layers();
  m->layer_bytes_.resize(n);
  m->layer_weights_.resize(n);
  for (uint32_t i = 0; i < n; ++i) {
    const LayerSpec& l = m->manifest_.layers[i];
    const std::string where = mfile + ": layers[" + std::to_string(i) + "] '" + l.name + "' (" +
                              std::string(op_name(l.op)) + ")";
    std::vector<const TensorInfo*> tensors;
    std::optional<DType> width;  // of the layer's float weights
    for (const WeightSpec& spec : weight_specs(l.op, l.attrs)) {
      const std::string* name = l.weight(spec.role);
      if (!name) {
        m->layer_weights_[i].push_back(nullptr);
        continue;
      }
      const std::string field = where + ": weights." + std::string(spec.role);
      auto it = by_name.find(*name);
      if (it == by_name.end()) return not_found(field + ": tensor '" + *name + "' is not in " + wfile);
      const TensorInfo* t = it->second;
      if (auto [o, fresh] = owner.emplace(*name, l.name); !fresh) {
        return invalid_argument(field + ": tensor '" + *name + "' is already used by layer '" + o->second +
                                "'; each layer must own its bytes (store tied weights once per layer)");
      }
      const bool exact = exact_weights(l.op);
      if (exact ? t->desc.dtype != spec.dtype : !is_float(t->desc.dtype)) {
        return unsupported(field + ": tensor '" + *name + "' is " + std::string(dtype_name(t->desc.dtype)) +
                           ", expected " + (exact ? std::string(dtype_name(spec.dtype))
                                                  : std::string("float32, float16 or bfloat16")));
      }
      if (!exact) {
        if (!width) width = t->desc.dtype;
        if (*width != t->desc.dtype) {
          return unsupported(field + ": tensor '" + *name + "' is " + std::string(dtype_name(t->desc.dtype)) +
                             " but the layer's other weights are " + std::string(dtype_name(*width)) +
                             " (one width per layer)");
        }
      }
      if (t->desc.shape != spec.shape) {
        return invalid_argument(field + ": tensor '" + *name + "' has shape " + t->desc.shape.to_string() +
                                " but the op's attributes need " + spec.shape.to_string());
      }
      m->layer_weights_[i].push_back(t);
      tensors.push_back(t);
    }
    m->manifest_.layers[i].attrs.weights = width.value_or(DType::f32);
    std::sort(tensors.begin(), tensors.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->data.offset < b->data.offset; });
    m->layer_bytes_[i] = {cursor, 0};
    for (const TensorInfo* t : tensors) {
      if (t->data.offset != cursor) {
        return corrupt(wfile + ": tensor '" + t->name + "' of layer '" + l.name + "' starts at data byte " +
                       std::to_string(t->data.offset) + ", expected " + std::to_string(cursor) +
                       ": each layer's tensors must be contiguous and in layer order");
      }
      cursor = t->data.end();
    }
    m->layer_bytes_[i].length = cursor - m->layer_bytes_[i].offset;
  }
  EMBER_RETURN_IF_ERROR(m->bind_trailing(by_name, owner, cursor, mfile, wfile));
  for (const auto& t : m->index_.tensors) {
    if (!owner.count(t.name)) return invalid_argument(wfile + ": tensor '" + t.name + "' is not used by any layer");
  }
  return std::shared_ptr<const Model>(std::move(m));
}

Status Model::bind_trailing(const std::map<std::string, const TensorInfo*, std::less<>>& by_name,
                            std::map<std::string, std::string, std::less<>>& owner, uint64_t layers_end,
                            const std::string& mfile, const std::string& wfile) {
  if (!manifest_.generation) return Status::OK();
  const GenerationSpec& g = *manifest_.generation;
  const std::pair<const std::string*, ByteRange*> files[] = {{&g.tokenizer, &tokenizer_},
                                                             {&g.tokenizer_config, &tokenizer_config_}};
  for (const auto& [name, range] : files) {
    if (name->empty()) continue;
    const std::string field = mfile + ": generation: tensor '" + *name + "'";
    auto it = by_name.find(*name);
    if (it == by_name.end()) return not_found(field + " is not in " + wfile);
    const TensorInfo* t = it->second;
    if (auto [o, fresh] = owner.emplace(*name, "generation"); !fresh) {
      return invalid_argument(field + " is a weight of layer '" + o->second + "'; the tokenizer's bytes are no layer's");
    }
    if (t->desc.dtype != DType::u8 || t->desc.shape.rank != 1) {
      return invalid_argument(field + " is " + std::string(dtype_name(t->desc.dtype)) + t->desc.shape.to_string() +
                              "; a file's bytes are uint8 [bytes]");
    }
    if (t->data.offset < layers_end) {
      return invalid_argument(field + " starts at data byte " + std::to_string(t->data.offset) +
                              ", inside the layers' bytes (which end at " + std::to_string(layers_end) +
                              "): the tokenizer's bytes come after every layer's");
    }
    *range = t->data;
  }
  return Status::OK();
}

Result<std::vector<std::optional<TensorDesc>>> Model::check_inputs(const std::vector<TensorDesc>& inputs) const {
  const auto& declared = manifest_.inputs;
  if (inputs.size() != declared.size()) {
    return invalid_argument("model '" + manifest_.name + "' takes " + std::to_string(declared.size()) +
                            " input(s), got " + std::to_string(inputs.size()));
  }
  std::vector<std::optional<TensorDesc>> values(graph_.value_names.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TensorSpec& d = declared[i];
    if (inputs[i].dtype != d.dtype) {
      return invalid_argument("input '" + d.name + "' must be " + std::string(dtype_name(d.dtype)) + ", got " +
                              std::string(dtype_name(inputs[i].dtype)));
    }
    if (!inputs[i].shape.matches(d.shape) || inputs[i].shape.has_wildcard() || inputs[i].shape.numel() <= 0) {
      return invalid_argument("input '" + d.name + "' has shape " + inputs[i].shape.to_string() + ", expected " +
                              d.shape.to_string() + " (-1: any size)");
    }
    values[i] = inputs[i];
  }
  Status st = infer_range(manifest_, graph_, {0, num_layers()}, values);
  if (!st.ok()) return st.error();
  return values;
}

std::string repository_version_dir(const std::string& root, const std::string& model, uint32_t version) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path folder = fs::path(root) / model;
  if (version == 1 && fs::exists(folder / kManifestFile, ec)) return folder.string();
  const fs::path dir = folder / std::to_string(version);
  return fs::exists(dir / kManifestFile, ec) ? dir.string() : std::string();
}

std::string stage_name(const std::string& model, LayerRange range) {
  return model + "#" + std::to_string(range.first) + "-" + std::to_string(range.last);
}

Result<std::shared_ptr<const Model>> Model::stage(const std::shared_ptr<const Model>& whole, LayerRange range) {
  if (range.empty() || range.last > whole->num_layers()) {
    return invalid_argument("stage [" + std::to_string(range.first) + ", " + std::to_string(range.last) +
                            ") of model '" + whole->manifest().name + "' with " + std::to_string(whole->num_layers()) +
                            " layers");
  }
  const Graph& g = whole->graph();
  // Value shapes at two sizes of the free dims: a dim that differs is free (-1) in the stage.
  auto shapes_at = [&](int64_t batch, int64_t seq) { return whole->check_inputs(concrete_inputs(*whole, batch, seq)); };
  EMBER_ASSIGN_OR_RETURN(auto a, shapes_at(2, 3));
  EMBER_ASSIGN_OR_RETURN(auto b, shapes_at(5, 7));
  auto spec_of = [&](uint32_t v) {
    TensorSpec t{g.value_names[v], a[v]->dtype, a[v]->shape};
    for (int i = 0; i < t.shape.rank; ++i)
      if (a[v]->shape[i] != b[v]->shape[i]) t.shape[i] = -1;
    return t;
  };
  Manifest m;
  m.name = stage_name(whole->manifest().name, range);
  m.description =
      "layers [" + std::to_string(range.first) + ", " + std::to_string(range.last) + ") of " + whole->manifest().name;
  m.serving = whole->manifest().serving;
  // A stage is no generative model of its own (other inputs and outputs), and carries no tokenizer.
  m.generation.reset();
  for (uint32_t v : g.range_inputs(range)) m.inputs.push_back(spec_of(v));
  for (uint32_t v : g.range_outputs(range)) m.outputs.push_back(spec_of(v));
  m.layers.assign(whole->manifest().layers.begin() + range.first, whole->manifest().layers.begin() + range.last);

  const ByteRange bytes = whole->range_bytes(range);
  SafetensorsIndex index;
  index.header_bytes = whole->weights_index().header_bytes;
  index.data_offset = whole->data_offset() + bytes.offset;
  index.data_bytes = bytes.length;
  for (const TensorInfo& t : whole->weights_index().tensors) {
    if (t.data.offset < bytes.offset || t.data.end() > bytes.end() ||
        (t.data.length == 0 && t.data.offset == bytes.end())) {
      continue;
    }
    TensorInfo s = t;
    s.data.offset -= bytes.offset;
    index.tensors.push_back(std::move(s));
  }
  // Keep only the tensors the stage's layers name (a zero-length tensor at a boundary belongs to one side).
  std::set<std::string, std::less<>> named;
  for (const LayerSpec& l : m.layers)
    for (const WeightBinding& w : l.weights) named.insert(w.tensor);
  std::erase_if(index.tensors, [&](const TensorInfo& t) { return !named.count(t.name); });
  auto built = assemble(std::move(m), std::move(index), whole->file(), whole->source());
  if (!built.ok()) return built.error().with_context("cutting stage " + stage_name(whole->manifest().name, range));
  return built;
}

}  // namespace ember::gpu
