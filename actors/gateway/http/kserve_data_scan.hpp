// scan_input_data: the numbers of a KServe v2 inference request's input tensors, read straight from
// the JSON text. A tensor's "data" is most of a large request (tens of thousands of numbers), and a
// general JSON parser spends most of its time there: building a value for each number and
// converting it with strtod. This scanner finds each inputs[i].data list, checks that it holds only
// numbers as JSON writes them and lists of them (nested at most a shape's rank deep), and keeps
// each number's text; the caller parses the rest of the document, with those lists left out, and
// converts the numbers itself (std::from_chars, correctly rounded as strtod is).
//
// It declines (nullopt) whenever the text is not that simple: a "data" holding anything else, a
// number JSON does not allow ("01", "+1", "1.", "NaN"), a key given twice, lists nested too deep,
// text that ends early, objects nested deeper than 64. The caller then parses the body whole, as
// before, so every error reads as it always did. Keys are compared as written: an escaped key is
// left to the full parser. Pure; never throws.
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>
#include <vector>

namespace ember {

struct InputDataSpan {
  size_t input = 0;                       // index into "inputs"
  size_t begin = 0;                       // the list's first byte ('[') in the body
  size_t end = 0;                         // one past its last (']')
  std::vector<std::string_view> numbers;  // each number's text, row-major
};

/// Every inputs[i].data list of `body` (empty when there is none), or nullopt (see the header).
std::optional<std::vector<InputDataSpan>> scan_input_data(std::string_view body);

/// Whether `t` is a number as JSON writes it: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
bool is_json_number(std::string_view t);

}  // namespace ember
