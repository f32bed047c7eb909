#include "src/app/retention.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <exception>
#include <filesystem>

#include "base/clock.h"
#include "base/json_reader.h"
#include "base/private_dirs.h"
#include "src/config/private_file.h"

namespace tmcra::app {

namespace {

using json = nlohmann::json;

constexpr int64_t kMinBytes = 64 * 1024;
constexpr int kSizePasses = 12;

std::string PolicyPath(const std::string& data_dir) { return data_dir + "/retention.json"; }

// The number and the unit letter of "30d", "500M"; the unit is 0 when there is none.
bool SplitUnit(const std::string& text, int64_t& number, char& unit) {
  if (text.empty() || !std::isdigit(static_cast<unsigned char>(text.front()))) return false;
  size_t used = 0;
  try {
    number = std::stoll(text, &used);
  } catch (const std::exception&) {
    return false;
  }
  const std::string rest = text.substr(used);
  if (rest.size() > 1) return false;
  unit = rest.empty() ? '\0' : static_cast<char>(std::tolower(static_cast<unsigned char>(rest[0])));
  return number > 0;
}

// `number` times `factor`, or nullopt when it overflows.
std::optional<int64_t> Scaled(int64_t number, int64_t factor) {
  if (number > INT64_MAX / factor) return std::nullopt;
  return number * factor;
}

}  // namespace

json RetentionPolicy::ToJson() const {
  json out = json::object();
  out["max_age_seconds"] = max_age_seconds ? json(*max_age_seconds) : json(nullptr);
  out["max_bytes"] = max_bytes ? json(*max_bytes) : json(nullptr);
  return out;
}

Result<int64_t> ParseDuration(const std::string& text, const std::string& what) {
  int64_t number = 0;
  char unit = 0;
  const Error bad = Error::Invalid(what + ": '" + text +
                                   "' is not a duration (e.g. 30d, 12h, 2w, 90m or seconds)");
  if (!SplitUnit(text, number, unit)) return bad;
  const int64_t factor = unit == 0     ? 1
                         : unit == 'm' ? 60
                         : unit == 'h' ? 3600
                         : unit == 'd' ? 86400
                         : unit == 'w' ? 604800
                                       : 0;
  if (factor == 0) return bad;
  auto seconds = Scaled(number, factor);
  if (!seconds) return bad;
  return *seconds;
}

Result<int64_t> ParseByteSize(const std::string& text, const std::string& what) {
  int64_t number = 0;
  char unit = 0;
  const Error bad =
      Error::Invalid(what + ": '" + text + "' is not a size (e.g. 500M, 2G, 64K or bytes)");
  if (!SplitUnit(text, number, unit)) return bad;
  const int64_t factor = unit == 0     ? 1
                         : unit == 'k' ? 1024
                         : unit == 'm' ? 1024 * 1024
                         : unit == 'g' ? int64_t{1024} * 1024 * 1024
                                       : 0;
  if (factor == 0) return bad;
  auto bytes = Scaled(number, factor);
  if (!bytes) return bad;
  if (*bytes < kMinBytes) return Error::Invalid(what + ": at least 64K");
  return *bytes;
}

Result<RetentionPolicy> LoadRetention(const std::string& data_dir) {
  const std::string path = PolicyPath(data_dir);
  TMCRA_ASSIGN_OR_RETURN(auto text, config::ReadPrivateFile(path, config::FileSecrecy::kSecret));
  RetentionPolicy policy;
  if (!text) return policy;
  const json parsed = ParseJsonLenient(*text);
  const auto field = [&parsed](const char* key) -> std::optional<int64_t> {
    if (!parsed.is_object()) return std::nullopt;
    auto it = parsed.find(key);
    if (it == parsed.end() || !it->is_number_integer() || it->get<int64_t>() <= 0) {
      return std::nullopt;
    }
    return it->get<int64_t>();
  };
  if (!parsed.is_object()) return Error::Invalid(path + ": not a JSON object");
  policy.max_age_seconds = field("max_age_seconds");
  policy.max_bytes = field("max_bytes");
  return policy;
}

Status SaveRetention(const std::string& data_dir, const RetentionPolicy& policy) {
  const std::string path = PolicyPath(data_dir);
  if (policy.empty()) {
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      return Error::Internal(path + ": cannot remove: " + std::strerror(errno));
    }
    return Ok();
  }
  TMCRA_RETURN_IF_ERROR(MakePrivateDirs(data_dir));
  TMCRA_RETURN_IF_ERROR(CheckDirClosedToOthers(data_dir, StickyDirs::kRefused));
  const std::string staged = path + ".tmp";
  unlink(staged.c_str());
  const int fd = open(staged.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return Error::Internal(staged + ": " + std::strerror(errno));
  const std::string text = policy.ToJson().dump(2) + "\n";
  const bool written =
      write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) && fsync(fd) == 0;
  close(fd);
  if (!written || rename(staged.c_str(), path.c_str()) != 0) {
    unlink(staged.c_str());
    return Error::Internal(path + ": cannot write: " + std::strerror(errno));
  }
  return Ok();
}

int64_t DirectoryBytes(const std::string& dir) {
  int64_t bytes = 0;
  std::error_code ec;
  for (std::filesystem::recursive_directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    struct stat st {};
    if (lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      bytes += static_cast<int64_t>(st.st_blocks) * 512;
    }
  }
  return bytes;
}

