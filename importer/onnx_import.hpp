// `ember model import`: an ONNX model (default domain, opsets 9-17) converted into an Ember model
// directory, DIR/model.json + DIR/weights.safetensors. docs/design/onnx-import.md is the design.
//
// What comes out:
//   - layers in a topological order of the ONNX nodes, each an op of model/ops.hpp. Constant
//     subgraphs (Shape, Gather, Concat, Cast, Unsqueeze, arithmetic ... on constants) are folded,
//     Identity and inference Dropout removed, and a few patterns fused (MatMul + bias Add ->
//     linear, the erf and tanh GELU -> gelu);
//   - weights in layer order, each layer's tensors contiguous and in its op's weight_specs order,
//     named "<layer>.<role>", so a layer range is one byte range (model/model.hpp). A weight that
//     two layers read is written once per layer (duplicated: see the design note for the cost);
//   - free dims: an input dim the ONNX graph leaves symbolic (dim_param, or no dim_value) is -1,
//     and so is every output dim that follows from one. --batch-dim N frees dim N of every input
//     even where the graph fixed it; --input-shape NAME=D0,D1,... sets an input's dims outright
//     (a size fixes a dim the graph left free, `?` frees one), for a graph whose free dims Ember
//     cannot keep free (an image CNN exported with free height and width, whose feature maps only
//     line up at multiples of its stride).
//
// What is refused, at import and never at serve time: every node whose op, attributes or operands
// Ember cannot run, all of them listed in one Error ("node '/layer1/Mul' (Mul): not supported yet:
// ..."), and the malformed files onnx_graph.hpp and onnx_tensor.hpp describe. After writing, the
// directory is checked as a server loads it (Model::check_dir), so a model that imports serves.
//
// Blocking file I/O on the caller's thread; the CLI's, never an actor's. No global state: any
// thread, concurrently for different outputs.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "model/manifest.hpp"

namespace ember::importer {

struct ImportOptions {
  /// The model's name; empty: the file's stem with characters outside [A-Za-z0-9_.-] replaced.
  std::string name;
  /// -1 (default): the graph's own free dims only. N >= 0: dim N of every input of rank > N is free
  /// too (one free dim shared by all inputs), for a graph exported without dynamic axes.
  int batch_dim = -1;
  /// Per graph input name: its dims as imported, one entry per dim of the graph's declared rank;
  /// -1 frees a dim, a size > 0 fixes it (a dim the graph fixed to another size is refused: the
  /// weights were made for it). Wins over batch_dim for that input. A name that is not a graph
  /// input, or a rank that differs, is an error.
  std::map<std::string, std::vector<int64_t>> input_shapes;
};

/// Parses --input-shape's "NAME=D0,D1,..." (each D a size >= 1, or `?` / -1 for a free dim) into
/// `into`; a name given twice is an error. Pure.
Status parse_input_shape(std::string_view spec, std::map<std::string, std::vector<int64_t>>& into);

/// What a conversion did, for the CLI's summary and for tests.
struct ImportStats {
  int64_t opset = 0;
  uint32_t nodes = 0;      // in the ONNX graph
  uint32_t folded = 0;     // evaluated at import (constant subgraphs)
  uint32_t removed = 0;    // Identity, Dropout, and nodes no output needs
  uint32_t fused = 0;      // nodes merged into a fused layer (their layers count in manifest.layers)
  uint64_t parameters = 0; // weight elements written (float32, and constant layers' values), duplicates included
  uint64_t duplicated_bytes = 0;  // bytes written more than once (weights read by several layers)
};

/// A weight as it is written: a float32 tensor (`values`), or, for a `constant` layer's value of
/// another dtype, its bytes (`raw`, little-endian, `dtype`'s width per element). Two layers that
/// read one ONNX weight hold the same `values`.
struct ImportedWeight {
  std::string tensor;
  gpu::Shape shape;
  std::shared_ptr<const std::vector<float>> values;  // dtype float32
  gpu::DType dtype = gpu::DType::f32;
  std::shared_ptr<const std::vector<uint8_t>> raw;   // any other dtype
};

struct Imported {
  gpu::Manifest manifest;
  std::vector<ImportedWeight> weights;  // in file order: layer order, each layer's roles in kernel order
  ImportStats stats;
};

/// Converts the ONNX model in `bytes`. `model_dir`: the folder its external data files are in (""
/// refuses external data). `source` names the model in messages. Validates the manifest it makes
/// (parse_manifest); reads no other file.
Result<Imported> convert_onnx(std::string_view bytes, const std::string& model_dir, const ImportOptions& options,
                              std::string_view source);

/// Writes `imported` as DIR/model.json and DIR/weights.safetensors (creating DIR), then checks DIR
/// as a server would load it. On a failed check the two files are removed.
Status write_model_dir(const Imported& imported, const std::string& dir);

/// Reads FILE, converts it and writes DIR.
Result<Imported> import_onnx_file(const std::string& file, const std::string& dir, const ImportOptions& options);

}  // namespace ember::importer
