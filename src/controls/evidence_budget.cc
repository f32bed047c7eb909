#include "src/controls/evidence_budget.h"

#include <set>

#include "src/common/sha256.h"
#include "src/common/utf8.h"

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

std::vector<std::string> SplitEvidenceBlocks(std::string_view content) {
  std::vector<std::string> blocks;
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
  std::set<std::string> seen;
  bool first = true;
  for (const std::string& block : SplitEvidenceBlocks(content)) {
    const std::string digest = Sha256Hex(block);
    const bool duplicate =
        !seen.insert(digest).second ||
        (!visible.empty() && visible.find(block) != std::string_view::npos);
    const size_t length = CodePointLength(block);
    if (duplicate || out.characters + length + 2 > budget) {
      out.omitted.push_back({{"hash", digest}, {"reason", duplicate ? "duplicate" : "budget"}});
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
