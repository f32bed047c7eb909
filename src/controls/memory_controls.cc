#include "src/controls/memory_controls.h"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "base/canonical_json.h"
#include "base/ids.h"
#include "base/json_reader.h"
#include "base/sha256.h"
#include "base/utf8.h"

namespace tmcra::controls {

namespace {

using ojson = nlohmann::ordered_json;

constexpr int kLockAttempts = 60;
constexpr auto kLockInterval = std::chrono::milliseconds(25);
constexpr int kMaxLockBreaks = 8;  // per acquisition, so a pathological directory cannot spin
constexpr double kStaleLockSeconds = 10.0;
constexpr size_t kTaskFieldLimit = 4000;
constexpr char kSubagent[] = ":subagent:";
constexpr char kBusy[] = "Memory controls busy; inspect the local lock";

// ---- Python text semantics ----------------------------------------------------------------

// One code point of `s` at `i`; its byte length goes to `*len`. An invalid byte decodes as
// itself with length 1 (never a space, never a letter we look for).
char32_t DecodeAt(std::string_view s, size_t i, size_t* len) {
  const auto b0 = static_cast<unsigned char>(s[i]);
  const auto cont = [&](size_t k) {
    return i + k < s.size() && (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
  };
  const auto byte = [&](size_t k) {
    return static_cast<char32_t>(static_cast<unsigned char>(s[i + k]) & 0x3F);
  };
  if (b0 < 0x80) {
    *len = 1;
    return b0;
  }
  if (b0 >= 0xC2 && b0 < 0xE0 && cont(1)) {
    *len = 2;
    return (static_cast<char32_t>(b0 & 0x1F) << 6) | byte(1);
  }
  if (b0 >= 0xE0 && b0 < 0xF0 && cont(1) && cont(2)) {
    const char32_t cp = (static_cast<char32_t>(b0 & 0x0F) << 12) | (byte(1) << 6) | byte(2);
    if (cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF)) {
      *len = 3;
      return cp;
    }
  }
  if (b0 >= 0xF0 && b0 < 0xF5 && cont(1) && cont(2) && cont(3)) {
    const char32_t cp =
        (static_cast<char32_t>(b0 & 0x07) << 18) | (byte(1) << 12) | (byte(2) << 6) | byte(3);
    if (cp >= 0x10000 && cp <= 0x10FFFF) {
      *len = 4;
      return cp;
    }
  }
  *len = 1;
  return 0xDC00 + b0;  // Python's surrogateescape stand-in: not a space, not a letter
}

// str.isspace() / the `\s` of a str pattern (Py_UNICODE_ISSPACE).
bool IsPySpace(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// str.strip() with no argument.
std::string_view PyStrip(std::string_view s) {
  size_t begin = 0;
  while (begin < s.size()) {
    size_t len = 0;
    if (!IsPySpace(DecodeAt(s, begin, &len))) break;
    begin += len;
  }
  size_t end = begin;  // one past the last non-space code point
  for (size_t i = begin; i < s.size();) {
    size_t len = 0;
    const bool space = IsPySpace(DecodeAt(s, i, &len));
    i += len;
    if (!space) end = i;
  }
  return s.substr(begin, end - begin);
}

bool IsBlank(std::string_view s) { return PyStrip(s).empty(); }

// s[:limit] counting code points.
std::string PyPrefix(std::string_view s, size_t limit) {
  size_t i = 0;
  for (size_t n = 0; i < s.size() && n < limit; ++n) {
    size_t len = 0;
    DecodeAt(s, i, &len);
    i += len;
  }
  return std::string(s.substr(0, i));
}

// Code points repr() escapes besides the C0/C1 controls: the non-printable ones hosts can
// plausibly send (spaces other than ' ', line/paragraph separators, format characters,
// private use). Python's full table is Unicode's; this covers what matters here.
bool ReprEscapes(char32_t c) {
  return c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
         (c >= 0x205F && c <= 0x2064) || (c >= 0x2066 && c <= 0x206F) || c == 0x3000 ||
         c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB) || (c >= 0xE000 && c <= 0xF8FF) ||
         (c >= 0xDC80 && c <= 0xDCFF) || c >= 0xF0000;
}

void AppendPyRepr(std::string& out, const ojson& v);

void AppendPyStringRepr(std::string& out, std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  out.push_back(quote);
  for (size_t i = 0; i < s.size();) {
    size_t len = 0;
    const char32_t c = DecodeAt(s, i, &len);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (ReprEscapes(c)) {
      char buf[16];
      const auto value = static_cast<unsigned long>(c);
      if (c <= 0xFF) {
        std::snprintf(buf, sizeof buf, "\\x%02lx", value);
      } else if (c <= 0xFFFF) {
        std::snprintf(buf, sizeof buf, "\\u%04lx", value);
      } else {
        std::snprintf(buf, sizeof buf, "\\U%08lx", value);
      }
      out += buf;
    } else {
      out.append(s.substr(i, len));
    }
    i += len;
  }
  out.push_back(quote);
}

void AppendPyRepr(std::string& out, const ojson& v) {
  using T = ojson::value_t;
  switch (v.type()) {
    case T::null:
      out += "None";
      return;
    case T::boolean:
      out += v.get<bool>() ? "True" : "False";
      return;
    case T::number_integer:
      out += std::to_string(v.get<int64_t>());
      return;
    case T::number_unsigned:
      out += std::to_string(v.get<uint64_t>());
      return;
    case T::number_float:
      out += PythonFloatRepr(v.get<double>());
      return;
    case T::string:
      AppendPyStringRepr(out, v.get_ref<const std::string&>());
      return;
    case T::array: {
      out.push_back('[');
      bool first = true;
      for (const auto& item : v) {
        if (!first) out += ", ";
        first = false;
        AppendPyRepr(out, item);
      }
      out.push_back(']');
      return;
    }
    case T::object: {
      out.push_back('{');
      bool first = true;
      for (const auto& [key, item] : v.items()) {
        if (!first) out += ", ";
        first = false;
        AppendPyStringRepr(out, key);
        out += ": ";
        AppendPyRepr(out, item);
      }
      out.push_back('}');
      return;
    }
    case T::binary:
    case T::discarded:
      out += "None";
      return;
  }
}

// str(v) for a value json.loads produced.
std::string PyStr(const ojson& v) {
  if (v.is_string()) return v.get<std::string>();
  std::string out;
  AppendPyRepr(out, v);
  return out;
}

// Python truthiness of a JSON value (JS's agrees for everything the files hold).
bool Truthy(const ojson& v) {
  switch (v.type()) {
    case ojson::value_t::null:
      return false;
    case ojson::value_t::boolean:
      return v.get<bool>();
    case ojson::value_t::number_integer:
      return v.get<int64_t>() != 0;
    case ojson::value_t::number_unsigned:
      return v.get<uint64_t>() != 0;
    case ojson::value_t::number_float:
      return v.get<double>() != 0.0;
    case ojson::value_t::string:
      return !v.get_ref<const std::string&>().empty();
    case ojson::value_t::array:
    case ojson::value_t::object:
      return !v.empty();
    default:
      return false;
  }
}

bool IsInteger(const ojson& v) { return v.is_number_integer(); }  // false for bool and float

// ---- the state file's JSON: json.dumps(ensure_ascii=False), default separators ------------

void AppendPythonJson(std::string& out, const ojson& v) { out += PythonJsonDumps(v); }

json ToPlain(const ojson& v) {
  switch (v.type()) {
    case ojson::value_t::object: {
      json out = json::object();
      for (const auto& [key, item] : v.items()) out[key] = ToPlain(item);
      return out;
    }
    case ojson::value_t::array: {
      json out = json::array();
      for (const auto& item : v) out.push_back(ToPlain(item));
      return out;
    }
    case ojson::value_t::null:
      return nullptr;
    case ojson::value_t::boolean:
      return v.get<bool>();
    case ojson::value_t::number_integer:
      return v.get<int64_t>();
    case ojson::value_t::number_unsigned:
      return v.get<uint64_t>();
    case ojson::value_t::number_float:
      return v.get<double>();
    case ojson::value_t::string:
      return v.get<std::string>();
    default:
      return nullptr;
  }
}

ojson ToOrdered(const json& v) {
  switch (v.type()) {
    case json::value_t::object: {
      ojson out = ojson::object();
      for (const auto& [key, item] : v.items()) out[key] = ToOrdered(item);
      return out;
    }
    case json::value_t::array: {
      ojson out = ojson::array();
      for (const auto& item : v) out.push_back(ToOrdered(item));
      return out;
    }
    case json::value_t::null:
      return nullptr;
    case json::value_t::boolean:
      return v.get<bool>();
    case json::value_t::number_integer:
      return v.get<int64_t>();
    case json::value_t::number_unsigned:
      return v.get<uint64_t>();
    case json::value_t::number_float:
      return v.get<double>();
    case json::value_t::string:
      return v.get<std::string>();
    default:
      return nullptr;
  }
}

// datetime.now(timezone.utc).isoformat(): 2026-07-15T12:00:00.123456+00:00 (no fraction when
// the microseconds are zero).
std::string IsoNow() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  tm parts{};
  gmtime_r(&ts.tv_sec, &parts);
  char buf[64];
  const long micros = ts.tv_nsec / 1000;
  if (micros != 0) {
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%06ld+00:00",
                  parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday, parts.tm_hour,
                  parts.tm_min, parts.tm_sec, micros);
  } else {
    std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d+00:00", parts.tm_year + 1900,
                  parts.tm_mon + 1, parts.tm_mday, parts.tm_hour, parts.tm_min, parts.tm_sec);
  }
  return buf;
}

