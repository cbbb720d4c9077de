// libFuzzer target for config/: parse_cluster_config (the whole file: manager, gateway, node,
// devices, transfer and binding sections, through yaml-cpp), parse_devices_config (the `devices:`
// section alone), parse_workflow (workflow.json) and the unit parsers of base/units.cpp, all on the
// same text.
//
// Input: the text of an ember.yaml; the unit parsers also read it whole, as they would read one
// YAML scalar or command-line value. Nothing may throw out of them. On success a ClusterConfig or
// DevicesConfig must pass validate(); a workflow's steps must each come after every step they read,
// read only workflow inputs and steps, and be at most kMaxWorkflowSteps; a byte size must print (format_bytes); a
// bandwidth must be a non-negative number; failures of the file parsers name the file.
#include <cmath>

#include "base/units.hpp"
#include "config/cluster_config.hpp"
#include "config/device_config.hpp"
#include "config/workflow_config.hpp"
#include "tests/fuzz/fuzz_common.hpp"

using namespace ember;

namespace {
constexpr std::string_view kSource = "fuzz-node.yaml";
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text = fuzz::as_text(data, size);

  auto cluster = parse_cluster_config(text, kSource);
  if (cluster.ok()) {
    EMBER_FUZZ_CHECK(validate(*cluster, kSource).ok());
  } else {
    EMBER_FUZZ_CHECK(cluster.error().message().starts_with(kSource));
  }

  auto devices = parse_devices_config(text, kSource);
  if (devices.ok()) {
    EMBER_FUZZ_CHECK(validate(*devices, kSource).ok());
    EMBER_FUZZ_CHECK(devices->kind == DeviceKind::automatic || devices->kind == DeviceKind::sim ||
                     devices->kind == DeviceKind::cuda);
  } else {
    EMBER_FUZZ_CHECK(devices.error().message().starts_with(kSource));
  }

  auto workflow = parse_workflow(text, "fuzz", "fuzz/workflow.json");
  if (workflow.ok()) {
    EMBER_FUZZ_CHECK(!workflow->steps.empty() && workflow->steps.size() <= kMaxWorkflowSteps);
    EMBER_FUZZ_CHECK(!workflow->outputs.empty());
    for (size_t i = 0; i < workflow->steps.size(); ++i) {
      for (size_t a : workflow->steps[i].after) EMBER_FUZZ_CHECK(a < i);
    }
  } else {
    EMBER_FUZZ_CHECK(workflow.error().message().starts_with("fuzz/workflow.json"));
  }

  if (auto bytes = parse_bytes(text); bytes.ok()) {
    EMBER_FUZZ_CHECK(!format_bytes(*bytes).empty());
  }
  if (auto bw = parse_bandwidth(text); bw.ok()) {
    EMBER_FUZZ_CHECK(!std::isnan(*bw) && *bw >= 0);
  }
  (void)parse_duration_us(text);
  if (auto number = parse_number(text); number.ok()) {
    EMBER_FUZZ_CHECK(std::isfinite(*number));
  }
  return 0;
}
