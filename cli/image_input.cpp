#include "cli/image_input.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace ember::cli {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

/// Reads the header's fields past the magic; `pos` ends on the byte after the last field.
class HeaderReader {
 public:
  HeaderReader(std::string_view bytes, size_t pos) : bytes_(bytes), pos_(pos) {}

  /// Whitespace and comments, then a decimal number <= limit.
  Result<int64_t> number(const char* what, int64_t limit) {
    bool skipped = false;
    while (pos_ < bytes_.size()) {
      if (is_space(bytes_[pos_])) {
        ++pos_;
        skipped = true;
      } else if (bytes_[pos_] == '#') {
        while (pos_ < bytes_.size() && bytes_[pos_] != '\n') ++pos_;
        skipped = true;
      } else {
        break;
      }
    }
    if (pos_ >= bytes_.size()) return corrupt(std::string("header ends before its ") + what);
    if (!skipped) return corrupt(std::string("no whitespace before the ") + what);
    int64_t v = 0;
    const size_t start = pos_;
    while (pos_ < bytes_.size() && bytes_[pos_] >= '0' && bytes_[pos_] <= '9') {
      v = v * 10 + (bytes_[pos_] - '0');
      if (v > limit) return corrupt(std::string(what) + " above " + std::to_string(limit));
      ++pos_;
    }
    if (pos_ == start) return corrupt(std::string(what) + " is not a decimal number");
    return v;
  }

  size_t pos() const { return pos_; }

 private:
  std::string_view bytes_;
  size_t pos_;
};

/// Bilinear sampling positions along one axis with half-pixel centres, clamped at the edges.
struct Taps {
  std::vector<int64_t> lo, hi;
  std::vector<float> frac;  // weight of hi
};

Taps taps(int64_t in, int64_t out) {
  Taps t;
  t.lo.resize(static_cast<size_t>(out));
  t.hi.resize(static_cast<size_t>(out));
  t.frac.resize(static_cast<size_t>(out));
  const double scale = static_cast<double>(in) / static_cast<double>(out);
  for (int64_t i = 0; i < out; ++i) {
    const double src = std::clamp((static_cast<double>(i) + 0.5) * scale - 0.5, 0.0, static_cast<double>(in - 1));
    const auto lo = static_cast<int64_t>(std::floor(src));
    t.lo[static_cast<size_t>(i)] = lo;
    t.hi[static_cast<size_t>(i)] = std::min(lo + 1, in - 1);
    t.frac[static_cast<size_t>(i)] = static_cast<float>(src - static_cast<double>(lo));
  }
  return t;
}

std::string input_shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

Result<ImageInput> ImageInput::parse(std::string_view bytes) {
  if (bytes.size() < 2 || bytes[0] != 'P' || (bytes[1] != '5' && bytes[1] != '6')) {
    std::string magic;  // the first two bytes, unprintable ones as \xNN
    for (const char c : bytes.substr(0, std::min<size_t>(bytes.size(), 2))) {
      if (c >= 0x20 && c < 0x7f) {
        magic += c;
      } else {
        char hex[8];
        std::snprintf(hex, sizeof hex, "\\x%02x", static_cast<unsigned char>(c));
        magic += hex;
      }
    }
    return unsupported("not a binary PGM (P5) or PPM (P6) file: it starts with '" + magic + "'");
  }
  const int64_t channels = bytes[1] == '5' ? 1 : 3;
  HeaderReader header(bytes, 2);
  EMBER_ASSIGN_OR_RETURN(const int64_t width, header.number("width", kMaxSide));
  EMBER_ASSIGN_OR_RETURN(const int64_t height, header.number("height", kMaxSide));
  EMBER_ASSIGN_OR_RETURN(const int64_t maxval, header.number("maxval", 65535));
  if (width == 0 || height == 0) return corrupt("empty image (" + std::to_string(width) + "x" + std::to_string(height) + ")");
  if (maxval != 255) return unsupported("maxval " + std::to_string(maxval) + ": only 8-bit samples (maxval 255) are read");
  size_t pos = header.pos();
  if (pos >= bytes.size() || !is_space(bytes[pos])) return corrupt("no whitespace byte after maxval");
  ++pos;
  const auto need = static_cast<size_t>(width * height * channels);
  if (bytes.size() - pos < need) {
    return corrupt("truncated: a " + std::to_string(width) + "x" + std::to_string(height) + (channels == 1 ? " gray" : " RGB") +
                   " raster is " + std::to_string(need) + " bytes, the file holds " + std::to_string(bytes.size() - pos));
  }
  std::vector<uint8_t> samples(bytes.begin() + static_cast<std::ptrdiff_t>(pos),
                               bytes.begin() + static_cast<std::ptrdiff_t>(pos + need));
  return ImageInput(width, height, channels, std::move(samples));
}