// ---- errors -------------------------------------------------------------------------------

Error DataLoss(std::string message) { return {Errc::kDataLoss, false, std::move(message)}; }

Error FileError(const std::string& what, const std::string& path, int err) {
  const Errc code =
      (err == EACCES || err == EPERM || err == EROFS) ? Errc::kPermissionDenied : Errc::kInternal;
  return {code, false, what + " " + path + ": " + std::strerror(err)};
}

// Runs `fn`, turning any exception into an Error: the public API never throws.
template <class F>
auto Guarded(F&& fn) -> decltype(fn()) {
  try {
    return fn();
  } catch (const std::exception& e) {
    spdlog::error("memory controls: unexpected exception: {}", e.what());
    return Error::Internal("Memory controls failed unexpectedly");
  }
}

// ---- paths and the state ------------------------------------------------------------------

Status ValidateKey(const std::string& key) {
  bool ok = key.size() == 64;
  for (char c : key) ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  if (!ok) return Error::Invalid("Invalid memory control key");
  return Ok();
}

std::string StatePath(const std::string& root, const std::string& key) {
  return root + "/" + key + ".json";
}
std::string LockPath(const std::string& root, const std::string& key) {
  return root + "/" + key + ".lock";
}

ojson BlankState() {
  return ojson{{"schemaVersion", 1},
               {"sessions", ojson::object()},
               {"tasks", ojson::object()},
               {"recent", ojson::array()},
               {"budgetChars", kDefaultBudgetChars}};
}

