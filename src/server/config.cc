#include "server/config.h"

#include <toml++/toml.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <span>
#include <sstream>

#include "api/request_checks.h"
#include "core/cron.h"
#include "core/job_fields.h"
#include "core/notify_target.h"
#include "engine/scheduler.h"
#include "storage/open_store.h"
#include "transport/redis_url.h"

namespace taskengine {
namespace {

// The PostgreSQL schema names the store accepts.
bool IsSchemaName(std::string_view name) {
  if (name.empty() || name.size() > 63) return false;
  for (std::size_t i = 0; i < name.size(); ++i) {
    const char ch = name[i];
    const bool ok = (ch >= 'a' && ch <= 'z') || ch == '_' || (i > 0 && ch >= '0' && ch <= '9');
    if (!ok) return false;
  }
  return true;
}

// A [http] public_hosts entry: a DNS name or an IP address (IPv6 with or
// without brackets), without a port.
bool IsPublicHost(const std::string& name) {
  if (name.empty() || name.size() > 255) return false;
  std::optional<api::HostAndPort> parsed = api::ParseHostAndPort(name);
  if (!parsed && name.front() != '[') parsed = api::ParseHostAndPort("[" + name + "]");
  return parsed.has_value() && parsed->port == -1;
}
bool IsHex(char ch) {
  return (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
}

// "" when every '%' of `part` starts a %XX escape and it has no space or
// control character; else the problem, naming `what` (never the text itself,
// which may be a password).
std::string CheckUriPart(std::string_view part, std::string_view what) {
  for (std::size_t i = 0; i < part.size(); ++i) {
    const auto ch = static_cast<unsigned char>(part[i]);
    if (ch <= 0x20 || ch == 0x7f) {
      return "has a space or control character in its " + std::string(what) + " (write it as %XX)";
    }
    if (ch == '%' && (i + 2 >= part.size() || !IsHex(part[i + 1]) || !IsHex(part[i + 2]))) {
      return "has a malformed %-escape in its " + std::string(what) + " (write %XX)";
    }
  }
  return "";
}

// One "host[:port]" of the host list ("" when it parses).
std::string CheckUriHost(std::string_view item) {
  std::string_view port;
  if (!item.empty() && item.front() == '[') {
    const std::size_t close = item.find(']');
    if (close == std::string_view::npos) return "has an IPv6 host without its closing ']'";
    const std::string_view rest = item.substr(close + 1);
    if (!rest.empty() && rest.front() != ':') {
      return "has text after the IPv6 host ']' that is not :port";
    }
    if (!rest.empty()) port = rest.substr(1);
    if (close == 1) return "has an empty IPv6 host '[]'";
  } else {
    const std::size_t colon = item.find(':');
    if (colon != std::string_view::npos) {
      port = item.substr(colon + 1);
      item = item.substr(0, colon);
    }
    if (std::string problem = CheckUriPart(item, "host"); !problem.empty()) return problem;
    if (item.find_first_of("[]@/") != std::string_view::npos) {
      return "has a host with '[', ']', '@' or '/' in it";
    }
  }
  if (port.empty()) return "";
  std::int64_t value = 0;
  for (char ch : port) {
    if (ch < '0' || ch > '9' || value > 65535) {
      return "has port '" + std::string(port.substr(0, 16)) + "', which is not a number 1..65535";
    }
    value = value * 10 + (ch - '0');
  }
  if (value < 1 || value > 65535) {
    return "has port " + std::string(port) + ", which is not in 1..65535";
  }
  return "";
}

constexpr int kMaxWorkerThreads = 256;
constexpr std::size_t kMaxTextField = 200;

std::string Where(std::string_view file, const toml::source_region& region) {
  std::string out(file);
  if (region.begin.line > 0) {
    out += ":" + std::to_string(region.begin.line) + ":" + std::to_string(region.begin.column);
  }
  return out;
}

// The keys of every table ParseConfig reads: the tables below refuse any
// other key, and ConfigKeys() lists them for the documentation.
constexpr std::string_view kRootKeys[] = {"database",  "redis",           "engine",        "http",
                                          "redaction", "retention",       "notifications", "log",
                                          "queue",     "command_profile", "http_target",   "job"};
constexpr std::string_view kDatabaseKeys[] = {"path", "url", "schema", "sync"};
constexpr std::string_view kRedisKeys[] = {"url", "prefix"};
constexpr std::string_view kEngineKeys[] = {"worker_threads",           "poll_interval_ms",
                                            "sweep_interval_ms",        "shutdown_grace_ms",
                                            "replay_requires_approval", "max_payload_bytes"};
constexpr std::string_view kHttpKeys[] = {"host",
                                          "port",
                                          "auth",
                                          "session_idle_minutes",
                                          "session_absolute_hours",
                                          "secure_cookies",
                                          "metrics_open",
                                          "login_per_minute",
                                          "dispatch_per_second",
                                          "lease_per_second",
                                          "public_hosts",
                                          "login_per_second",
                                          "login_threads",
                                          "login_queue",
                                          "login_lockout_after",
                                          "max_connections",
                                          "max_connections_per_client",
                                          "header_timeout_ms"};
constexpr std::string_view kRedactionKeys[] = {"keys"};
constexpr std::string_view kRetentionKeys[] = {"enabled",    "executions_days", "logs_days",
                                               "audit_days", "batch",           "interval_seconds"};
constexpr std::string_view kNotificationKeys[] = {
    "enabled", "per_job_per_hour", "orphan_threshold", "targets",       "dashboard_url",
    "from",    "smtp_url",         "smtp_tls",         "smtp_username", "smtp_password_env",
    "sendmail"};
constexpr std::string_view kLogKeys[] = {"format", "lifecycle"};
constexpr std::string_view kQueueKeys[] = {"name", "priority", "concurrency", "pool"};
constexpr std::string_view kCommandProfileKeys[] = {"name", "argv", "cwd", "env"};
constexpr std::string_view kHttpTargetKeys[] = {"name",       "url",           "allow_hosts",
                                                "allow_http", "allow_private", "headers"};

struct TableKeys {
  std::string_view table;
  bool array_of_tables;  // [[table]]
  std::span<const std::string_view> keys;
};
constexpr TableKeys kTables[] = {
    {"database", false, kDatabaseKeys},
    {"redis", false, kRedisKeys},
    {"engine", false, kEngineKeys},
    {"http", false, kHttpKeys},
    {"redaction", false, kRedactionKeys},
    {"retention", false, kRetentionKeys},
    {"notifications", false, kNotificationKeys},
    {"log", false, kLogKeys},
    {"queue", true, kQueueKeys},
    {"command_profile", true, kCommandProfileKeys},
    {"http_target", true, kHttpTargetKeys},
    {"job", true, kJobDefinitionFields},
};

// The declared keys of the table `table` ("" for the root).
std::span<const std::string_view> KeysOf(std::string_view table) {
  if (table.empty()) return kRootKeys;
  for (const TableKeys& t : kTables) {
    if (t.table == table) return t.keys;
  }
  TE_CHECK(false && "a table ParseConfig reads must be declared in kTables");
  return {};
}

// Reads the keys of one TOML table, remembering which were read; keys the
// table does not declare (kTables) are refused as unknown. Not thread-safe;
// lives for one table.
class TableReader {
 public:
  // `path` names the table in messages ("engine", "job[2]"); empty for the root.
  // `kind` is its entry in kTables ("engine", "job"); empty for the root.
  TableReader(const toml::table& table, std::string_view kind, std::string path,
              std::string_view file)
      : table_(table), declared_(KeysOf(kind)), path_(std::move(path)), file_(file) {}

  // The node under `key`, or nullptr; marks the key as known.
  // REQUIRES: `key` is declared for this table in kTables.
  const toml::node* Get(std::string_view key) {
    TE_CHECK(IsDeclared(key) && "a key ParseConfig reads must be declared in kTables");
    known_.emplace(key);
    return table_.get(key);
  }

  const std::string& path() const { return path_; }

  // Where the table and each key it sets are, for ServerConfig::locations.
  ServerConfig::TableLocation Location() const {
    ServerConfig::TableLocation location;
    location.path = path_;
    location.where = Where(file_, table_.source());
    for (auto&& [key, node] : table_) {
      location.keys[std::string(key.str())] = Where(file_, node.source());
    }
    return location;
  }

  Status Int(std::string_view key, std::int64_t min, std::int64_t max, std::int64_t* out) {
    const toml::node* n = Get(key);
    if (n == nullptr) return Status::Ok();
    const auto* v = n->as_integer();
    if (v == nullptr) return Error(*n, key, "must be an integer");
    if (v->get() < min || v->get() > max) {
      return Error(*n, key,
                   "must be between " + std::to_string(min) + " and " + std::to_string(max) +
                       " (got " + std::to_string(v->get()) + ")");
    }
    *out = v->get();
    return Status::Ok();
  }

  Status Int(std::string_view key, std::int64_t min, std::int64_t max, int* out) {
    std::int64_t v = *out;
    TE_RETURN_IF_ERROR(Int(key, min, max, &v));
    *out = static_cast<int>(v);
    return Status::Ok();
  }

  Status String(std::string_view key, std::size_t max_bytes, std::string* out) {
    const toml::node* n = Get(key);
    if (n == nullptr) return Status::Ok();
    const auto* v = n->as_string();
    if (v == nullptr) return Error(*n, key, "must be a string");
    if (v->get().size() > max_bytes) {
      return Error(*n, key, "is longer than " + std::to_string(max_bytes) + " bytes");
    }
    *out = v->get();
    return Status::Ok();
  }

  // `*out` is set only when the key is present.
  Status Bool(std::string_view key, bool* out) {
    const toml::node* n = Get(key);
    if (n == nullptr) return Status::Ok();
    const auto* v = n->as_boolean();
    if (v == nullptr) return Error(*n, key, "must be true or false");
    *out = v->get();
    return Status::Ok();
  }

  // An array of strings, each 1..max_bytes bytes, at most max_items;
  // `*out` is set only when the key is present.
  Status StringList(std::string_view key, std::size_t max_items, std::size_t max_bytes,
                    std::vector<std::string>* out) {
    const toml::node* n = Get(key);
    if (n == nullptr) return Status::Ok();
    const auto* arr = n->as_array();
    if (arr == nullptr || arr->size() > max_items) {
      return Error(*n, key,
                   "must be an array of at most " + std::to_string(max_items) + " strings");
    }
    std::vector<std::string> items;
    for (std::size_t i = 0; i < arr->size(); ++i) {
      const auto* v = arr->get(i)->as_string();
      if (v == nullptr || v->get().empty() || v->get().size() > max_bytes) {
        return Error(
            *arr->get(i), key,
            "must hold non-empty strings of at most " + std::to_string(max_bytes) + " bytes");
      }
      items.push_back(v->get());
    }
    *out = std::move(items);
    return Status::Ok();
  }

  // kInvalidArgument naming the first key the table does not declare. Called
  // after a complete read, when every declared key has been asked for.
  Status RejectUnknown() const {
    TE_DCHECK(known_.size() == declared_.size() && "every declared key must be read");
    for (auto&& [key, node] : table_) {
      if (!IsDeclared(key.str())) {
        return InvalidArgument(Where(file_, key.source()) + ": unknown key '" +
                               Qualified(key.str()) + "'");
      }
    }
    return Status::Ok();
  }

  Status Error(const toml::node& n, std::string_view key, const std::string& what) const {
    return InvalidArgument(Where(file_, n.source()) + ": " + Qualified(key) + " " + what);
  }

  std::string Qualified(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }

 private:
  bool IsDeclared(std::string_view key) const {
    return std::find(declared_.begin(), declared_.end(), key) != declared_.end();
  }

  const toml::table& table_;
  const std::span<const std::string_view> declared_;
  const std::string path_;
  const std::string_view file_;
  std::set<std::string, std::less<>> known_;
};

// Converts a TOML value to JSON. Dates and times have no JSON form: refused.
Result<nlohmann::json> ToJson(const toml::node& node, const std::string& path,
                              std::string_view file) {
  auto bad = [&](const std::string& what) {
    return InvalidArgument(Where(file, node.source()) + ": " + path + " " + what);
  };
  if (const auto* t = node.as_table()) {
    nlohmann::json obj = nlohmann::json::object();
    for (auto&& [key, value] : *t) {
      TE_ASSIGN_OR_RETURN(obj[std::string(key.str())],
                          ToJson(value, path + "." + std::string(key.str()), file));
    }
    return obj;
  }
  if (const auto* a = node.as_array()) {
    nlohmann::json arr = nlohmann::json::array();
    for (std::size_t i = 0; i < a->size(); ++i) {
      TE_ASSIGN_OR_RETURN(nlohmann::json item,
                          ToJson(*a->get(i), path + "[" + std::to_string(i) + "]", file));
      arr.push_back(std::move(item));
    }
    return arr;
  }
  if (const auto* s = node.as_string()) return nlohmann::json(s->get());
  if (const auto* i = node.as_integer()) return nlohmann::json(i->get());
  if (const auto* b = node.as_boolean()) return nlohmann::json(b->get());
  if (const auto* f = node.as_floating_point()) {
    if (!std::isfinite(f->get())) return bad("must be a finite number (JSON has no nan or inf)");
    return nlohmann::json(f->get());
  }
  return bad("is a date or time, which JSON cannot hold: write it as a string");
}

using Locations = std::map<std::pair<std::string, std::string>, ServerConfig::TableLocation>;

// Reads the array of tables `key` ([[queue]], [[job]]) and calls `each` on
// each table, then records where it is under (key, its name). An absent key is
// an empty array.
template <typename Fn>
Status ForEachTable(TableReader& root, std::string_view key, std::string_view file,
                    Locations* locations, Fn each) {
  const toml::node* n = root.Get(key);
  if (n == nullptr) return Status::Ok();
  const auto* arr = n->as_array();
  if (arr == nullptr || !arr->is_array_of_tables()) {
    return root.Error(*n, key, "must be an array of tables: write [[" + std::string(key) + "]]");
  }
  for (std::size_t i = 0; i < arr->size(); ++i) {
    const toml::table& t = *arr->get(i)->as_table();
    TableReader reader(t, key, std::string(key) + "[" + std::to_string(i) + "]", file);
    TE_RETURN_IF_ERROR(each(reader, t));
    TE_RETURN_IF_ERROR(reader.RejectUnknown());
    (*locations)[{std::string(key), t["name"].value_or(std::string())}] = reader.Location();
  }
  return Status::Ok();
}

// Reads a sub-table ([database], [engine], ...) and records where it is under
// (key, ""). An absent key is an empty table.
template <typename Fn>
Status WithTable(TableReader& root, std::string_view key, std::string_view file,
                 Locations* locations, Fn each) {
  const toml::node* n = root.Get(key);
  if (n == nullptr) return Status::Ok();
  const auto* t = n->as_table();
  if (t == nullptr) return root.Error(*n, key, "must be a table: write [" + std::string(key) + "]");
  TableReader reader(*t, key, std::string(key), file);
  TE_RETURN_IF_ERROR(each(reader));
  TE_RETURN_IF_ERROR(reader.RejectUnknown());
  (*locations)[{std::string(key), std::string()}] = reader.Location();
  return Status::Ok();
}

Result<SyncMode> ParseSync(std::string_view s) {
  if (s == "full") return SyncMode::kFull;
  if (s == "normal") return SyncMode::kNormal;
  return InvalidArgument("must be \"full\" or \"normal\"");
}

Status ReadJob(TableReader& r, const toml::table& table, std::string_view file,
               JobDefinition* job) {
  std::string name;
  TE_RETURN_IF_ERROR(r.String("name", kMaxTextField, &name));
  if (name.empty()) {
    return InvalidArgument(Where(file, table.source()) + ": " + r.Qualified("name") +
                           " is required");
  }
  if (!IsValidJobName(name)) {
    return r.Error(*r.Get("name"), "name",
                   "'" + name + "' is not a valid job name ([a-z0-9][a-z0-9._-]{0,99})");
  }
  job->name = JobName(name);
  TE_RETURN_IF_ERROR(r.String("display_name", kMaxTextField, &job->display_name));
  TE_RETURN_IF_ERROR(r.String("handler", kMaxTextField, &job->handler));
  if (job->handler.empty()) {
    return InvalidArgument(Where(file, table.source()) + ": " + r.Qualified("handler") +
                           " is required (e.g. \"command\")");
  }
  if (!IsValidJobName(job->handler)) {
    return r.Error(*r.Get("handler"), "handler", "'" + job->handler + "' is not a valid name");
  }
  TE_RETURN_IF_ERROR(r.String("queue", kMaxTextField, &job->queue));
  if (!IsValidQueueName(job->queue)) {
    return r.Error(*r.Get("queue"), "queue", "'" + job->queue + "' is not a valid queue name");
  }
  std::string scope(ToString(job->scope));
  TE_RETURN_IF_ERROR(r.String("scope", kMaxTextField, &scope));
  auto parsed_scope = ParseJobScope(scope);
  if (!parsed_scope)
    return r.Error(*r.Get("scope"), "scope", "must be \"global\" or \"per_tenant\"");
  job->scope = *parsed_scope;
  TE_RETURN_IF_ERROR(r.String("schedule", kMaxTextField, &job->schedule));
  TE_RETURN_IF_ERROR(r.String("timezone", 64, &job->timezone));
  if (job->timezone.empty()) return r.Error(*r.Get("timezone"), "timezone", "must not be empty");
  std::string catch_up(ToString(job->catch_up));
  TE_RETURN_IF_ERROR(r.String("catch_up", 16, &catch_up));
  if (auto policy = ParseCatchUpPolicy(catch_up)) {
    job->catch_up = *policy;
  } else {
    return r.Error(*r.Get("catch_up"), "catch_up", "must be \"coalesce\", \"all\" or \"none\"");
  }
  TE_RETURN_IF_ERROR(r.Int("catch_up_window_ms", 0, 7 * kMillisPerDay, &job->catch_up_window_ms));
  TE_RETURN_IF_ERROR(r.Int("window_ms", 0, 366 * kMillisPerDay, &job->window_ms));
  if (auto checked = CheckJobSchedule(*job); !checked.ok()) {  // cron, zone, whole-minute window
    // Named at the key the scheduler refused.
    std::string_view key = "timezone";
    if (job->window_ms % 60'000 != 0) {
      key = "window_ms";
    } else if (!job->schedule.empty() && !ParseCron(job->schedule).ok()) {
      key = "schedule";
    }
    const toml::node* n = r.Get(key);
    return InvalidArgument(Where(file, n != nullptr ? n->source() : table.source()) + ": " +
                           r.Qualified(key) + ": " + checked.status().message());
  }
  TE_RETURN_IF_ERROR(r.Int("timeout_ms", 1, 7 * kMillisPerDay, &job->timeout_ms));
  TE_RETURN_IF_ERROR(r.Int("lease_ms", 100, kMillisPerDay, &job->lease_ms));
  RetryPolicy& p = job->retry;
  TE_RETURN_IF_ERROR(r.Int("max_attempts", 1, 1000, &p.max_attempts));
  TE_RETURN_IF_ERROR(r.Int("backoff_base_ms", 0, kMillisPerDay, &p.backoff_base_ms));
  TE_RETURN_IF_ERROR(r.Int("backoff_cap_ms", 0, 7 * kMillisPerDay, &p.backoff_cap_ms));
  if (p.backoff_cap_ms < p.backoff_base_ms) {
    const toml::node* n = r.Get("backoff_cap_ms");
    return InvalidArgument(Where(file, n != nullptr ? n->source() : table.source()) + ": " +
                           r.Qualified("backoff_cap_ms") + " (" + std::to_string(p.backoff_cap_ms) +
                           ") must not be below backoff_base_ms (" +
                           std::to_string(p.backoff_base_ms) + ")");
  }
  TE_RETURN_IF_ERROR(r.Int("max_permanent_attempts", 1, 1000, &p.max_permanent_attempts));
  TE_RETURN_IF_ERROR(
      r.Int("max_unsupported_schema_attempts", 1, 1000, &p.max_unsupported_schema_attempts));
  TE_RETURN_IF_ERROR(r.Int("max_ambiguous_attempts", 1, 1000, &p.max_ambiguous_attempts));
  TE_RETURN_IF_ERROR(
      r.Int("max_consecutive_lease_expiries", 1, 1000, &p.max_consecutive_lease_expiries));
  TE_RETURN_IF_ERROR(r.String("lane_template", kMaxTextField, &job->lane_template));
  if (const toml::node* n = r.Get("accepted_schema_versions")) {
    const auto* arr = n->as_array();
    if (arr == nullptr) {
      return r.Error(*n, "accepted_schema_versions", "must be an array of integers, e.g. [1, 2]");
    }
    std::set<std::int64_t> seen;
    for (std::size_t i = 0; i < arr->size(); ++i) {
      const auto* v = arr->get(i)->as_integer();
      if (v == nullptr || v->get() < 1 || v->get() > 1'000'000) {
        return r.Error(*arr->get(i), "accepted_schema_versions",
                       "must hold integers from 1 to 1000000");
      }
      if (!seen.insert(v->get()).second) {
        return r.Error(*arr->get(i), "accepted_schema_versions",
                       "lists " + std::to_string(v->get()) + " twice");
      }
      job->accepted_schema_versions.push_back(static_cast<int>(v->get()));
    }
  }
  TE_RETURN_IF_ERROR(r.Bool("enabled", &job->enabled));
  TE_RETURN_IF_ERROR(r.Bool("notify_on_failure", &job->notify_on_failure));
  TE_RETURN_IF_ERROR(r.StringList("notify_targets", kMaxNotifyTargets, 320, &job->notify_targets));
  if (auto targets = ParseNotifyTargets(job->notify_targets); !targets.ok()) {
    return r.Error(*r.Get("notify_targets"), "notify_targets", targets.status().message());
  }
  if (const toml::node* n = r.Get("config")) {
    if (!n->is_table())
      return r.Error(*n, "config", "must be a table, e.g. config = { argv = [...] }");
    TE_ASSIGN_OR_RETURN(nlohmann::json j, ToJson(*n, r.Qualified("config"), file));
    job->config_json = j.dump();
  }
  return Status::Ok();
}

Status ApplyEnv(const EnvLookup& env, ServerConfig* c) {
  for (const char* name : {"DATABASE_URL", "TASKENGINE_DATABASE_URL"}) {
    // Later wins: TASKENGINE_DATABASE_URL over DATABASE_URL over the file.
    auto url = env(name);
    if (!url || url->empty()) continue;  // set but empty: as if unset
    if (!IsPostgresUrl(*url) && !IsMariaDbUrl(*url)) {
      return InvalidArgument(std::string(name) +
                             " must start with postgres://, postgresql://, mysql:// or mariadb://"
                             " (is '" +
                             RedactUrl(*url) + "')");
    }
    if (Status s = CheckPostgresUrl(*url); IsPostgresUrl(*url) && !s.ok()) {
      return InvalidArgument(std::string(name) + " " + s.message());
    }
    c->database_url = *url;
  }
  for (const char* name : {"REDIS_URL", "TASKENGINE_REDIS_URL"}) {
    // Later wins: TASKENGINE_REDIS_URL over REDIS_URL over the file.
    auto url = env(name);
    if (!url || url->empty()) continue;  // set but empty: as if unset
    if (auto parsed = ParseRedisUrl(*url); !parsed.ok()) {
      return InvalidArgument(std::string(name) + ": " + parsed.status().message());
    }
    c->redis_url = *url;
  }
  if (auto prefix = env("TASKENGINE_REDIS_PREFIX")) {
    if (Status s = CheckRedisPrefix(*prefix); !s.ok()) {
      return InvalidArgument("TASKENGINE_REDIS_PREFIX: " + s.message());
    }
    c->redis_prefix = *prefix;
  }
  if (auto schema = env("TASKENGINE_DATABASE_SCHEMA")) {
    if (!IsSchemaName(*schema)) {
      return InvalidArgument("TASKENGINE_DATABASE_SCHEMA='" + *schema +
                             "' must match [a-z_][a-z0-9_]* (at most 63 characters)");
    }
    c->database_schema = *schema;
  }
  if (auto format = env("TASKENGINE_LOG_FORMAT")) {
    if (*format == "text") {
      c->log_format = LogFormat::kText;
    } else if (*format == "json") {
      c->log_format = LogFormat::kJson;
    } else {
      return InvalidArgument("TASKENGINE_LOG_FORMAT='" + *format + "' must be text or json");
    }
  }
  if (auto db = env("TASKENGINE_DB")) {
    if (db->empty()) return InvalidArgument("TASKENGINE_DB is set but empty");
    c->database_path = *db;
  }
  if (auto sync = env("TASKENGINE_SYNC")) {
    auto mode = ParseSync(*sync);
    if (!mode.ok()) {
      return InvalidArgument("TASKENGINE_SYNC='" + *sync + "' " + mode.status().message());
    }
    c->sync = *mode;
  }
  if (auto workers = env("TASKENGINE_WORKERS")) {
    char* end = nullptr;
    errno = 0;
    long v = std::strtol(workers->c_str(), &end, 10);
    if (workers->empty() || *end != '\0' || errno != 0 || v < 0 || v > kMaxWorkerThreads) {
      return InvalidArgument("TASKENGINE_WORKERS='" + *workers + "' must be an integer from 0 to " +
                             std::to_string(kMaxWorkerThreads));
    }
    c->worker_threads = static_cast<int>(v);
  }
  if (auto host = env("TASKENGINE_HTTP_HOST")) {
    if (host->empty() || host->size() > 255) {
      return InvalidArgument("TASKENGINE_HTTP_HOST='" + *host + "' must be a host name or address");
    }
    c->http.host = *host;
  }
  if (auto port = env("TASKENGINE_HTTP_PORT")) {
    char* end = nullptr;
    errno = 0;
    long v = std::strtol(port->c_str(), &end, 10);
    if (port->empty() || *end != '\0' || errno != 0 || v < 0 || v > 65535) {
      return InvalidArgument("TASKENGINE_HTTP_PORT='" + *port +
                             "' must be an integer from 0 to 65535");
    }
    c->http.port = static_cast<int>(v);
  }
  if (auto hosts = env("TASKENGINE_HTTP_PUBLIC_HOSTS")) {
    c->http.public_hosts.clear();
    std::stringstream items(*hosts);
    for (std::string item; std::getline(items, item, ',');) {
      while (!item.empty() && item.front() == ' ') item.erase(item.begin());
      while (!item.empty() && item.back() == ' ') item.pop_back();
      if (item.empty()) continue;
      if (!IsPublicHost(item)) {
        return InvalidArgument("TASKENGINE_HTTP_PUBLIC_HOSTS: '" + item +
                               "' is not a host name or address (without a port)");
      }
      c->http.public_hosts.push_back(item);
    }
  }
  if (auto auth = env("TASKENGINE_HTTP_AUTH")) {
    if (*auth == "true" || *auth == "1") {
      c->http.auth = true;
    } else if (*auth == "false" || *auth == "0") {
      c->http.auth = false;
    } else {
      return InvalidArgument("TASKENGINE_HTTP_AUTH='" + *auth + "' must be true or false");
    }
  }
  return Status::Ok();
}

Result<ServerConfig> FromTable(const toml::table& root_table, std::string_view file) {
  ServerConfig c;
  TableReader root(root_table, "", "", file);
  TE_RETURN_IF_ERROR(WithTable(root, "database", file, &c.locations, [&](TableReader& t) -> Status {
    TE_RETURN_IF_ERROR(t.String("path", 4096, &c.database_path));
    if (c.database_path.empty()) return t.Error(*t.Get("path"), "path", "must not be empty");
    TE_RETURN_IF_ERROR(t.String("url", 4096, &c.database_url));
    if (t.Get("url") != nullptr && !IsPostgresUrl(c.database_url) &&
        !IsMariaDbUrl(c.database_url)) {
      return t.Error(*t.Get("url"), "url",
                     "must start with postgres://, postgresql://, mysql:// or mariadb://");
    }
    if (t.Get("url") != nullptr && IsPostgresUrl(c.database_url)) {
      if (Status s = CheckPostgresUrl(c.database_url); !s.ok()) {
        return t.Error(*t.Get("url"), "url", s.message());
      }
    }
    TE_RETURN_IF_ERROR(t.String("schema", 63, &c.database_schema));
    if (t.Get("schema") != nullptr && !IsSchemaName(c.database_schema)) {
      return t.Error(*t.Get("schema"), "schema",
                     "must match [a-z_][a-z0-9_]* (at most 63 characters)");
    }
    std::string sync = "full";
    TE_RETURN_IF_ERROR(t.String("sync", 16, &sync));
    auto mode = ParseSync(sync);
    if (!mode.ok()) return t.Error(*t.Get("sync"), "sync", mode.status().message());
    c.sync = *mode;
    return Status::Ok();
  }));
  TE_RETURN_IF_ERROR(WithTable(root, "redis", file, &c.locations, [&](TableReader& t) -> Status {
    TE_RETURN_IF_ERROR(t.String("url", 4096, &c.redis_url));
    if (t.Get("url") != nullptr) {
      if (auto parsed = ParseRedisUrl(c.redis_url); !parsed.ok()) {
        return t.Error(*t.Get("url"), "url", parsed.status().message());
      }
    }
    TE_RETURN_IF_ERROR(t.String("prefix", 64, &c.redis_prefix));
    if (t.Get("prefix") != nullptr) {
      if (Status s = CheckRedisPrefix(c.redis_prefix); !s.ok()) {
        return t.Error(*t.Get("prefix"), "prefix", s.message());
      }
    }
    return Status::Ok();
  }));
  TE_RETURN_IF_ERROR(WithTable(root, "engine", file, &c.locations, [&](TableReader& t) -> Status {
    TE_RETURN_IF_ERROR(t.Int("worker_threads", 0, kMaxWorkerThreads, &c.worker_threads));
    TE_RETURN_IF_ERROR(t.Int("poll_interval_ms", 1, 60'000, &c.poll_interval_ms));
    TE_RETURN_IF_ERROR(t.Int("sweep_interval_ms", 1, 3'600'000, &c.sweep_interval_ms));
    TE_RETURN_IF_ERROR(t.Int("shutdown_grace_ms", 0, 3'600'000, &c.shutdown_grace_ms));
    TE_RETURN_IF_ERROR(t.Bool("replay_requires_approval", &c.replay_requires_approval));
    std::int64_t payload = static_cast<std::int64_t>(c.max_payload_bytes);
    TE_RETURN_IF_ERROR(t.Int("max_payload_bytes", static_cast<std::int64_t>(kMinPayloadLimit),
                             static_cast<std::int64_t>(kMaxPayloadLimit), &payload));
    c.max_payload_bytes = static_cast<std::size_t>(payload);
    return Status::Ok();
  }));
  TE_RETURN_IF_ERROR(WithTable(root, "http", file, &c.locations, [&](TableReader& t) -> Status {
    TE_RETURN_IF_ERROR(t.String("host", 255, &c.http.host));
    if (c.http.host.empty()) return t.Error(*t.Get("host"), "host", "must not be empty");
    TE_RETURN_IF_ERROR(t.Int("port", 0, 65535, &c.http.port));
    TE_RETURN_IF_ERROR(t.Bool("auth", &c.http.auth));
    std::int64_t idle_minutes = c.http.session_idle_ms / 60'000;
    TE_RETURN_IF_ERROR(t.Int("session_idle_minutes", 1, 7 * 24 * 60, &idle_minutes));
    c.http.session_idle_ms = idle_minutes * 60'000;
    std::int64_t absolute_hours = c.http.session_absolute_ms / 3'600'000;
    TE_RETURN_IF_ERROR(t.Int("session_absolute_hours", 1, 30 * 24, &absolute_hours));
    c.http.session_absolute_ms = absolute_hours * 3'600'000;
    TE_RETURN_IF_ERROR(t.Bool("secure_cookies", &c.http.secure_cookies));
    TE_RETURN_IF_ERROR(t.Bool("metrics_open", &c.http.metrics_open));
    TE_RETURN_IF_ERROR(t.Int("login_per_minute", 0, 100'000, &c.http.login_per_minute));
    TE_RETURN_IF_ERROR(t.Int("dispatch_per_second", 0, 1'000'000, &c.http.dispatch_per_second));
    TE_RETURN_IF_ERROR(t.Int("lease_per_second", 0, 1'000'000, &c.http.lease_per_second));
    if (const toml::node* n = t.Get("public_hosts")) {
      const auto* arr = n->as_array();
      if (arr == nullptr) {
        return t.Error(*n, "public_hosts",
                       "must be an array of strings, e.g. [\"te.example.com\"]");
      }
      for (std::size_t i = 0; i < arr->size(); ++i) {
        const auto* v = arr->get(i)->as_string();
        if (v == nullptr || !IsPublicHost(v->get())) {
          return t.Error(*arr->get(i), "public_hosts",
                         "must hold host names or addresses without a port");
        }
        c.http.public_hosts.push_back(v->get());
      }
    }
    TE_RETURN_IF_ERROR(t.Int("login_per_second", 0, 100'000, &c.http.login_per_second));
    TE_RETURN_IF_ERROR(t.Int("login_threads", 1, 64, &c.http.login_threads));
    TE_RETURN_IF_ERROR(t.Int("login_queue", 0, 10'000, &c.http.login_queue));
    TE_RETURN_IF_ERROR(t.Int("login_lockout_after", 0, 1000, &c.http.login_lockout_after));
    TE_RETURN_IF_ERROR(t.Int("max_connections", 0, 10'000'000, &c.http.max_connections));
    TE_RETURN_IF_ERROR(
        t.Int("max_connections_per_client", 1, 10'000'000, &c.http.max_connections_per_client));
    TE_RETURN_IF_ERROR(t.Int("header_timeout_ms", 100, 600'000, &c.http.header_timeout_ms));
    return Status::Ok();
  }));
  TE_RETURN_IF_ERROR(
      WithTable(root, "redaction", file, &c.locations, [&](TableReader& t) -> Status {
        const toml::node* n = t.Get("keys");
        if (n == nullptr) return Status::Ok();
        const auto* arr = n->as_array();
        if (arr == nullptr) return t.Error(*n, "keys", "must be an array of strings");
        for (std::size_t i = 0; i < arr->size(); ++i) {
          const auto* v = arr->get(i)->as_string();
          if (v == nullptr || v->get().empty() || v->get().size() > 100) {
            return t.Error(*arr->get(i), "keys",
                           "must hold non-empty strings of at most 100 bytes");
          }
          c.redact_keys.push_back(v->get());
        }
        return Status::Ok();
      }));
  TE_RETURN_IF_ERROR(
      WithTable(root, "retention", file, &c.locations, [&](TableReader& t) -> Status {
        RetentionPolicy& r = c.retention;
        TE_RETURN_IF_ERROR(t.Bool("enabled", &r.enabled));
        const struct {
          const char* key;
          Millis* ms;
        } ages[] = {{"executions_days", &r.executions_ms},
                    {"logs_days", &r.logs_ms},
                    {"audit_days", &r.audit_ms}};
        for (const auto& a : ages) {
          std::int64_t days = *a.ms / kRetentionDayMs;
          TE_RETURN_IF_ERROR(t.Int(a.key, 0, 36'500, &days));
          *a.ms = days * kRetentionDayMs;
        }
        TE_RETURN_IF_ERROR(t.Int("batch", 1, 10'000, &r.batch));
        std::int64_t interval_s = r.interval_ms / 1000;
        TE_RETURN_IF_ERROR(t.Int("interval_seconds", 1, 86'400, &interval_s));
        r.interval_ms = interval_s * 1000;
        return Status::Ok();
      }));
  TE_RETURN_IF_ERROR(
      WithTable(root, "notifications", file, &c.locations, [&](TableReader& t) -> Status {
        NotifySettings& n = c.notifications;
        TE_RETURN_IF_ERROR(t.Bool("enabled", &n.enabled));
        TE_RETURN_IF_ERROR(t.Int("per_job_per_hour", 1, 10'000, &n.per_job_per_hour));
        TE_RETURN_IF_ERROR(t.Int("orphan_threshold", 1, 100'000, &n.orphan_threshold));
        TE_RETURN_IF_ERROR(t.StringList("targets", kMaxNotifyTargets, 320, &n.targets));
        TE_RETURN_IF_ERROR(t.String("dashboard_url", 500, &n.dashboard_url));
        TE_RETURN_IF_ERROR(t.String("from", 254, &n.from));
        TE_RETURN_IF_ERROR(t.String("smtp_url", 500, &n.smtp_url));
        std::string tls = "required";
        TE_RETURN_IF_ERROR(t.String("smtp_tls", 16, &tls));
        if (tls == "required") {
          n.smtp_tls = SmtpTls::kRequired;
        } else if (tls == "off") {
          n.smtp_tls = SmtpTls::kOff;
        } else {
          return t.Error(*t.Get("smtp_tls"), "smtp_tls", "must be \"required\" or \"off\"");
        }
        TE_RETURN_IF_ERROR(t.String("smtp_username", 200, &n.smtp_username));
        TE_RETURN_IF_ERROR(t.String("smtp_password_env", 100, &n.smtp_password_env));
        TE_RETURN_IF_ERROR(t.StringList("sendmail", 32, 1000, &n.sendmail));
        if (Status s = ValidateNotifySettings(n); !s.ok()) {
          return InvalidArgument(std::string(file) + ": " + s.message());
        }
        return Status::Ok();
      }));
  TE_RETURN_IF_ERROR(WithTable(root, "log", file, &c.locations, [&](TableReader& t) -> Status {
    std::string format = "text";
    TE_RETURN_IF_ERROR(t.String("format", 16, &format));
    if (format == "text") {
      c.log_format = LogFormat::kText;
    } else if (format == "json") {
      c.log_format = LogFormat::kJson;
    } else {
      return t.Error(*t.Get("format"), "format", "must be \"text\" or \"json\"");
    }
    TE_RETURN_IF_ERROR(t.Bool("lifecycle", &c.log_lifecycle));
    return Status::Ok();
  }));
  std::set<std::string> queue_names;
  TE_RETURN_IF_ERROR(ForEachTable(
      root, "queue", file, &c.locations, [&](TableReader& t, const toml::table& tbl) -> Status {
        QueueConfig q;
        q.name.clear();
        TE_RETURN_IF_ERROR(t.String("name", kMaxTextField, &q.name));
        if (q.name.empty()) {
          return InvalidArgument(Where(file, tbl.source()) + ": " + t.Qualified("name") +
                                 " is required");
        }
        if (!IsValidQueueName(q.name)) {
          return t.Error(*t.Get("name"), "name", "'" + q.name + "' is not a valid queue name");
        }
        if (IsReservedQueueName(q.name)) {
          return t.Error(*t.Get("name"), "name",
                         "'" + q.name + "' is reserved for the server's own work");
        }
        if (!queue_names.insert(q.name).second) {
          return t.Error(*t.Get("name"), "name", "'" + q.name + "' is declared twice");
        }
        TE_RETURN_IF_ERROR(t.Int("priority", -1000, 1000, &q.priority));
        TE_RETURN_IF_ERROR(t.Int("concurrency", 0, 10'000, &q.concurrency));
        TE_RETURN_IF_ERROR(t.Bool("pool", &q.pool));
        c.queues.push_back(std::move(q));
        return Status::Ok();
      }));
  if (c.queues.empty()) {
    c.queues.push_back(QueueConfig{});
    queue_names.insert(c.queues.back().name);
  }
  // [[command_profile]] and [[http_target]]: a name plus the server-owned keys
  // of their handler, kept as JSON and checked like job configs at load.
  // Every declared key but the name is a setting of the handler.
  auto read_named = [&](std::string_view table, std::string_view required,
                        std::map<std::string, std::string, std::less<>>* out) {
    return ForEachTable(
        root, table, file, &c.locations, [&](TableReader& t, const toml::table& tbl) -> Status {
          std::string name;
          TE_RETURN_IF_ERROR(t.String("name", kMaxTextField, &name));
          if (name.empty()) {
            return InvalidArgument(Where(file, tbl.source()) + ": " + t.Qualified("name") +
                                   " is required");
          }
          if (!IsValidJobName(name)) {
            return t.Error(*t.Get("name"), "name",
                           "'" + name + "' is not a valid name ([a-z0-9][a-z0-9._-]{0,99})");
          }
          if (out->count(name) > 0) {
            return t.Error(*t.Get("name"), "name", "'" + name + "' is defined twice");
          }
          if (t.Get(required) == nullptr) {
            return InvalidArgument(Where(file, tbl.source()) + ": " +
                                   t.Qualified(std::string(required)) + " is required");
          }
          nlohmann::json settings = nlohmann::json::object();
          for (std::string_view key : KeysOf(table)) {
            if (key == "name") continue;
            if (const toml::node* n = t.Get(key)) {
              TE_ASSIGN_OR_RETURN(settings[std::string(key)],
                                  ToJson(*n, t.Qualified(std::string(key)), file));
            }
          }
          (*out)[name] = settings.dump();
          return Status::Ok();
        });
  };
  TE_RETURN_IF_ERROR(read_named("command_profile", "argv", &c.command_profiles));
  TE_RETURN_IF_ERROR(read_named("http_target", "url", &c.http_targets));
  std::set<std::string> job_names;
  TE_RETURN_IF_ERROR(ForEachTable(
      root, "job", file, &c.locations, [&](TableReader& t, const toml::table& tbl) -> Status {
        JobDefinition job;
        TE_RETURN_IF_ERROR(ReadJob(t, tbl, file, &job));
        if (!job_names.insert(job.name.value).second) {
          return t.Error(*t.Get("name"), "name", "'" + job.name.value + "' is defined twice");
        }
        if (queue_names.count(job.queue) == 0) {
          const toml::node* n = t.Get("queue");
          return InvalidArgument(Where(file, n != nullptr ? n->source() : tbl.source()) +
                                 ": job '" + job.name.value + "' uses queue '" + job.queue +
                                 "', which no [[queue]] declares (its work would never run)");
        }
        c.jobs.push_back(std::move(job));
        return Status::Ok();
      }));
  TE_RETURN_IF_ERROR(root.RejectUnknown());
  return c;
}

}  // namespace

EnvLookup ProcessEnv() {
  return [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

Result<ServerConfig> ParseConfig(std::string_view toml_text, std::string_view source_name,
                                 const EnvLookup& env) {
  ServerConfig config;
  try {
    toml::table table = toml::parse(toml_text, source_name);
    TE_ASSIGN_OR_RETURN(config, FromTable(table, source_name));
  } catch (const toml::parse_error& e) {
    return InvalidArgument(Where(source_name, e.source()) + ": " + std::string(e.description()));
  } catch (const std::exception& e) {
    return InvalidArgument(std::string(source_name) + ": " + e.what());
  }
  config.source = std::string(source_name);
  TE_RETURN_IF_ERROR(ApplyEnv(env, &config));
  return config;
}

Result<ServerConfig> LoadConfig(const std::string& path, const EnvLookup& env) {
  if (path.empty()) {
    TE_ASSIGN_OR_RETURN(ServerConfig config, ParseConfig("", "", env));
    config.source.clear();
    return config;
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return InvalidArgument("cannot read config file " + path + ": it is a directory");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return InvalidArgument("cannot read config file " + path + ": " + std::strerror(errno));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return InvalidArgument("cannot read config file " + path);
  return ParseConfig(text.str(), path, env);
}

Status CheckPostgresUrl(std::string_view url) {
  auto bad = [](const std::string& problem) {
    return InvalidArgument("is not a valid PostgreSQL URL: it " + problem +
                           " (postgres://[user[:password]@][host][:port][/dbname][?param=value])");
  };
  std::string_view rest;
  if (url.starts_with("postgres://")) {
    rest = url.substr(11);
  } else if (url.starts_with("postgresql://")) {
    rest = url.substr(13);
  } else {
    return bad("does not start with postgres:// or postgresql://");
  }
  std::string_view query;
  if (const std::size_t q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  std::string_view database;
  if (const std::size_t slash = rest.find('/'); slash != std::string_view::npos) {
    database = rest.substr(slash + 1);
    rest = rest.substr(0, slash);
  }
  if (const std::size_t at = rest.rfind('@'); at != std::string_view::npos) {
    if (std::string p = CheckUriPart(rest.substr(0, at), "user or password"); !p.empty()) {
      return bad(p);
    }
    rest = rest.substr(at + 1);
  }
  // The host list: host[:port][,host[:port]...]; an empty host means the
  // default (a Unix socket).
  for (std::size_t start = 0; start <= rest.size();) {
    std::size_t end = rest.find(',', start);
    if (end == std::string_view::npos) end = rest.size();
    if (std::string p = CheckUriHost(rest.substr(start, end - start)); !p.empty()) return bad(p);
    start = end + 1;
  }
  if (std::string p = CheckUriPart(database, "database name"); !p.empty()) return bad(p);
  if (!query.empty()) {
    for (std::size_t start = 0; start <= query.size();) {
      std::size_t end = query.find('&', start);
      if (end == std::string_view::npos) end = query.size();
      const std::string_view param = query.substr(start, end - start);
      const std::size_t eq = param.find('=');
      if (eq == std::string_view::npos || eq == 0) {
        return bad("has a query parameter that is not name=value");
      }
      if (std::string p = CheckUriPart(param, "query parameters"); !p.empty()) return bad(p);
      start = end + 1;
    }
  }
  return Status::Ok();
}

std::string ConfigLocation(const ServerConfig& config, std::string_view table,
                           std::string_view name, std::string_view key) {
  auto it = config.locations.find({std::string(table), std::string(name)});
  if (it == config.locations.end()) return "";
  const ServerConfig::TableLocation& t = it->second;
  if (!key.empty()) {
    if (auto k = t.keys.find(key); k != t.keys.end()) {
      return k->second + ": " + (t.path.empty() ? "" : t.path + ".") + std::string(key);
    }
  }
  return t.where + ": " + t.path;
}

Status Located(const Status& status, const ServerConfig& config, std::string_view table,
               std::string_view name, std::string_view key) {
  if (status.ok()) return status;
  const std::string where = ConfigLocation(config, table, name, key);
  if (where.empty()) return status;
  return Status(status.code(), where + ": " + status.message());
}

std::vector<std::string> ConfigKeys() {
  std::vector<std::string> keys;
  for (const TableKeys& t : kTables) {
    std::string section(t.array_of_tables ? "[[" : "[");
    section.append(t.table).append(t.array_of_tables ? "]] " : "] ");
    for (std::string_view key : t.keys) keys.push_back(section + std::string(key));
  }
  return keys;
}

std::string_view BackendName(const ServerConfig& config) {
  if (config.database_url.empty()) return "sqlite";
  return IsMariaDbUrl(config.database_url) ? "mariadb" : "postgresql";
}

std::string DescribeDatabase(const ServerConfig& config) {
  if (IsMariaDbUrl(config.database_url)) return "mariadb " + RedactUrl(config.database_url);
  if (!config.database_url.empty()) {
    return "postgresql " + RedactUrl(config.database_url) + " (schema " + config.database_schema +
           ")";
  }
  return "sqlite " + config.database_path + " (sync " + std::string(SyncModeName(config.sync)) +
         ")";
}

std::string DescribeQueues(const std::vector<QueueConfig>& queues) {
  std::string out;
  for (const QueueConfig& q : queues) {
    if (!out.empty()) out += ", ";
    out += q.name + " (priority " + std::to_string(q.priority) + ", ";
    if (!q.pool) {
      out += "remote workers only)";
    } else if (q.concurrency == 0) {
      out += "concurrency all)";
    } else {
      out += "concurrency " + std::to_string(q.concurrency) + ")";
    }
  }
  return out;
}

bool IsLoopbackHost(std::string_view host) {
  if (host == "localhost" || host == "::1" || host == "[::1]") return true;
  // 127.0.0.0/8 in dotted-quad form only.
  if (host.rfind("127.", 0) != 0) return false;
  int dots = 0;
  int digits = 0;
  for (char ch : host) {
    if (ch == '.') {
      if (digits == 0) return false;
      ++dots;
      digits = 0;
    } else if (ch >= '0' && ch <= '9' && digits < 3) {
      ++digits;
    } else {
      return false;
    }
  }
  return dots == 3 && digits > 0;
}

std::string_view LogFormatName(LogFormat f) { return f == LogFormat::kJson ? "json" : "text"; }
std::string_view SyncModeName(SyncMode m) { return m == SyncMode::kFull ? "full" : "normal"; }

}  // namespace taskengine
