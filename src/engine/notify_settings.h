// The settings of failure notifications (product.md I6): [notifications] of
// the configuration. The notifier itself is engine/notifier.h; delivery is
// handlers/notify_handler.h.
#pragma once

#include <string>
#include <vector>

#include "taskengine/clock.h"
#include "taskengine/status.h"

namespace taskengine {

// How an smtp:// connection is secured (smtps:// is TLS from the start).
enum class SmtpTls {
  kRequired,  // STARTTLS or fail (default)
  kOff,       // plain text: only for a relay on the same host or a test sink
};

struct NotifySettings {
  bool enabled = true;  // serve runs the notifier
  // Notifications per job in any hour (a sliding window); the failures over
  // it are counted and told in the next notification of that job.
  int per_job_per_hour = 10;
  // One sweep recovering more expired leases than this alerts `targets`.
  int orphan_threshold = 5;
  // Global targets (core/notify_target.h): orphan alerts, and the failures
  // of jobs that name no targets of their own.
  std::vector<std::string> targets;
  // The dashboard's address as users reach it, e.g. "https://jobs.example.com":
  // notifications link to the execution's page. Empty: no link.
  std::string dashboard_url;
  // E-mail: the envelope and header sender.
  std::string from = "taskengine@localhost";
  // E-mail over SMTP: "smtp://host:587" (STARTTLS) or "smtps://host:465".
  std::string smtp_url;
  SmtpTls smtp_tls = SmtpTls::kRequired;
  std::string smtp_username;
  // The name of the environment variable holding the SMTP password (never
  // the password itself in the file).
  std::string smtp_password_env;
  // E-mail through a local mail program instead of SMTP: its argv (argv[0]
  // an absolute path), the message on its standard input, e.g.
  // ["/usr/sbin/sendmail", "-t", "-i"]. Wins over smtp_url.
  std::vector<std::string> sendmail;
  // Between two notifier passes.
  Millis interval_ms = 1'000;
};

// Checks ranges and shapes: per_job_per_hour 1..10000, orphan_threshold
// 1..100000, targets (ParseNotifyTargets), dashboard_url http(s)://, from an
// e-mail address, smtp_url smtp:// or smtps://, sendmail argv[0] absolute,
// interval 100 ms..1 min. kInvalidArgument names the key.
Status ValidateNotifySettings(const NotifySettings& settings);

}  // namespace taskengine