Result<std::string> ReadWholeFile(const std::string& path, bool* missing) {
  *missing = false;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) {
      *missing = true;
      return std::string();
    }
    return DataLoss("Cannot read the memory controls state " + path + ": " + std::strerror(errno));
  }
  std::string text;
  char buf[65536];
  for (;;) {
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      close(fd);
      return DataLoss("Cannot read the memory controls state " + path + ": " + std::strerror(err));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

// _read(key): the state, or the blank state when the file does not exist. Containers a
// hand-edited file lacks are added empty; ones of the wrong type are data loss.
Result<ojson> ReadState(const std::string& root, const std::string& key) {
  if (auto ok = ValidateKey(key); !ok) return ok.error();
  const std::string path = StatePath(root, key);
  bool missing = false;
  auto text = ReadWholeFile(path, &missing);
  if (!text) return text.error();
  if (missing) return BlankState();
  ojson state = ParseOrderedJsonLenient(*text);  // ojson::parse, in linear time
  if (state.is_discarded()) return DataLoss("The memory controls state is not valid JSON: " + path);
  if (!state.is_object()) {
    return DataLoss("The memory controls state is not a JSON object: " + path);
  }
  const auto version = state.find("schemaVersion");
  const bool v1 =
      version != state.end() && ((version->is_number_integer() && version->get<int64_t>() == 1) ||
                                 (version->is_number_float() && version->get<double>() == 1.0));
  if (!v1) return DataLoss("Unsupported memory controls version");
  for (const auto& [name, object] :
       {std::pair{"sessions", true}, {"tasks", true}, {"recent", false}}) {
    auto it = state.find(name);
    if (it == state.end()) {
      state[name] = object ? ojson::object() : ojson::array();
    } else if (object ? !it->is_object() : !it->is_array()) {
      return DataLoss(std::string("The memory controls state has a malformed \"") + name +
                      "\": " + path);
    }
  }
  return state;
}

// budgetChars of a state: only 1000..64000 is ever written; a missing or hand-edited value
// outside that range reads as the default.
int64_t EffectiveBudget(const ojson& state) {
  const auto it = state.find("budgetChars");
  if (it == state.end() || !IsInteger(*it)) return kDefaultBudgetChars;
  if (it->is_number_unsigned()) {
    const auto value = it->get<uint64_t>();
    return value >= 1000 && value <= 64000 ? static_cast<int64_t>(value) : kDefaultBudgetChars;
  }
  const auto value = it->get<int64_t>();
  return value >= 1000 && value <= 64000 ? value : kDefaultBudgetChars;
}

// What policy() and may_write() read of one session row.
struct RowView {
  std::string mode = "normal";
  int64_t generation = 0;
  std::optional<std::string> turn_hash;
  bool legacy_suppressed = false;
  const ojson* row = nullptr;  // into the state; valid while the state is not modified

  // allowed(session_id, turn_hash) of may_write.
  bool TurnAllowed(const std::optional<std::string>& hash) const {
    if (hash && !hash->empty()) {
      if (row == nullptr) return true;
      const auto turns = row->find("suppressedTurns");
      if (turns == row->end() || !turns->is_object()) return true;
      const auto flag = turns->find(*hash);
      return flag == turns->end() || !Truthy(*flag);
    }
    return !legacy_suppressed;
  }
};

Status CheckRow(const ojson& row, const std::string& hash) {
  if (!row.is_object()) {
    return DataLoss("The memory controls state has a malformed session " + hash);
  }
  if (auto m = row.find("mode"); m != row.end() && !m->is_string()) {
    return DataLoss("The memory controls state has a malformed mode in session " + hash);
  }
  if (auto g = row.find("generation"); g != row.end() && !IsInteger(*g)) {
    return DataLoss("The memory controls state has a malformed generation in session " + hash);
  }
  return Ok();
}

// _session(state, session_id), read-only: an absent row reads as the default row.
Result<RowView> ReadRow(const ojson& state, const std::string& session_id) {
  if (IsBlank(session_id)) return Error::Invalid("Exact session_id is required");
  RowView view;
  const std::string hash = Sha256Hex(session_id);
  const ojson& sessions = state.at("sessions");
  const auto it = sessions.find(hash);
  if (it == sessions.end()) return view;
  if (auto ok = CheckRow(*it, hash); !ok) return ok.error();
  view.row = &*it;
  view.mode = it->value("mode", std::string("normal"));
  view.generation = it->value("generation", int64_t{0});
  if (auto t = it->find("currentTurnHash");
      t != it->end() && t->is_string() && !t->get_ref<const std::string&>().empty()) {
    view.turn_hash = t->get<std::string>();
  }
  if (auto s = it->find("suppressLegacyCapture"); s != it->end()) {
    view.legacy_suppressed = Truthy(*s);
  }
  return view;
}

// _session(state, session_id) for an edit: the row, created with TMCRA's defaults when absent.
// The pointer is valid until the next insertion into state["sessions"].
Result<ojson*> MutableRow(ojson& state, const std::string& session_id) {
  if (IsBlank(session_id)) return Error::Invalid("Exact session_id is required");
  const std::string hash = Sha256Hex(session_id);
  ojson& sessions = state["sessions"];
  if (!sessions.contains(hash)) {
    sessions[hash] = ojson{{"mode", "normal"}, {"generation", 0}, {"taskId", nullptr}};
  }
  ojson& row = sessions[hash];
  if (auto ok = CheckRow(row, hash); !ok) return ok.error();
  if (!row.contains("mode")) row["mode"] = "normal";
  if (!row.contains("generation")) row["generation"] = 0;
  return &row;
}

std::optional<std::string> ParentOf(const std::string& session_id) {
  const size_t pos = session_id.find(kSubagent);
  if (pos == std::string::npos) return std::nullopt;
  return session_id.substr(0, pos);
}

Result<Policy> PolicyOf(const ojson& state, const std::string& key, const std::string& session_id) {
  auto row = ReadRow(state, session_id);
  if (!row) return row.error();
  std::optional<RowView> parent;
  if (auto parent_id = ParentOf(session_id)) {
    auto p = ReadRow(state, *parent_id);
    if (!p) return p.error();
    parent = std::move(*p);
  }
  Policy policy;
  policy.key = key;
  policy.session_id = session_id;
  policy.mode = row->mode;
  policy.generation = row->generation;
  policy.turn_hash = row->turn_hash;
  policy.parent_turn_hash = parent ? parent->turn_hash : std::nullopt;
  policy.parent_generation = parent ? parent->generation : 0;
  policy.read = row->mode != "off" && (!parent || parent->mode != "off");
  policy.write = row->mode == "normal" && (!parent || parent->mode == "normal");
  return policy;
}

// ---- the lock -----------------------------------------------------------------------------

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return {};
  return buf;
}

