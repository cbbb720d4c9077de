// pcie_bench: N models swapped into one device at once (N = 1, 2, 4), their weight groups copied
// over one paced PCIe link either as each swap issues them (all at once, on a stream of its own:
// the copy engine serves commands in issue order, so the first comer holds it) or through the
// device's I/O scheduler (gpu/io_scheduler.hpp: blocks interleaved round robin, in batches), side by
// side in one run. Per model: the time until its first group arrived (its first layer may start)
// and until its last did; and a small request input (64 KiB) issued on another stream a little
// after the swaps began: how long it waited (StreamBox Fig. 17). Then request inputs from pageable
// memory (N = 1 input on the idle link), copied directly against staged through a pinned region
// (gpu/pinned_staging.hpp: a host memcpy, then a copy at the pinned rate). Every byte is checked
// after each run. Not a test: it prints figures for a human to judge.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "gpu/io_scheduler.hpp"
#include "gpu/pinned_staging.hpp"
#include "gpu/sim_device.hpp"

namespace ember::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kMiB = 1ull << 20;

struct Options {
  double pcie_gb_s = 8;
  uint64_t model_mib = 96;
  uint64_t group_kib = 2048;
  uint32_t batch = 6;
  double input_after_ms = 2;
  uint64_t input_kib = 64;
  int rounds = 3;
  double pageable_gb_s = 0;  // 0: the SimDevice default, half the pinned rate
};

double ms_since(Clock::time_point t0, Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(t - t0).count();
}

struct Result {
  std::vector<double> first_ms, done_ms;  // per model
  double input_wait_ms = 0;
};

Result run_once(gpu::SimDevice& device, const Options& o, const std::vector<std::vector<uint8_t>>& hosts,
                gpu::DevicePtr base, bool interleave) {
  const size_t n = hosts.size();
  const uint64_t model_bytes = hosts[0].size(), group = o.group_kib << 10;
  const size_t groups = (model_bytes + group - 1) / group;
  gpu::IoScheduler io(device, {group, o.batch, false});
  std::vector<std::vector<std::unique_ptr<gpu::Event>>> events(n);
  std::vector<std::unique_ptr<gpu::Stream>> streams;
  std::vector<std::shared_ptr<gpu::IoTicket>> tickets(n);
  Result r;
  r.first_ms.assign(n, 0);
  r.done_ms.assign(n, 0);
  const auto t0 = Clock::now();
  for (size_t m = 0; m < n; ++m) {
    std::vector<gpu::CopyPiece> pieces;
    for (size_t g = 0; g < groups; ++g) {
      events[m].push_back(device.create_event());
      const uint64_t at = g * group, len = std::min(group, model_bytes - at);
      pieces.push_back({base + (m * model_bytes + at), hosts[m].data() + at, len, events[m].back().get()});
    }
    if (interleave) {
      tickets[m] = io.submit(std::move(pieces));
      continue;
    }
    streams.push_back(device.create_stream());  // what a swap without the scheduler does
    for (const auto& p : pieces) {
      streams.back()->copy_to_device(p.dst, p.src, p.bytes);
      streams.back()->record(*p.done);
    }
  }
  // The small input, issued a little after the swaps began.
  std::thread input([&] {
    std::vector<uint8_t> bytes(o.input_kib << 10, 7);
    auto s = device.create_stream();
    std::this_thread::sleep_until(t0 + std::chrono::microseconds(static_cast<int64_t>(o.input_after_ms * 1000)));
    const auto issued = Clock::now();
    s->copy_to_device(base + n * model_bytes, bytes.data(), bytes.size());
    (void)s->synchronize();
    r.input_wait_ms = ms_since(issued, Clock::now());
  });
  std::vector<std::thread> watchers;
  for (size_t m = 0; m < n; ++m) {
    watchers.emplace_back([&, m] {
      if (tickets[m]) tickets[m]->wait_issued(1);
      (void)events[m].front()->synchronize();
      r.first_ms[m] = ms_since(t0, Clock::now());
      if (tickets[m]) tickets[m]->wait_issued(groups);
      (void)events[m].back()->synchronize();
      r.done_ms[m] = ms_since(t0, Clock::now());
    });
  }
  for (auto& w : watchers) w.join();
  input.join();
  for (auto& s : streams) (void)s->synchronize();
  for (auto& t : tickets) {
    if (t) (void)t->wait();
  }
  return r;
}

bool bytes_landed(gpu::SimDevice& device, const std::vector<std::vector<uint8_t>>& hosts, gpu::DevicePtr base) {
  auto s = device.create_stream();
  std::vector<uint8_t> back(hosts[0].size());
  for (size_t m = 0; m < hosts.size(); ++m) {
    s->copy_to_host(back.data(), base + m * hosts[0].size(), back.size());
    if (!s->synchronize().ok() || back != hosts[m]) return false;
  }
  return true;
}

double mean(const std::vector<double>& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}
double max_of(const std::vector<double>& v) { return *std::max_element(v.begin(), v.end()); }

