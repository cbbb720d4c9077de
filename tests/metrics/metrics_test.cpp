#include "metrics/metrics.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <thread>
#include <vector>

namespace ember::metrics {
namespace metrics_test {

// "m<i>". (Built by appending: GCC 12 warns falsely on "m" + std::string, PR 105329.)
std::string label_m(int i) {
  std::string s = "m";
  s += std::to_string(i);
  return s;
}

const FamilySnapshot* find(const MetricsSnapshot& s, std::string_view name) {
  for (const auto& f : s.families) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

TEST(Metrics, RendersAGoldenExposition) {
  Registry registry;
  auto& requests = registry.counter("ember_requests_total", "Inference requests", {"model", "outcome"});
  requests.with({"mlp", "success"}).inc(3);
  requests.with({"bert", "error"}).inc();
  registry.gauge("ember_queue_depth", "Requests queued").with({}).set(2.5);
  auto& latency = registry.histogram("ember_latency_seconds", "Request latency", {"model"}, {0.25, 1});
  for (double v : {0.125, 0.25, 0.5, 4.0}) latency.with({"mlp"}).observe(v);
  registry.counter("ember_unused_total", "Has labels, no series yet: not rendered", {"model"});

  EXPECT_EQ(registry.render(),
            "# HELP ember_latency_seconds Request latency\n"
            "# TYPE ember_latency_seconds histogram\n"
            "ember_latency_seconds_bucket{model=\"mlp\",le=\"0.25\"} 2\n"
            "ember_latency_seconds_bucket{model=\"mlp\",le=\"1\"} 3\n"
            "ember_latency_seconds_bucket{model=\"mlp\",le=\"+Inf\"} 4\n"
            "ember_latency_seconds_sum{model=\"mlp\"} 4.875\n"
            "ember_latency_seconds_count{model=\"mlp\"} 4\n"
            "# HELP ember_queue_depth Requests queued\n"
            "# TYPE ember_queue_depth gauge\n"
            "ember_queue_depth 2.5\n"
            "# HELP ember_requests_total Inference requests\n"
            "# TYPE ember_requests_total counter\n"
            "ember_requests_total{model=\"bert\",outcome=\"error\"} 1\n"
            "ember_requests_total{model=\"mlp\",outcome=\"success\"} 3\n");
}

TEST(Metrics, UnlabelledFamiliesRenderZeroAtOnceAndHistogramsWithoutLabelsUseOnlyLe) {
  Registry registry;
  registry.counter("a_total", "A");
  registry.histogram("b_seconds", "B", {}, {1}).with({}).observe(0.5);
  EXPECT_EQ(registry.render(),
            "# HELP a_total A\n# TYPE a_total counter\na_total 0\n"
            "# HELP b_seconds B\n# TYPE b_seconds histogram\n"
            "b_seconds_bucket{le=\"1\"} 1\nb_seconds_bucket{le=\"+Inf\"} 1\nb_seconds_sum 0.5\nb_seconds_count 1\n");
}

TEST(Metrics, SpecialValues) {
  Registry registry;
  auto& g = registry.gauge("g", "special", {"k"});
  g.with({"nan"}).set(std::numeric_limits<double>::quiet_NaN());
  g.with({"pinf"}).set(std::numeric_limits<double>::infinity());
  g.with({"ninf"}).set(-std::numeric_limits<double>::infinity());
  g.with({"big"}).set(1e21);
  g.with({"small"}).set(-0.001);
  const std::string text = registry.render();
  EXPECT_NE(text.find("g{k=\"nan\"} NaN\n"), std::string::npos) << text;
  EXPECT_NE(text.find("g{k=\"pinf\"} +Inf\n"), std::string::npos) << text;
  EXPECT_NE(text.find("g{k=\"ninf\"} -Inf\n"), std::string::npos) << text;
  EXPECT_NE(text.find("g{k=\"big\"} 1e+21\n"), std::string::npos) << text;
  EXPECT_NE(text.find("g{k=\"small\"} -0.001\n"), std::string::npos) << text;
}

TEST(Metrics, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(escape_label_value(R"(a\b"c)" "\n" "d"), R"(a\\b\"c\nd)");
  EXPECT_EQ(escape_help("x\\y \"q\"\nz"), "x\\\\y \"q\"\\nz");
  EXPECT_EQ(escape_label_value("caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x94\xA5"), "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x94\xA5");
  // Invalid UTF-8 (a stray continuation byte, a truncated sequence, an overlong '/', a surrogate)
  // becomes U+FFFD, one per bad byte, so the exposition stays UTF-8.
  EXPECT_EQ(escape_label_value("a\x80z"), "a\xEF\xBF\xBDz");
  EXPECT_EQ(escape_label_value("a\xC3"), "a\xEF\xBF\xBD");
  EXPECT_EQ(escape_label_value("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(escape_label_value("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");

  Registry registry;
  registry.counter("c_total", "Line one\nline two with a \\ backslash", {"path"}).with({"C:\\dir\n\"x\""}).inc();
  EXPECT_EQ(registry.render(),
            "# HELP c_total Line one\\nline two with a \\\\ backslash\n"
            "# TYPE c_total counter\n"
            "c_total{path=\"C:\\\\dir\\n\\\"x\\\"\"} 1\n");
}

TEST(Metrics, HistogramBucketsAreInclusiveAndCumulative) {
  Histogram h({1, 2, 5});
  for (double v : {-1.0, 0.5, 1.0, 1.5, 2.0, 4.999, 5.0, 5.001, 100.0}) h.observe(v);
  h.observe(std::numeric_limits<double>::quiet_NaN());  // ignored
  EXPECT_EQ(h.cumulative_counts(), (std::vector<uint64_t>{3, 5, 7, 9}));
  EXPECT_EQ(h.count(), 9u);
  EXPECT_DOUBLE_EQ(h.sum(), -1.0 + 0.5 + 1.0 + 1.5 + 2.0 + 4.999 + 5.0 + 5.001 + 100.0);
  h.observe(std::numeric_limits<double>::infinity());
  EXPECT_EQ(h.cumulative_counts().back(), 10u);

  Registry registry;
  auto& fam = registry.histogram("h_seconds", "H", {"m"}, {1, 2, 5});
  for (double v : {0.5, 3.0, 3.0}) fam.with({"x"}).observe(v);
  auto snap = registry.snapshot();
  const FamilySnapshot* f = find(snap, "h_seconds");
  ASSERT_NE(f, nullptr);
  EXPECT_EQ(f->type, MetricType::histogram);
  EXPECT_EQ(f->bucket_bounds, (std::vector<double>{1, 2, 5}));
  ASSERT_EQ(f->series.size(), 1u);
  EXPECT_EQ(f->series[0].bucket_counts, (std::vector<uint64_t>{1, 1, 3, 3}));
  EXPECT_EQ(f->series[0].count, 3u);
  EXPECT_DOUBLE_EQ(f->series[0].sum, 6.5);
}

TEST(Metrics, DefaultLatencyBuckets) {
  const auto& b = default_latency_buckets_s();
  ASSERT_EQ(b.size(), 19u);
  EXPECT_DOUBLE_EQ(b.front(), 50e-6);
  EXPECT_DOUBLE_EQ(b.back(), 60.0);
  for (size_t i = 1; i < b.size(); ++i) {
    EXPECT_LT(b[i - 1], b[i]);
    EXPECT_LE(b[i] / b[i - 1], 3.0 + 1e-9);  // roughly exponential: no gap wider than 3x
  }
  Registry registry;
  EXPECT_EQ(registry.histogram("lat_seconds", "L").bounds(), b);
  EXPECT_EQ(exponential_buckets(1, 2, 4), (std::vector<double>{1, 2, 4, 8}));
}

TEST(Metrics, CountersOnlyGoUp) {
  Counter c;
  c.inc();
  c.inc(2.5);
  c.inc(-1);
  c.inc(std::numeric_limits<double>::quiet_NaN());
  EXPECT_DOUBLE_EQ(c.value(), 3.5);
  Gauge g;
  g.set(10);
  g.dec(3);
  g.inc();
  g.add(-0.5);
  EXPECT_DOUBLE_EQ(g.value(), 7.5);
}

TEST(Metrics, RegisteringTwiceReturnsTheSameFamilyAndSeriesStayPut) {
  Registry registry;
  auto& a = registry.counter("req_total", "first help", {"model"});
  auto& b = registry.counter("req_total", "second help ignored", {"model"});
  EXPECT_EQ(&a, &b);
  Counter* first = &a.with({"m0"});
  for (int i = 1; i < 1000; ++i) a.with({label_m(i)}).inc();  // the map rebalances
  EXPECT_EQ(first, &a.with({"m0"}));
  EXPECT_EQ(first, &b.with(std::vector<std::string>{"m0"}));
  EXPECT_EQ(find(registry.snapshot(), "req_total")->help, "first help");
}

TEST(Metrics, ConflictingRegistrationsAreProgrammerErrors) {
  Registry registry;
  auto& c = registry.counter("x_total", "X", {"a"});
  c.with({"1"}).inc();
  // Debug builds assert; release builds hand out a working family that is never rendered.
  EXPECT_DEBUG_DEATH(registry.gauge("x_total", "X as a gauge", {"a"}).with({"1"}).set(5), "");
  EXPECT_DEBUG_DEATH(registry.counter("x_total", "X", {"b"}).with({"1"}).inc(7), "");
  EXPECT_DEBUG_DEATH(registry.counter("bad name", "spaces").with({}).inc(), "");
  EXPECT_DEBUG_DEATH(registry.histogram("h", "le is reserved", {"le"}).with({"1"}).observe(1), "");
  EXPECT_DEBUG_DEATH(registry.counter("y_total", "wrong arity", {"a", "b"}).with({"1"}).inc(), "");
#ifdef NDEBUG
  const auto snap = registry.snapshot();
  const FamilySnapshot* x = find(snap, "x_total");
  ASSERT_NE(x, nullptr);
  EXPECT_EQ(x->type, MetricType::counter);
  ASSERT_EQ(x->series.size(), 1u);
  EXPECT_EQ(x->series[0].value, 1);
  EXPECT_EQ(find(snap, "bad name"), nullptr);
  EXPECT_EQ(find(snap, "h"), nullptr);
  EXPECT_TRUE(find(snap, "y_total")->series.empty());  // the wrong-arity call went to the sink
#endif
}

TEST(Metrics, SeriesBeyondTheCapGoToACountedSink) {
  Registry registry(3);
  auto& fam = registry.counter("per_model_total", "P", {"model"});
  for (int i = 0; i < 5; ++i) fam.with({label_m(i)}).inc();
  Counter& sink = fam.with({"m9"});
  EXPECT_EQ(&sink, &fam.with({"m8"}));
  auto snap = registry.snapshot();
  EXPECT_EQ(find(snap, "per_model_total")->series.size(), 3u);
  const FamilySnapshot* dropped = find(snap, "ember_metrics_dropped_series_total");
  ASSERT_NE(dropped, nullptr);
  ASSERT_EQ(dropped->series.size(), 1u);
  EXPECT_EQ(dropped->series[0].label_values, (std::vector<std::string>{"per_model_total"}));
  EXPECT_EQ(dropped->series[0].value, 4);  // m3, m4, m9, m8
}

NodeMetrics node(std::string name, const Registry& r) { return {std::move(name), r.snapshot()}; }

TEST(MergeSnapshots, AddsANodeLabelAndRendersOneFamilyPerName) {
  Registry a, b;
  a.counter("ember_requests_total", "Inference requests", {"model"}).with({"mlp"}).inc(2);
  b.counter("ember_requests_total", "Inference requests", {"model"}).with({"mlp"}).inc(5);
  b.counter("ember_requests_total", "Inference requests", {"model"}).with({"bert"}).inc(1);
  a.gauge("ember_resident_bytes", "Bytes resident").with({}).set(1024);
  b.histogram("ember_latency_seconds", "Latency", {}, {0.5}).with({}).observe(0.25);

  auto merged = merge_snapshots({node("gpu-2", b), node("gpu-1", a)});
  EXPECT_TRUE(merged.skipped.empty());
  EXPECT_EQ(render(merged.metrics),
            "# HELP ember_latency_seconds Latency\n"
            "# TYPE ember_latency_seconds histogram\n"
            "ember_latency_seconds_bucket{node=\"gpu-2\",le=\"0.5\"} 1\n"
            "ember_latency_seconds_bucket{node=\"gpu-2\",le=\"+Inf\"} 1\n"
            "ember_latency_seconds_sum{node=\"gpu-2\"} 0.25\n"
            "ember_latency_seconds_count{node=\"gpu-2\"} 1\n"
            "# HELP ember_requests_total Inference requests\n"
            "# TYPE ember_requests_total counter\n"
            "ember_requests_total{node=\"gpu-1\",model=\"mlp\"} 2\n"
            "ember_requests_total{node=\"gpu-2\",model=\"bert\"} 1\n"
            "ember_requests_total{node=\"gpu-2\",model=\"mlp\"} 5\n"
            "# HELP ember_resident_bytes Bytes resident\n"
            "# TYPE ember_resident_bytes gauge\n"
            "ember_resident_bytes{node=\"gpu-1\"} 1024\n");
  // Merging is a pure function of its inputs.
  EXPECT_EQ(merge_snapshots({node("gpu-2", b), node("gpu-1", a)}).metrics, merged.metrics);
}

TEST(MergeSnapshots, SkipsConflictingFamiliesWhole) {
  Registry a, b, c;
  a.counter("x", "X", {"m"}).with({"1"}).inc();
  b.gauge("x", "X as a gauge", {"m"}).with({"1"}).set(9);
  c.counter("x", "X with other labels", {"k"}).with({"1"}).inc();
  a.histogram("h", "H", {}, {1, 2}).with({}).observe(1);
  b.histogram("h", "H", {}, {1, 3}).with({}).observe(1);
  c.histogram("h", "H", {}, {1, 2}).with({}).observe(1);

  auto merged = merge_snapshots({node("a", a), node("b", b), node("c", c)});
  ASSERT_EQ(merged.skipped.size(), 3u);
  EXPECT_EQ(merged.skipped[0], "b: h: bucket bounds differ from those first seen from a");
  EXPECT_EQ(merged.skipped[1], "b: x: type gauge conflicts with counter (first seen from a)");
  EXPECT_EQ(merged.skipped[2], "c: x: label names differ from those first seen from a");
  const std::string text = render(merged.metrics);
  EXPECT_EQ(text,
            "# HELP h H\n# TYPE h histogram\n"
            "h_bucket{node=\"a\",le=\"1\"} 1\nh_bucket{node=\"a\",le=\"2\"} 1\nh_bucket{node=\"a\",le=\"+Inf\"} 1\n"
            "h_sum{node=\"a\"} 1\nh_count{node=\"a\"} 1\n"
            "h_bucket{node=\"c\",le=\"1\"} 1\nh_bucket{node=\"c\",le=\"2\"} 1\nh_bucket{node=\"c\",le=\"+Inf\"} 1\n"
            "h_sum{node=\"c\"} 1\nh_count{node=\"c\"} 1\n"
            "# HELP x X\n# TYPE x counter\nx{node=\"a\",m=\"1\"} 1\n");
}

TEST(MergeSnapshots, KeepsAnExistingNodeLabelAsExportedNode) {
  Registry r;
  r.gauge("peer_bytes", "Bytes from each peer", {"node"}).with({"gpu-7"}).set(3);
  auto merged = merge_snapshots({node("gpu-1", r)});
  EXPECT_TRUE(merged.skipped.empty());
  EXPECT_EQ(render(merged.metrics),
            "# HELP peer_bytes Bytes from each peer\n# TYPE peer_bytes gauge\n"
            "peer_bytes{node=\"gpu-1\",exported_node=\"gpu-7\"} 3\n");
  EXPECT_EQ(find(merged.metrics, "peer_bytes")->label_names, (std::vector<std::string>{"node", "exported_node"}));

  auto custom = merge_snapshots({node("gpu-1", r)}, "instance");
  EXPECT_EQ(find(custom.metrics, "peer_bytes")->label_names, (std::vector<std::string>{"instance", "node"}));
}

TEST(MergeSnapshots, ValidatesSnapshotsFromElsewhere) {
  auto family = [](std::string name, MetricType type, std::vector<std::string> labels) {
    return FamilySnapshot{std::move(name), "h", type, std::move(labels), {}, {}};
  };
  MetricsSnapshot s;
  s.families.push_back(family("bad name", MetricType::counter, {}));
  s.families.push_back(family("bad_type", static_cast<MetricType>(7), {}));
  s.families.push_back(family("bad_label", MetricType::counter, {"__x"}));
  s.families.push_back(family("repeated_label", MetricType::counter, {"a", "a"}));
  s.families.push_back(family("node_clash", MetricType::counter, {"node", "exported_node"}));
  auto hist = family("bad_bounds", MetricType::histogram, {});
  hist.bucket_bounds = {2, 1};
  s.families.push_back(hist);
  auto ok = family("ok", MetricType::counter, {"m"});
  ok.series.push_back({{"1"}, 1, {}, 0, 0});
  ok.series.push_back({{"1", "2"}, 1, {}, 0, 0});  // wrong arity
  ok.series.push_back({{"1"}, 2, {}, 0, 0});       // duplicate
  s.families.push_back(ok);
  auto h = family("h", MetricType::histogram, {});
  h.bucket_bounds = {1};
  h.series.push_back({{}, 0, {1}, 0, 1});      // wrong bucket count
  s.families.push_back(h);
  auto h2 = family("h2", MetricType::histogram, {"k"});
  h2.bucket_bounds = {1};
  h2.series.push_back({{"a"}, 0, {2, 1}, 0, 1});  // not cumulative
  h2.series.push_back({{"b"}, 0, {1, 2}, 0, 3});  // count differs from +Inf
  h2.series.push_back({{"c"}, 0, {1, 2}, 1.5, 2});
  s.families.push_back(h2);

  auto merged = merge_snapshots({{"n1", s}, {"n1", s}, {"", s}});
  std::string all;
  for (const auto& line : merged.skipped) all += line + "\n";
  for (const char* expect : {"n1: bad name: not a valid metric name", "n1: bad_type: unknown metric type 7",
                             "n1: bad_label: label name '__x' is not valid", "n1: repeated_label: label names repeat",
                             "n1: node_clash: label names repeat", "n1: bad_bounds: bucket bounds are not finite",
                             "n1: ok: series {\"1\",\"2\"}: wrong number of label values",
                             "n1: ok: series {\"1\"}: appears twice", "n1: h: series {}: wrong number of buckets",
                             "n1: h2: series {\"a\"}: bucket counts are not cumulative",
                             "n1: h2: series {\"b\"}: count differs from the +Inf bucket",
                             "n1: a second snapshot from the same node", "a snapshot without a node name"}) {
    EXPECT_NE(all.find(expect), std::string::npos) << expect << "\nin:\n" << all;
  }
  EXPECT_EQ(render(merged.metrics),
            "# HELP h2 h\n# TYPE h2 histogram\n"
            "h2_bucket{node=\"n1\",k=\"c\",le=\"1\"} 1\nh2_bucket{node=\"n1\",k=\"c\",le=\"+Inf\"} 2\n"
            "h2_sum{node=\"n1\",k=\"c\"} 1.5\nh2_count{node=\"n1\",k=\"c\"} 2\n"
            "# HELP ok h\n# TYPE ok counter\nok{node=\"n1\",m=\"1\"} 1\n");
}

TEST(Render, LeavesOutMisshapenSeriesInsteadOfReadingPastThem) {
  MetricsSnapshot s;
  FamilySnapshot f{"h", "h", MetricType::histogram, {"k"}, {1, 2}, {}};
  f.series.push_back({{"a"}, 0, {1}, 0, 1});             // too few buckets
  f.series.push_back({{}, 0, {1, 1, 1}, 0, 1});          // too few label values
  f.series.push_back({{"ok"}, 0, {0, 0, 0}, 0, 0});
  s.families.push_back(f);
  EXPECT_EQ(render(s),
            "# HELP h h\n# TYPE h histogram\n"
            "h_bucket{k=\"ok\",le=\"1\"} 0\nh_bucket{k=\"ok\",le=\"2\"} 0\nh_bucket{k=\"ok\",le=\"+Inf\"} 0\n"
            "h_sum{k=\"ok\"} 0\nh_count{k=\"ok\"} 0\n");
}

TEST(Metrics, NameRules) {
  for (const char* ok : {"a", "_a", "a:b", "ember_requests_total", "A9"}) EXPECT_TRUE(is_valid_metric_name(ok)) << ok;
  for (const char* bad : {"", "9a", "a-b", "a b", "é"}) EXPECT_FALSE(is_valid_metric_name(bad)) << bad;
  for (const char* ok : {"a", "_a", "model", "le"}) EXPECT_TRUE(is_valid_label_name(ok)) << ok;
  for (const char* bad : {"", "__name", "a:b", "9a"}) EXPECT_FALSE(is_valid_label_name(bad)) << bad;
}

// Several threads increment shared series, create series concurrently and scrape meanwhile: the
// totals come out exact and every thread got the same series for the same labels.
TEST(Metrics, ConcurrentUpdatesAreExact) {
  Registry registry;
  auto& requests = registry.counter("req_total", "R", {"model"});
  auto& depth = registry.gauge("depth", "D");
  auto& latency = registry.histogram("lat_seconds", "L", {"model"}, {0.5, 1.5});
  constexpr int kThreads = 8;
  constexpr int kIters = 100'000;
  std::vector<Counter*> seen(kThreads);
  std::atomic<bool> done{false};
  std::thread scraper([&] {
    while (!done.load()) {
      auto snap = registry.snapshot();
      const auto* h = find(snap, "lat_seconds");
      for (const auto& s : h->series) EXPECT_EQ(s.bucket_counts.back(), s.count);
      (void)render(snap);
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      Counter& shared = requests.with({"shared"});
      seen[t] = &shared;
      Counter& own = requests.with({label_m(t)});
      Histogram& h = latency.with({"shared"});
      Gauge& g = depth.with({});
      for (int i = 0; i < kIters; ++i) {
        shared.inc();
        own.inc(2);
        h.observe(i % 2 ? 1.0 : 2.0);
        g.inc();
        g.dec();
      }
    });
  }
  for (auto& th : threads) th.join();
  done = true;
  scraper.join();

  for (int t = 1; t < kThreads; ++t) EXPECT_EQ(seen[t], seen[0]);
  EXPECT_EQ(requests.with({"shared"}).value(), double(kThreads) * kIters);
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(requests.with({label_m(t)}).value(), 2.0 * kIters);
  const Histogram& h = latency.with({"shared"});
  EXPECT_EQ(h.count(), uint64_t(kThreads) * kIters);
  EXPECT_EQ(h.cumulative_counts(), (std::vector<uint64_t>{0, uint64_t(kThreads) * kIters / 2, uint64_t(kThreads) * kIters}));
  EXPECT_EQ(h.sum(), 1.5 * kThreads * kIters);
  EXPECT_EQ(depth.with({}).value(), 0.0);
}

}  // namespace metrics_test
}  // namespace ember::metrics