double AgeSeconds(const struct stat& st) {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<double>(now.tv_sec - st.st_mtim.tv_sec) +
         static_cast<double>(now.tv_nsec - st.st_mtim.tv_nsec) / 1e9;
}

bool SameFile(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// The lock file we created and hold: `<key>.lock`, O_EXCL, 0600, with {"pid", "host",
// "createdAt"} inside and an flock(LOCK_EX) on it for as long as we hold it.
class HeldLock {
 public:
  HeldLock(std::string path, int fd, struct stat st) : path_(std::move(path)), fd_(fd), st_(st) {}
  HeldLock(const HeldLock&) = delete;
  HeldLock& operator=(const HeldLock&) = delete;
  ~HeldLock() {
    // Unlink only our own lock: if it was broken and someone else holds the name now, their
    // lock stays.
    if (StillOurs()) unlink(path_.c_str());
    close(fd_);
  }

  // True while `<key>.lock` is still the file we created (nobody broke it).
  bool StillOurs() const {
    struct stat now {};
    return lstat(path_.c_str(), &now) == 0 && SameFile(now, st_);
  }

 private:
  std::string path_;
  int fd_;
  struct stat st_;
};

// Judges an existing lock and removes it when it is stale. Returns true when the caller should
// try to create the lock again at once (it was removed, or had already gone).
//
// Stale: the holder is not a live tmcra-mcp (no flock on the file) and either the lock names a
// pid on this host that no longer exists, or the file is older than kStaleLockSeconds (the only
// test for TMCRA's JS/Python locks, which are empty). The stale file is renamed to a unique
// name first, so of two breakers only one removes it; a breaker that finds it renamed a fresh
// lock (created after its judgement) puts it back.
bool BreakIfStale(const std::string& lock_path) {
  const int fd = open(lock_path.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) return errno == ENOENT;
  struct stat st {};
  if (fstat(fd, &st) != 0) {
    close(fd);
    return false;
  }
  if (flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) {
    close(fd);  // a live tmcra-mcp holds it, however long
    return false;
  }
  std::string content;
  char buf[1024];
  const ssize_t n = read(fd, buf, sizeof buf);
  if (n > 0) content.assign(buf, static_cast<size_t>(n));
  std::string reason;
  const json holder = json::parse(content, nullptr, /*allow_exceptions=*/false);
  if (holder.is_object() && holder.value("host", std::string()) == HostName() &&
      holder.contains("pid") && holder["pid"].is_number_integer()) {
    const auto pid = holder["pid"].get<int64_t>();
    if (pid > 0 && pid <= INT32_MAX && kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      reason = "its holder (pid " + std::to_string(pid) + ") has exited";
    }
  }
  // A lock "from the future" (the clock was set back) is judged by the same distance.
  if (reason.empty() && std::fabs(AgeSeconds(st)) > kStaleLockSeconds) {
    reason = "it is older than " + std::to_string(static_cast<int>(kStaleLockSeconds)) + " s";
  }
  if (reason.empty()) {
    close(fd);
    return false;
  }
  struct stat named {};
  if (lstat(lock_path.c_str(), &named) != 0 || !SameFile(named, st)) {
    close(fd);  // another breaker was quicker; the name is free or holds a new lock
    return true;
  }
  const std::string aside = lock_path + "." + UuidV4() + ".stale";
  if (rename(lock_path.c_str(), aside.c_str()) != 0) {
    const bool gone = errno == ENOENT;
    close(fd);
    return gone;
  }
  struct stat moved {};
  if (lstat(aside.c_str(), &moved) == 0 && !SameFile(moved, st)) {
    // Another breaker removed the stale lock and a new holder created this one in between:
    // give it back (link fails if yet another lock exists; that holder then notices it lost
    // the lock before committing).
    if (link(aside.c_str(), lock_path.c_str()) != 0) {
      spdlog::warn("memory controls: could not restore a live lock {}", lock_path);
    }
    unlink(aside.c_str());
    close(fd);
    return true;
  }
  unlink(aside.c_str());
  close(fd);
  spdlog::warn("memory controls: removed the stale lock {} ({})", lock_path, reason);
  return true;
}

Result<std::unique_ptr<HeldLock>> AcquireLock(const std::string& root, const std::string& key) {
  const std::string path = LockPath(root, key);
  int breaks = 0;
  for (int attempt = 0; attempt < kLockAttempts;) {
    // The lock is born complete: holder details and flock go on a private file first, which
    // link(2) then publishes under the lock's name only if that name is free. A holder killed
    // at any moment therefore never leaves an empty lock that only age could clear (TMCRA's
    // plain O_CREAT|O_EXCL protocol is still respected: link fails with EEXIST on its locks).
    const std::string staged = path + "." + UuidV4() + ".new";
    const int fd = open(staged.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) return FileError("Cannot create the memory controls lock", staged, errno);
    fchmod(fd, 0600);
    while (flock(fd, LOCK_EX) != 0 && errno == EINTR) {
    }
    ojson holder{
        {"pid", static_cast<int64_t>(getpid())}, {"host", HostName()}, {"createdAt", IsoNow()}};
    std::string text;
    AppendPythonJson(text, holder);
    text.push_back('\n');
    (void)!write(fd, text.data(), text.size());
    const int linked = link(staged.c_str(), path.c_str());
    const int link_errno = errno;
    unlink(staged.c_str());
    if (linked == 0) {
      struct stat st {};
      fstat(fd, &st);
      return std::make_unique<HeldLock>(path, fd, st);
    }
    close(fd);
    errno = link_errno;
    if (errno != EEXIST) return FileError("Cannot create the memory controls lock", path, errno);
    if (breaks < kMaxLockBreaks && BreakIfStale(path)) {
      ++breaks;
      continue;
    }
    ++attempt;
    if (attempt < kLockAttempts) std::this_thread::sleep_for(kLockInterval);
  }
  return Error::Unavailable(kBusy);
}

// Creates `root` and its missing parents, each 0700 (an existing directory is left as it is).
Status EnsureRoot(const std::string& root) {
  if (root.empty()) return Error::Invalid("The memory controls directory is not set");
  struct stat st {};
  if (stat(root.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return Ok();
    return FileError("Cannot use the memory controls directory", root, ENOTDIR);
  }
  for (size_t pos = 1;; ++pos) {
    pos = root.find('/', pos);
    const std::string prefix = root.substr(0, pos);
    if (mkdir(prefix.c_str(), 0700) == 0) {
      chmod(prefix.c_str(), 0700);  // whatever the umask
    } else if (errno != EEXIST) {
      return FileError("Cannot create the memory controls directory", prefix, errno);
    }
    if (pos == std::string::npos) break;
  }
  return Ok();
}

Status WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Error{Errc::kInternal, false, std::strerror(errno)};
    }
    done += static_cast<size_t>(n);
  }
  return Ok();
}

