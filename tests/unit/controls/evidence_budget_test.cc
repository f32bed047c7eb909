#include "src/controls/evidence_budget.h"

#include <catch2/catch.hpp>

#include "base/sha256.h"

using tmcra::controls::SelectEvidence;
using tmcra::controls::SplitEvidenceBlocks;

namespace {
const std::string kContent =
    "[TMCRA authority policy | p]\n\n"
    "[TMCRA actor section | actor=user]\nUser requirements and facts\n\n"
    "[Immutable source window 1 | date=d]\nfirst fact\n\nwith a blank line inside\n\n"
    "[Immutable neighboring source | date=d]\nneighbour\n\n"
    "[Immutable source window 2 | date=d]\nfirst fact\n\nwith a blank line inside";
}  // namespace

TEST_CASE("blocks split only before block headers", "[controls][budget]") {
  auto blocks = SplitEvidenceBlocks(kContent);
  REQUIRE(blocks.size() == 5);
  CHECK(blocks[2] ==
        "[Immutable source window 1 | date=d]\nfirst fact\n\nwith a blank line inside");
  CHECK(SplitEvidenceBlocks("").size() == 1);
}

TEST_CASE("selection keeps whole blocks within budget and drops duplicates", "[controls][budget]") {
  auto all = SelectEvidence(kContent, 100000);
  CHECK(all.omitted.empty());
  CHECK(all.content == kContent);
  CHECK(all.ToJson()["estimatedTokens"] == (all.characters + 2) / 3);
  CHECK(all.ToJson()["tokenEstimateOnly"] == true);

  auto visible =
      SelectEvidence(kContent, 100000, "[Immutable neighboring source | date=d]\nneighbour");
  REQUIRE(visible.omitted.size() == 1);
  CHECK(visible.omitted[0]["reason"] == "duplicate");
  CHECK(visible.omitted[0]["hash"] ==
        tmcra::Sha256Hex("[Immutable neighboring source | date=d]\nneighbour"));

  // A budget that fits the first two blocks and the small neighbour, but not the larger ones:
  // the scan goes on after a miss.
  const size_t budget = 30 + 2 + 62 + 2 + 50 + 2;
  auto tight = SelectEvidence(kContent, budget);
  CHECK(tight.content.find("neighbour") != std::string::npos);
  CHECK(tight.content.find("first fact") == std::string::npos);
  CHECK(tight.characters <= budget);
  CHECK(tight.omitted.size() == 2);
  CHECK(tight.omitted[0]["reason"] == "budget");
}

TEST_CASE("an identical block is a duplicate, named by its SHA-256", "[controls][budget]") {
  const std::string block = "[Immutable source window 1 | date=d]\nthe same fact";
  const std::string content = "[TMCRA authority policy | p]\n\n" + block + "\n\n" + block +
                              "\n\n[Immutable source window 2 | date=d]\nanother fact";
  auto selection = SelectEvidence(content, 100000);
  REQUIRE(selection.omitted.size() == 1);
  CHECK(selection.omitted[0]["reason"] == "duplicate");
  CHECK(selection.omitted[0]["hash"] == tmcra::Sha256Hex(block));
  CHECK(selection.content == "[TMCRA authority policy | p]\n\n" + block +
                                 "\n\n[Immutable source window 2 | date=d]\nanother fact");
  // An omitted block over the budget is named by its digest too.
  auto tight = SelectEvidence(content, 30 + 2 + 50 + 2);
  REQUIRE(tight.omitted.size() == 2);
  CHECK(tight.omitted[0]["reason"] == "duplicate");
  CHECK(tight.omitted[1]["reason"] == "budget");
  CHECK(tight.omitted[1]["hash"] ==
        tmcra::Sha256Hex("[Immutable source window 2 | date=d]\nanother fact"));
}
