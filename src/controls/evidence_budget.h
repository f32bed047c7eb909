// Evidence budget selection (docs/contract.md §4.2.5): fit recalled evidence into a character
// budget, whole blocks at a time, dropping blocks the host already shows.
//
// The content is split before every block header ("\n\n" followed by "[Immutable ",
// "[Slow memory ", "[Fast memory " or "[TMCRA actor section"). Blocks are taken in order; a
// block is a duplicate when an identical block came before or `visible` contains it, and a
// budget miss when used + length + 2 would exceed the budget; the scan goes on after a miss so
// smaller blocks can still fit. Lengths are code points.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace tmcra::controls {

inline constexpr size_t kDefaultEvidenceBudget = 12000;

struct Selection {
  std::string content;
  nlohmann::json omitted = nlohmann::json::array();  // [{hash, reason: duplicate|budget}]
  size_t characters = 0;
  nlohmann::json ToJson()
      const;  // {content, omitted, characters, estimatedTokens, tokenEstimateOnly}
};

// Views into `content`, which must outlive them.
std::vector<std::string_view> SplitEvidenceBlocks(std::string_view content);
Selection SelectEvidence(std::string_view content, size_t budget, std::string_view visible = {});

}  // namespace tmcra::controls
