// The ONNX window ops: Conv, ConvTranspose, MaxPool, AveragePool, GlobalAveragePool and
// GlobalMaxPool, over one or two spatial dims. Ember's are 2-d (NCHW): a 1-d op's input [N, C, L]
// is reshaped to [N, C, 1, L], the op runs with a kernel of height 1, and its output is reshaped
// back. Ember pads both sides of a dim alike (and a pool by at most half its kernel): what ONNX
// pads beyond that becomes a pad layer before the op (zeros for convolutions and counted
// averages, the lowest float for max pools); a transposed convolution's extra padding is cropped
// by a slice after it. What cannot be expressed so is refused: an average that excludes padding
// Ember would have to add, extra padding with ceil_mode, and a ceil_mode window count that ONNX's
// formula and PyTorch's (which Ember follows) disagree on. Before opset 10 the pools have no
// ceil_mode (and MaxPool no dilations); one that has them anyway is refused by name.
#include <cfloat>

#include "importer/fold.hpp"
#include "importer/lower.hpp"
#include "importer/onnx_attrs.hpp"

namespace ember::importer {

namespace {

using gpu::OpKind;

// Ember's attributes are integers in 0..INT32_MAX (model/ops.cpp).
Status in_range(const char* what, int64_t v, int64_t min) {
  if (v < min || v > INT32_MAX) return invalid_argument(std::string(what) + " " + std::to_string(v) + " is out of range");
  return Status::OK();
}

// The geometry of a window op, always 2-d: a 1-d op's height is a dummy of size 1.
struct Window {
  int spatial = 2;  // the ONNX op's spatial dims: 1 or 2
  int64_t kernel[2] = {1, 1}, stride[2] = {1, 1}, dilation[2] = {1, 1};
  int64_t begin[2] = {0, 0}, end[2] = {0, 0};  // ONNX's pads
  bool symmetric() const { return begin[0] == end[0] && begin[1] == end[1]; }
};

Status need_spatial(const Value& x, const char* op) {
  if (x.dims.rank() == 3 || x.dims.rank() == 4) return Status::OK();
  return unsupported("not supported yet: " + std::string(op) + " over a rank-" + std::to_string(x.dims.rank()) +
                     " input (Ember's window ops are 1-d or 2-d)");
}

// Strides, dilations and pads of a window op with `kernel` over x's spatial dims.
Result<Window> read_window(NodeAttrs& a, const Value& x, const std::vector<int64_t>& kernel, bool dilations) {
  Window w;
  w.spatial = x.dims.rank() - 2;
  const size_t s = static_cast<size_t>(w.spatial);
  const auto strides = a.ints("strides", std::vector<int64_t>(s, 1));
  const auto dil = dilations ? a.ints("dilations", std::vector<int64_t>(s, 1)) : std::vector<int64_t>(s, 1);
  auto pads = a.ints("pads", std::vector<int64_t>(2 * s, 0));
  const std::string auto_pad = a.text("auto_pad", "NOTSET");
  if (kernel.size() != s || strides.size() != s || dil.size() != s || pads.size() != 2 * s) {
    return invalid_argument("kernel " + list_text(kernel) + ", strides " + list_text(strides) + ", dilations " +
                            list_text(dil) + " or pads " + list_text(pads) + " do not fit " + std::to_string(s) +
                            " spatial dims");
  }
  for (size_t i = 0; i < s; ++i) {
    EMBER_RETURN_IF_ERROR(in_range("kernel", kernel[i], 1));
    EMBER_RETURN_IF_ERROR(in_range("stride", strides[i], 1));
    EMBER_RETURN_IF_ERROR(in_range("dilation", dil[i], 1));
  }
  if (auto_pad == "VALID") {
    pads.assign(2 * s, 0);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t i = 0; i < s; ++i) {
      const int d = 2 + static_cast<int>(i);
      if (!x.dims.fixed(d)) return unsupported("not supported yet: auto_pad " + auto_pad + " over a free spatial dim");
      const int64_t in = x.dims.a[d], st = strides[i];
      const int64_t total = std::max<int64_t>(0, ((in + st - 1) / st - 1) * st + (kernel[i] - 1) * dil[i] + 1 - in);
      pads[i] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      pads[i + s] = total - pads[i];
    }
  } else if (auto_pad != "NOTSET") {
    return invalid_argument("auto_pad '" + auto_pad + "' is not an ONNX value");
  }
  const size_t off = 2 - s;  // a 1-d op fills index 1 (width)
  for (size_t i = 0; i < s; ++i) {
    EMBER_RETURN_IF_ERROR(in_range("pad", pads[i], 0));
    EMBER_RETURN_IF_ERROR(in_range("pad", pads[i + s], 0));
    w.kernel[off + i] = kernel[i];
    w.stride[off + i] = strides[i];
    w.dilation[off + i] = dil[i];
    w.begin[off + i] = pads[i];
    w.end[off + i] = pads[i + s];
  }
  return w;
}

// x as Ember's 2-d ops take it: itself, or [N, C, L] as [N, C, 1, L].
Result<Value> lift(Converter& c, const Value& x, const std::string& hint) {
  if (x.dims.rank() == 4) return x;
  Dims d;
  d.a.rank = d.b.rank = 4;
  for (int i = 0, k = 0; i < 4; ++i) {
    d.a[i] = i == 2 ? 1 : x.dims.a[k];
    d.b[i] = i == 2 ? 1 : x.dims.b[k];
    k += i == 2 ? 0 : 1;
  }
  return c.reshape(hint + ".as_2d", x, d);
}

// Defines output 0 of `n` as `y`, reshaped back to 1-d when the op was.
Status define_lowered(Converter& c, const onnx::NodeProto& n, const Window& w, Value y) {
  if (w.spatial == 2) {
    c.define(n, 0, std::move(y));
    return Status::OK();
  }
  Dims d;
  for (int i = 0; i < 4; ++i) {
    if (i == 2) continue;
    d.a[d.a.rank++] = y.dims.a[i];
    d.b[d.b.rank++] = y.dims.b[i];
  }
  EMBER_ASSIGN_OR_RETURN(Value back, c.reshape(layer_hint(n), y, d));
  c.define(n, 0, std::move(back));
  return Status::OK();
}

// Pads x (4-d) by the part of the window's pads Ember's op does not take (`kept` per side), with `value`.
Result<Value> pad_extra(Converter& c, const std::string& hint, const Value& x, const Window& w, const int64_t kept[2],
                        float value) {
  gpu::LayerAttrs attrs;
  attrs.num_pads = 8;
  for (int i = 0; i < 2; ++i) {
    attrs.pads[2 + i] = w.begin[i] - kept[i];
    attrs.pads[6 + i] = w.end[i] - kept[i];
  }
  attrs.alpha = value;
  return c.add_layer(hint + ".pad", OpKind::pad, attrs, {&x}, {});
}

// A Conv's or ConvTranspose's operands: X an activation with spatial dims, W a constant of X's
// rank (`layout` names its dims in the message), B an optional constant.
struct ConvOperands {
  const Value* x = nullptr;
  std::shared_ptr<const Constant> w, b;
};

Result<ConvOperands> conv_operands(Converter& c, const onnx::NodeProto& n, const char* what, const char* layout) {
  ConvOperands o;
  EMBER_ASSIGN_OR_RETURN(o.x, c.activation_input(n, 0, "X"));
  EMBER_ASSIGN_OR_RETURN(o.w, c.constant_input(n, 1, "W"));
  EMBER_RETURN_IF_ERROR(need_spatial(*o.x, what));
  const int rank = o.x->dims.rank();
  if (static_cast<int>(o.w->dims.size()) != rank) {
    return invalid_argument("W is " + o.w->describe() + ", expected " + layout + " of rank " + std::to_string(rank));
  }
  if (c.input(n, 2)) {
    EMBER_ASSIGN_OR_RETURN(o.b, c.constant_input(n, 2, "B"));
  }
  return o;
}

Status convert_conv(Converter& c, const onnx::NodeProto& n) {
  EMBER_ASSIGN_OR_RETURN(ConvOperands ops, conv_operands(c, n, "convolution", "[M, C/group, k...]"));
  const Value* x = ops.x;
  auto w = ops.w;
  const auto& b = ops.b;
  NodeAttrs a(n);
  gpu::LayerAttrs attrs;
  attrs.groups = a.integer("group", 1);
  const std::vector<int64_t> wk(w->dims.begin() + 2, w->dims.end());
  const auto k = a.ints("kernel_shape", wk);
  if (k != wk) return invalid_argument("kernel_shape " + list_text(k) + " does not match W " + w->describe());
  EMBER_ASSIGN_OR_RETURN(const Window win, read_window(a, *x, k, true));
  EMBER_RETURN_IF_ERROR(a.finish());
  if (!x->dims.fixed(1)) return unsupported("not supported yet: a free channel dim");
  EMBER_RETURN_IF_ERROR(in_range("group", attrs.groups, 1));
  attrs.in_channels = x->dims.a[1];
  attrs.out_channels = w->dims[0];
  if (w->dims[1] * attrs.groups != attrs.in_channels || attrs.out_channels % attrs.groups) {
    return invalid_argument("W " + w->describe() + " with group " + std::to_string(attrs.groups) + " does not fit " +
                            std::to_string(attrs.in_channels) + " input channels");
  }
  if (win.spatial == 1) w = std::make_shared<const Constant>(with_dims(*w, {w->dims[0], w->dims[1], 1, w->dims[2]}));
  int64_t kept[2];
  for (int i = 0; i < 2; ++i) {
    kept[i] = std::min(win.begin[i], win.end[i]);
    attrs.kernel[i] = win.kernel[i];
    attrs.stride[i] = win.stride[i];
    attrs.dilation[i] = win.dilation[i];
    attrs.padding[i] = kept[i];
  }
  attrs.bias = b != nullptr;
  std::vector<RoleWeight> weights = {{"weight", w}};
  if (b) weights.push_back({"bias", b});
  EMBER_ASSIGN_OR_RETURN(Value in, lift(c, *x, layer_hint(n)));
  if (!win.symmetric()) {
    EMBER_ASSIGN_OR_RETURN(in, pad_extra(c, layer_hint(n), in, win, kept, 0.f));
  }
  EMBER_ASSIGN_OR_RETURN(Value y, c.add_layer(layer_hint(n) + (win.spatial == 1 ? ".conv2d" : ""), OpKind::conv2d,
                                              attrs, {&in}, weights));
  return define_lowered(c, n, win, std::move(y));
}

Status convert_conv_transpose(Converter& c, const onnx::NodeProto& n) {
  EMBER_ASSIGN_OR_RETURN(ConvOperands ops, conv_operands(c, n, "ConvTranspose", "[C, M/group, k...]"));
  const Value* x = ops.x;
  auto w = ops.w;
  const auto& b = ops.b;
  const int rank = x->dims.rank();
  NodeAttrs a(n);
  gpu::LayerAttrs attrs;
  attrs.groups = a.integer("group", 1);
  const std::vector<int64_t> wk(w->dims.begin() + 2, w->dims.end());
  const auto k = a.ints("kernel_shape", wk);
  if (k != wk) return invalid_argument("kernel_shape " + list_text(k) + " does not match W " + w->describe());
  if (a.has("output_shape")) return unsupported("not supported yet: output_shape (give pads and output_padding)");
  const std::string auto_pad = a.text("auto_pad", "NOTSET");
  if (auto_pad != "NOTSET" && auto_pad != "VALID") return unsupported("not supported yet: auto_pad " + auto_pad);
  const auto out_pad = a.ints("output_padding", std::vector<int64_t>(static_cast<size_t>(rank - 2), 0));
  EMBER_ASSIGN_OR_RETURN(Window win, read_window(a, *x, k, true));
  EMBER_RETURN_IF_ERROR(a.finish());
  if (out_pad.size() != static_cast<size_t>(win.spatial)) return invalid_argument("output_padding " + list_text(out_pad) + " does not fit");
  if (!x->dims.fixed(1)) return unsupported("not supported yet: a free channel dim");
  EMBER_RETURN_IF_ERROR(in_range("group", attrs.groups, 1));
  attrs.in_channels = x->dims.a[1];
  attrs.out_channels = w->dims[1] * attrs.groups;
  if (w->dims[0] != attrs.in_channels || attrs.in_channels % attrs.groups) {
    return invalid_argument("W " + w->describe() + " does not fit " + std::to_string(attrs.in_channels) + " input channels");
  }
  if (win.spatial == 1) w = std::make_shared<const Constant>(with_dims(*w, {w->dims[0], w->dims[1], 1, w->dims[2]}));
  int64_t kept[2];
  for (int i = 0; i < 2; ++i) {
    kept[i] = std::min(win.begin[i], win.end[i]);
    attrs.kernel[i] = win.kernel[i];
    attrs.stride[i] = win.stride[i];
    attrs.dilation[i] = win.dilation[i];
    attrs.padding[i] = kept[i];
  }
  attrs.output_padding[win.spatial == 1 ? 1 : 0] = out_pad[0];
  if (win.spatial == 2) attrs.output_padding[1] = out_pad[1];
  attrs.bias = b != nullptr;
  std::vector<RoleWeight> weights = {{"weight", w}};
  if (b) weights.push_back({"bias", b});
  EMBER_ASSIGN_OR_RETURN(Value in, lift(c, *x, layer_hint(n)));
  EMBER_ASSIGN_OR_RETURN(Value y, c.add_layer(layer_hint(n) + (win.symmetric() && win.spatial == 2 ? "" : ".conv_transpose2d"),
                                              OpKind::conv_transpose2d, attrs, {&in}, weights));
  if (!win.symmetric()) {  // the output loses begin - kept rows at the start and end - kept at the end
    gpu::LayerAttrs crop;
    crop.num_axes = 2;
    for (int i = 0; i < 2; ++i) {
      crop.axes[i] = 2 + i;
      crop.starts[i] = win.begin[i] - kept[i];
      crop.ends[i] = win.end[i] - kept[i] > 0 ? -(win.end[i] - kept[i]) : kMaxDim;
      crop.steps[i] = 1;
    }
    EMBER_ASSIGN_OR_RETURN(y, c.add_layer(layer_hint(n) + (win.spatial == 1 ? ".crop" : ""), OpKind::slice, crop, {&y}, {}));
  }
  return define_lowered(c, n, win, std::move(y));
}

// ONNX's output size of a pooled dim (opsets <= 18, no rule dropping a window that starts in the padding).
int64_t onnx_pooled(int64_t in, int64_t k, int64_t s, int64_t pads, int64_t d, bool ceil_mode) {
  const int64_t span = in + pads - ((k - 1) * d + 1);
  if (span < 0) return 0;
  return (ceil_mode ? (span + s - 1) / s : span / s) + 1;
}

// MaxPool or AveragePool `n` of x; `extra_pad` (or nullptr) is a fused Pad of zeros.
Status pool(Converter& c, const onnx::NodeProto& n, const Value* x, bool max, const int64_t extra_pad[2]) {
  EMBER_RETURN_IF_ERROR(need_spatial(*x, "pooling"));
  NodeAttrs a(n);
  if (max) a.ignore("storage_order");  // the layout of Indices, which is unused
  const auto k = a.ints("kernel_shape");
  // MaxPool's dilations and both pools' ceil_mode arrive with opset 10 (MaxPool-10, AveragePool-10).
  const bool dilations = max && a.since("dilations", 10, c.opset());
  EMBER_ASSIGN_OR_RETURN(Window win, read_window(a, *x, k, dilations));
  gpu::LayerAttrs attrs;
  if (a.since("ceil_mode", 10, c.opset())) attrs.ceil_mode = a.integer("ceil_mode", 0) != 0;
  attrs.count_include_pad = max || a.integer("count_include_pad", 0) != 0;
  EMBER_RETURN_IF_ERROR(a.finish());
  if (max) EMBER_RETURN_IF_ERROR(c.require_unused(n, 1, "Indices"));
  if (extra_pad) {  // a Pad's zeros are values: counted whatever count_include_pad says
    if (win.begin[0] || win.begin[1] || win.end[0] || win.end[1]) {
      return unsupported("not supported yet: a padded AveragePool after a Pad");
    }
    attrs.count_include_pad = true;
    for (int i = 0; i < 2; ++i) win.begin[i] = win.end[i] = extra_pad[i];
  }
  int64_t kept[2];
  bool extra = false;
  for (int i = 0; i < 2; ++i) {
    kept[i] = std::min(win.begin[i], win.end[i]);
    if (2 * kept[i] > win.kernel[i]) kept[i] = 0;  // Ember pads a pool by at most half its kernel
    extra |= win.begin[i] != kept[i] || win.end[i] != kept[i];
    attrs.kernel[i] = win.kernel[i];
    attrs.stride[i] = win.stride[i];
    attrs.dilation[i] = win.dilation[i];
    attrs.padding[i] = kept[i];
  }
  if (extra && attrs.ceil_mode) return unsupported("not supported yet: ceil_mode with pads Ember's pools do not take");
  if (extra && !attrs.count_include_pad) {
    return unsupported("not supported yet: count_include_pad 0 with pads " + list_text({win.begin[0], win.begin[1], win.end[0], win.end[1]}) +
                       " that Ember's avg_pool2d does not take (asymmetric, or over half the kernel)");
  }
  EMBER_ASSIGN_OR_RETURN(Value in, lift(c, *x, layer_hint(n)));
  if (extra) {
    EMBER_ASSIGN_OR_RETURN(in, pad_extra(c, layer_hint(n), in, win, kept, max ? -FLT_MAX : 0.f));
  }
  const OpKind op = max ? OpKind::max_pool2d : OpKind::avg_pool2d;
  if (attrs.ceil_mode) {  // ONNX's size and PyTorch's differ when a last window would start in the padding
    EMBER_ASSIGN_OR_RETURN(const Dims got, c.infer(op, attrs, {&in}));
    for (int lane = 0; lane < 2; ++lane) {
      for (int i = 0; i < 2; ++i) {
        const int64_t dim = lane ? in.dims.b[2 + i] : in.dims.a[2 + i];
        const int64_t want = onnx_pooled(dim, win.kernel[i], win.stride[i], 2 * kept[i], win.dilation[i], true);
        if ((lane ? got.b[2 + i] : got.a[2 + i]) != want) {
          return unsupported("not supported: ceil_mode where ONNX's output size (" + std::to_string(want) +
                             ") differs from PyTorch's, which Ember follows (a last window starting in the padding)");
        }
      }
    }
  }
  EMBER_ASSIGN_OR_RETURN(Value y, c.add_layer(layer_hint(n) + (win.spatial == 1 ? ".pool2d" : ""), op, attrs, {&in}, {}));
  return define_lowered(c, n, win, std::move(y));
}

Status convert_max_pool(Converter& c, const onnx::NodeProto& n) {
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.activation_input(n, 0, "X"));
  return pool(c, n, x, true, nullptr);
}