// `<key>.<uuid4>.tmp` (0600), fsync, rename over `<key>.json`, fsync the directory.
Status WriteState(const std::string& root, const std::string& key, const ojson& state,
                  const HeldLock& lock) {
  std::string text;
  AppendPythonJson(text, state);
  const std::string temporary = root + "/" + key + "." + UuidV4() + ".tmp";
  const int fd =
      open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return FileError("Cannot write the memory controls state", temporary, errno);
  fchmod(fd, 0600);
  Status written = WriteAll(fd, text);
  if (written && fsync(fd) != 0) written = Error{Errc::kInternal, false, std::strerror(errno)};
  close(fd);
  if (!written) {
    unlink(temporary.c_str());
    return Error::Internal("Cannot write the memory controls state " + temporary + ": " +
                           written.error().message);
  }
  if (!lock.StillOurs()) {  // our lock was broken as stale: another writer may be in
    unlink(temporary.c_str());
    return Error::Unavailable(kBusy);
  }
  if (rename(temporary.c_str(), StatePath(root, key).c_str()) != 0) {
    const int err = errno;
    unlink(temporary.c_str());
    return FileError("Cannot replace the memory controls state", StatePath(root, key), err);
  }
  if (const int dir = open(root.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir >= 0) {
    fsync(dir);
    close(dir);
  }
  return Ok();
}

// _edit(key): validate, lock, re-read under the lock, run `fn`, write when it succeeded and
// changed something, unlock. `fn(state, dirty)` may clear `dirty` to skip the write.
template <class F>
auto Edit(const std::string& root, const std::string& key, F&& fn)
    -> decltype(fn(std::declval<ojson&>(), std::declval<bool&>())) {
  if (auto pre = ReadState(root, key); !pre) return pre.error();
  if (auto made = EnsureRoot(root); !made) return made.error();
  auto lock = AcquireLock(root, key);
  if (!lock) return lock.error();
  auto state = ReadState(root, key);
  if (!state) return state.error();
  bool dirty = true;
  auto result = fn(*state, dirty);
  if (!result || !dirty) return result;
  if (auto written = WriteState(root, key, *state, **lock); !written) return written.error();
  return result;
}

// ---- operations ---------------------------------------------------------------------------

json SuppressRow(ojson& row) {
  const auto current = row.find("currentTurnHash");
  const bool identified = current != row.end() && Truthy(*current);
  if (identified) {
    // Copied first: inserting "suppressedTurns" may move the row's members.
    const std::string hash = current->is_string() ? current->get<std::string>() : PyStr(*current);
    ojson& turns = row["suppressedTurns"];
    if (!turns.is_object()) turns = ojson::object();
    turns[hash] = true;
  }
  row["suppressLegacyCapture"] = true;
  return json{{"automaticCapture", "suppressed"},
              {"turnIdentified", identified},
              {"originalMemoryChanged", false}};
}

Result<json> Suppress(const std::string& root, const std::string& key,
                      const std::string& session_id) {
  return Edit(root, key, [&](ojson& state, bool&) -> Result<json> {
    auto row = MutableRow(state, session_id);
    if (!row) return row.error();
    return SuppressRow(**row);
  });
}

Result<json> Dashboard(const std::string& root, const std::string& key,
                       const std::string& session_id) {
  auto state = ReadState(root, key);
  if (!state) return state.error();
  auto policy = PolicyOf(*state, key, session_id);
  if (!policy) return policy.error();
  json view = policy->ToJson();
  view.erase("key");
  json tasks = json::array();
  for (const auto& [id, task] : state->at("tasks").items()) tasks.push_back(ToPlain(task));
  json recent = json::array();
  const std::string session_key = Sha256Hex(session_id);
  for (const auto& item : state->at("recent")) {
    if (item.is_object() && item.contains("sessionKey") && item["sessionKey"] == session_key) {
      recent.push_back(ToPlain(item));
    }
  }
  return json{{"policy", std::move(view)},
              {"tasks", std::move(tasks)},
              {"budgetChars", EffectiveBudget(*state)},
              {"recent", std::move(recent)}};
}

Result<json> SetMode(ojson& row, const ojson& args) {
  const auto it = args.find("mode");
  const bool valid = it != args.end() && it->is_string() &&
                     (*it == "normal" || *it == "recall_only" || *it == "off");
  if (!valid) return Error::Invalid("Invalid memory mode");
  const std::string mode = it->get<std::string>();
  int64_t generation = row["generation"].get<int64_t>();
  if (row["mode"] != mode) {
    row["generation"] = ++generation;
    // Deviation (§9.4 #21): every capture taken before a mode switch is now invalid (its
    // generation differs), so the blanket suppression of turn-less captures a correction set
    // has nothing left to protect and must not outlive the user's explicit choice.
    row.erase("suppressLegacyCapture");
  }
  row["mode"] = mode;
  if (mode != "normal") row["taskId"] = nullptr;
  return json{{"mode", mode}, {"generation", generation}, {"disabledContentBackfill", false}};
}

Result<json> SetBudget(ojson& state, const ojson& args) {
  const auto it = args.find("budgetChars");
  if (it == args.end() || !IsInteger(*it)) return Error::Invalid("budgetChars must be 1000..64000");
  const bool in_range = it->is_number_unsigned()
                            ? it->get<uint64_t>() >= 1000 && it->get<uint64_t>() <= 64000
                            : it->get<int64_t>() >= 1000 && it->get<int64_t>() <= 64000;
  if (!in_range) return Error::Invalid("budgetChars must be 1000..64000");
  const int64_t budget = it->get<int64_t>();
  state["budgetChars"] = budget;
  return json{{"budgetChars", budget}};
}

Result<json> UpdateTask(ojson& state, const std::string& session_id, const ojson& args) {
  {
    auto row = MutableRow(state, session_id);
    if (!row) return row.error();
    if ((**row)["mode"] != "normal") return Error::Invalid("Task capture is disabled");
  }
  ojson& tasks = state["tasks"];
  std::string task_id;
  const auto id = args.find("id");
  if (id != args.end() && Truthy(*id)) {
    if (!id->is_string() || !tasks.contains(id->get<std::string>())) {
      return Error::Invalid("Unknown task in this scope");
    }
    task_id = id->get<std::string>();
  } else {
    task_id = "task_" + UuidV4();
  }
  ojson task = ojson::object();
  if (auto existing = tasks.find(task_id); existing != tasks.end() && existing->is_object()) {
    task = *existing;
  }
  for (const char* field : {"objective", "summary", "nextStep"}) {
    const auto value = args.find(field);
    // Deviation: a null field is "not given" (JS's `??`), not Python's str(None) == "None".
    if (value == args.end() || value->is_null()) continue;
    task[field] = PyPrefix(PyStrip(PyStr(*value)), kTaskFieldLimit);
  }
  const auto status_arg = args.find("status");
  const ojson status =
      status_arg == args.end() || status_arg->is_null() ? ojson("active") : *status_arg;
  task["id"] = task_id;
  task["status"] = status;
  task["updatedAt"] = IsoNow();
  const auto objective = task.find("objective");
  const bool valid_status =
      status.is_string() && (status == "active" || status == "completed" || status == "blocked");
  if (objective == task.end() || !Truthy(*objective) || !valid_status) {
    return Error::Invalid("Task objective and valid status required");
  }
  tasks[task_id] = task;
  auto row = MutableRow(state, session_id);
  if (!row) return row.error();
  (**row)["taskId"] = status == "active" ? ojson(task_id) : ojson(nullptr);
  return ToPlain(task);
}

// Fullmatch of TMCRA's continuation pattern on an already stripped prompt (Python `re`,
// IGNORECASE, Unicode `\s`):
//   (?:好的?[,，\s]*)?(?:继续|接着[做来]?|往下[做走]?|补齐这些|完成这些|continue|resume|go on|carry
//   on)[。.!！\s]*
// Matched by hand rather than with std::regex: libstdc++'s matcher recurses per character (a
// long "continue!!!…" would exhaust the stack), it works on bytes (the CJK classes above are
// multi-byte), and its `\s` and icase are ASCII-only. No alternative needs backtracking: no
// keyword starts with a character the optional prefix can consume, and no optional keyword
// suffix (做, 来, 走) can be consumed by the trailing class.
bool MatchesContinuation(std::string_view s) {
  size_t i = 0;
  const auto at = [&](std::string_view literal) { return s.substr(i, literal.size()) == literal; };
  const auto space_at = [&](size_t* len) { return i < s.size() && IsPySpace(DecodeAt(s, i, len)); };
  if (at("好")) {
    i += std::strlen("好");
    if (at("的")) i += std::strlen("的");
    for (size_t len = 0;;) {
      if (at(",")) {
        i += 1;
      } else if (at("，")) {
        i += std::strlen("，");
      } else if (space_at(&len)) {
        i += len;
      } else {
        break;
      }
    }
  }
  // One ASCII keyword, case-insensitively as Python's re.I does it for str patterns: a letter
  // also matches its upper case, 'i' also İ (U+0130) and ı (U+0131), 's' also ſ (U+017F).
  const auto keyword_ci = [&](std::string_view word) {
    size_t j = i;
    for (char k : word) {
      if (j >= s.size()) return false;
      size_t len = 0;
      const char32_t c = DecodeAt(s, j, &len);
      const auto lower = static_cast<char32_t>(k);
      bool ok = c == lower;
      if (!ok && k >= 'a' && k <= 'z') {
        ok =
            c == lower - 32 || (k == 'i' && (c == 0x130 || c == 0x131)) || (k == 's' && c == 0x17F);
      }
      if (!ok) return false;
      j += len;
    }
    i = j;
    return true;
  };
  bool keyword = false;
  for (std::string_view word : {"继续", "补齐这些", "完成这些"}) {
    if (!keyword && at(word)) {
      i += word.size();
      keyword = true;
    }
  }
  if (!keyword && at("接着")) {
    i += std::strlen("接着");
    if (at("做") || at("来")) i += std::strlen("做");
    keyword = true;
  }
  if (!keyword && at("往下")) {
    i += std::strlen("往下");
    if (at("做") || at("走")) i += std::strlen("做");
    keyword = true;
  }
  for (std::string_view word : {"continue", "resume", "go on", "carry on"}) {
    if (!keyword && keyword_ci(word)) keyword = true;
  }
  if (!keyword) return false;
  while (i < s.size()) {
    size_t len = 0;
    if (at("。") || at("！")) {
      i += std::strlen("。");
    } else if (at(".") || at("!")) {
      i += 1;
    } else if (space_at(&len)) {
      i += len;
    } else {
      return false;
    }
  }
  return true;
}

// A task field for the handoff query: f"{value}" in Python; a null reads as "".
std::string FieldText(const ojson& task, const char* field) {
  const auto it = task.find(field);
  if (it == task.end() || it->is_null()) return {};
  return PyStr(*it);
}

bool IsActive(const ojson& task) {
  if (!task.is_object()) return false;
  const auto status = task.find("status");
  return status != task.end() && *status == "active";
}

}  // namespace

