// Layer blocks of a model's graph (AsyFunc §2.2, Fig. 5; issue 19): where a model can be cut so
// that its two sides meet in exactly one tensor.
//
// A cut point k (0 < k < layers) is valid when exactly one value computed before it is read at or
// after it (or is a model output): the layers on either side then meet in one tensor, which is
// what a Body sends its Shadow and gets back (residual blocks stay whole: inside one, the skip
// connection is a second value crossing). Model inputs read on both sides (a transformer's
// attention mask) do not count: every side can be given their rows. A block is the range between
// two consecutive cuts (or the model's ends); a Shadow holds a range of consecutive blocks.
//
// Pure: anyone, any thread.
#pragma once

#include <cstdint>
#include <vector>

#include "model/manifest.hpp"
#include "model/tensor.hpp"

namespace ember::gpu {

/// The valid cut points of `graph`, ascending (see the header).
std::vector<uint32_t> cut_points(const Graph& graph);
/// The blocks between consecutive cut points (the model's ends included), in order.
std::vector<LayerRange> layer_blocks(const Graph& graph);


}  // namespace ember::gpu
