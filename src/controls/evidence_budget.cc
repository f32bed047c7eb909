#include "src/controls/evidence_budget.h"

#include <unordered_set>

#include "base/sha256.h"
#include "base/utf8.h"

namespace tmcra::controls {

namespace {

bool StartsBlock(std::string_view rest) {
  for (std::string_view prefix :
       {"[Immutable ", "[Slow memory ", "[Fast memory ", "[TMCRA actor section"}) {
    if (rest.substr(0, prefix.size()) == prefix) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string_view> SplitEvidenceBlocks(std::string_view content) {
  std::vector<std::string_view> blocks;
  size_t start = 0;
  size_t pos = 0;
  while ((pos = content.find("\n\n", pos)) != std::string_view::npos) {
    if (StartsBlock(content.substr(pos + 2))) {
      blocks.emplace_back(content.substr(start, pos - start));
      start = pos + 2;
      pos = start;
    } else {
      pos += 1;
    }
  }
  blocks.emplace_back(content.substr(start));
  return blocks;
}

Selection SelectEvidence(std::string_view content, size_t budget, std::string_view visible) {
  Selection out;
  out.content.reserve(content.size());
  // The contract keys blocks by their SHA-256; equal digests are equal blocks, so the blocks
  // themselves are compared and only an omitted block's digest is computed.
  std::unordered_set<std::string_view> seen;
  bool first = true;
  for (const std::string_view block : SplitEvidenceBlocks(content)) {
    const bool duplicate = !seen.insert(block).second ||
                           (!visible.empty() && visible.find(block) != std::string_view::npos);
    const size_t length = duplicate ? 0 : CodePointLength(block);
    if (duplicate || out.characters + length + 2 > budget) {
      out.omitted.push_back(
          {{"hash", Sha256Hex(block)}, {"reason", duplicate ? "duplicate" : "budget"}});
      continue;
    }
    if (!first) out.content += "\n\n";
    out.content += block;
    first = false;
    out.characters += length + 2;
  }
  return out;
}

nlohmann::json Selection::ToJson() const {
  return nlohmann::json{{"content", content},
                        {"omitted", omitted},
                        {"characters", characters},
                        {"estimatedTokens", (characters + 2) / 3},
                        {"tokenEstimateOnly", true}};
}

}  // namespace tmcra::controls