// ---- Policy -------------------------------------------------------------------------------

json Policy::ToJson() const {
  const bool subagent = session_id.find(kSubagent) != std::string::npos;
  return json{{"key", key},
              {"sessionId", session_id},
              {"mode", mode},
              {"generation", generation},
              {"turnHash", turn_hash ? json(*turn_hash) : json(nullptr)},
              {"parentTurnHash", parent_turn_hash ? json(*parent_turn_hash) : json(nullptr)},
              {"parentGeneration",
               subagent && parent_generation >= 0 ? json(parent_generation) : json(nullptr)},
              {"read", read},
              {"write", write}};
}

Result<Policy> Policy::FromJson(const json& value) {
  return Guarded([&]() -> Result<Policy> {
    if (!value.is_object()) return Error::Invalid("capture: must be an object");
    Policy p;
    const auto string_field = [&](const char* name, std::string* out) -> Status {
      const auto it = value.find(name);
      if (it == value.end() || !it->is_string()) {
        return Error::Invalid(std::string("capture.") + name + ": must be a string");
      }
      *out = it->get<std::string>();
      return Ok();
    };
    const auto optional_string = [&](const char* name, std::optional<std::string>* out) -> Status {
      const auto it = value.find(name);
      if (it == value.end() || it->is_null()) return Ok();
      if (!it->is_string()) {
        return Error::Invalid(std::string("capture.") + name + ": must be a string or null");
      }
      if (!it->get_ref<const std::string&>().empty()) *out = it->get<std::string>();
      return Ok();
    };
    const auto integer = [](const json& v) {
      return v.is_number_integer() && (!v.is_number_unsigned() || v.get<uint64_t>() <= INT64_MAX);
    };
    if (auto s = string_field("key", &p.key); !s) return s.error();
    if (auto s = string_field("sessionId", &p.session_id); !s) return s.error();
    if (auto it = value.find("mode"); it != value.end()) {
      if (!it->is_string()) return Error::Invalid("capture.mode: must be a string");
      p.mode = it->get<std::string>();
    }
    const auto gen = value.find("generation");
    if (gen == value.end() || !integer(*gen)) {
      return Error::Invalid("capture.generation: must be an integer");
    }
    p.generation = gen->get<int64_t>();
    if (auto s = optional_string("turnHash", &p.turn_hash); !s) return s.error();
    if (auto s = optional_string("parentTurnHash", &p.parent_turn_hash); !s) return s.error();
    const bool subagent = p.session_id.find(kSubagent) != std::string::npos;
    const auto parent_gen = value.find("parentGeneration");
    if (parent_gen == value.end() || parent_gen->is_null()) {
      // Python compares None with the current parent generation: a sub-agent capture without
      // one never matches; for any other session both sides are "no parent".
      p.parent_generation = subagent ? -1 : 0;
    } else if (integer(*parent_gen)) {
      p.parent_generation = parent_gen->get<int64_t>();
    } else {
      return Error::Invalid("capture.parentGeneration: must be an integer or null");
    }
    const auto truthy = [&](const char* name) {
      const auto it = value.find(name);
      return it != value.end() && Truthy(ToOrdered(*it));
    };
    p.read = truthy("read");
    p.write = truthy("write");
    return p;
  });
}

