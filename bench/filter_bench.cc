// filter_bench: the content filter's throughput (filter/content_filter.h) on typical text and
// on adversarial inputs (long runs of what its detectors look for), in MB/s. Goals: >= 100
// MB/s on typical text, no input slower than 10 MB/s (docs/privacy.md). Prints a Markdown
// table; never fails on a figure.
//
//   build/bench/bench/filter_bench [--mb N]   (N MB of each input, default 10)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "filter/content_filter.h"

namespace {

std::string Repeat(const std::string& piece, size_t bytes) {
  std::string out;
  out.reserve(bytes + piece.size());
  while (out.size() < bytes) out += piece;
  return out;
}

// Prose, code and log lines, a secret now and then, about as tmcra stores them.
std::string Typical(size_t bytes) {
  const std::string mix =
      "The deployment of the billing API failed at 10:42 because the migration timed out.\n"
      "def handler(event, context):\n    token = os.environ['TOKEN']\n    return render(event)\n"
      "2026-07-15T10:00:00Z INFO request_id=4f2a9c1e status=200 path=/v1/scopes/p/recall\n"
      "commit 3f786850e387550fdab836ed7e6dc881de23001b: fix the parser for CJK input\n"
      "We agreed to ship the invoicing service on Friday; see docs/runbook.md for rollbacks.\n"
      "export GITHUB_TOKEN=ghp_a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8 # for CI only\n"
      "{\"user\": \"dana\", \"scope\": \"team-alpha\", \"items\": [1, 2, 3], \"ok\": true}\n";
  return Repeat(mix, bytes);
}

double MegabytesPerSecond(const tmcra::filter::ContentFilter& filter, const std::string& text) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto result = filter.Apply(text);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (result.text.size() > text.size() * 4) std::fprintf(stderr, "unexpected growth\n");
  return static_cast<double>(text.size()) / 1e6 / seconds;
}

}  // namespace

int main(int argc, char** argv) {
  size_t mb = 10;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], "--mb") == 0) mb = static_cast<size_t>(std::atoi(argv[i + 1]));
  }
  const size_t bytes = mb << 20;
  const std::vector<std::pair<std::string, std::string>> inputs = {
      {"typical (prose, code, logs, a secret per 600 bytes)", Typical(bytes)},
      {"`ghp_` + 35 characters, repeated",
       Repeat("ghp_abcdefghijklmnopqrstuvwxyz012345678 ", bytes)},
      {"`password=` repeated", Repeat("password=", bytes)},
      {"`-----BEGIN ` repeated, no end", Repeat("-----BEGIN ", bytes)},
      {"`://user:` repeated", Repeat("://user:", bytes)},
      {"`eyJ` repeated", Repeat("eyJ", bytes)},
      {"`[` repeated", Repeat("[", bytes)},
      {"`[Immutable source window 1 | ` repeated", Repeat("[Immutable source window 1 | ", bytes)},
      {"`<private>` repeated", Repeat("<private>", bytes)},
      {"`Bearer ` repeated", Repeat("Bearer ", bytes)},
      {"`token: ` repeated", Repeat("token: ", bytes)},
      {"`sig=` repeated", Repeat("sig=", bytes)},
      {"`a` repeated (one long token)", Repeat("a", bytes)},
      {"`\\n\\n` (escaped) repeated", Repeat("\\n", bytes)},
      {"random base64", Repeat("QmFzZTY0IGRhdGEgb2YgYW4gaW1hZ2UgdGhhdCBpcyBub3QgYSBrZXk+/", bytes)},
  };
  const tmcra::filter::ContentFilter filter;
  std::printf("| input (%zu MB each) | MB/s | goal |\n|---|---|---|\n", mb);
  double slowest = 1e18;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const double speed = MegabytesPerSecond(filter, inputs[i].second);
    slowest = std::min(slowest, speed);
    const double goal = i == 0 ? 100 : 10;
    std::printf("| %s | %.1f | %s (>= %.0f) |\n", inputs[i].first.c_str(), speed,
                speed >= goal ? "met" : "MISSED", goal);
    std::fflush(stdout);
  }
  std::printf("\nslowest input: %.1f MB/s\n", slowest);
  return 0;
}
