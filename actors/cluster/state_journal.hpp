// StateJournal: what the manager decided, kept on its disk before it acts (issue 37: a restarted
// manager comes back as it was). A folder (manager.state_dir) holds two files:
//
//   state.json   the last snapshot: {"format": "ember-manager-state", "version": 1, "seq": N,
//                "state": <the caller's JSON>}; replaced whole (written beside, fsync'd, renamed,
//                the folder fsync'd), so it is the old one or the new one, never a mix
//   journal      what was decided since: a header line {"format": "ember-manager-journal",
//                "version": 1, "after": N}, then one line per record, "<crc32c, 8 hex> <seq>
//                <the caller's JSON>", appended and fsync'd before append() returns
//
// Records are numbered from 1 on and never reused; a snapshot says the last record it holds.
// open() reads both back: the snapshot (if any) and the records after it, in order.
//
// What a crash may leave, and what open() does with it:
//   a record half written (the last line lacks its newline, or its checksum fails)
//                               dropped and the file cut back to the last whole record: it was
//                               never acknowledged (append had not returned)
//   compact() between its two renames (a new state.json, the old journal)
//                               the old journal's records the snapshot already holds are skipped
//   anything else               refused, naming the file and line: a record in the middle that
//                               fails its checksum or does not parse, numbers that skip or repeat,
//                               a journal continuing from a later snapshot than state.json, a file
//                               that is not Ember's (corrupt); a format version newer than this
//                               build reads (unsupported: written by a newer Ember; the operator
//                               upgrades, nothing is rewritten)
// A missing folder is created (0700); missing files are an empty state.
//
// Plain C++, no CAF: owned by one caller (the cluster manager actor), not thread-safe. Blocking
// file I/O: each append is one write and one fdatasync (microseconds to milliseconds, by disk).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.hpp"

namespace ember {

class StateJournal {
 public:
  static constexpr int kVersion = 1;

  struct Record {
    uint64_t seq = 0;
    std::string json;
  };
  /// What open() found.
  struct Loaded {
    std::optional<std::string> snapshot;  // state.json's "state", as JSON text
    uint64_t snapshot_seq = 0;            // the last record it holds
    std::vector<Record> records;          // after it, in order
    bool torn_tail = false;               // a half-written last record was dropped
  };

  /// Opens (creating) the folder `dir` and reads what it holds into `loaded`. Errors as the
  /// header says; io_error when the folder or a file cannot be made, read or written.
  static Result<StateJournal> open(const std::string& dir, Loaded& loaded);

  StateJournal(StateJournal&&) noexcept;
  StateJournal& operator=(StateJournal&&) noexcept;
  ~StateJournal();

  /// Appends `json` (one JSON value, no newline: nlohmann's dump()) as the next record, on disk
  /// before it returns; its number. invalid_argument for a newline in `json`; io_error when the
  /// write or the sync fails (the record then does not count: the caller must not act on it).
  Result<uint64_t> append(std::string_view json);

  /// Replaces state.json with `state_json` (one JSON value holding every record so far) and starts
  /// an empty journal after it. invalid_argument when `state_json` does not parse; io_error when a
  /// file cannot be written (whatever was written, a restart reads the same state).
  Status compact(std::string_view state_json);

  /// The last record's number (0: none yet).
  uint64_t seq() const { return seq_; }
  /// Records appended since the last snapshot (what a compaction would drop).
  uint64_t since_snapshot() const { return seq_ - snapshot_seq_; }
  const std::string& dir() const { return dir_; }

 private:
  StateJournal(std::string dir, int fd, uint64_t size, uint64_t seq, uint64_t snapshot_seq)
      : dir_(std::move(dir)), fd_(fd), size_(size), seq_(seq), snapshot_seq_(snapshot_seq) {}

  std::string dir_;
  int fd_ = -1;        // journal, open for appending
  uint64_t size_ = 0;  // its bytes: a failed append is cut back to here
  uint64_t seq_ = 0, snapshot_seq_ = 0;
};

}  // namespace ember