Result<ImageInput> ImageInput::read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found(path + ": cannot open");
  std::stringstream ss;
  ss << f.rdbuf();
  auto image = parse(ss.str());
  if (!image.ok()) return image.error().with_context(path);
  return image;
}

Result<ImageTensor> ImageInput::to_tensor(const std::vector<int64_t>& input_shape, const Normalisation& norm) const {
  const std::string where = "image input " + input_shape_text(input_shape);
  if (input_shape.size() != 4) return invalid_argument(where + ": not [N, C, H, W]");
  if (input_shape[0] != 1 && input_shape[0] != -1) return invalid_argument(where + ": batch must be 1 or free for one image");
  const int64_t c_out = input_shape[1];
  if (c_out != 1 && c_out != 3) return invalid_argument(where + ": channels must be 1 or 3");
  for (int i = 2; i < 4; ++i) {
    if (input_shape[static_cast<size_t>(i)] == 0 || input_shape[static_cast<size_t>(i)] < -1)
      return invalid_argument(where + ": height and width must be sizes or free (-1)");
  }
  for (const auto* v : {&norm.mean, &norm.std_dev}) {
    if (v->size() != 1 && static_cast<int64_t>(v->size()) != c_out) {
      return invalid_argument(std::string(v == &norm.mean ? "mean" : "std") + " has " + std::to_string(v->size()) +
                              " values; give 1 or one per channel (" + std::to_string(c_out) + ")");
    }
  }
  for (float s : norm.std_dev) {
    if (s == 0.f || !std::isfinite(s)) return invalid_argument("std must be finite and not 0");
  }
  const int64_t h = input_shape[2] == -1 ? height_ : input_shape[2];
  const int64_t w = input_shape[3] == -1 ? width_ : input_shape[3];
  const Taps ty = taps(height_, h), tx = taps(width_, w);

  ImageTensor t;
  t.shape = {1, c_out, h, w};
  t.data.resize(static_cast<size_t>(c_out * h * w));
  float pixel[3];
  for (int64_t y = 0; y < h; ++y) {
    const auto iy = static_cast<size_t>(y);
    for (int64_t x = 0; x < w; ++x) {
      const auto ix = static_cast<size_t>(x);
      for (int64_t c = 0; c < channels_; ++c) {
        const float top = sample(ty.lo[iy], tx.lo[ix], c) * (1.f - tx.frac[ix]) + sample(ty.lo[iy], tx.hi[ix], c) * tx.frac[ix];
        const float bottom = sample(ty.hi[iy], tx.lo[ix], c) * (1.f - tx.frac[ix]) + sample(ty.hi[iy], tx.hi[ix], c) * tx.frac[ix];
        pixel[c] = top * (1.f - ty.frac[iy]) + bottom * ty.frac[iy];
      }
      for (int64_t c = 0; c < c_out; ++c) {
        float v;
        if (channels_ == c_out) {
          v = pixel[c];
        } else if (channels_ == 1) {
          v = pixel[0];
        } else {
          v = 0.299f * pixel[0] + 0.587f * pixel[1] + 0.114f * pixel[2];
        }
        const float mean = norm.mean.size() == 1 ? norm.mean[0] : norm.mean[static_cast<size_t>(c)];
        const float std_dev = norm.std_dev.size() == 1 ? norm.std_dev[0] : norm.std_dev[static_cast<size_t>(c)];
        t.data[static_cast<size_t>((c * h + y) * w + x)] = (v / 255.f - mean) / std_dev;
      }
    }
  }
  return t;
}

}  // namespace ember::cli
