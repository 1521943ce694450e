#include "core/notify_target.h"

#include <set>

#include "taskengine/types.h"

namespace taskengine {
namespace {

constexpr std::size_t kMaxAddressBytes = 254;  // RFC 5321's path limit, less the brackets

bool IsAtext(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  constexpr std::string_view kSpecials = "!#$%&'*+/=?^_`{|}~-";
  return kSpecials.find(c) != std::string_view::npos;
}

// A dot-atom: atext runs separated by single dots.
bool IsDotAtom(std::string_view s) {
  if (s.empty() || s.front() == '.' || s.back() == '.') return false;
  char prev = 0;
  for (char c : s) {
    if (c == '.') {
      if (prev == '.') return false;
    } else if (!IsAtext(c)) {
      return false;
    }
    prev = c;
  }
  return true;
}

// Host name labels: letters, digits, hyphens (not first or last), 1..63 bytes.
bool IsHostName(std::string_view s) {
  if (s.empty() || s.size() > 253) return false;
  std::size_t start = 0;
  while (start <= s.size()) {
    std::size_t end = s.find('.', start);
    if (end == std::string_view::npos) end = s.size();
    const std::string_view label = s.substr(start, end - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-') {
      return false;
    }
    for (char c : label) {
      const bool ok =
          (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
      if (!ok) return false;
    }
    start = end + 1;
    if (end == s.size()) break;
  }
  return true;
}

std::string Quote(std::string_view text) {
  std::string out = "'";
  for (char c : text.substr(0, 100)) {
    out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  }
  return out + (text.size() > 100 ? "...'" : "'");
}

}  // namespace

bool IsEmailAddress(std::string_view s) {
  if (s.size() > kMaxAddressBytes) return false;
  const std::size_t at = s.rfind('@');
  if (at == std::string_view::npos || at == 0 || at > 64) return false;
  return IsDotAtom(s.substr(0, at)) && IsHostName(s.substr(at + 1));
}

std::string NotifyTarget::ToString() const {
  switch (channel) {
    case NotifyChannel::kEmail:
      return "email:" + address;
    case NotifyChannel::kWebhook:
      return "webhook:" + address;
    case NotifyChannel::kSlack:
      return "slack:" + address;
  }
  return address;
}

Result<NotifyTarget> ParseNotifyTarget(std::string_view text) {
  NotifyTarget t;
  std::string_view rest = text;
  const std::size_t colon = text.find(':');
  if (colon != std::string_view::npos) {
    const std::string_view scheme = text.substr(0, colon);
    rest = text.substr(colon + 1);
    if (scheme == "email" || scheme == "mailto") {
      t.channel = NotifyChannel::kEmail;
    } else if (scheme == "webhook") {
      t.channel = NotifyChannel::kWebhook;
    } else if (scheme == "slack") {
      t.channel = NotifyChannel::kSlack;
    } else {
      return InvalidArgument("notify target " + Quote(text) +
                             ": unknown channel (use an e-mail address, email:ADDRESS, "
                             "webhook:NAME or slack:NAME)");
    }
  }
  if (t.channel == NotifyChannel::kEmail) {
    if (!IsEmailAddress(rest)) {
      return InvalidArgument("notify target " + Quote(text) +
                             ": not an e-mail address of the form local@host.example");
    }
  } else if (!IsValidJobName(rest)) {
    return InvalidArgument("notify target " + Quote(text) +
                           ": the name of an [[http_target]] must match [a-z0-9][a-z0-9._-]{0,99}");
  }
  t.address = std::string(rest);
  return t;
}

Result<std::vector<NotifyTarget>> ParseNotifyTargets(const std::vector<std::string>& texts) {
  if (texts.size() > kMaxNotifyTargets) {
    return InvalidArgument("at most " + std::to_string(kMaxNotifyTargets) +
                           " notify targets (got " + std::to_string(texts.size()) + ")");
  }
  std::vector<NotifyTarget> out;
  std::set<std::string> seen;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    auto t = ParseNotifyTarget(texts[i]);
    if (!t.ok()) {
      return InvalidArgument("notify_targets[" + std::to_string(i) + "]: " + t.status().message());
    }
    if (!seen.insert(t->ToString()).second) {
      return InvalidArgument("notify_targets[" + std::to_string(i) + "]: " + Quote(texts[i]) +
                             " is listed twice");
    }
    out.push_back(std::move(*t));
  }
  return out;
}

}  // namespace taskengine