std::string ControlKey(std::string_view base_url, std::string_view api_key,
                       std::string_view scope) {
  std::string_view base = base_url;
  while (!base.empty() && base.back() == '/') base.remove_suffix(1);
  std::string material;
  material.reserve(base.size() + api_key.size() + scope.size() + 2);
  material.append(base);
  material.push_back('\0');
  material.append(api_key);
  material.push_back('\0');
  material.append(scope);
  return Sha256Hex(material);
}

bool IsContinuation(std::string_view prompt) { return MatchesContinuation(PyStrip(prompt)); }

// ---- ControlStore -------------------------------------------------------------------------

ControlStore::ControlStore(std::string root) : root_(std::move(root)) {}

Result<Policy> ControlStore::GetPolicy(const std::string& key, const std::string& session_id) {
  return Guarded([&]() -> Result<Policy> {
    auto state = ReadState(root_, key);
    if (!state) return state.error();
    return PolicyOf(*state, key, session_id);
  });
}

namespace {

// continuation() against a state already read (§4.2.4).
Result<json> ContinuationOf(const ojson& state, const std::string& session_id,
                            const std::string& prompt) {
  std::vector<const ojson*> active;
  for (const auto& [id, task] : state.at("tasks").items()) {
    if (IsActive(task)) active.push_back(&task);
  }
  auto row = ReadRow(state, session_id);
  if (!row) return row.error();
  const ojson* task = nullptr;
  if (row->row != nullptr) {
    const auto bound = row->row->find("taskId");
    if (bound != row->row->end() && bound->is_string()) {
      const auto it = state.at("tasks").find(bound->get<std::string>());
      if (it != state.at("tasks").end() && IsActive(*it)) task = &*it;
    }
  }
  if (task == nullptr && active.size() == 1) task = active.front();
  if (task == nullptr) {
    json candidates = json::array();
    for (const ojson* t : active) {
      candidates.push_back({{"id", ToPlain(t->value("id", ojson()))},
                            {"objective", ToPlain(t->value("objective", ojson()))}});
    }
    return json{{"query", prompt}, {"task", nullptr}, {"candidates", std::move(candidates)}};
  }
  std::string query = prompt + "\nCurrent task: " + FieldText(*task, "objective") +
                      "\nLast observed result: " + FieldText(*task, "summary") +
                      "\nNext step: " + FieldText(*task, "nextStep");
  return json{{"query", std::move(query)}, {"task", ToPlain(*task)}, {"candidates", json::array()}};
}

json NoContinuation(const std::string& prompt) {
  return json{{"query", prompt}, {"task", nullptr}, {"candidates", json::array()}};
}

// ForRecall's answer from a state already read and the session's policy in it.
Result<RecallControls> SnapshotOf(const ojson& state, Policy policy, const std::string& session_id,
                                  const std::string& prompt) {
  RecallControls out;
  out.policy = std::move(policy);
  if (!out.policy.read) return out;  // recall is off: nothing more is looked at
  if (IsContinuation(prompt)) {
    auto handoff = ContinuationOf(state, session_id, prompt);
    if (!handoff) return handoff.error();
    out.handoff = std::move(*handoff);
  } else {
    out.handoff = NoContinuation(prompt);
  }
  out.budget_chars = EffectiveBudget(state);
  return out;
}

}  // namespace

