// OutputDecoder: what a model's output tensor says, in labels: the top classes of a classifier, or
// the text of a CTC recogniser. `ember infer --labels FILE --decode top|ctc` prints it; nothing
// that serves includes it.
//
// Pure: anyone may call it on any thread; it reads only the labels file `read_labels` is given,
// never throws, never aborts on input: a tensor or labels that do not fit each other are an Error.
//
// Labels: one per line of a UTF-8 text file ('\n', a '\r' before it dropped; no line after a final
// '\n'); label k names class k (top) or the k-th class that is not the blank (ctc). The caller may
// append labels the file lacks (PaddleOCR's recognisers: a space after the file's last line).
//
// Decoding (the classes are the last axis; values are what the model answers, probabilities or
// logits alike):
//   - top: output [C] or [N, C]; per row, the `top` largest values (at most C), largest first, equal
//     values in class order, each with its class and its label (the class number without labels).
//     Labels, when given, must number exactly C.
//   - ctc: output [N, T, C], greedy CTC (Graves et al. 2006, best path): per row, the class of the
//     largest value of each of the T columns; runs of one class collapse to one; the blank class
//     is dropped; what stays is labels joined. Labels must number exactly C - 1: class i < blank
//     is label i, class i > blank is label i - 1 (blank 0: labels start at class 1). The row's score
//     is the mean of the kept columns' largest values (PaddleOCR's confidence), 0 for empty text.
// A shape that is not one of these, data that does not fill it, or labels that do not number the
// classes is invalid_argument naming both counts.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace ember::cli {

enum class DecodeMode { top, ctc };

struct DecodeOptions {
  DecodeMode mode = DecodeMode::top;
  /// top: classes per row, >= 1.
  int64_t top = 5;
  /// ctc: the blank class, >= 0 and below C.
  int64_t blank = 0;
};

/// One class of a top decoding.
struct ClassValue {
  int64_t index = 0;
  float value = 0.f;
  std::string label;
};

/// One row (batch entry) decoded: `top` for top, `text` and `score` for ctc.
struct DecodedRow {
  std::vector<ClassValue> top;
  std::string text;
  float score = 0.f;
};

class OutputDecoder {
 public:
  /// The lines of `text` (see the top).
  static std::vector<std::string> parse_labels(std::string_view text);
  /// parse_labels() of the file at `path`; not_found when it cannot be opened.
  static Result<std::vector<std::string>> read_labels(const std::string& path);

  /// invalid_argument for top < 1, blank < 0, or ctc without labels. `labels` may be empty for top.
  static Result<OutputDecoder> create(std::vector<std::string> labels, const DecodeOptions& options);

  /// One DecodedRow per row of `data`, a row-major tensor of `shape` (see the top).
  Result<std::vector<DecodedRow>> decode(const std::vector<int64_t>& shape, const std::vector<float>& data) const;

 private:
  OutputDecoder(std::vector<std::string> labels, const DecodeOptions& options)
      : labels_(std::move(labels)), options_(options) {}

  std::vector<DecodedRow> decode_top(int64_t rows, int64_t classes, const std::vector<float>& data) const;
  std::vector<DecodedRow> decode_ctc(int64_t rows, int64_t columns, int64_t classes, const std::vector<float>& data) const;

  std::vector<std::string> labels_;
  DecodeOptions options_;
};

}  // namespace ember::cli
