// Folding: ONNX ops evaluated on constants at import, with the ONNX (numpy) semantics, in both
// probe lanes of values.hpp at once. This is what turns an exporter's shape arithmetic
// (Shape -> Gather -> Unsqueeze -> Concat -> Reshape) into a fixed Reshape target.
//
// Integers that differ between the lanes (they depend on a free dim) may be added, multiplied,
// gathered, concatenated and reshaped; they may not be used where the importer needs one number
// (an index, a slice bound, a cast to float): those are Errors. Every function checks its operands
// (ranks, dims, indices in range, no division by zero) and never trusts the file.
//
// Pure; anyone, any thread.
#pragma once

#include <cstdint>
#include <vector>

#include "base/status.hpp"
#include "importer/values.hpp"
#include "model/ops.hpp"

namespace ember::importer {

enum class Arith : uint8_t { add, sub, mul, div };

/// numpy broadcasting of two shapes.
Result<std::vector<int64_t>> broadcast_dims(const std::vector<int64_t>& x, const std::vector<int64_t>& y);

/// x (op) y, broadcasting; both floats or both integers (integer division truncates toward zero).
Result<Constant> fold_arith(Arith op, const Constant& x, const Constant& y);

/// fn(x) elementwise with unary's semantics (model/ops.hpp); x must be floats, except neg, abs and
/// sign, which also take fixed integers, and not, which takes integers (0/1).
Result<Constant> fold_unary(gpu::UnaryFn fn, float alpha, float beta, const Constant& x);

/// fn(x, y) with broadcasting and binary's semantics (model/ops.hpp): arithmetic on two floats, or
/// add/sub/mul/div/min/max on two integer constants (per lane); comparisons on one kind give
/// integers 0/1 per lane; and/or/xor take integers (nonzero is true).
Result<Constant> fold_binary(gpu::BinaryFn fn, const Constant& x, const Constant& y);

/// ONNX Where: cond (integers, nonzero true, fixed) ? x : y, broadcasting all three; x and y one kind.
Result<Constant> fold_where(const Constant& cond, const Constant& x, const Constant& y);

/// ONNX Expand: x broadcast to `shape` (numpy rules; fixed dims).
Result<Constant> fold_expand(const Constant& x, const std::vector<int64_t>& shape);

/// ONNX Gather along `axis` (negative counts from the end); indices must be fixed.
Result<Constant> fold_gather(const Constant& data, const Constant& indices, int64_t axis);

/// ONNX Concat along `axis`: same kind, same rank, dims equal but along `axis`.
Result<Constant> fold_concat(const std::vector<const Constant*>& parts, int64_t axis);

/// ONNX Slice: `axes` empty means 0, 1, ...; `steps` empty means 1s. Bounds are clamped as ONNX says.
Result<Constant> fold_slice(const Constant& data, const std::vector<int64_t>& starts, const std::vector<int64_t>& ends,
                            std::vector<int64_t> axes, std::vector<int64_t> steps);

/// ONNX Transpose; `perm` empty reverses the dims.
Result<Constant> fold_transpose(const Constant& data, std::vector<int64_t> perm);

/// The same elements under new dims (the caller checked that the element counts agree).
Constant with_dims(Constant c, std::vector<int64_t> dims);

/// Cast to float32 (`to_float`) or to int64 (floats truncate toward zero).
Result<Constant> fold_cast(const Constant& c, bool to_float);

/// Normalises `axis` for `rank` (negative counts from the end); an Error when out of range.
Result<int> normalize_axis(int64_t axis, int rank);

/// The integers of a 1-d (or scalar) constant, which must be fixed; `what` names it in errors.
Result<std::vector<int64_t>> fixed_ints(const Constant& c, const char* what);

}  // namespace ember::importer
