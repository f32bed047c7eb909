#include "src/tools/content_filtering.h"

namespace tmcra::tools {

namespace {

nlohmann::json ReportJson(const filter::FilterReport& report, int64_t dropped_messages) {
  nlohmann::json redacted = nlohmann::json::object();
  for (const auto& [kind, n] : report.redacted) redacted[kind] = n;
  return {{"redacted", std::move(redacted)},
          {"private_spans", report.private_spans},
          {"recalled_blocks", report.recalled_blocks},
          {"dropped_messages", dropped_messages}};
}

}  // namespace

void FilterTally::Add(const Filtering& filtering) {
  std::lock_guard lock(mu_);
  total_.Add(filtering.report);
  dropped_messages_ += filtering.dropped_messages;
}

nlohmann::json FilterTally::ToJson() const {
  std::lock_guard lock(mu_);
  return ReportJson(total_, dropped_messages_);
}

nlohmann::json Filtering::ToJson() const { return ReportJson(report, dropped_messages); }

std::string FilterText(const filter::ContentFilter* filter, std::string_view text,
                       Filtering& filtering) {
  if (filter == nullptr) return std::string(text);
  filter::FilterResult result = filter->Apply(text);
  filtering.report.Add(result.report);
  return std::move(result.text);
}

void FilterMessages(const filter::ContentFilter* filter, nlohmann::json& messages,
                    Filtering& filtering) {
  if (filter == nullptr || !messages.is_array()) return;
  nlohmann::json kept = nlohmann::json::array();
  for (auto& m : messages) {
    auto content = m.find("content");
    if (content != m.end() && content->is_string()) {
      std::string text = FilterText(filter, content->get_ref<const std::string&>(), filtering);
      if (text.empty()) {
        ++filtering.dropped_messages;
        continue;
      }
      *content = std::move(text);
    }
    kept.push_back(std::move(m));
  }
  messages = std::move(kept);
}

}  // namespace tmcra::tools
