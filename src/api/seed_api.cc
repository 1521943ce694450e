#include "api/seed_api.h"

#include <cctype>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/errors.h"
#include "api/json_util.h"
#include "core/notify_target.h"
#include "taskengine/types.h"

namespace taskengine::api {
namespace {

using Json = nlohmann::json;
using Out = nlohmann::ordered_json;

constexpr std::string_view kPrefix = "/api/";
constexpr char kDefaultRetryReason[] = "retried through the seed dashboard API";

// The next non-empty part of `text` between `sep`s from `*start` on, trimmed
// of spaces and tabs; `*start` moves past it. nullopt when none is left.
std::optional<std::string_view> NextPart(std::string_view text, char sep, std::size_t* start) {
  while (*start <= text.size()) {
    std::size_t end = text.find(sep, *start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view part = text.substr(*start, end - *start);
    *start = end + 1;
    const std::size_t first = part.find_first_not_of(" \t");
    if (first != std::string_view::npos) {
      return part.substr(first, part.find_last_not_of(" \t") - first + 1);
    }
  }
  return std::nullopt;
}

// The non-empty parts of `text` between `sep`s, trimmed of spaces and tabs.
std::vector<std::string> Split(std::string_view text, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (std::optional<std::string_view> part = NextPart(text, sep, &start)) {
    out.emplace_back(*part);
  }
  return out;
}

// --- the seed's names for our statuses and fields ---

std::string SeedStatus(const std::string& ours) {
  if (ours == "queued") return "pending";
  if (ours == "succeeded") return "completed";
  if (ours == "canceled") return "cancelled";
  return ours;  // running, failed; quarantined and partially_canceled as they are
}

std::string OurStatus(const std::string& seed) {
  if (seed == "pending") return "queued";
  if (seed == "completed") return "succeeded";
  if (seed == "cancelled") return "canceled";
  return seed;
}

std::string SeedTrigger(const std::string& ours) {
  if (ours == "api") return "manual";
  if (ours == "replay") return "retry";
  return ours;
}

const Json& Field(const Json& j, const char* name) {
  static const Json kNull;
  auto it = j.find(name);
  return it == j.end() ? kNull : *it;
}

Json Seconds(const Json& ms) {
  return ms.is_number_integer() ? Json(ms.get<std::int64_t>() / 1000) : Json(nullptr);
}

// The e-mail targets, comma-separated (the seed's notifyEmails), or null.
Json EmailsOf(const Json& targets) {
  std::string out;
  if (targets.is_array()) {
    for (const Json& t : targets) {
      if (t.is_string() && IsEmailAddress(t.get<std::string>())) {
        out += (out.empty() ? "" : ",") + t.get<std::string>();
      }
    }
  }
  return out.empty() ? Json(nullptr) : Json(out);
}

Out SeedJob(const Json& j) {
  const Json& attempts = Field(j, "max_attempts");
  return {
      {"id", Field(j, "name")},
      {"name", Field(j, "name")},
      {"displayName", Field(j, "display_name")},
      {"className", Field(j, "handler")},
      {"schedule", Field(j, "schedule")},
      {"timezone", Field(j, "timezone")},
      {"queue", Field(j, "queue")},
      {"scope", Field(j, "scope") == "per_tenant" ? Json("per_store") : Field(j, "scope")},
      {"timeout", Seconds(Field(j, "timeout_ms"))},
      {"maxRetries",
       attempts.is_number_integer() ? Json(attempts.get<std::int64_t>() - 1) : Json(nullptr)},
      {"retryBackoff", Seconds(Field(j, "backoff_base_ms"))},
      {"config", Field(j, "config")},
      {"isEnabled", Field(j, "enabled")},
      {"notifyOnFailure", Field(j, "notify_on_failure")},
      {"notifyEmails", EmailsOf(Field(j, "notify_targets"))},
      {"notifyTargets", Field(j, "notify_targets")},
      {"nextRunAt", Field(j, "next_fire")},
      {"lastRunAt", Field(j, "last_fire")},
      {"created_at", Field(j, "created_at")},
      {"updated_at", Field(j, "updated_at")},
  };
}

Out SeedExecution(const Json& e) {
  const Json& status = Field(e, "status");
  return {
      {"id", Field(e, "id")},
      {"jobDefinitionId", Field(e, "job")},
      {"typeNum", Field(e, "tenant")},
      {"status", status.is_string() ? Json(SeedStatus(status.get<std::string>())) : status},
      // Ours, unrenamed: quarantined (needs an operator) is never shown as a guess.
      {"engineStatus", status},
      {"triggerType", Field(e, "trigger").is_string()
                          ? Json(SeedTrigger(Field(e, "trigger").get<std::string>()))
                          : Json(nullptr)},
      {"triggeredBy", Field(e, "requester")},
      {"workerId", Field(e, "worker")},
      {"attempt", Field(e, "attempt")},
      {"maxAttempts", Field(e, "max_attempts")},
      {"idempotencyKey", Field(e, "idempotency_key")},
      {"payload", Field(e, "payload")},
      {"result", Field(e, "result")},
      {"progress", Field(e, "progress")},
      {"errorMessage", Field(e, "error")},
      {"errorTrace", nullptr},
      {"failureClass", Field(e, "failure_class")},
      {"laneKey", Field(e, "lane_key")},
      {"scheduled_fire_at", Field(e, "scheduled_at")},
      {"queued_at", Field(e, "queued_at")},
      {"started_at", Field(e, "started_at")},
      {"completed_at", Field(e, "finished_at")},
      {"durationMs", Field(e, "duration_ms")},
  };
}

Out SeedLog(const Json& l) {
  const Json& level = Field(l, "level");
  return {{"level", level == "warn" ? Json("warning") : level},
          {"message", Field(l, "message")},
          {"attempt", Field(l, "attempt")},
          {"logged_at", Field(l, "at")}};
}

Out SeedWorker(const Json& w) {
  const Json& current = Field(w, "current");
  return {
      {"id", Field(w, "id")},
      {"name", Field(w, "name")},
      {"kind", Field(w, "kind")},
      {"hostname", Field(w, "host")},
      {"pid", Field(w, "pid")},
      {"status", Field(w, "state")},
      {"currentExecutionId", current.is_array() && !current.empty() ? current[0] : Json(nullptr)},
      {"currentExecutionIds", current},
      {"concurrency", Field(w, "concurrency")},
      {"jobsProcessed", Field(w, "processed")},
      {"jobsFailed", Field(w, "failed")},
      {"started_at", Field(w, "started_at")},
      {"last_heartbeat", Field(w, "last_seen_at")}};
}

Out SeedStats(const Json& s, bool global) {
  Out depths = Out::object();
  for (const Json& q : Field(s, "queues")) depths[q.value("queue", "")] = Field(q, "queued");
  const Json& day = Field(s, "last_24h");
  Out stats = {
      {"activeWorkers", Field(s, "active_workers")},
      {"pendingJobs", Field(s, "queued")},
      {"runningJobs", Field(s, "running")},
      {"failedJobs24h", Field(day, "failed")},
      {"quarantinedJobs24h", Field(day, "quarantined")},
      {"completedJobs24h", Field(day, "succeeded")},
      {"oldestPendingAgeMs", Field(s, "oldest_due_age_ms")},
      {"queueDepths", std::move(depths)},
  };
  if (global) {
    Out stores = Out::array();
    for (const Json& t : Field(s, "tenants")) {
      stores.push_back({{"typeNum", Field(t, "tenant")},
                        {"pending", Field(t, "queued")},
                        {"running", Field(t, "running")},
                        {"failed", Field(t, "failed_24h")}});
    }
    stats["jobsByStore"] = std::move(stores);
  }
  return stats;
}

// --- one request: the calls it makes to /api/v1 ---

class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  using Then = std::function<void(const Json& body, int status)>;

  Exchange(const Router* v1, HttpRequest request, Responder respond,
           std::optional<std::string> tenant)
      : v1_(v1),
        request_(std::move(request)),
        respond_(std::move(respond)),
        tenant_(std::move(tenant)) {}

  const HttpRequest& request() const { return request_; }
  const std::optional<std::string>& tenant() const { return tenant_; }

  // Calls /api/v1 as the caller (its own headers); an error answer is
  // answered as the seed's error, else `then` gets the parsed body.
  void Call(HttpMethod method, std::string target, const Json* body, Then then,
            const std::string& idempotency_key = "") {
    HttpRequest r = request_;
    r.method = method;
    r.method_name = std::string(ToString(method));
    r.SetTarget(std::move(target));
    std::erase_if(r.headers, [](const auto& h) {
      return h.first == "content-type" || h.first == "content-length" ||
             h.first == "idempotency-key";
    });
    if (!idempotency_key.empty()) r.headers.emplace_back("idempotency-key", idempotency_key);
    r.body.clear();
    if (body != nullptr) {
      r.headers.emplace_back("content-type", "application/json");
      r.body = body->dump();
    }
    auto self = shared_from_this();
    v1_->Handle(std::move(r), Responder([self, then = std::move(then)](HttpResponse answer) {
                  if (self->principal_.empty()) self->principal_ = answer.principal;
                  if (answer.status < 200 || answer.status > 299) {
                    self->Forward(std::move(answer));
                    return;
                  }
                  then(Json::parse(answer.body, nullptr, /*allow_exceptions=*/false),
                       answer.status);
                }));
  }

  // The execution `id` as the caller may see it under this tenant's path:
  // another tenant's answers 404 like a missing one.
  void Execution(const std::string& id, Then then) {
    auto self = shared_from_this();
    Call(HttpMethod::kGet, "/api/v1/executions/" + id, nullptr,
         [self, id, then = std::move(then)](const Json& e, int status) {
           if (self->tenant_ && Field(e, "tenant") != Json(*self->tenant_)) {
             self->Error(404, "not_found", "execution " + id + " not found");
             return;
           }
           then(e, status);
         });
  }

  // Under /api/<tenant>/: the tenant must be visible to the caller (the
  // API's 404 otherwise). Under /api/tasks/: the caller needs every tenant.
  void CheckScope(std::function<void()> then) {
    auto self = shared_from_this();
    if (tenant_) {
      Call(HttpMethod::kGet, "/api/v1/tenants/" + *tenant_, nullptr,
           [then = std::move(then)](const Json&, int) { then(); });
      return;
    }
    Call(HttpMethod::kGet, "/api/v1/auth/session", nullptr,
         [self, then = std::move(then)](const Json& who, int) {
           if (Field(who, "all_tenants") != Json(true)) {
             self->Error(403, "forbidden", "the global task API needs access to every tenant");
             return;
           }
           then();
         });
  }

  void Reply(int status, Out body) {
    Out out = {{"success", true}};
    for (auto& [key, value] : body.items()) out[key] = std::move(value);
    HttpResponse r = JsonResponse(status, out);
    r.principal = principal_;
    respond_.Send(std::move(r));
  }

  void Error(int status, std::string_view code, std::string_view message) {
    HttpResponse r =
        JsonResponse(status, Out{{"success", false}, {"error", message}, {"code", code}});
    r.principal = principal_;
    respond_.Send(std::move(r));
  }

 private:
  // An /api/v1 error as the seed's {"success": false, "error": message}, with
  // the same status and headers (Retry-After, WWW-Authenticate, Allow).
  void Forward(HttpResponse answer) {
    const Json body = Json::parse(answer.body, nullptr, /*allow_exceptions=*/false);
    const Json& error = Field(body, "error");
    HttpResponse r =
        JsonResponse(answer.status,
                     Out{{"success", false},
                         {"error", error.value("message", "HTTP " + std::to_string(answer.status))},
                         {"code", error.value("code", "")},
                         {"details", Field(error, "details")}});
    r.headers = std::move(answer.headers);
    r.principal = answer.principal;
    respond_.Send(std::move(r));
  }

  const Router* v1_;
  const HttpRequest request_;
  const Responder respond_;
  const std::optional<std::string> tenant_;
  std::string principal_;
};

using ExchangePtr = std::shared_ptr<Exchange>;

// The request body as a JSON object ({} when empty); answers 400 otherwise.
std::optional<Json> ObjectBody(Exchange& x) {
  Result<Json> body = ParseJsonBody(x.request(), /*allow_empty=*/true);
  if (!body.ok()) {
    x.Error(400, "invalid_argument", body.status().message());
    return std::nullopt;
  }
  if (body->is_null()) return Json::object();
  if (!body->is_object()) {
    x.Error(400, "invalid_argument", "the request body must be a JSON object");
    return std::nullopt;
  }
  return *body;
}

// Refuses fields the route does not know (a typo must not pass unnoticed).
bool OnlyFields(Exchange& x, const Json& body, std::initializer_list<std::string_view> known) {
  for (const auto& [key, value] : body.items()) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || key == k;
    if (!ok) {
      std::string list;
      for (std::string_view k : known) list += (list.empty() ? "" : ", ") + std::string(k);
      x.Error(400, "invalid_argument",
              "unknown field '" + key.substr(0, 100) + "' (known: " + list + ")");
      return false;
    }
  }
  return true;
}

std::string Encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// --- routes ---

void ListJobs(const ExchangePtr& x) {
  x->CheckScope([x] {
    x->Call(HttpMethod::kGet, "/api/v1/jobs", nullptr, [x](const Json& page, int) {
      Out jobs = Out::array();
      for (const Json& j : Field(page, "items")) jobs.push_back(SeedJob(j));
      x->Reply(200, {{"jobs", std::move(jobs)}});
    });
  });
}

void GetJob(const ExchangePtr& x, const std::string& id) {
  x->CheckScope([x, id] {
    x->Call(HttpMethod::kGet, "/api/v1/jobs/" + id, nullptr, [x](const Json& job, int) {
      x->Reply(200, {{"job", SeedJob(job)}});
    });
  });
}

// PUT {isEnabled, schedule, timezone, config, notifyOnFailure, notifyEmails,
// reason} -> PATCH /api/v1/jobs/{id}. notifyEmails (comma-separated, or null
// or "" for none) replaces the job's e-mail targets and keeps its webhook and
// Slack targets.
void UpdateJob(const ExchangePtr& x, const std::string& id) {
  std::optional<Json> body = ObjectBody(*x);
  if (!body) return;
  if (!OnlyFields(*x, *body,
                  {"isEnabled", "schedule", "timezone", "config", "notifyOnFailure", "notifyEmails",
                   "reason"})) {
    return;
  }
  const std::string path = "/api/v1/jobs/" + id;
  x->CheckScope([x, path, in = std::move(*body)] {
    x->Call(HttpMethod::kGet, path, nullptr, [x, path, in](const Json& current, int) {
      Json patch = Json::object();
      for (const auto& [seed, ours] :
           {std::pair{"isEnabled", "enabled"}, std::pair{"schedule", "schedule"},
            std::pair{"timezone", "timezone"}, std::pair{"config", "config"},
            std::pair{"notifyOnFailure", "notify_on_failure"}, std::pair{"reason", "reason"}}) {
        if (in.contains(seed)) patch[ours] = in[seed];
      }
      if (in.contains("notifyEmails")) {
        const Json& emails = in["notifyEmails"];
        if (!emails.is_null() && !emails.is_string()) {
          x->Error(400, "invalid_argument",
                   "notifyEmails: must be comma-separated e-mail addresses, or null");
          return;
        }
        Json targets = Json::array();
        for (const Json& t : Field(current, "notify_targets")) {
          if (t.is_string() && !IsEmailAddress(t.get<std::string>())) targets.push_back(t);
        }
        if (emails.is_string()) {
          for (std::string& one : Split(emails.get<std::string>(), ',')) targets.push_back(one);
        }
        patch["notify_targets"] = std::move(targets);
      }
      x->Call(HttpMethod::kPatch, path, &patch, [x](const Json& job, int) {
        x->Reply(200, {{"job", SeedJob(job)}});
      });
    });
  });
}

// POST {store, payload, idempotencyKey, runAt, delaySeconds, lane}: a
// per-store job runs for the path's store (or `store` under /api/tasks/).
void DispatchJob(const ExchangePtr& x, const std::string& id) {
  std::optional<Json> body = ObjectBody(*x);
  if (!body) return;
  if (!OnlyFields(*x, *body,
                  {"store", "payload", "idempotencyKey", "runAt", "delaySeconds", "lane"})) {
    return;
  }
  const Json& store = Field(*body, "store");
  if (!store.is_null() && !store.is_string()) {
    x->Error(400, "invalid_argument", "store: must be a store id (string)");
    return;
  }
  if (x->tenant() && store.is_string() && store.get<std::string>() != *x->tenant()) {
    x->Error(400, "invalid_argument",
             "store: must be this path's store '" + *x->tenant() + "' or absent");
    return;
  }
  const std::string path = "/api/v1/jobs/" + id;
  x->CheckScope([x, path, in = std::move(*body)] {
    x->Call(HttpMethod::kGet, path, nullptr, [x, path, in](const Json& job, int) {
      Json request = Json::object();
      if (Field(job, "scope") == "per_tenant") {
        if (x->tenant()) {
          request["tenant"] = *x->tenant();
        } else if (in.contains("store")) {
          request["tenant"] = in["store"];
        }
      }
      for (const auto& [seed, ours] : {std::pair{"payload", "payload"},
                                       std::pair{"runAt", "run_at"}, std::pair{"lane", "lane"}}) {
        if (in.contains(seed)) request[ours] = in[seed];
      }
      const Json& key = Field(in, "idempotencyKey");
      if (!key.is_null() && (!key.is_string() || key.get<std::string>().empty())) {
        x->Error(400, "invalid_argument", "idempotencyKey: must be a non-empty string");
        return;
      }
      if (in.contains("delaySeconds")) {
        const Json& delay = in["delaySeconds"];
        if (!delay.is_number() || !(delay.get<double>() >= 0) || delay.get<double>() > 3.1e7) {
          x->Error(400, "invalid_argument",
                   "delaySeconds: must be a number of seconds, 0..31000000");
          return;
        }
        request["delay_ms"] = static_cast<std::int64_t>(delay.get<double>() * 1000);
      }
      x->Call(
          HttpMethod::kPost, path + "/dispatch", &request,
          [x](const Json& r, int status) {
            const std::string new_id = std::to_string(r.value("id", std::int64_t{0}));
            x->Call(
                HttpMethod::kGet, "/api/v1/executions/" + new_id, nullptr,
                [x, status](const Json& e, int) {
                  x->Reply(status, {{"created", status == 202}, {"execution", SeedExecution(e)}});
                });
          },
          key.is_string() ? key.get<std::string>() : "");
    });
  });
}

// GET ?jobId&status&limit&offset (&typeNum under /api/tasks/) -> a page with
// "total" (counted up to 10,000: totalIsLowerBound beyond).
void ListExecutions(const ExchangePtr& x) {
  auto query = QueryParams::Parse(x->request().query);
  if (!query.ok()) {
    x->Error(400, "invalid_argument", query.status().message());
    return;
  }
  Status known = x->tenant()
                     ? query->RejectUnknown({"jobId", "status", "limit", "offset"})
                     : query->RejectUnknown({"jobId", "status", "limit", "offset", "typeNum"});
  if (!known.ok()) {
    x->Error(400, "invalid_argument", known.message());
    return;
  }
  std::vector<std::pair<std::string, std::string>> params;
  if (const std::string* job = query->Get("jobId")) params.emplace_back("job", *job);
  if (const std::string* status = query->Get("status")) {
    std::string ours;
    for (const std::string& one : Split(*status, ',')) {
      ours += (ours.empty() ? "" : ",") + OurStatus(one);
    }
    params.emplace_back("status", ours);
  }
  const std::string* limit = query->Get("limit");
  params.emplace_back("limit", limit != nullptr ? *limit : (x->tenant() ? "50" : "100"));
  const std::string* offset = query->Get("offset");
  params.emplace_back("offset", offset != nullptr ? *offset : "0");
  if (x->tenant()) {
    params.emplace_back("tenant", *x->tenant());
  } else if (const std::string* store = query->Get("typeNum")) {
    params.emplace_back("tenant", *store);
  }
  std::string target = "/api/v1/executions?";
  for (std::size_t i = 0; i < params.size(); ++i) {
    target += (i == 0 ? "" : "&") + params[i].first + "=" + Encode(params[i].second);
  }
  x->CheckScope([x, target] {
    x->Call(HttpMethod::kGet, target, nullptr, [x](const Json& page, int) {
      Out executions = Out::array();
      for (const Json& e : Field(page, "items")) executions.push_back(SeedExecution(e));
      x->Reply(200, {{"executions", std::move(executions)},
                     {"total", Field(page, "total")},
                     {"totalIsLowerBound", Field(page, "total_is_lower_bound")},
                     {"offset", Field(page, "offset")}});
    });
  });
}

void GetExecution(const ExchangePtr& x, const std::string& id) {
  x->CheckScope([x, id] {
    x->Execution(id, [x, id](const Json& e, int) {
      auto answer = [x, e](const Json& result) {
        Out execution = SeedExecution(e);
        execution["result"] = result;
        Out logs = Out::array();
        for (const Json& l : Field(e, "logs")) logs.push_back(SeedLog(l));
        x->Reply(200, {{"execution", std::move(execution)}, {"logs", std::move(logs)}});
      };
      if (Field(e, "status") != "succeeded") {
        answer(nullptr);
        return;
      }
      x->Call(HttpMethod::kGet, "/api/v1/executions/" + id + "/result", nullptr,
              [answer](const Json& r, int) { answer(Field(r, "result")); });
    });
  });
}

// POST {reason, assume} -> POST /api/v1/executions/{id}/replay: the same
// execution is queued again (an audited operator action; the reason defaults
// to kDefaultRetryReason).
void RetryExecution(const ExchangePtr& x, const std::string& id) {
  std::optional<Json> body = ObjectBody(*x);
  if (!body || !OnlyFields(*x, *body, {"reason", "assume"})) return;
  Json replay = *body;
  if (!replay.contains("reason")) replay["reason"] = kDefaultRetryReason;
  x->CheckScope([x, id, replay] {
    x->Execution(id, [x, id, replay](const Json&, int) {
      x->Call(
          HttpMethod::kPost, "/api/v1/executions/" + id + "/replay", &replay,
          [x, id](const Json& r, int) {
            x->Execution(id, [x, r](const Json& e, int) {
              x->Reply(200, {{"outcome", Field(r, "outcome")}, {"execution", SeedExecution(e)}});
            });
          });
    });
  });
}

// POST {reason} -> POST /api/v1/executions/{id}/cancel.
void AbortExecution(const ExchangePtr& x, const std::string& id) {
  std::optional<Json> body = ObjectBody(*x);
  if (!body || !OnlyFields(*x, *body, {"reason"})) return;
  x->CheckScope([x, id, cancel = std::move(*body)] {
    x->Execution(id, [x, id, cancel](const Json&, int) {
      x->Call(HttpMethod::kPost, "/api/v1/executions/" + id + "/cancel", &cancel,
              [x](const Json& r, int) {
                const Json& status = Field(r, "status");
                x->Reply(200, {{"status", status.is_string()
                                              ? Json(SeedStatus(status.get<std::string>()))
                                              : Json(nullptr)},
                               {"cancelRequested", Field(r, "cancel_requested")}});
              });
    });
  });
}

void Stats(const ExchangePtr& x) {
  const std::string target =
      x->tenant() ? "/api/v1/stats?tenant=" + *x->tenant() : std::string("/api/v1/stats");
  x->CheckScope([x, target] {
    x->Call(HttpMethod::kGet, target, nullptr, [x](const Json& s, int) {
      x->Reply(200, {{"stats", SeedStats(s, !x->tenant())}});
    });
  });
}

void Workers(const ExchangePtr& x) {
  x->CheckScope([x] {
    x->Call(HttpMethod::kGet, "/api/v1/workers", nullptr, [x](const Json& page, int) {
      Out workers = Out::array();
      for (const Json& w : Field(page, "items")) workers.push_back(SeedWorker(w));
      x->Reply(200, {{"workers", std::move(workers)}});
    });
  });
}

bool IsId(const std::string& s) {
  return !s.empty() && s.size() <= 19 && s.find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace

// Asked of every request: the first two parts of the path only, unsplit.
bool SeedApi::Handles(std::string_view path) {
  if (!path.starts_with(kPrefix)) return false;
  const std::string_view rest = path.substr(kPrefix.size());
  std::size_t start = 0;
  const std::optional<std::string_view> first = NextPart(rest, '/', &start);
  if (!first) return false;
  if (*first == "tasks") return true;
  const std::optional<std::string_view> second = NextPart(rest, '/', &start);
  return second && *second == "tasks";
}

void SeedApi::Handle(HttpRequest request, Responder respond) const {
  std::vector<std::string> s = Split(std::string_view(request.path).substr(kPrefix.size()), '/');
  std::optional<std::string> tenant;
  if (s[0] != "tasks") {
    tenant = s[0];
    s.erase(s.begin());
  }
  s.erase(s.begin());  // "tasks"
  const HttpMethod method = request.method;
  auto x = std::make_shared<Exchange>(v1_, std::move(request), std::move(respond), tenant);
  if (tenant && !IsValidTenantId(*tenant)) {
    x->Error(404, "not_found", "no such store");
    return;
  }
  auto route = [&](HttpMethod want, std::function<void()> run) {
    if (method != want) {
      x->Error(405, "method_not_allowed", "use " + std::string(ToString(want)));
      return;
    }
    run();
  };
  const std::size_t n = s.size();
  const std::string first = n > 0 ? s[0] : "";
  // Under /api/tasks/ only stats, executions and workers (seed 001).
  const bool global_route = first == "stats" || first == "executions" || first == "workers";
  if (n == 0 || (!tenant && !global_route)) {
    x->Error(404, "not_found", "no such route");
  } else if (first == "jobs" && n == 1) {
    route(HttpMethod::kGet, [&] { ListJobs(x); });
  } else if (first == "jobs" && n == 2) {
    if (method == HttpMethod::kPut) {
      UpdateJob(x, s[1]);
    } else {
      route(HttpMethod::kGet, [&] { GetJob(x, s[1]); });
    }
  } else if (first == "jobs" && n == 3 && s[2] == "dispatch") {
    route(HttpMethod::kPost, [&] { DispatchJob(x, s[1]); });
  } else if (first == "executions" && n == 1) {
    route(HttpMethod::kGet, [&] { ListExecutions(x); });
  } else if (first == "executions" && n >= 2 && !IsId(s[1])) {
    x->Error(400, "invalid_argument", "execution id: must be a positive integer");
  } else if (first == "executions" && n == 2) {
    route(HttpMethod::kGet, [&] { GetExecution(x, s[1]); });
  } else if (first == "executions" && n == 3 && s[2] == "retry") {
    route(HttpMethod::kPost, [&] { RetryExecution(x, s[1]); });
  } else if (first == "executions" && n == 3 && s[2] == "abort") {
    route(HttpMethod::kPost, [&] { AbortExecution(x, s[1]); });
  } else if (first == "stats" && n == 1) {
    route(HttpMethod::kGet, [&] { Stats(x); });
  } else if (first == "workers" && n == 1) {
    route(HttpMethod::kGet, [&] { Workers(x); });
  } else {
    x->Error(404, "not_found", "no such route");
  }
}

}  // namespace taskengine::api