/// Inputs from pageable memory: directly against through a pinned staging region, medians of
/// `rounds` copies each, alternating.
int staged_inputs(gpu::SimDevice& device, const Options& o, gpu::DevicePtr base) {
  auto staging = gpu::PinnedStaging::create(device, 16 * kMiB);
  if (!staging.ok()) {
    std::fprintf(stderr, "pcie_bench: %s\n", staging.error().message().c_str());
    return 1;
  }
  std::printf("request inputs from pageable memory (pageable link %.1f GB/s), medians of %d copies:\n",
              device.host_bytes_per_s(nullptr, 0) / 1e9, o.rounds);
  std::printf("%10s %14s %14s %8s %6s\n", "input", "direct", "staged", "ratio", "bytes");
  for (uint64_t kib : {64, 1024, 16384}) {
    std::vector<uint8_t> input(kib << 10), back(kib << 10);
    for (size_t i = 0; i < input.size(); ++i) input[i] = static_cast<uint8_t>(i * 7 + kib);
    auto stream = device.create_stream();
    std::vector<double> direct, staged;
    bool ok = true;
    for (int k = 0; k < o.rounds; ++k) {
      for (bool via : {false, true}) {
        // The link idle first (longer than the pacer's catch-up): each copy starts a busy period.
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
        const auto t0 = Clock::now();
        if (via) {
          (*staging)->copy_to_device(*stream, base, input.data(), input.size());
        } else {
          stream->copy_to_device(base, input.data(), input.size());
        }
        ok = ok && stream->synchronize().ok();
        (via ? staged : direct).push_back(ms_since(t0, Clock::now()));
        stream->copy_to_host(back.data(), base, back.size());
        ok = ok && stream->synchronize().ok() && back == input;
      }
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    std::printf("%7llu KiB %11.3f ms %11.3f ms %8.2f %6s\n", static_cast<unsigned long long>(kib), median(direct),
                median(staged), median(staged) / median(direct), ok ? "ok" : "WRONG");
  }
  return 0;
}

int run(const Options& o) {
  SimDeviceConfig c;
  c.memory_bytes = (4 * o.model_mib + 64) * kMiB;
  c.compute_threads = 1;
  c.pcie_bytes_per_s = o.pcie_gb_s * 1e9;
  c.pageable_bytes_per_s = o.pageable_gb_s * 1e9;
  auto device = gpu::SimDevice::create(c, 0);
  if (!device.ok()) {
    std::fprintf(stderr, "pcie_bench: %s\n", device.error().message().c_str());
    return 1;
  }
  auto base = (*device)->allocate(c.memory_bytes - 32 * kMiB);
  if (!base.ok()) return 1;
  std::printf(
      "pcie_bench: models of %llu MiB swapped in at once over %.1f GB/s (pinned), groups of %llu KiB; I/O "
      "scheduler batches of %u blocks; a %llu KiB input issued %.1f ms after the swaps began; %d rounds, "
      "medians of each figure\n",
      static_cast<unsigned long long>(o.model_mib), o.pcie_gb_s, static_cast<unsigned long long>(o.group_kib), o.batch,
      static_cast<unsigned long long>(o.input_kib), o.input_after_ms, o.rounds);
  std::printf("%2s %-12s %14s %14s %14s %14s %14s %6s\n", "N", "copies", "first layer", "first, worst", "done, mean",
              "done, worst", "input waits", "bytes");
  for (size_t n : {1, 2, 4}) {
    std::vector<std::vector<uint8_t>> hosts(n, std::vector<uint8_t>(o.model_mib * kMiB));
    for (size_t m = 0; m < n; ++m) {
      for (size_t i = 0; i < hosts[m].size(); i += 4096) hosts[m][i] = static_cast<uint8_t>(m * 31 + i / 4096);
      (void)(*device)->register_host(hosts[m].data(), hosts[m].size());
    }
    double first_ratio = 0, input_ratio = 0;
    for (bool interleave : {false, true}) {
      std::vector<double> first, worst, done, done_worst, input;
      bool ok = true;
      for (int k = 0; k < o.rounds; ++k) {
        Result r = run_once(**device, o, hosts, *base, interleave);
        ok = ok && bytes_landed(**device, hosts, *base);
        first.push_back(mean(r.first_ms));
        worst.push_back(max_of(r.first_ms));
        done.push_back(mean(r.done_ms));
        done_worst.push_back(max_of(r.done_ms));
        input.push_back(r.input_wait_ms);
      }
      auto median = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        return v[v.size() / 2];
      };
      std::printf("%2zu %-12s %11.2f ms %11.2f ms %11.2f ms %11.2f ms %11.2f ms %6s\n", n,
                  interleave ? "interleaved" : "as issued", median(first), median(worst), median(done),
                  median(done_worst), median(input), ok ? "ok" : "WRONG");
      if (!interleave) {
        first_ratio = median(first);
        input_ratio = median(input);
      } else {
        std::printf("   interleaved / as issued: first layer (mean) %.2f, input wait %.2f\n",
                    median(first) / first_ratio, median(input) / input_ratio);
      }
    }
    for (auto& h : hosts) (*device)->unregister_host(h.data());
  }
  return staged_inputs(**device, o, *base);
}

}  // namespace
}  // namespace ember::bench

int main(int argc, char** argv) {
  ember::bench::Options o;
  CLI::App app{"Concurrent swap-ins over one PCIe link, as issued against interleaved by the I/O scheduler"};
  app.add_option("--pcie", o.pcie_gb_s, "Host-to-device bandwidth, GB/s");
  app.add_option("--model-mib", o.model_mib, "Weights per model, MiB");
  app.add_option("--group-kib", o.group_kib, "Copy group and block size, KiB");
  app.add_option("--batch", o.batch, "I/O scheduler blocks per batch");
  app.add_option("--input-after-ms", o.input_after_ms, "When the small input is issued");
  app.add_option("--rounds", o.rounds, "Rounds per setup (medians reported)");
  app.add_option("--pageable", o.pageable_gb_s, "Host-to-device bandwidth from pageable memory, GB/s (0: half --pcie)");
  CLI11_PARSE(app, argc, argv);
  return ember::bench::run(o);
}
