// English synonyms and related words, from WordNet 3.0 (Princeton University), compiled into
// the binary at build time (memory/synonyms_gen.cc reads Debian's wordnet-base): for a word's
// two most frequent senses per part of speech, the other one-word lemmas of the sense
// ("physician" -> "doctor", "medico") and its derivationally related forms ("prescribe" ->
// "prescription"). The table is a sorted text searched in place: nothing is read or built at
// start.
#pragma once

#include <string>
#include <vector>

namespace tmcra::memory {

// The related words of `word` (lower-case), or of its base forms when it is inflected
// ("deployments" -> "deployment", "failed" -> "fail", by WordNet's detachment rules): at most
// `limit`, the word's own first.
std::vector<std::string> RelatedWords(const std::string& word, size_t limit = 12);

// How many words the table holds (for tests and the status).
size_t RelatedWordsTableSize();

}  // namespace tmcra::memory