Status convert_avg_pool(Converter& c, const onnx::NodeProto& n) {
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.activation_input(n, 0, "X"));
  return pool(c, n, x, false, nullptr);
}

// GlobalAveragePool of NCHW: Ember's global_avg_pool; of other ranks, and GlobalMaxPool: a reduce
// over the spatial dims, kept as 1.
Status convert_global_pool(Converter& c, const onnx::NodeProto& n) {
  EMBER_ASSIGN_OR_RETURN(const Value* x, c.activation_input(n, 0, "X"));
  EMBER_RETURN_IF_ERROR(NodeAttrs(n).finish());
  const bool max = n.op_type() == "GlobalMaxPool";
  if (x->dims.rank() < 3) return invalid_argument("the input has rank " + std::to_string(x->dims.rank()) + ", expected N, C and spatial dims");
  if (!max && x->dims.rank() == 4) return define_layer(c, n, OpKind::global_avg_pool, {}, {x});
  gpu::LayerAttrs attrs;
  attrs.fn = static_cast<uint8_t>(max ? gpu::ReduceFn::max : gpu::ReduceFn::mean);
  attrs.keepdims = true;
  for (int i = 2; i < x->dims.rank(); ++i) attrs.axes[attrs.num_axes++] = i;
  return define_layer(c, n, OpKind::reduce, attrs, {x});
}

}  // namespace

Status avg_pool_after_pad(Converter& c, const onnx::NodeProto& n, const Value* x, const int64_t extra_pad[2]) {
  return pool(c, n, x, false, extra_pad);
}

OpConversion conv_conversion(std::string_view op) {
  static const std::pair<std::string_view, OpConversion> kTable[] = {
      {"Conv", convert_conv},
      {"ConvTranspose", convert_conv_transpose},
      {"MaxPool", convert_max_pool},
      {"AveragePool", convert_avg_pool},
      {"GlobalAveragePool", convert_global_pool},
      {"GlobalMaxPool", convert_global_pool},
  };
  for (const auto& [name, fn] : kTable)
    if (name == op) return fn;
  return nullptr;
}

}  // namespace ember::importer
