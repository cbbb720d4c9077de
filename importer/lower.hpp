// Helpers the op conversions (importer/lower_*.cpp) share: defining a node's output as a folded
// constant, an alias or a new layer, the inputs an op's older version takes, and the few
// conversions one file hands to another.
//
// Used only inside the importer, on the Converter's thread.
#pragma once

#include <string>
#include <vector>

#include "importer/converter.hpp"

namespace ember::importer {

/// "[1, 2, 3]".
std::string list_text(const std::vector<int64_t>& v);

/// Output `i` of `n` is the constant `value` (or its Error); counted as folded.
Status define_folded(Converter& c, const onnx::NodeProto& n, int i, Result<Constant> value);

/// Output `i` of `n` is `v` unchanged; counted as removed.
Status define_alias(Converter& c, const onnx::NodeProto& n, int i, const Value& v);

/// Output 0 of `n` is a new layer named after the node.
Status define_layer(Converter& c, const onnx::NodeProto& n, gpu::OpKind op, const gpu::LayerAttrs& attrs,
                    const std::vector<const Value*>& inputs, const std::vector<RoleWeight>& weights = {});

/// Before opset `version`, `n`'s op takes only its first `count` inputs (what follows were
/// attributes then, or did not exist): an Error naming both when it has more. OK from `version` on.
Status inputs_before(const Converter& c, const onnx::NodeProto& n, int count, int64_t version);

/// lower_conv.cpp: AveragePool `n` of x after a fused Pad of zeros of `extra_pad` (height, width).
Status avg_pool_after_pad(Converter& c, const onnx::NodeProto& n, const Value* x, const int64_t extra_pad[2]);

}  // namespace ember::importer
