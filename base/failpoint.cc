#include "base/failpoint.h"

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

namespace tmcra {

namespace {

struct Failpoints {
  std::mutex mu;
  std::map<std::string, long> remaining;  // name -> hits left before dying

  Failpoints() {
    const char* spec = std::getenv("TMCRA_FAILPOINTS");
    if (spec == nullptr) return;
    std::string text(spec);
    size_t start = 0;
    while (start <= text.size()) {
      const size_t comma = text.find(',', start);
      std::string item =
          text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      if (!item.empty()) {
        long count = 1;
        if (const size_t colon = item.find(':'); colon != std::string::npos) {
          count = std::strtol(item.c_str() + colon + 1, nullptr, 10);
          item.resize(colon);
        }
        remaining[item] = count < 1 ? 1 : count;
      }
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
  }
};

Failpoints& Registry() {
  static Failpoints failpoints;
  return failpoints;
}

}  // namespace

void FailpointHit(std::string_view name) {
  Failpoints& f = Registry();
  std::lock_guard lock(f.mu);
  auto it = f.remaining.find(std::string(name));
  if (it == f.remaining.end()) return;
  if (--it->second > 0) return;
  // Say where we died (stderr only), then die the way a crash or an OOM kill would.
  const std::string line = "failpoint " + std::string(name) + ": SIGKILL\n";
  [[maybe_unused]] const ssize_t ignored = write(2, line.data(), line.size());
  kill(getpid(), SIGKILL);
}

void FailpointStall(std::string_view name) {
  {
    Failpoints& f = Registry();
    std::lock_guard lock(f.mu);
    if (f.remaining.count(std::string(name)) == 0) return;
  }
  const std::string line = "failpoint " + std::string(name) + ": stalled\n";
  [[maybe_unused]] const ssize_t ignored = write(2, line.data(), line.size());
  sleep(600);
}

}  // namespace tmcra
