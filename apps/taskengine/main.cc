// taskengine: the server and operator CLI. Flags are parsed here; every verb
// is a thin layer over src/server (see cli.h for the verbs and exit codes).
#include <iostream>

#include "cli.h"
#include "terminal_output.h"

namespace {

constexpr const char* kFooter =
    "Exit codes: 0 ok, 1 usage or invalid input, 2 not found, 3 database unavailable,\n"
    "4 conflict (idempotency key reused with another payload, or the status does not allow\n"
    "the action), 5 other error. effect:* also exit 10 already_done, 11 ambiguous,\n"
    "12 stale, 13 canceled; scheduler:run exits 6 when another node holds the leader lock.\n"
    "Errors are printed to stderr as \"taskengine: <message>\".\n"
    "Configuration: taskengine.toml (see --config) with TASKENGINE_* variables overriding it\n"
    "(docs/operations.md lists them) and --db overriding those; `taskengine config:check`\n"
    "checks it without touching the database.";

}  // namespace

int main(int argc, char** argv) {
  using namespace taskengine::cli;
  CLI::App app("taskengine: a durable background-job engine", "taskengine");
  app.footer(kFooter);
  app.set_version_flag("--version", "taskengine 0.1.0");
  app.require_subcommand(1);
  app.fallthrough();  // global options are accepted after the verb too

  GlobalFlags flags;
  app.add_option("--config", flags.config_path,
                 "Configuration file. Default: ./taskengine.toml when it exists, else built-in "
                 "defaults");
  app.add_option("--db", flags.db, "SQLite database file (overrides the config and TASKENGINE_DB)");
  app.add_flag("--json", flags.json, "Print one JSON document instead of text");

  std::vector<Verb> verbs;
  AddServerVerbs(app, flags, &verbs);
  AddConfigVerbs(app, flags, &verbs);
  AddJobVerbs(app, flags, &verbs);
  AddExecutionVerbs(app, flags, &verbs);
  AddOperatorVerbs(app, flags, &verbs);
  AddEffectVerbs(app, flags, &verbs);
  AddSchedulerVerbs(app, flags, &verbs);
  AddSecurityVerbs(app, flags, &verbs);
  AddRetentionVerbs(app, flags, &verbs);
  AddNotifyVerbs(app, flags, &verbs);
  AddWorkerVerbs(app, flags, &verbs);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    ProtectTerminal(/*json_stdout=*/false);
    std::string message = e.what();
    if (app.get_subcommands().empty() && !app.remaining().empty()) {
      message = "unknown verb '" + app.remaining().front() + "'";
    }
    std::cerr << "taskengine: " << message << "\n"
              << "Run `taskengine --help` (or `taskengine <verb> --help`) for usage." << std::endl;
    return kExitUsage;
  }
  // Every text output from here on goes through the terminal filter.
  ProtectTerminal(flags.json);
  for (const Verb& verb : verbs) {
    if (verb.command->parsed()) return verb.run();
  }
  std::cerr << "taskengine: no verb given; run `taskengine --help`" << std::endl;
  return kExitUsage;
}
