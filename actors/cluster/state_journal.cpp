#include "actors/cluster/state_journal.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "base/read_file.hpp"
#include "transport/checksum.hpp"

namespace ember {

namespace {

constexpr const char* kStateFormat = "ember-manager-state";
constexpr const char* kJournalFormat = "ember-manager-journal";
constexpr uint64_t kMaxFileBytes = 1ull << 30;

std::string why() { return std::strerror(errno); }

Status write_all(int fd, std::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return io_error(path + ": cannot write: " + why());
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return Status::OK();
}

Status sync_dir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return io_error(dir + ": cannot open the folder to sync it: " + why());
  const int rc = ::fsync(fd);
  const std::string err = rc != 0 ? why() : "";
  ::close(fd);
  if (rc != 0) return io_error(dir + ": cannot sync the folder: " + err);
  return Status::OK();
}

/// `dir`/`name` becomes `content` whole: written beside, synced, renamed over, the folder synced.
Status replace_file(const std::string& dir, const std::string& name, std::string_view content) {
  const std::string path = dir + "/" + name, tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return io_error(tmp + ": cannot create: " + why());
  Status s = write_all(fd, content, tmp);
  if (s.ok() && ::fsync(fd) != 0) s = io_error(tmp + ": cannot sync: " + why());
  ::close(fd);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = io_error(path + ": cannot replace: " + why());
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  return sync_dir(dir);
}

std::string journal_header(uint64_t after) {
  nlohmann::ordered_json h;
  h["format"] = kJournalFormat;
  h["version"] = StateJournal::kVersion;
  h["after"] = after;
  return h.dump() + "\n";
}

/// "<crc32c of the rest, 8 hex> <seq> <json>\n".
std::string record_line(uint64_t seq, std::string_view json) {
  std::string body = std::to_string(seq) + " ";
  body.append(json);
  char crc[16];
  std::snprintf(crc, sizeof crc, "%08" PRIx32 " ", transport::crc32c(body.data(), body.size()));
  return crc + body + "\n";
}

/// A header line of `format` read: its version and the object, or why not.
/// `kind`: "state" or "journal", for the message.
Result<nlohmann::json> read_header(std::string_view text, const char* format, const char* kind, const std::string& path) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object() || !j.contains("format") || j["format"] != format) {
    return corrupt(path + ": not an Ember manager " + kind + " file (no \"format\": \"" + format + "\")");
  }
  if (!j.contains("version") || !j["version"].is_number_unsigned()) {
    return corrupt(path + ": its \"version\" is missing or not a number");
  }
  const uint64_t version = j["version"].get<uint64_t>();
  if (version > static_cast<uint64_t>(StateJournal::kVersion)) {
    return unsupported(path + ": written by a newer Ember (format version " + std::to_string(version) +
                       "; this one reads version " + std::to_string(StateJournal::kVersion) +
                       "): upgrade this manager; nothing was changed");
  }
  return j;
}

Result<bool> exists(const std::string& path) {
  std::error_code ec;
  const bool there = std::filesystem::exists(path, ec);
  if (ec) return io_error(path + ": cannot look it up: " + ec.message());
  return there;
}

}  // namespace

StateJournal::StateJournal(StateJournal&& o) noexcept
    : dir_(std::move(o.dir_)), fd_(std::exchange(o.fd_, -1)), size_(o.size_), seq_(o.seq_), snapshot_seq_(o.snapshot_seq_) {}

StateJournal& StateJournal::operator=(StateJournal&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    dir_ = std::move(o.dir_);
    fd_ = std::exchange(o.fd_, -1);
    size_ = o.size_;
    seq_ = o.seq_;
    snapshot_seq_ = o.snapshot_seq_;
  }
  return *this;
}

StateJournal::~StateJournal() {
  if (fd_ >= 0) ::close(fd_);
}

