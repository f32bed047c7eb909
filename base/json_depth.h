// How deeply a JSON text nests, measured on the text before any parser sees it, so that a
// hostile input cannot make a recursive parser (or a recursive destructor) exhaust the stack.
#pragma once

#include <string_view>

namespace tmcra {

// The deepest nesting of arrays and objects in `text`, counting brackets outside strings
// (escapes inside strings understood). Stops early: a text deeper than `limit` returns a
// value greater than `limit`. Not a validator: malformed JSON gives some depth, and the parser
// refuses it afterwards.
int JsonNestingDepth(std::string_view text, int limit);

}  // namespace tmcra
