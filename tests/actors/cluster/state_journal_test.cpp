// StateJournal: records on disk before append() returns, read back in order after a snapshot; what
// a crash leaves (a half-written last record, a compaction stopped between its renames) read back
// as the acknowledged state; everything else refused naming the file and line, a newer format
// refused as such.
#include "actors/cluster/state_journal.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cinttypes>
#include <cstdio>
#include <fstream>

#include "tests/model/model_test_util.hpp"
#include "transport/checksum.hpp"

namespace ember {
namespace state_journal_test {

using gpu::testing::TempDir;

std::string slurp(const std::string& path) { return gpu::testing::read_file(path); }

void put(const std::string& path, const std::string& content) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << content;
}

/// A record line as the journal writes it.
std::string line(uint64_t seq, const std::string& json) {
  const std::string body = std::to_string(seq) + " " + json;
  char crc[16];
  std::snprintf(crc, sizeof crc, "%08" PRIx32 " ", transport::crc32c(body.data(), body.size()));
  return crc + body + "\n";
}

std::string header(uint64_t after, int version = 1) {
  return "{\"format\":\"ember-manager-journal\",\"version\":" + std::to_string(version) +
         ",\"after\":" + std::to_string(after) + "}\n";
}

std::vector<std::string> jsons(const StateJournal::Loaded& l) {
  std::vector<std::string> out;
  for (const auto& r : l.records) out.push_back(std::to_string(r.seq) + ":" + r.json);
  return out;
}

TEST(StateJournal, RecordsComeBackInOrderAfterTheSnapshot) {
  TempDir tmp;
  const std::string dir = tmp / "state";
  StateJournal::Loaded l;
  {
    auto j = StateJournal::open(dir, l);
    ASSERT_TRUE(j.ok()) << j.error().message();
    EXPECT_FALSE(l.snapshot.has_value());
    EXPECT_TRUE(l.records.empty());
    struct stat st {};
    ASSERT_EQ(::stat(dir.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u) << "the state folder is the manager's own";
    EXPECT_EQ(*j->append(R"({"load":"m/1","replicas":2})"), 1u);
    EXPECT_EQ(*j->append(R"({"scale":"m/1","min":1,"max":4})"), 2u);
    EXPECT_EQ(j->seq(), 2u);
  }
  {
    auto j = StateJournal::open(dir, l);
    ASSERT_TRUE(j.ok()) << j.error().message();
    EXPECT_EQ(jsons(l), (std::vector<std::string>{R"(1:{"load":"m/1","replicas":2})",
                                                  R"(2:{"scale":"m/1","min":1,"max":4})"}));
    EXPECT_FALSE(l.torn_tail);
    // A snapshot holding both, then one more record.
    ASSERT_TRUE(j->compact(R"({"floors":{"m/1":2}})").ok());
    EXPECT_EQ(j->since_snapshot(), 0u);
    EXPECT_EQ(*j->append(R"({"unload":"m/1"})"), 3u);
  }
  auto j = StateJournal::open(dir, l);
  ASSERT_TRUE(j.ok()) << j.error().message();
  EXPECT_EQ(l.snapshot, std::optional<std::string>(R"({"floors":{"m/1":2}})"));
  EXPECT_EQ(l.snapshot_seq, 2u);
  EXPECT_EQ(jsons(l), (std::vector<std::string>{R"(3:{"unload":"m/1"})"}));
  EXPECT_EQ(j->seq(), 3u);
  EXPECT_EQ(j->since_snapshot(), 1u);
}

TEST(StateJournal, AHalfWrittenLastRecordIsDroppedAndTheNextFollowsTheLastWholeOne) {
  for (const std::string& tail : {std::string("0badf00d 3 {\"x\""),                 // no newline
                                 line(3, R"({"x":1})").replace(0, 8, "00000000")}) {  // checksum fails
    TempDir tmp;
    StateJournal::Loaded l;
    {
      auto j = StateJournal::open(tmp.path(), l);
      ASSERT_TRUE(j.ok());
      ASSERT_TRUE(j->append(R"({"a":1})").ok());
      ASSERT_TRUE(j->append(R"({"a":2})").ok());
    }
    put(tmp / "journal", slurp(tmp / "journal") + tail);
    auto j = StateJournal::open(tmp.path(), l);
    ASSERT_TRUE(j.ok()) << j.error().message();
    EXPECT_TRUE(l.torn_tail);
    EXPECT_EQ(jsons(l), (std::vector<std::string>{R"(1:{"a":1})", R"(2:{"a":2})"}));
    EXPECT_EQ(*j->append(R"({"a":3})"), 3u);
    StateJournal::Loaded again;
    ASSERT_TRUE(StateJournal::open(tmp.path(), again).ok());
    EXPECT_FALSE(again.torn_tail);
    EXPECT_EQ(jsons(again), (std::vector<std::string>{R"(1:{"a":1})", R"(2:{"a":2})", R"(3:{"a":3})"}));
  }
}

TEST(StateJournal, ACompactionStoppedBetweenItsRenamesReadsAsTheSnapshot) {
  TempDir tmp;
  // The new state.json holds records 1..2; the old journal still has them.
  put(tmp / "state.json", R"({"format":"ember-manager-state","version":1,"seq":2,"state":{"s":2}})");
  put(tmp / "journal", header(0) + line(1, R"({"a":1})") + line(2, R"({"a":2})"));
  StateJournal::Loaded l;
  auto j = StateJournal::open(tmp.path(), l);
  ASSERT_TRUE(j.ok()) << j.error().message();
  EXPECT_EQ(l.snapshot, std::optional<std::string>(R"({"s":2})"));
  EXPECT_TRUE(l.records.empty());
  EXPECT_EQ(slurp(tmp / "journal"), header(2)) << "the journal starts after the snapshot again";
  EXPECT_EQ(*j->append(R"({"a":3})"), 3u);
}

TEST(StateJournal, CorruptionIsRefusedNamingTheFileAndLine) {
  struct Case {
    std::string state, journal, message;
  };
  const std::string good_state = R"({"format":"ember-manager-state","version":1,"seq":0,"state":{}})";
  std::string flipped = line(1, R"({"a":1})");
  flipped[flipped.size() - 3] = '2';  // the record's bytes changed under its checksum
  for (const Case& c : std::vector<Case>{
           {"", header(0) + flipped + line(2, R"({"a":2})"), "journal: line 2: its checksum does not match"},
           {"", header(0) + line(1, "{}") + line(3, "{}") + line(4, "{}"),
            "journal: line 3: record 3 where record 2 was due"},
           {"", header(0) + line(1, "{}") + line(2, "{nope") + line(3, "{}"), "journal: line 3: its record is not JSON"},
           {"", header(5) + line(6, "{}"), "it continues from record 5, but"},
           {"", "garbage\n", "journal: not an Ember manager journal file"},
           {"", "{\"format\":\"ember-manager-journal\"", "journal: its header line is incomplete"},
           {"hello", "", "state.json: not an Ember manager state file"},
           {R"({"format":"ember-manager-state","version":1})", "", "state.json: \"seq\" or \"state\" is missing"},
           {good_state, header(0) + "xyz\n" + line(1, "{}"), "journal: line 2: it is not \"<checksum> <number> <record>\""},
       }) {
    SCOPED_TRACE(c.message);
    TempDir tmp;
    if (!c.state.empty()) put(tmp / "state.json", c.state);
    if (!c.journal.empty()) put(tmp / "journal", c.journal);
    const std::string before = c.journal.empty() ? "" : slurp(tmp / "journal");
    StateJournal::Loaded l;
    auto j = StateJournal::open(tmp.path(), l);
    ASSERT_FALSE(j.ok());
    EXPECT_EQ(j.error().code(), ErrorCode::corrupt);
    EXPECT_NE(j.error().message().find(c.message), std::string::npos) << j.error().message();
    if (!c.journal.empty()) {
      EXPECT_EQ(slurp(tmp / "journal"), before) << "a refused journal is left as it was";
    }
  }
}

TEST(StateJournal, ANewerFormatIsRefusedAsSuchAndLeftAlone) {
  for (const bool in_state : {true, false}) {
    TempDir tmp;
    if (in_state) {
      put(tmp / "state.json", R"({"format":"ember-manager-state","version":2,"seq":0,"state":{}})");
    } else {
      put(tmp / "journal", header(0, 2));
    }
    StateJournal::Loaded l;
    auto j = StateJournal::open(tmp.path(), l);
    ASSERT_FALSE(j.ok());
    EXPECT_EQ(j.error().code(), ErrorCode::unsupported);
    EXPECT_NE(j.error().message().find("written by a newer Ember (format version 2; this one reads version 1)"),
              std::string::npos)
        << j.error().message();
  }
}

TEST(StateJournal, RefusesRecordsItCouldNotReadBack) {
  TempDir tmp;
  StateJournal::Loaded l;
  auto j = StateJournal::open(tmp.path(), l);
  ASSERT_TRUE(j.ok());
  auto two_lines = j->append("{\"a\":\n1}");
  ASSERT_FALSE(two_lines.ok());
  EXPECT_EQ(two_lines.error().code(), ErrorCode::invalid_argument);
  EXPECT_EQ(j->compact("{not json").error().code(), ErrorCode::invalid_argument);
  EXPECT_EQ(j->seq(), 0u);
  EXPECT_EQ(slurp(tmp / "journal"), header(0));
}

}  // namespace state_journal_test
}  // namespace ember
