// DesiredState: the decisions' records folded into the state, the state as a snapshot and back, the
// same state rebuilt from a StateJournal after a restart (before and after a compaction), and
// records or snapshots it cannot read refused naming what.
#include "actors/cluster/desired_state.hpp"

#include <gtest/gtest.h>

#include "actors/cluster/state_journal.hpp"
#include "tests/model/model_test_util.hpp"

namespace ember {
namespace desired_state_test {

const model_key kM{"m", 1}, kN{"n", 2};

DesiredState decided() {
  DesiredState s;
  for (const std::string& r : {DesiredState::load_record(kM, 2), DesiredState::scale_record(kM, 1, 4),
                               DesiredState::slo_record(kM, {250'000, 0.99}), DesiredState::load_record(kN, 0),
                               DesiredState::scale_record(kN, 0, 3), DesiredState::unload_record(kN),
                               DesiredState::drain_record("n1"), DesiredState::drain_record("n2"),
                               DesiredState::left_record("n2")}) {
    EXPECT_TRUE(s.apply(r).ok()) << r;
  }
  return s;
}

TEST(DesiredState, RecordsFoldIntoTheStateAndAnUnloadEndsOnlyTheLoad) {
  const DesiredState s = decided();
  ASSERT_EQ(s.models().size(), 2u);
  const ModelIntent& m = s.models().at(kM);
  EXPECT_EQ(m.load, std::optional<uint32_t>(2));
  EXPECT_EQ(m.min, std::optional<uint32_t>(1));
  EXPECT_EQ(m.max, std::optional<uint32_t>(4));
  ASSERT_TRUE(m.slo.has_value());
  EXPECT_EQ(m.slo->deadline_us, 250'000u);
  EXPECT_DOUBLE_EQ(m.slo->percentile, 0.99);
  const ModelIntent& n = s.models().at(kN);
  EXPECT_FALSE(n.load.has_value()) << "unloaded";
  EXPECT_EQ(n.max, std::optional<uint32_t>(3)) << "the console's bounds outlive an unload";
  // A model whose only decision was its load is gone once unloaded.
  DesiredState t;
  ASSERT_TRUE(t.apply(DesiredState::load_record(kM, 1)).ok());
  ASSERT_TRUE(t.apply(DesiredState::unload_record(kM)).ok());
  EXPECT_TRUE(t.models().empty());
  // `slo MODEL off` (a deadline of 0) ends the SLO set at run time.
  ASSERT_TRUE(t.apply(DesiredState::slo_record(kM, {250'000, 0.9})).ok());
  ASSERT_TRUE(t.apply(DesiredState::slo_record(kM, {0, 0.98})).ok());
  EXPECT_TRUE(t.models().empty());
  // A drain lasts while its node is a member: it ends when the node leaves.
  EXPECT_TRUE(s.drained("n1"));
  EXPECT_FALSE(s.drained("n2"));
  EXPECT_FALSE(s.drained("n3"));
}

TEST(DesiredState, TheSnapshotReadsBackAsTheSameState) {
  const DesiredState s = decided();
  auto back = DesiredState::from_snapshot(s.snapshot());
  ASSERT_TRUE(back.ok()) << back.error().message();
  EXPECT_TRUE(*back == s) << s.snapshot() << "\n" << back->snapshot();
  EXPECT_EQ(back->snapshot(), s.snapshot());
  EXPECT_TRUE(back->drained("n1"));
  auto empty = DesiredState::from_snapshot(DesiredState().snapshot());
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->models().empty());
}

TEST(DesiredState, ARestartRebuildsItFromTheJournalBeforeAndAfterACompaction) {
  gpu::testing::TempDir tmp;
  DesiredState live;
  {
    StateJournal::Loaded l;
    auto j = StateJournal::open(tmp.path(), l);
    ASSERT_TRUE(j.ok());
    for (const std::string& r : {DesiredState::load_record(kM, 3), DesiredState::scale_record(kM, 2, 5)}) {
      ASSERT_TRUE(j->append(r).ok());  // on disk first, then acted on
      ASSERT_TRUE(live.apply(r).ok());
    }
  }
  auto rebuild = [&] {
    StateJournal::Loaded l;
    auto j = StateJournal::open(tmp.path(), l);
    EXPECT_TRUE(j.ok());
    DesiredState s;
    if (l.snapshot) s = *DesiredState::from_snapshot(*l.snapshot);
    for (const auto& r : l.records) EXPECT_TRUE(s.apply(r.json).ok());
    return std::pair{std::move(*j), s};
  };
  auto [j, s] = rebuild();
  EXPECT_TRUE(s == live);
  ASSERT_TRUE(j.compact(s.snapshot()).ok());
  const std::string more = DesiredState::slo_record(kM, {1'000'000, 0.9});
  ASSERT_TRUE(j.append(more).ok());
  ASSERT_TRUE(live.apply(more).ok());
  auto [j2, s2] = rebuild();
  EXPECT_TRUE(s2 == live) << s2.snapshot();
}

TEST(DesiredState, WhatItCannotReadIsRefusedNamingWhat) {
  DesiredState s;
  for (const auto& [record, message] : std::vector<std::pair<std::string, std::string>>{
           {"[]", "not a JSON object with an \"op\""},
           {R"({"op":"load","replicas":2})", "(load): \"model\" is missing"},
           {R"({"op":"load","model":{"name":"m","version":1},"replicas":-2})", "\"replicas\" is missing or not a number"},
           {R"({"op":"grow","model":{"name":"m","version":1}})", "unknown op \"grow\""},
           {R"({"op":"slo","model":{"name":"m","version":1},"deadline_us":5,"percentile":2})", "\"percentile\""},
           {R"({"op":"drain"})", "(drain): \"node\" is missing"},
           {R"({"op":"left","node":7})", "(left): \"node\" is missing or not a name"},
       }) {
    const Status st = s.apply(record);
    ASSERT_FALSE(st.ok()) << record;
    EXPECT_EQ(st.error().code(), ErrorCode::corrupt);
    EXPECT_NE(st.error().message().find(message), std::string::npos) << st.error().message();
  }
  EXPECT_TRUE(s.models().empty()) << "a refused record changes nothing";
  auto bad_drains = DesiredState::from_snapshot(R"({"version":1,"models":[],"drained":"n1"})");
  ASSERT_FALSE(bad_drains.ok());
  EXPECT_NE(bad_drains.error().message().find("\"drained\" is not a list"), std::string::npos);
  auto newer = DesiredState::from_snapshot(R"({"version":2,"models":[]})");
  ASSERT_FALSE(newer.ok());
  EXPECT_EQ(newer.error().code(), ErrorCode::unsupported);
  auto twice = DesiredState::from_snapshot(
      R"({"version":1,"models":[{"model":{"name":"m","version":1}},{"model":{"name":"m","version":1}}]})");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message().find("m/1 is given twice"), std::string::npos) << twice.error().message();
}

}  // namespace desired_state_test
}  // namespace ember
