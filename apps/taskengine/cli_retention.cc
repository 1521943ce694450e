// retention:run, db:vacuum.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "cli.h"
#include "core/time_text.h"
#include "engine/engine_internal.h"
#include "engine/retention.h"
#include "server/logging.h"
#include "storage/open_store.h"
#include "storage/sqlite/sqlite_vacuum.h"

namespace taskengine::cli {
namespace {

// RFC 3339, or null for 0 ("none", "kept forever").
nlohmann::ordered_json TimeOrNull(Millis ms) {
  return ms > 0 ? nlohmann::ordered_json(FormatTime(ms)) : nlohmann::ordered_json(nullptr);
}

std::string Days(Millis ms) {
  return ms == 0 ? "forever" : std::to_string(ms / kRetentionDayMs) + " days";
}

void PrintCounts(const char* verb, const PurgeTotals& c) {
  Table t({"KIND", verb});
  t.Add({"executions", std::to_string(c.executions)});
  t.Add({"log lines", std::to_string(c.logs)});
  t.Add({"attempts", std::to_string(c.attempts)});
  t.Add({"effects", std::to_string(c.effects)});
  t.Add({"audit records", std::to_string(c.audit)});
  t.Print(std::cout);
  if (c.executions > 0) {
    Printf("executions ended from %s to %s\n", ShortTime(c.oldest_ended_at).c_str(),
           ShortTime(c.newest_ended_at).c_str());
  }
}

nlohmann::ordered_json CountsJson(bool dry_run, const RetentionCutoffs& cut, const PurgeTotals& c) {
  return {{"dry_run", dry_run},
          {"cutoffs",
           {{"executions_ended_before", TimeOrNull(cut.executions_ended_before)},
            {"logs_before", TimeOrNull(cut.logs_before)},
            {"audit_before", TimeOrNull(cut.audit_before)}}},
          {"executions", c.executions},
          {"logs", c.logs},
          {"attempts", c.attempts},
          {"effects", c.effects},
          {"audit", c.audit},
          {"oldest_ended_at", TimeOrNull(c.oldest_ended_at)},
          {"newest_ended_at", TimeOrNull(c.newest_ended_at)}};
}

int RunRetention(const GlobalFlags& flags, bool dry_run) {
  ServerConfig config;
  auto engine = OpenClient(flags, &config);
  if (!engine.ok()) return Fail(engine.status());
  const RetentionPolicy& policy = config.retention;
  Retention retention(&StoreOf(**engine), (*engine)->clock(), RetentionOptions{policy, "", 0});
  const RetentionCutoffs cutoffs = CutoffsAt(policy, (*engine)->clock()->NowMillis());
  if (!flags.json) {
    Printf("retention: executions %s, logs %s, audit %s (batches of %d)\n",
           Days(policy.executions_ms).c_str(), Days(policy.logs_ms).c_str(),
           Days(policy.audit_ms).c_str(), policy.batch);
  }
  if (dry_run) {
    auto due = retention.DryRun();
    if (!due.ok()) return Fail(due.status());
    PurgeTotals c;
    c.Add(*due);
    if (flags.json) {
      PrintJson(CountsJson(true, cutoffs, c));
    } else {
      PrintCounts("WOULD GO", c);
      Printf("dry run: nothing was removed\n");
    }
    return kExitOk;
  }
  // Progress on stderr: rewritten in place on a terminal, else a line at
  // most every 2 seconds.
  const bool tty = isatty(STDERR_FILENO) != 0;
  auto last = std::chrono::steady_clock::now();
  bool printed = false;
  auto result = retention.RunPass([&](const PurgeReport&, const PurgeTotals& t) {
    const auto now = std::chrono::steady_clock::now();
    if (flags.json || now - last < std::chrono::milliseconds(tty ? 200 : 2000)) return;
    last = now;
    printed = true;
    std::fprintf(stderr,
                 "%sretention: %lld executions, %lld log lines, %lld audit records removed%s",
                 tty ? "\r" : "", static_cast<long long>(t.executions),
                 static_cast<long long>(t.logs), static_cast<long long>(t.audit), tty ? "" : "\n");
  });
  if (printed && tty) std::fprintf(stderr, "\n");
  if (!result.ok()) return Fail(result.status());
  const PurgeTotals& c = *result;
  if (flags.json) {
    nlohmann::ordered_json doc = CountsJson(false, cutoffs, c);
    doc["batches"] = c.batches;
    PrintJson(doc);
  } else {
    PrintCounts("REMOVED", c);
    Printf("%d batches\n", c.batches);
  }
  return kExitOk;
}

int RunVacuum(const GlobalFlags& flags) {
  auto config = ResolveConfig(flags);
  if (!config.ok()) return Fail(config.status());
  ConfigureLogging(config->log_format, /*verbose=*/false);
  if (!config->database_url.empty()) {
    return Fail(InvalidArgument(
        "db:vacuum compacts a SQLite database; " + RedactUrl(config->database_url) +
        " is PostgreSQL, whose autovacuum makes freed space reusable (VACUUM FULL, with the "
        "database's own tools, gives it back to the file system)"));
  }
  auto r = sqlite::Vacuum(config->database_path, /*busy_timeout_ms=*/30'000);
  if (!r.ok()) return Fail(r.status());
  if (flags.json) {
    PrintJson({{"database", config->database_path},
               {"bytes_before", r->bytes_before},
               {"bytes_after", r->bytes_after},
               {"was_incremental", r->was_incremental}});
  } else {
    Printf("compacted %s: %lld -> %lld bytes; incremental auto-vacuum %s\n",
           config->database_path.c_str(), static_cast<long long>(r->bytes_before),
           static_cast<long long>(r->bytes_after),
           r->was_incremental ? "was already on" : "is now on");
  }
  return kExitOk;
}

}  // namespace

void AddRetentionVerbs(CLI::App& app, const GlobalFlags& flags, std::vector<Verb>* verbs) {
  auto dry_run = std::make_shared<bool>(false);
  CLI::App* run = AddVerb(
      app, "retention:run",
      "Purges what [retention] says has aged out, now, in batches (I7): ended executions with "
      "their logs, attempts, effects and idempotency keys (never a queued, running or "
      "lane-blocking one, nor one waiting for a replay approval), old log lines and audit "
      "records. Prints the rows removed per kind (progress on stderr). serve does the same "
      "every [retention] interval_seconds.");
  run->add_flag("--dry-run", *dry_run,
                "Only count what would go per kind, with the oldest and newest end time");
  verbs->push_back({run, [&flags, dry_run] { return RunRetention(flags, *dry_run); }});

  CLI::App* vacuum = AddVerb(
      app, "db:vacuum",
      "Compacts the SQLite database file and turns on incremental auto-vacuum, so that "
      "retention gives freed space back from then on (databases created by this version have "
      "it already). Writers wait while it runs (up to 30 s, then fail): run it while serve is "
      "stopped or quiet; it needs free disk space about the size of the database.");
  verbs->push_back({vacuum, [&flags] { return RunVacuum(flags); }});
}

}  // namespace taskengine::cli
