// ImageInput: a picture from a binary Netpbm file, and the tensor it makes for a model's image
// input. `ember infer --image FILE` sends it; nothing that serves includes it.
//
// Pure: anyone may call it on any thread; it reads only the file `read` is given, never throws,
// never aborts on input: a file that is not what the layout below says is an Error naming what is
// wrong (the caller adds the file's name where `parse` was given bytes).
//
// File layout (Netpbm's binary variants, 8-bit only):
//   1. magic: "P5" (PGM, gray, 1 channel) or "P6" (PPM, RGB, 3 channels); anything else, the ASCII
//      variants P2/P3 and 16-bit files included, is refused
//   2. width, height and maxval in ASCII decimal, each after whitespace; a '#' before maxval starts
//      a comment that runs to the end of its line. 1 <= width, height <= kMaxSide; maxval 255 only
//   3. exactly one whitespace byte
//   4. height rows top to bottom, each width pixels left to right, each `channels` bytes (R, G, B);
//      fewer bytes is a truncated file; bytes after the raster (a next image) are ignored
//
// The tensor (to_tensor), for an input whose shape is [N, C, H, W] (NCHW, float32), -1 a free dim:
//   - N: 1 (a free N, or N = 1); one image fills one batch row
//   - C: 1 or 3. A gray image fills 3 channels with its one, replicated; an RGB image fills 1 channel
//     with its luma, 0.299 R + 0.587 G + 0.114 B (ITU-R BT.601, what Pillow's convert("L") takes)
//   - H, W: where fixed, the image is resized to them bilinearly with half-pixel centres (OpenCV's
//     INTER_LINEAR, ONNX Resize's `linear` with `half_pixel`; no antialiasing when shrinking, so
//     downscale a large picture beforehand); where free, the image's own height or width
//   - value[0][c][y][x] = (sample / 255 - mean[c]) / std[c], mean and std one value for every
//     channel or one per channel. The defaults 0.5, 0.5 map [0, 255] onto [-1, 1] (PaddleOCR's
//     recogniser and classifier); ImageNet models take mean 0.485,0.456,0.406 std 0.229,0.224,0.225.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace ember::cli {

/// How samples become values: per channel, or one value for all. std_dev values must not be 0.
struct Normalisation {
  std::vector<float> mean{0.5f};
  std::vector<float> std_dev{0.5f};
};

/// A float32 tensor in row-major order; data.size() is the product of shape.
struct ImageTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

class ImageInput {
 public:
  /// Largest width or height a file may declare.
  static constexpr int64_t kMaxSide = 1 << 15;

  /// The image in `bytes` (a whole file). corrupt for a truncated or malformed header or raster;
  /// unsupported for another magic or a maxval other than 255.
  static Result<ImageInput> parse(std::string_view bytes);
  /// parse() of the file at `path`, its errors prefixed with the path; not_found when it cannot be
  /// opened.
  static Result<ImageInput> read(const std::string& path);

  int64_t width() const { return width_; }
  int64_t height() const { return height_; }
  /// 1 (gray) or 3 (RGB).
  int64_t channels() const { return channels_; }
  /// The sample of channel c at row y, column x (all in range).
  uint8_t sample(int64_t y, int64_t x, int64_t c) const { return samples_[(y * width_ + x) * channels_ + c]; }

  /// The tensor for an input of `input_shape` (see the top); invalid_argument when the shape is not
  /// [1 or -1, 1 or 3, H, W] or mean or std_dev has neither 1 nor C values or a std_dev is 0.
  Result<ImageTensor> to_tensor(const std::vector<int64_t>& input_shape, const Normalisation& norm) const;

 private:
  ImageInput(int64_t width, int64_t height, int64_t channels, std::vector<uint8_t> samples)
      : width_(width), height_(height), channels_(channels), samples_(std::move(samples)) {}

  int64_t width_ = 0;
  int64_t height_ = 0;
  int64_t channels_ = 0;
  std::vector<uint8_t> samples_;  // height x width x channels, row-major
};

}  // namespace ember::cli
