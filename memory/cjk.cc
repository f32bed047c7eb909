#include "memory/cjk.h"

#include "base/utf8.h"

namespace tmcra::memory {

bool IsCjk(uint32_t cp) {
  if (cp < 0x1100) return false;
  return (cp >= 0x1100 && cp <= 0x11ff) ||  // Hangul jamo
         (cp >= 0x3005 && cp <= 0x3007) ||  // 々 〆 〇
         (cp >= 0x3041 && cp <= 0x3096) ||  // hiragana
         (cp >= 0x309d && cp <= 0x309f) ||  // ゝ ゞ ゟ
         (cp >= 0x30a1 && cp <= 0x30fa) ||  // katakana
         (cp >= 0x30fc && cp <= 0x30ff) ||  // ー ヽ ヾ ヿ
         (cp >= 0x3131 && cp <= 0x318e) ||  // Hangul compatibility jamo
         (cp >= 0x31f0 && cp <= 0x31ff) ||  // katakana phonetic extensions
         (cp >= 0x3400 && cp <= 0x4dbf) ||  // Han extension A
         (cp >= 0x4e00 && cp <= 0x9fff) ||  // Han
         (cp >= 0xa960 && cp <= 0xa97f) ||  // Hangul jamo extended A
         (cp >= 0xac00 && cp <= 0xd7a3) ||  // Hangul syllables
         (cp >= 0xd7b0 && cp <= 0xd7ff) ||  // Hangul jamo extended B
         (cp >= 0xf900 && cp <= 0xfaff) ||  // Han compatibility ideographs
         (cp >= 0xff66 && cp <= 0xff9f) ||  // half-width katakana
         (cp >= 0x20000 && cp <= 0x323af);  // Han extensions B to H
}

std::string CjkIndexText(std::string_view content) {
  std::string out;
  // The byte range of the previous CJK code point when it continues a run, else npos.
  size_t prev_at = std::string_view::npos;
  size_t prev_len = 0;
  const auto end_run = [&] {
    if (prev_at == std::string_view::npos) return;
    if (!out.empty()) out.push_back(' ');
    out.append(content.substr(prev_at, prev_len));  // the run's last code point, alone
    prev_at = std::string_view::npos;
  };
  for (size_t i = 0; i < content.size();) {
    const auto lead = static_cast<unsigned char>(content[i]);
    if (lead < 0x80) {
      end_run();
      ++i;
      continue;
    }
    const size_t n = Utf8SequenceLength(content, i);
    if (n == 0) {
      end_run();
      ++i;
      continue;
    }
    uint32_t cp = n == 2 ? (lead & 0x1fu) : n == 3 ? (lead & 0x0fu) : (lead & 0x07u);
    for (size_t k = 1; k < n; ++k) {
      cp = (cp << 6) | (static_cast<unsigned char>(content[i + k]) & 0x3fu);
    }
    if (!IsCjk(cp)) {
      end_run();
    } else {
      if (prev_at != std::string_view::npos) {
        if (!out.empty()) out.push_back(' ');
        out.append(content.substr(prev_at, prev_len + n));  // the previous one and this one
      }
      prev_at = i;
      prev_len = n;
    }
    i += n;
  }
  end_run();
  return out;
}

Result<int64_t> CjkWatermark(db::Database& db) {
  return db.QueryInt("SELECT through_seq FROM index_watermarks WHERE name = 'records_cjk'");
}

}  // namespace tmcra::memory