Result<StateJournal> StateJournal::open(const std::string& dir, Loaded& loaded) {
  loaded = {};
  std::error_code ec;
  if (std::filesystem::create_directories(dir, ec)) ::chmod(dir.c_str(), 0700);
  if (ec) return io_error(dir + ": cannot create the state folder: " + ec.message());
  const std::string state_path = dir + "/state.json", journal_path = dir + "/journal";

  EMBER_ASSIGN_OR_RETURN(bool have_state, exists(state_path));
  if (have_state) {
    EMBER_ASSIGN_OR_RETURN(std::string text, read_file(state_path, kMaxFileBytes, "a manager state file"));
    EMBER_ASSIGN_OR_RETURN(nlohmann::json j, read_header(text, kStateFormat, "state", state_path));
    if (!j.contains("seq") || !j["seq"].is_number_unsigned() || !j.contains("state")) {
      return corrupt(state_path + ": \"seq\" or \"state\" is missing");
    }
    loaded.snapshot = j["state"].dump();
    loaded.snapshot_seq = j["seq"].get<uint64_t>();
  }

  uint64_t seq = loaded.snapshot_seq;
  EMBER_ASSIGN_OR_RETURN(bool have_journal, exists(journal_path));
  bool rewrite = !have_journal;
  if (have_journal) {
    EMBER_ASSIGN_OR_RETURN(std::string text, read_file(journal_path, kMaxFileBytes, "a manager journal"));
    const size_t header_end = text.find('\n');
    if (header_end == std::string::npos) return corrupt(journal_path + ": its header line is incomplete");
    EMBER_ASSIGN_OR_RETURN(nlohmann::json h, read_header(std::string_view(text).substr(0, header_end), kJournalFormat,
                                                         "journal", journal_path));
    if (!h.contains("after") || !h["after"].is_number_unsigned()) return corrupt(journal_path + ": \"after\" is missing");
    const uint64_t after = h["after"].get<uint64_t>();
    if (after > loaded.snapshot_seq) {
      return corrupt(journal_path + ": it continues from record " + std::to_string(after) + ", but " +
                     (have_state ? state_path + " holds records up to " + std::to_string(loaded.snapshot_seq)
                                 : state_path + " is missing") +
                     ": records in between are lost");
    }
    if (after < loaded.snapshot_seq) rewrite = true;  // compact() stopped between its renames
    uint64_t expected = after + 1;
    size_t pos = header_end + 1;
    size_t line_no = 1;
    while (pos < text.size()) {
      ++line_no;
      const size_t end = text.find('\n', pos);
      const bool last = end == std::string::npos || end + 1 == text.size();
      const std::string_view line = std::string_view(text).substr(pos, end == std::string::npos ? std::string::npos : end - pos);
      std::string problem;
      const size_t sp1 = line.find(' ');
      const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
      uint64_t n = 0;
      if (end == std::string::npos) {
        problem = "its last line is incomplete";
      } else if (sp1 != 8 || sp2 == std::string_view::npos) {
        problem = "it is not \"<checksum> <number> <record>\"";
      } else {
        const std::string_view body = line.substr(sp1 + 1);
        char want[16];
        std::snprintf(want, sizeof want, "%08" PRIx32, transport::crc32c(body.data(), body.size()));
        const std::string_view number = line.substr(sp1 + 1, sp2 - sp1 - 1);
        if (line.substr(0, 8) != want) {
          problem = "its checksum does not match";
        } else if (number.empty() || number.size() > 19 || number.find_first_not_of("0123456789") != std::string_view::npos) {
          problem = "its number is not a number";
        } else if (!nlohmann::json::accept(line.substr(sp2 + 1))) {
          problem = "its record is not JSON";
        } else {
          n = std::stoull(std::string(number));
        }
      }
      if (!problem.empty()) {
        if (!last) return corrupt(journal_path + ": line " + std::to_string(line_no) + ": " + problem);
        loaded.torn_tail = true;  // a record being written when the process stopped: never acknowledged
        break;
      }
      if (n != expected) {
        return corrupt(journal_path + ": line " + std::to_string(line_no) + ": record " + std::to_string(n) +
                       " where record " + std::to_string(expected) + " was due");
      }
      if (n > loaded.snapshot_seq) loaded.records.push_back({n, std::string(line.substr(sp2 + 1))});
      ++expected;
      pos = end + 1;
    }
    seq = std::max(seq, expected - 1);
    if (loaded.torn_tail) rewrite = true;
  }
  if (rewrite) {  // the journal as it should stand: a header after the snapshot, the records after it
    std::string content = journal_header(loaded.snapshot_seq);
    for (const Record& r : loaded.records) content += record_line(r.seq, r.json);
    EMBER_RETURN_IF_ERROR(replace_file(dir, "journal", content));
  }
  const int fd = ::open(journal_path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  if (fd < 0) return io_error(journal_path + ": cannot open for appending: " + why());
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string err = why();
    ::close(fd);
    return io_error(journal_path + ": cannot stat: " + err);
  }
  return StateJournal(dir, fd, static_cast<uint64_t>(st.st_size), seq, loaded.snapshot_seq);
}

Result<uint64_t> StateJournal::append(std::string_view json) {
  if (json.find('\n') != std::string_view::npos) return invalid_argument("a journal record must be one line of JSON");
  const std::string path = dir_ + "/journal";
  if (fd_ < 0) return io_error(path + ": not open (a compaction failed to reopen it); restart the manager");
  const std::string line = record_line(seq_ + 1, json);
  Status s = write_all(fd_, line, path);
  if (s.ok() && ::fdatasync(fd_) != 0) s = io_error(path + ": cannot sync: " + why());
  if (!s.ok()) {
    // Cut back what was written, so that the next record follows the last acknowledged one.
    if (::ftruncate(fd_, static_cast<off_t>(size_)) != 0) {
      return io_error(s.error().message() + "; and it cannot be cut back: " + why());
    }
    return s.error();
  }
  size_ += line.size();
  return ++seq_;
}

Status StateJournal::compact(std::string_view state_json) {
  if (!nlohmann::json::accept(state_json)) return invalid_argument("a manager state snapshot must be one JSON value");
  std::string content = "{\"format\":\"" + std::string(kStateFormat) + "\",\"version\":" + std::to_string(kVersion) +
                        ",\"seq\":" + std::to_string(seq_) + ",\"state\":";
  content.append(state_json);
  content += "}\n";
  EMBER_RETURN_IF_ERROR(replace_file(dir_, "state.json", content));
  snapshot_seq_ = seq_;
  const std::string header = journal_header(seq_);
  EMBER_RETURN_IF_ERROR(replace_file(dir_, "journal", header));
  const std::string path = dir_ + "/journal";
  const int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CLOEXEC);
  ::close(fd_);
  fd_ = fd;  // never the replaced file: a record appended there would be lost
  if (fd < 0) return io_error(path + ": cannot open for appending: " + why() + "; no record is taken until a restart");
  size_ = header.size();
  return Status::OK();
}

}  // namespace ember
