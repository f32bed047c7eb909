// The CJK index: Chinese and Japanese are written without spaces, and many of their words are
// two characters long ("東京", "会議", "端口"). The word index (unicode61) keeps a whole run of
// such text as one token and the trigram index needs three characters, so neither finds a
// two-character word inside a sentence. The CJK index holds, for every run of CJK code points
// (Han, kana, Hangul), each code point together with the one after it; the run's last code
// point stands alone. A query's runs of two or more become their bigrams; a run of one becomes
// a prefix query, which finds every place that code point appears, since every code point of
// an indexed run starts one token.
//
// A lone kana or Hangul syllable (a particle, mostly) is not searched, and lone Han characters
// are searched only when the query has no run of two: "用Redis的端口" searches 的端 and 端口, not
// 用. Prefixes are chosen within the postings budget like bigrams (recall.cc), but a query of
// one common character still walks the postings of every token it starts (about 21 ms p50 for
// lone-character queries on 100k Japanese messages).
//
// The index is an FTS5 table with the `ascii` tokenizer over text this module writes: tokens
// of non-ASCII code points separated by spaces (the `ascii` tokenizer treats every non-ASCII
// code point as a token character, so no Unicode table of SQLite's decides what a token is).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/result.h"
#include "base/sqlite_db.h"

namespace tmcra::memory {

// Han (with extensions and compatibility ideographs), hiragana, katakana (with the half-width
// forms and the prolonged sound mark), Hangul syllables and jamo, and 々 〆 〇.
bool IsCjk(uint32_t cp);

// The CJK index's text for a record's `content`: its tokens separated by single spaces, or ""
// when `content` holds no CJK code point. Invalid UTF-8 sequences end a run.
std::string CjkIndexText(std::string_view content);

// The CJK index's watermark in `db`'s current snapshot: every record at or below it that has
// CJK text is in the index (Engine::RepairCjkIndex fills in the rest); 0 without one.
[[nodiscard]] Result<int64_t> CjkWatermark(db::Database& db);

}  // namespace tmcra::memory
