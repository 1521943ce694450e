// effect:reserve, effect:commit, effect:release: the effect ledger (E1) for
// the scripts of `command` jobs. They find their lease in the variables the
// command handler sets (TASKENGINE_EXECUTION_ID, TASKENGINE_CLAIM_VERSION) and
// the database in TASKENGINE_DB, print the ledger's answer as one word on
// stdout, and exit with a code per answer:
//
//   if "$TASKENGINE_BIN" effect:reserve notice; then
//     send_notice && "$TASKENGINE_BIN" effect:commit notice --detail "$msg_id"
//   fi
#include <iostream>
#include <memory>

#include "cli.h"
#include "engine/engine_internal.h"
#include "server/operations.h"
#include "storage/store.h"
#include "views/views.h"

namespace taskengine::cli {
namespace {

int ExitCodeForAnswer(EffectAnswer answer) {
  switch (answer) {
    case EffectAnswer::kProceed:
      return kExitOk;
    case EffectAnswer::kAlreadyDone:
      return kExitAlreadyDone;
    case EffectAnswer::kAmbiguous:
      return kExitAmbiguous;
    case EffectAnswer::kStale:
      return kExitStale;
    case EffectAnswer::kCanceled:
      return kExitCanceled;
  }
  return kExitOther;
}

// Prints a one-word answer (or a JSON document with it) to stdout.
void PrintAnswer(const GlobalFlags& flags, nlohmann::ordered_json doc) {
  if (flags.json) {
    PrintJson(doc);
  } else {
    std::cout << doc["answer"].get<std::string>() << std::endl;
  }
}

struct EffectFlags {
  std::string name;
  std::string detail;
};

// The lease from the environment and an engine on the database. Returns the
// exit code of a failure, or kExitOk.
int Open(const GlobalFlags& flags, const EffectFlags& f, LeaseRef* lease,
         std::unique_ptr<Engine>* engine) {
  if (!IsValidEffectName(f.name)) {
    return Fail(InvalidArgument(
        "'" + f.name + "' is not an effect name (1..120 characters of A-Z a-z 0-9 . _ : -)"));
  }
  auto ref = LeaseFromEnvironment(ProcessEnv());
  if (!ref.ok()) return Fail(ref.status());
  *lease = *ref;
  auto opened = OpenClient(flags);
  if (!opened.ok()) return Fail(opened.status());
  *engine = std::move(opened).value();
  return kExitOk;
}

int RunReserve(const GlobalFlags& flags, const EffectFlags& f) {
  LeaseRef lease;
  std::unique_ptr<Engine> engine;
  if (int code = Open(flags, f, &lease, &engine); code != kExitOk) return code;
  auto reply = StoreOf(*engine).ReserveEffect(lease, f.name);
  if (!reply.ok()) return Fail(reply.status());
  PrintAnswer(flags, EffectReplyToJson(*reply));
  return ExitCodeForAnswer(reply->answer);
}

int RunCommit(const GlobalFlags& flags, const EffectFlags& f) {
  LeaseRef lease;
  std::unique_ptr<Engine> engine;
  if (int code = Open(flags, f, &lease, &engine); code != kExitOk) return code;
  auto record = StoreOf(*engine).CommitEffect(lease, f.name, f.detail);
  if (!record.ok()) {
    if (record.status().code() == ErrorCode::kStale) {
      PrintAnswer(flags, {{"answer", "stale"}, {"key", EffectKey(lease.id, f.name)}});
      return kExitStale;
    }
    if (record.status().code() == ErrorCode::kConflict) {
      return Fail(Conflict(record.status().message() + " (run effect:reserve " + f.name +
                           " before the effect)"));
    }
    return Fail(record.status());
  }
  nlohmann::ordered_json doc = {{"answer", "committed"}};
  const nlohmann::ordered_json effect = EffectToJson(*record);
  for (const auto& [field, value] : effect.items()) {
    if (field != "state") doc[field] = value;
  }
  PrintAnswer(flags, std::move(doc));
  return kExitOk;
}

int RunRelease(const GlobalFlags& flags, const EffectFlags& f) {
  LeaseRef lease;
  std::unique_ptr<Engine> engine;
  if (int code = Open(flags, f, &lease, &engine); code != kExitOk) return code;
  Status s = StoreOf(*engine).ReleaseEffect(lease, f.name);
  const std::string key = EffectKey(lease.id, f.name);
  if (s.code() == ErrorCode::kStale) {
    PrintAnswer(flags, {{"answer", "stale"}, {"key", key}});
    return kExitStale;
  }
  if (!s.ok()) return Fail(s);
  PrintAnswer(flags, {{"answer", "released"}, {"key", key}});
  return kExitOk;
}

constexpr const char* kEnvNote =
    " Runs inside a `command` job: reads TASKENGINE_EXECUTION_ID and TASKENGINE_CLAIM_VERSION, "
    "and the database from TASKENGINE_DB (set by the server), --db or the config.";

}  // namespace

void AddEffectVerbs(CLI::App& app, const GlobalFlags& flags, std::vector<Verb>* verbs) {
  auto rf = std::make_shared<EffectFlags>();
  CLI::App* reserve = AddVerb(
      app, "effect:reserve",
      std::string("Reserve effect NAME (key <execution id>:NAME) before performing it, and "
                  "print the ledger's answer. Exit 0 proceed (perform it, then effect:commit), "
                  "10 already_done (skip it), 11 ambiguous (an earlier attempt reserved it and "
                  "never confirmed: exit 76 from the script unless the sink is idempotent), "
                  "12 stale (this attempt no longer holds the execution: stop), 13 canceled "
                  "(cancellation was requested: start nothing, stop).") +
          kEnvNote);
  reserve->add_option("name", rf->name, "Effect name, e.g. notice or invoice:v2")->required();
  verbs->push_back({reserve, [&flags, rf] { return RunReserve(flags, *rf); }});

  auto cf = std::make_shared<EffectFlags>();
  CLI::App* commit = AddVerb(
      app, "effect:commit",
      std::string("Record reserved effect NAME as done, with an optional detail (e.g. the "
                  "sink's message id); prints committed. Idempotent (the first detail stays). "
                  "Exit 12 stale when this attempt no longer holds the execution, 4 when NAME "
                  "was never reserved.") +
          kEnvNote);
  commit->add_option("name", cf->name, "Effect name")->required();
  commit->add_option("--detail", cf->detail, "What to record, e.g. a message id");
  verbs->push_back({commit, [&flags, cf] { return RunCommit(flags, *cf); }});

  auto lf = std::make_shared<EffectFlags>();
  CLI::App* release = AddVerb(
      app, "effect:release",
      std::string("Give back this attempt's reservation of effect NAME because the effect "
                  "certainly did not happen (e.g. the connection was refused), so that a retry "
                  "proceeds instead of meeting ambiguous; prints released. A committed effect "
                  "is kept. Exit 12 stale when this attempt no longer holds the execution.") +
          kEnvNote);
  release->add_option("name", lf->name, "Effect name")->required();
  verbs->push_back({release, [&flags, lf] { return RunRelease(flags, *lf); }});
}

}  // namespace taskengine::cli
