// The metrics snapshot a node ships to gateways (see metrics/metrics.hpp for the type and its
// inspect overloads).
#pragma once

#include "metrics/metrics.hpp"

namespace ember {
using metrics_snapshot = metrics::MetricsSnapshot;
}  // namespace ember
