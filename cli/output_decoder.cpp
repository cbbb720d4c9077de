#include "cli/output_decoder.hpp"

#include <algorithm>
#include <fstream>
#include <numeric>
#include <sstream>

namespace ember::cli {

namespace {

std::string output_shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

std::vector<std::string> OutputDecoder::parse_labels(std::string_view text) {
  std::vector<std::string> labels;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(start, end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    labels.emplace_back(line);
    start = end + 1;
  }
  return labels;
}

Result<std::vector<std::string>> OutputDecoder::read_labels(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return not_found(path + ": cannot open");
  std::stringstream ss;
  ss << f.rdbuf();
  return parse_labels(ss.str());
}

Result<OutputDecoder> OutputDecoder::create(std::vector<std::string> labels, const DecodeOptions& options) {
  if (options.mode == DecodeMode::top && options.top < 1) return invalid_argument("top must be at least 1");
  if (options.mode == DecodeMode::ctc) {
    if (options.blank < 0) return invalid_argument("blank must be a class, not " + std::to_string(options.blank));
    if (labels.empty()) return invalid_argument("ctc decoding needs labels");
  }
  return OutputDecoder(std::move(labels), options);
}

Result<std::vector<DecodedRow>> OutputDecoder::decode(const std::vector<int64_t>& shape,
                                                      const std::vector<float>& data) const {
  const bool ctc = options_.mode == DecodeMode::ctc;
  if (ctc ? shape.size() != 3 : shape.size() != 1 && shape.size() != 2) {
    return invalid_argument(std::string(ctc ? "ctc decoding needs an output [N, T, C]" : "top decoding needs an output [C] or [N, C]") +
                            "; this one is " + output_shape_text(shape));
  }
  int64_t numel = 1;
  for (int64_t d : shape) {
    if (d < 1) return invalid_argument("output " + output_shape_text(shape) + " has an empty or unknown dimension");
    numel *= d;
  }
  if (static_cast<int64_t>(data.size()) != numel) {
    return invalid_argument("output " + output_shape_text(shape) + " needs " + std::to_string(numel) + " values, it carries " +
                            std::to_string(data.size()));
  }
  const int64_t classes = shape.back();
  const int64_t want_labels = ctc ? classes - 1 : classes;
  if ((ctc || !labels_.empty()) && static_cast<int64_t>(labels_.size()) != want_labels) {
    return invalid_argument(std::to_string(labels_.size()) + " labels for an output of " + std::to_string(classes) +
                            " classes" + (ctc ? " (the blank and one class per label): " : ": ") + "expected " +
                            std::to_string(want_labels));
  }
  if (ctc && options_.blank >= classes) {
    return invalid_argument("blank " + std::to_string(options_.blank) + " is not one of the " + std::to_string(classes) +
                            " classes");
  }
  const int64_t rows = shape.size() == 1 ? 1 : shape[0];
  return ctc ? decode_ctc(rows, shape[1], classes, data) : decode_top(rows, classes, data);
}

std::vector<DecodedRow> OutputDecoder::decode_top(int64_t rows, int64_t classes, const std::vector<float>& data) const {
  std::vector<DecodedRow> out(static_cast<size_t>(rows));
  const int64_t k = std::min(options_.top, classes);
  std::vector<int64_t> order(static_cast<size_t>(classes));
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = data.data() + r * classes;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [row](int64_t a, int64_t b) {
      return row[a] > row[b] || (row[a] == row[b] && a < b);
    });
    for (int64_t i = 0; i < k; ++i) {
      const int64_t c = order[static_cast<size_t>(i)];
      out[static_cast<size_t>(r)].top.push_back(
          {c, row[c], labels_.empty() ? std::to_string(c) : labels_[static_cast<size_t>(c)]});
    }
  }
  return out;
}

std::vector<DecodedRow> OutputDecoder::decode_ctc(int64_t rows, int64_t columns, int64_t classes,
                                                  const std::vector<float>& data) const {
  std::vector<DecodedRow> out(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    DecodedRow& row = out[static_cast<size_t>(r)];
    int64_t previous = -1;
    double sum = 0;
    int64_t kept = 0;
    for (int64_t t = 0; t < columns; ++t) {
      const float* column = data.data() + (r * columns + t) * classes;
      const int64_t best = std::max_element(column, column + classes) - column;
      if (best != previous && best != options_.blank) {
        row.text += labels_[static_cast<size_t>(best < options_.blank ? best : best - 1)];
        sum += column[best];
        ++kept;
      }
      previous = best;
    }
    row.score = kept ? static_cast<float>(sum / static_cast<double>(kept)) : 0.f;
  }
  return out;
}

}  // namespace ember::cli