namespace {

// Records older than the age in every scope, and delivered outbox rows as old.
Status ApplyAge(int64_t max_age, api::MemoryApi& memory, queue::Outbox* outbox, json& report) {
  const double cutoff = NowSeconds() - static_cast<double>(max_age);
  TMCRA_ASSIGN_OR_RETURN(const json stats, memory.ScopeStats());
  int64_t records = 0;
  for (const json& scope : stats["scopes"]) {
    TMCRA_ASSIGN_OR_RETURN(const json done, memory.Forget(scope["scope_name"].get<std::string>(),
                                                          {{"before", FormatIsoUtc(cutoff)}}));
    records += done.value("records", int64_t{0});
  }
  report["aged_records"] = records;
  if (outbox != nullptr) {
    TMCRA_ASSIGN_OR_RETURN(const int64_t rows, outbox->DropDeliveredBefore(cutoff));
    report["aged_outbox_rows"] = rows;
  }
  return Ok();
}

// The oldest records while the directory is over the size. Delivered outbox rows go first
// (they are in memory already); what the outbox still holds for delivery is never dropped, so
// when it and the other files alone come near the size the pass says so and leaves memory as it
// is (the next pass, once they are delivered, tries again). The text to drop
// is estimated from the ratio of the store's file bytes to its text, pass by pass.
Status ApplySize(int64_t max_bytes, api::MemoryApi& memory, queue::Outbox* outbox,
                 const std::string& data_dir, json& report) {
  int64_t records = 0;
  if (DirectoryBytes(data_dir) <= max_bytes) {
    report["size_records"] = 0;
    return Ok();
  }
  if (outbox != nullptr) {
    TMCRA_RETURN_IF_ERROR(outbox->DropDeliveredBefore(NowSeconds()));
    TMCRA_RETURN_IF_ERROR(outbox->Compact());
  }
  // Measured without the write-ahead log's and free pages' bytes, which the estimate below
  // would count as text's.
  TMCRA_RETURN_IF_ERROR(memory.Erase());
  for (int pass = 0; pass < kSizePasses; ++pass) {
    // The two stores count with their live pages: a burst of writes grows a write-ahead log
    // by megabytes, which the next checkpoint empties (or a reader keeps from emptying for a
    // while); its bytes are not the text's.
    TMCRA_ASSIGN_OR_RETURN(const json figures, memory.Stats());
    const int64_t store = figures.value("live_bytes", int64_t{0});
    int64_t others = DirectoryBytes(data_dir) - figures.value("file_bytes", int64_t{0});
    if (outbox != nullptr) {
      TMCRA_ASSIGN_OR_RETURN(const int64_t live, outbox->LiveBytes());
      others += live - outbox->FileBytes();
    }
    others = std::max<int64_t>(others, 0);
    if (others + store <= max_bytes) break;
    if (static_cast<double>(others) >= static_cast<double>(max_bytes) * 0.9) {
      report["over_cap"] = "the outbox's writes waiting for delivery and the other files hold " +
                           std::to_string(others) + " bytes, more than the cap; memory is kept";
      break;
    }
    TMCRA_ASSIGN_OR_RETURN(const json stats, memory.ScopeStats());
    int64_t text = 0;
    for (const json& scope : stats["scopes"]) text += scope.value("bytes", int64_t{0});
    if (text == 0) break;
    const double ratio = std::max(1.0, static_cast<double>(store) / static_cast<double>(text));
    // Aimed a tenth under the cap, so that the next writes do not cross it at once; a pass
    // that falls short (part of the file's bytes do not shrink with the text) is followed by
    // another.
    const double target = static_cast<double>(max_bytes) * 0.9 - static_cast<double>(others);
    const double excess = static_cast<double>(store) - target;
    // Half the estimate at a time: while writes arrive, part of the store is jobs not yet
    // written as records, and the estimate runs high.
    TMCRA_ASSIGN_OR_RETURN(const json done,
                           memory.ForgetOldest(static_cast<int64_t>(excess / ratio / 2) + 1));
    records += done.value("records", int64_t{0});
    if (done.value("records", int64_t{0}) == 0) break;
  }
  report["size_records"] = records;
  return Ok();
}

}  // namespace

Result<json> ApplyRetention(const RetentionPolicy& policy, api::MemoryApi& memory,
                            queue::Outbox* outbox, const std::string& data_dir) {
  json report{{"bytes_before", DirectoryBytes(data_dir)}};
  if (policy.max_age_seconds) {
    TMCRA_RETURN_IF_ERROR(ApplyAge(*policy.max_age_seconds, memory, outbox, report));
  }
  if (policy.max_bytes) {
    TMCRA_RETURN_IF_ERROR(ApplySize(*policy.max_bytes, memory, outbox, data_dir, report));
  }
  report["bytes_after"] = DirectoryBytes(data_dir);
  return report;
}

RetentionWorker::RetentionWorker(api::MemoryApi& memory, OutboxGetter outbox, std::string data_dir,
                                 std::chrono::seconds period)
    : memory_(memory),
      outbox_(std::move(outbox)),
      data_dir_(std::move(data_dir)),
      period_(period),
      thread_([this] { Loop(); }) {}

RetentionWorker::~RetentionWorker() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void RetentionWorker::Loop() {
  {  // the first pass leaves the host's first calls alone
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, std::min(period_, std::chrono::seconds(10)),
                     [this] { return stopping_; })) {
      return;
    }
  }
  for (;;) {
    try {
      auto policy = LoadRetention(data_dir_);
      if (!policy) {
        spdlog::warn("retention: {}", policy.error().message);
      } else if (!policy->empty()) {
        auto report = ApplyRetention(*policy, memory_, outbox_(), data_dir_);
        if (report) {
          spdlog::info("retention applied: {}", report->dump());
        } else {
          spdlog::warn("retention: {}", report.error().message);
        }
      }
    } catch (const std::exception& e) {
      spdlog::error("retention: {}", e.what());
    }
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, period_, [this] { return stopping_; })) return;
  }
}

}  // namespace tmcra::app
