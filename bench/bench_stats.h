// Timing, statistics and the API key file, shared by the C++ benchmark drivers
// (lifecycle_bench, remote_bench).
#pragma once

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <string>
#include <vector>

#include "src/config/private_file.h"

namespace tmcra::bench {

using Clock = std::chrono::steady_clock;

inline double Ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// CPU seconds (user + system) this process has used so far, all threads.
inline double CpuSeconds() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  const auto seconds = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// Nearest rank, as the Node scripts do: p99 of 300 samples is the 297th smallest.
inline double Rank(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const auto n = static_cast<double>(v.size());
  const size_t i = static_cast<size_t>(std::max(1.0, std::ceil(p / 100.0 * n))) - 1;
  return v[std::min(i, v.size() - 1)];
}

inline double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// The API key in `path` (first line, trailing spaces dropped), read as tmcra-mcp reads a
// secret config file (src/config/private_file.h: ours, no group or other access, no symlink):
// never from argv, where every user of the machine could see it. false, said on stderr, when
// the file is refused, missing or empty.
inline bool ReadKeyFile(const std::string& path, std::string* key) {
  auto bytes = config::ReadPrivateFile(path, config::FileSecrecy::kSecret);
  if (!bytes || !*bytes) {
    std::cerr << "--key-file " << path << ": "
              << (bytes ? std::string("no such file") : bytes.error().message) << "\n";
    return false;
  }
  *key = (*bytes)->substr(0, (*bytes)->find('\n'));
  while (!key->empty() && (key->back() == '\r' || key->back() == ' ')) key->pop_back();
  if (key->empty()) std::cerr << "--key-file " << path << " is empty\n";
  return !key->empty();
}

}  // namespace tmcra::bench
