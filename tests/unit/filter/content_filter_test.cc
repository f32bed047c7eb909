// The content filter on hand-picked texts: secrets redacted by kind, private spans and recalled
// memory dropped, the rest left as it was, and a second pass changing nothing.
#include "filter/content_filter.h"

#include <catch2/catch.hpp>
#include <string>

using tmcra::filter::ContentFilter;
using tmcra::filter::FilterRules;

namespace {

std::string Filtered(const std::string& text, const FilterRules& rules = {}) {
  const ContentFilter filter(rules);
  const auto once = filter.Apply(text);
  CHECK(filter.Apply(once.text).text == once.text);  // f(f(x)) == f(x)
  return once.text;
}

}  // namespace

TEST_CASE("secrets in their contexts become [REDACTED:kind]", "[filter]") {
  CHECK(Filtered("export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE") ==
        "export AWS_ACCESS_KEY_ID=[REDACTED:aws_access_key_id]");
  CHECK(Filtered("DATABASE_URL=postgres://admin:s3cr3tP4ss@db.example.com:5432/app") ==
        "DATABASE_URL=postgres://admin:[REDACTED:url_password]@db.example.com:5432/app");
  CHECK(Filtered("password = \"hunter22\"") == "password = \"[REDACTED:password_assignment]\"");
  CHECK(Filtered("DB_PASSWORD=hunter2") == "DB_PASSWORD=[REDACTED:password_assignment]");
  CHECK(Filtered("-H 'Authorization: Basic dXNlcjpwYXNzd29yZA=='") ==
        "-H 'Authorization: Basic [REDACTED:authorization_header]'");
}

TEST_CASE("what is not a secret is left alone", "[filter]") {
  for (const std::string text :
       {"commit 3f786850e387550fdab836ed7e6dc881de23001b fixed it",
        "id 123e4567-e89b-12d3-a456-426614174000",
        "sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
        "password = get_password()", "if password == \"\":", "user_password = new_password",
        "path /usr/local/lib/python3.11/site-packages/sklearn", "the token is passed in the header",
        "public_key: AAAAC3NzaC1lZDI1NTE5AAAAIA"}) {
    CHECK(Filtered(text) == text);
  }
}

TEST_CASE("private spans are dropped with their tags, an unclosed one to the end", "[filter]") {
  CHECK(Filtered("keep <private>drop</private> this") == "keep  this");
  CHECK(Filtered("keep <PRIVATE>drop") == "keep ");
  CHECK(Filtered("<priv<private>x</private>ate>gone</private>!") == "!");
}

TEST_CASE("recalled memory is dropped: marked regions and unmarked evidence blocks", "[filter]") {
  const std::string injected = tmcra::filter::MarkRecalled(
      "[TMCRA authority policy | precedence=current_user>historical_user>assistant | "
      "assistant_is_not_user=true]\n\n[Immutable source window 1 | date=2026-01-01]\nold text");
  CHECK(Filtered("Answer. " + injected + "\nThe end.") == "Answer. The end.");
  CHECK(Filtered("UserPromptSubmit hook additional context: [Immutable source window 2 | "
                 "date=2026-01-01 | actor=user]\nthe stored fact\n\nmy question") ==
        "UserPromptSubmit hook additional context: my question");
  CHECK(Filtered("a [bracket] that is not a header") == "a [bracket] that is not a header");
}
