// What a kernel launch takes: device addresses, the tensors at them, and one layer's arguments
// (an op of model/ops.hpp's table with its inputs, weights, output and scratch). Built by the
// layer executor after infer_output succeeded; kernels (kernels_cpu.cpp, cuda/) may assume they are
// consistent. Pure value types: trivially copyable, they cross into CUDA kernels by value.
#pragma once

#include <cstdint>

#include "model/ops.hpp"
#include "model/tensor.hpp"

namespace ember::gpu {

/// An address in a device's memory space. Host code never dereferences one; only kernels running
/// on the owning device do.
struct DevicePtr {
  uint64_t addr = 0;
  explicit operator bool() const { return addr != 0; }
  DevicePtr operator+(uint64_t bytes) const { return {addr + bytes}; }
};

struct DeviceTensor {
  TensorDesc desc;
  DevicePtr ptr;
};

/// Everything a kernel launch needs. Built by the executor after infer_output succeeded.
struct KernelArgs {
  OpKind op = OpKind::count;
  LayerAttrs attrs;
  int num_inputs = 0;
  DeviceTensor inputs[kMaxLayerInputs];
  int num_weights = 0;
  DeviceTensor weights[kMaxLayerWeights];  // in weight_specs order; ptr 0 = absent optional weight
  DeviceTensor output;
  DevicePtr workspace;
  uint64_t workspace_bytes = 0;
};

}  // namespace ember::gpu
