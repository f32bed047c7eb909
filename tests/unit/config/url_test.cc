// Base-URL validation (docs/contract.md §5.4, docs/reliability.md §4.4, test row S4), path
// segment escaping (row S5) and the service's identifier grammars.
#include "src/config/url.h"

#include <curl/curl.h>

#include <catch2/catch.hpp>
#include <string>

using tmcra::config::QuoteSegment;
using tmcra::config::RedactUrl;
using tmcra::config::ValidateBaseUrl;

namespace {

struct UrlCase {
  const char* url;
  bool local_mode;
  bool accepted;
};

// clang-format off
const UrlCase kUrlTable[] = {
  // Service mode: https origins, with or without port and path prefix.
  {"https://api.tmcra.com", false, true},
  {"https://api.tmcra.com/", false, true},
  {"https://api.tmcra.com//", false, true},
  {"https://api.tmcra.com:8443", false, true},
  {"https://memory.example.com/prefix", false, true},
  {"https://memory.example.com/a/b-c_d~e", false, true},
  {"HTTPS://API.TMCRA.COM", false, true},
  {"https://192.0.2.10", false, true},
  {"https://[2001:db8::1]:8443", false, true},
  {"https://xn--bcher-kva.example", false, true},            // IDN written as punycode
  {"https://127.0.0.1:8443", false, true},                   // https to loopback is https
  // Service mode: everything else.
  {"http://api.tmcra.com", false, false},                    // plain http without local identity
  {"http://127.0.0.1:18089", false, false},                  // the contract's test case
  {"http://[::1]:2009", false, false},
  {"ftp://api.tmcra.com", false, false},
  {"file:///etc/passwd", false, false},
  {"gopher://api.tmcra.com", false, false},
  {"api.tmcra.com", false, false},                           // no scheme
  {"https:/api.tmcra.com", false, false},
  {"https:///api.tmcra.com", false, false},                  // empty host
  {"https://", false, false},
  {"", false, false},
  {"https://user:pw@api.tmcra.com", false, false},           // userinfo
  {"https://user@api.tmcra.com", false, false},
  {"https://@api.tmcra.com", false, false},
  {"https://a\\@b", false, false},                           // backslash (WHATWG reads it as '/')
  {"https://api.tmcra.com?q=1", false, false},               // query
  {"https://api.tmcra.com/?", false, false},                 // empty query still a '?'
  {"https://api.tmcra.com#f", false, false},                 // fragment
  {"https://api.tmcra.com:0", false, false},                 // port 0
  {"https://api.tmcra.com:65536", false, false},
  {"https://api.tmcra.com:99999", false, false},
  {"https://api.tmcra.com:", false, false},                  // empty port
  {"https://api.tmcra.com:0443", false, false},              // leading zero
  {"https://api.tmcra.com:44a", false, false},
  {"https://api.tmcra.com\r\n", false, false},               // CR/LF
  {"https://api.tmcra.com\nX-Evil: 1", false, false},
  {"https://api .tmcra.com", false, false},                  // space
  {"https://api.tmcra.com\t", false, false},                 // tab
  {" https://api.tmcra.com", false, false},
  {"https://api.tmcra.com.", false, false},                  // trailing dot
  {"https://api..tmcra.com", false, false},
  {"https://bücher.example", false, false},                  // raw IDN: use punycode
  {"https://0x7f.1", false, false},                          // obscure IPv4 spellings
  {"https://2130706433", false, false},
  {"https://0177.0.0.1", false, false},
  {"https://127.1", false, false},
  {"https://1.2.3.4.5", false, false},
  {"https://[0:00::0:1]", false, false},                     // libcurl reads it as [::1]
  {"https://[fe80::1%25eth0]", false, false},                // zone id
  {"https://[::1", false, false},
  {"https://h%2e.com", false, false},                        // percent-encoded host
  {"https://api.tmcra.com/a/../b", false, false},            // dot segments escape a prefix
  {"https://api.tmcra.com/%2e%2e/v1", false, false},
  {"https://api.tmcra.com/a/./b", false, false},
  {"https://api.tmcra.com/a%2Fb", false, false},             // encoded '/'
  {"https://api.tmcra.com/a%zz", false, false},
  {"https://api.tmcra.com/a<b", false, false},
  {"https://api.tmcra.com;x=y", false, false},
  // Local mode: exactly http://127.0.0.1:<port> or http://[::1]:<port>.
  {"http://127.0.0.1:2009", true, true},
  {"http://127.0.0.1:2009/", true, true},
  {"http://[::1]:2009", true, true},
  {"http://127.0.0.1:65535", true, true},
  {"HTTP://127.0.0.1:2009", true, true},
  {"https://127.0.0.1:2009", true, false},                   // https is not local mode's scheme
  {"https://api.tmcra.com", true, false},
  {"http://127.0.0.1", true, false},                         // no explicit port
  {"http://[::1]", true, false},
  {"http://localhost:2009", true, false},                    // names are refused
  {"http://LOCALHOST:2009", true, false},
  {"http://127.0.0.2:2009", true, false},
  {"http://0.0.0.0:2009", true, false},
  {"http://10.0.0.1:2009", true, false},
  {"http://api.tmcra.com:2009", true, false},
  {"http://0x7f.1:2009", true, false},
  {"http://0x7f000001:2009", true, false},
  {"http://2130706433:2009", true, false},
  {"http://0177.0.0.1:2009", true, false},
  {"http://127.1:2009", true, false},
  {"http://127.0.0.1.:2009", true, false},
  {"http://[::ffff:7f00:1]:2009", true, false},
  {"http://[::ffff:127.0.0.1]:2009", true, false},
  {"http://[0:00::0:1]:2009", true, false},
  {"http://[::]:2009", true, false},
  {"http://[::1%25lo]:2009", true, false},
  {"http://127.0.0.1:2009/v1", true, false},                 // no path in local mode
  {"http://127.0.0.1:2009/?x", true, false},
  {"http://127.0.0.1:2009#f", true, false},
  {"http://u:p@127.0.0.1:2009", true, false},
  {"http://127.0.0.1:0", true, false},
  {"http://127.0.0.1:65536", true, false},
  {"http://127.0.0.1:2009 ", true, false},
  {"http://127.0.0.1:20\t09", true, false},
};
// clang-format on

struct CurlView {
  std::string scheme, host, port;
};

CurlView CurlParse(const std::string& url) {
  CurlView out;
  CURLU* h = curl_url();
  REQUIRE(curl_url_set(h, CURLUPART_URL, url.c_str(), 0) == CURLUE_OK);
  const auto get = [h](CURLUPart part, unsigned flags) {
    char* v = nullptr;
    std::string s;
    if (curl_url_get(h, part, &v, flags) == CURLUE_OK && v != nullptr) s = v;
    curl_free(v);
    return s;
  };
  out.scheme = get(CURLUPART_SCHEME, 0);
  out.host = get(CURLUPART_HOST, 0);
  out.port = get(CURLUPART_PORT, CURLU_DEFAULT_PORT);
  curl_url_cleanup(h);
  return out;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

}  // namespace

TEST_CASE("base URL table: accepted exactly as specified, no parser differential",
          "[config][url]") {
  STATIC_REQUIRE(sizeof kUrlTable / sizeof kUrlTable[0] >= 40);
  for (const UrlCase& c : kUrlTable) {
    INFO("url=" << c.url << " local=" << c.local_mode);
    auto r = ValidateBaseUrl(c.url, c.local_mode);
    CHECK(r.has_value() == c.accepted);
    if (r) {
      // Re-parsed by libcurl (the transfer's parser), the URL names the same place.
      const CurlView curl = CurlParse(r->url + "/v1/jobs/x");
      CHECK(Lower(curl.scheme) == r->scheme);
      CHECK(Lower(curl.host) == r->host);
      CHECK(curl.port == std::to_string(r->port));
      CHECK(r->url.back() != '/');
      if (c.local_mode) {
        CHECK(r->scheme == "http");
        CHECK((r->host == "127.0.0.1" || r->host == "[::1]"));
        CHECK(r->path.empty());
      } else {
        CHECK(r->scheme == "https");
      }
    } else {
      CHECK(r.error().code == tmcra::Errc::kInvalidArgument);
      CHECK_FALSE(r.error().retryable);
      CHECK(r.error().message.rfind("TMCRA_BASE_URL must be an HTTPS origin", 0) == 0);
    }
  }
}

TEST_CASE("base URL parts and the error's setting name", "[config][url]") {
  auto r = ValidateBaseUrl("https://Memory.Example.com:8443/prefix/", false);
  REQUIRE(r);
  CHECK(r->url == "https://Memory.Example.com:8443/prefix");
  CHECK(r->host == "memory.example.com");
  CHECK(r->port == 8443);
  CHECK(r->path == "/prefix");
  auto d = ValidateBaseUrl("https://api.tmcra.com", false);
  REQUIRE(d);
  CHECK(d->port == 443);
  CHECK(d->path.empty());
  auto l = ValidateBaseUrl("http://[::1]:2009", true);
  REQUIRE(l);
  CHECK(l->host == "[::1]");
  CHECK(l->port == 2009);

  // An IPv6 address libcurl would shorten: refused, with the form to write instead.
  for (const char* longer : {"https://[0:0:0:0:0:0:0:1]:8443", "https://[2001:db8:0:0::1]"}) {
    INFO(longer);
    auto r6 = ValidateBaseUrl(longer, false);
    REQUIRE_FALSE(r6);
    CHECK(r6.error().message.find("shortest form") != std::string::npos);
  }
  CHECK(ValidateBaseUrl("https://[0:0:0:0:0:0:0:1]:8443", false).error().message.find("[::1]") !=
        std::string::npos);
  CHECK(ValidateBaseUrl("https://[2001:db8::1]", false));

  auto bad = ValidateBaseUrl("https://user:hunter2@h.example", false, "baseUrl in /x/config.json");
  REQUIRE_FALSE(bad);
  CHECK(bad.error().message.rfind("baseUrl in /x/config.json must be", 0) == 0);
  CHECK(bad.error().message.find("hunter2") == std::string::npos);
  CHECK(bad.error().message.find("credentials") != std::string::npos);
}

TEST_CASE("QuoteSegment matches urllib.parse.quote(v, safe='')", "[config][url]") {
  CHECK(QuoteSegment("personal") == "personal");
  CHECK(QuoteSegment("A-z_0.9~") == "A-z_0.9~");
  CHECK(QuoteSegment("") == "");
  CHECK(QuoteSegment("../") == "..%2F");
  CHECK(QuoteSegment("../../admin") == "..%2F..%2Fadmin");
  CHECK(QuoteSegment("%2e%2e") == "%252e%252e");
  CHECK(QuoteSegment("a/b") == "a%2Fb");
  CHECK(QuoteSegment("a?b") == "a%3Fb");
  CHECK(QuoteSegment("a#b") == "a%23b");
  CHECK(QuoteSegment(std::string("a\0b", 3)) == "a%00b");
  CHECK(QuoteSegment("a\r\nX-Evil: 1") == "a%0D%0AX-Evil%3A%201");
  CHECK(QuoteSegment("a b+c&d=e") == "a%20b%2Bc%26d%3De");
  CHECK(QuoteSegment("é") == "%C3%A9");
  CHECK(QuoteSegment("記憶") == "%E8%A8%98%E6%86%B6");
  CHECK(QuoteSegment("😀") == "%F0%9F%98%80");
  CHECK(QuoteSegment("\xff") == "%FF");
  CHECK(QuoteSegment("\\:@!$'()*,;") == "%5C%3A%40%21%24%27%28%29%2A%2C%3B");
  // Whatever the input, the result is one segment: no '/', '?', '#', CR, LF or raw '%' escapes.
  const std::string nasty =
      QuoteSegment(std::string("/..?#\r\n%\0 ", 10) + std::string(10000, 'x'));
  CHECK(nasty.find_first_of("/?#\r\n ") == std::string::npos);
}

TEST_CASE("RedactUrl drops userinfo, query and fragment", "[config][url]") {
  CHECK(RedactUrl("https://a:b@h:1/p?q#f") == "https://h:1/p");
  CHECK(RedactUrl("https://h") == "https://h");
  CHECK(RedactUrl("https://h/p@x") == "https://h/p@x");
}
