// What the model is given from memory (docs/hooks.md "What the model is given"): the recalled
// memory blocks of one or more recall receipts, minus those the session was given before or
// that are the session's own turns, within a byte cap, inside an untrusted envelope marked as
// recalled memory (so the content filter never stores it again). Pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

namespace tmcra::hooks {

// One recalled block ("[Immutable source window 1 | ... | memory_id=rec_1]\ntext").
struct MemoryBlock {
  std::string text;
  // What identifies the memory whatever window number a recall gives it: "memory:<id>" when
  // the header names a memory_id, else the SHA-256 of the text after the header line.
  std::string key;
  std::string session;       // the header's session=, or empty
  bool header_only = false;  // a section header ("[TMCRA ...]"), given with the next block
};

// The blocks of a recall receipt's injectable_context (its preamble left out).
std::vector<MemoryBlock> MemoryBlocks(const nlohmann::json& receipt);

struct Envelope {
  std::string text;               // empty: nothing to give
  std::vector<std::string> keys;  // the keys of the memory it gives
};

// The blocks whose key is not in `given` and whose session is not `session` (the model has
// its own session's turns), in order and each once, within `cap` bytes; what is left out for
// the cap is said in the envelope's last line. `angles_escaped`: the host writes each < and >
// as &lt; and &gt; (Gemini CLI), so each counts 4 bytes against the cap.
Envelope BuildEnvelope(const std::vector<MemoryBlock>& blocks, const std::set<std::string>& given,
                       const std::string& session, size_t cap, bool angles_escaped = false);

}  // namespace tmcra::hooks
