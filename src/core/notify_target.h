// Where a failure notification goes (product.md I6): one entry of a job
// definition's notify_targets or of [notifications] targets.
//
//   "ops@example.com"        e-mail (same as "email:ops@example.com")
//   "email:ops@example.com"  e-mail, over the server's SMTP or sendmail setting
//   "webhook:NAME"           a JSON document POSTed to the [[http_target]] NAME
//   "slack:NAME"             a Slack-compatible {"text": ...} to the [[http_target]] NAME
//
// A target names where to send, never how: URLs, credentials and the SSRF
// guard's allowances live in the server's configuration only (W3).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "taskengine/status.h"

namespace taskengine {

enum class NotifyChannel { kEmail, kWebhook, kSlack };

struct NotifyTarget {
  NotifyChannel channel = NotifyChannel::kEmail;
  std::string address;  // the e-mail address, or the [[http_target]] name

  // The canonical text: "email:ADDRESS", "webhook:NAME", "slack:NAME".
  std::string ToString() const;
};

// The most targets one job (or [notifications] targets) may name.
inline constexpr std::size_t kMaxNotifyTargets = 20;

// `local@domain` with a dot-atom local part (no quotes, spaces or control
// characters) and a host name domain, at most 254 bytes.
bool IsEmailAddress(std::string_view text);

// Parses one target. kInvalidArgument (the message quotes the entry) for an
// unknown channel, an e-mail address that is not `local@domain` with a plain
// dot-atom local part (no quotes, no spaces, no control characters, so it can
// never inject a header or an SMTP command) and a host name domain, or a
// webhook name that is not a name ([a-z0-9][a-z0-9._-]{0,99}).
Result<NotifyTarget> ParseNotifyTarget(std::string_view text);

// Every entry parsed; at most kMaxNotifyTargets, no entry twice (by the
// canonical text). The message names the entry's position.
Result<std::vector<NotifyTarget>> ParseNotifyTargets(const std::vector<std::string>& texts);

}  // namespace taskengine