Result<Policy> ControlStore::BeginTurn(const std::string& key, const std::string& session_id,
                                       const std::string& turn_id) {
  auto begun = BeginTurnForRecall(key, session_id, turn_id, "");
  if (!begun) return begun.error();
  return std::move(begun->policy);
}

Result<RecallControls> ControlStore::BeginTurnForRecall(const std::string& key,
                                                        const std::string& session_id,
                                                        const std::string& turn_id,
                                                        const std::string& prompt) {
  return Guarded([&]() -> Result<RecallControls> {
    if (IsBlank(turn_id)) return Error::Invalid("An exact host turn ID is required");
    auto read = ReadState(root_, key);
    if (!read) return read.error();
    auto before = PolicyOf(*read, key, session_id);
    if (!before) return before.error();
    const std::string hash = Sha256Hex(turn_id);
    // Writing is off, or a replayed prepare: nothing to record.
    if (!before->write || before->turn_hash == hash) {
      return SnapshotOf(*read, std::move(*before), session_id, prompt);
    }
    return Edit(root_, key, [&](ojson& state, bool& dirty) -> Result<RecallControls> {
      auto current = PolicyOf(state, key, session_id);
      if (!current) return current.error();
      if (!current->write) {  // the mode changed since the check above: record nothing
        dirty = false;
        return SnapshotOf(state, std::move(*current), session_id, prompt);
      }
      auto row = MutableRow(state, session_id);
      if (!row) return row.error();
      ojson& r = **row;
      const bool new_turn = !r.contains("currentTurnHash") || r["currentTurnHash"] != hash;
      if (!new_turn) {
        dirty = false;
        return SnapshotOf(state, std::move(*current), session_id, prompt);
      }
      r["currentTurnHash"] = hash;
      // Deviation (§9.4 #21): a new host turn ends the correction that suppressed turn-less
      // capture. The corrected turn itself stays vetoed by its hash in suppressedTurns.
      r.erase("suppressLegacyCapture");
      auto fresh = PolicyOf(state, key, session_id);
      if (!fresh) return fresh.error();
      // The state as it will be written (Edit writes it unless this returns an error).
      return SnapshotOf(state, std::move(*fresh), session_id, prompt);
    });
  });
}

Result<bool> ControlStore::MayWriteCaptured(const json& recall_receipt) {
  if (!recall_receipt.is_object()) return true;
  const auto it = recall_receipt.find("_local_capture");
  if (it == recall_receipt.end() || it->is_null()) return true;
  TMCRA_ASSIGN_OR_RETURN(const Policy capture, Policy::FromJson(*it));
  return MayWrite(capture);
}

Result<bool> ControlStore::MayWrite(const Policy& capture) {
  return Guarded([&]() -> Result<bool> {
    if (!capture.write) return false;
    auto state = ReadState(root_, capture.key);
    if (!state) return state.error();
    auto current = PolicyOf(*state, capture.key, capture.session_id);
    if (!current) return current.error();
    if (!current->write || current->generation != capture.generation ||
        current->parent_generation != capture.parent_generation) {
      return false;
    }
    auto row = ReadRow(*state, capture.session_id);
    if (!row) return row.error();
    if (!row->TurnAllowed(capture.turn_hash)) return false;
    if (auto parent_id = ParentOf(capture.session_id)) {
      auto parent = ReadRow(*state, *parent_id);
      if (!parent) return parent.error();
      if (!parent->TurnAllowed(capture.parent_turn_hash)) return false;
    }
    return true;
  });
}

Status ControlStore::SuppressTurn(const std::string& key, const std::string& session_id) {
  return Guarded([&]() -> Status {
    auto result = Suppress(root_, key, session_id);
    if (!result) return result.error();
    return Ok();
  });
}

Result<json> ControlStore::Control(const std::string& key, const std::string& session_id,
                                   const std::string& action, const json& args) {
  return Guarded([&]() -> Result<json> {
    if (action == "correction_start") return Suppress(root_, key, session_id);
    if (action == "dashboard") return Dashboard(root_, key, session_id);
    if (!args.is_null() && !args.is_object()) {
      return Error::Invalid("Memory control arguments must be an object");
    }
    const ojson arguments = args.is_null() ? ojson::object() : ToOrdered(args);
    return Edit(root_, key, [&](ojson& state, bool&) -> Result<json> {
      auto row = MutableRow(state, session_id);
      if (!row) return row.error();
      if (action == "mode") return SetMode(**row, arguments);
      if (action == "budget") return SetBudget(state, arguments);
      if (action == "task") return UpdateTask(state, session_id, arguments);
      return Error::Invalid("Unknown memory control action");
    });
  });
}

Result<json> ControlStore::Continuation(const std::string& key, const std::string& session_id,
                                        const std::string& prompt) {
  return Guarded([&]() -> Result<json> {
    if (!IsContinuation(prompt)) return NoContinuation(prompt);
    auto state = ReadState(root_, key);
    if (!state) return state.error();
    return ContinuationOf(*state, session_id, prompt);
  });
}

Result<RecallControls> ControlStore::ForRecall(const std::string& key,
                                               const std::string& session_id,
                                               const std::string& prompt) {
  return Guarded([&]() -> Result<RecallControls> {
    auto state = ReadState(root_, key);
    if (!state) return state.error();
    auto policy = PolicyOf(*state, key, session_id);
    if (!policy) return policy.error();
    return SnapshotOf(*state, std::move(*policy), session_id, prompt);
  });
}

Result<int64_t> ControlStore::BudgetChars(const std::string& key) {
  return Guarded([&]() -> Result<int64_t> {
    auto state = ReadState(root_, key);
    if (!state) return state.error();
    return EffectiveBudget(*state);
  });
}

}  // namespace tmcra::controls
