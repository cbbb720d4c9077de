// What `ember sim` prints and writes (sim/sim_report.hpp), from a hand-made SimResult: the summary
// against hand-computed figures, the table row, the CSV line by line, the Chrome trace as JSON that
// parses with the events of its window, and the SVG.
#include "sim/sim_report.hpp"

#include <gtest/gtest.h>

#include <sstream>

#include "base/json_text.hpp"

namespace ember::sim {
namespace sim_report_test {

/// Four requests of two models: three answered in 10, 20 and 30 ms, one lost; three cold starts.
struct Fixture {
  RequestTrace trace;
  SimResult result;
  Fixture() {
    trace.models = {"a", "b"};
    trace.requests = {{0, 0}, {1'000'000, 1}, {2'000'000, 0}, {3'000'000, 1}};
    result.requests = {
        {0, 5'000, 10'000, 0, 1, true, false},
        {1'000'000, 1'000'000, 1'020'000, 1, 0, false, false},
        {2'000'000, 2'010'000, 2'030'000, 0, 1, false, false},
        {3'000'000, 0, 0, 1, 0, true, true},
    };
    result.cold_starts = {{"a", "host1", "cache", 0, 100'000, 0, 0},
                          {"b", "host0", "peer", 0, 200'000, 500, 7},
                          {"b", "host1", "peer", 0, 400'000, 500, 7}};
    result.samples = {{1'000'000, {1, 2}, {0, 0}}, {2'000'000, {1, 1}, {0, 1}}};
    result.replica_seconds = 5;
    result.max_replicas = 3;
    result.chains = 1;
    result.events = 42;
    result.end_us = 3'000'000;
  }
};

TEST(SimReport, SummaryIsHandComputed) {
  Fixture f;
  const SimSummary s = summarize(f.result, {25'000, 25'000});
  EXPECT_EQ(s.requests, 4u);
  EXPECT_EQ(s.lost, 1u);
  EXPECT_EQ(s.cold_requests, 2u);
  EXPECT_DOUBLE_EQ(s.mean_ms, 20);
  EXPECT_DOUBLE_EQ(s.p50_ms, 20);  // nearest rank: the 2nd of 3
  EXPECT_DOUBLE_EQ(s.p99_ms, 30);
  EXPECT_DOUBLE_EQ(s.slo_pct, 50);  // 10 and 20 ms of 4 requests
  EXPECT_EQ(s.tiers.at("cache").count, 1u);
  EXPECT_DOUBLE_EQ(s.tiers.at("cache").mean_ms, 100);
  EXPECT_EQ(s.tiers.at("peer").count, 2u);
  EXPECT_DOUBLE_EQ(s.tiers.at("peer").mean_ms, 300);
  EXPECT_EQ(s.tiers.at("repository").count, 0u);
  EXPECT_DOUBLE_EQ(s.cold_start_mean_ms, 700.0 / 3);
  EXPECT_DOUBLE_EQ(s.replica_seconds, 5);
  EXPECT_EQ(s.max_replicas, 3u);
  EXPECT_DOUBLE_EQ(s.simulated_s, 3);
  // A model's own SLO: b's 10 ms fails its 20 ms request.
  EXPECT_DOUBLE_EQ(summarize(f.result, {25'000, 10'000}).slo_pct, 25);
}

TEST(SimReport, TableRowIsTheReplays) {
  Fixture f;
  // bench/autoscale_replay.py's header, word for word.
  EXPECT_EQ(summary_header(),
            "| arm | requests | lost | mean ms | p99 ms | SLO % | cold starts (cache/peer/repo) "
            "| mean cold start ms (cache/peer/repo) | replica-s |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  EXPECT_EQ(summary_row("c1", summarize(f.result, {25'000, 25'000})),
            "| c1 | 4 | 1 | 20 | 30 | 50.0 | 1/2/0 | 100/300/0 | 5 |\n");
}

TEST(SimReport, SummaryJsonParses) {
  Fixture f;
  auto j = parse_json_text(summary_json("c\"1", summarize(f.result, {25'000, 25'000})));
  ASSERT_TRUE(j.ok());
  EXPECT_EQ((*j)["label"], "c\"1");
  EXPECT_EQ((*j)["requests"], 4);
  EXPECT_EQ((*j)["lost"], 1);
  EXPECT_DOUBLE_EQ((*j)["mean_ms"].get<double>(), 20);
  EXPECT_DOUBLE_EQ((*j)["cold_starts"]["peer"]["mean_ms"].get<double>(), 300);
  EXPECT_EQ((*j)["cold_starts"]["cache"]["count"], 1);
  EXPECT_DOUBLE_EQ((*j)["replica_seconds"].get<double>(), 5);
}

TEST(SimReport, RequestsCsv) {
  Fixture f;
  std::ostringstream o;
  write_requests_csv(o, f.result, f.trace);
  EXPECT_EQ(o.str(),
            "time_s,model,host,cold,lost,start_s,end_s,latency_ms,retries\n"
            "0.000000,a,host1,1,0,0.005000,0.010000,10.000,0\n"
            "1.000000,b,host0,0,0,1.000000,1.020000,20.000,0\n"
            "2.000000,a,host1,0,0,2.010000,2.030000,30.000,0\n"
            "3.000000,b,,1,1,,,,0\n");
}

TEST(SimReport, ChromeTraceParsesAndKeepsItsWindow) {
  Fixture f;
  std::ostringstream all, window;
  write_chrome_trace(all, f.result, f.trace, {"a", "b"}, 0, UINT64_MAX);
  write_chrome_trace(window, f.result, f.trace, {"a", "b"}, 1'500'000, 2'500'000);
  auto count = [](const std::string& text, const std::string& ph, const std::string& cat) {
    auto j = parse_json_text(text);
    EXPECT_TRUE(j.ok()) << text;
    size_t n = 0;
    for (const auto& e : (*j)["traceEvents"]) n += e["ph"] == ph && (cat.empty() || e.value("cat", "") == cat);
    return n;
  };
  EXPECT_EQ(count(all.str(), "X", "request"), 3u);
  EXPECT_EQ(count(all.str(), "X", "load"), 3u);
  EXPECT_EQ(count(all.str(), "C", ""), 2u);
  EXPECT_EQ(count(window.str(), "X", "request"), 1u);  // the third request only
  EXPECT_EQ(count(window.str(), "X", "load"), 0u);
  EXPECT_EQ(count(window.str(), "C", ""), 1u);
  auto j = parse_json_text(all.str());
  for (const auto& e : (*j)["traceEvents"]) {
    if (e["ph"] == "X" && e["cat"] == "request" && e["args"]["request"] == 2) {
      EXPECT_EQ(e["ts"], 2'010'000);
      EXPECT_EQ(e["dur"], 20'000);
      EXPECT_DOUBLE_EQ(e["args"]["waited_ms"].get<double>(), 10);
    }
  }
}

TEST(SimReport, PlotIsAnSvgNamingEveryModel) {
  Fixture f;
  std::ostringstream o;
  write_plot_svg(o, f.result, {"a", "b&c"}, "t <1>");
  const std::string svg = o.str();
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_NE(svg.find("</svg>"), std::string::npos);
  EXPECT_NE(svg.find(">a</text>"), std::string::npos);
  EXPECT_NE(svg.find(">b&amp;c</text>"), std::string::npos);
  EXPECT_NE(svg.find("t &lt;1&gt;"), std::string::npos);
  EXPECT_NE(svg.find(">x</text>"), std::string::npos);  // the lost request
}

}  // namespace sim_report_test
}  // namespace ember::sim
