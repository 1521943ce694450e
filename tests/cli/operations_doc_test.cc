// docs/operations.md is the operator's complete reference (issue 14, item
// 10): every verb of `taskengine --help` appears in it as `verb ...` with a
// row in its verbs table naming each of the verb's own flags; every key of the
// configuration file (ConfigKeys(), the list ParseConfig refuses other keys
// with) appears as `[section] key` or `[[section]] key`; and every
// TASKENGINE_* variable the sources of src/ and apps/ name appears as
// `TASKENGINE_...`. Each failure names what is missing.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "cli_harness.h"
#include "server/config.h"

namespace taskengine::testing {
namespace {

namespace fs = std::filesystem;

// The flags every verb accepts (documented once, under "The CLI").
const std::set<std::string> kGlobalFlags = {"--help", "--config", "--db", "--json"};

std::string OperationsDoc() {
  const std::string doc = ReadFile(std::string(TE_SOURCE_DIR) + "/docs/operations.md");
  EXPECT_FALSE(doc.empty()) << "cannot read docs/operations.md";
  return doc;
}

// The lines of `text`.
std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines;
  for (std::size_t start = 0; start < text.size();) {
    std::size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

ProcessResult Help(const std::vector<std::string>& verb) {
  std::vector<std::string> argv = {TASKENGINE_BIN};
  argv.insert(argv.end(), verb.begin(), verb.end());
  argv.push_back("--help");
  return RunProcess(argv, "", kCliTimeout);
}

// The verbs `taskengine --help` lists under "Subcommands:".
std::vector<std::string> Verbs() {
  ProcessResult r = Help({});
  EXPECT_EQ(r.exit_code, 0) << r.Describe();
  std::vector<std::string> verbs;
  bool in_list = false;
  const std::regex verb("^  ([a-z][a-z:-]*)( |$)");
  for (const std::string& line : Lines(r.out)) {
    if (line == "Subcommands:") {
      in_list = true;
      continue;
    }
    std::smatch m;
    if (in_list && std::regex_search(line, m, verb)) verbs.push_back(m[1]);
    if (in_list && line.empty()) break;
  }
  return verbs;
}

// The long flags `taskengine <verb> --help` lists, but the global ones.
std::vector<std::string> FlagsOf(const std::string& verb) {
  ProcessResult r = Help({verb});
  EXPECT_EQ(r.exit_code, 0) << verb << ": " << r.Describe();
  std::vector<std::string> flags;
  const std::regex option("^  (?:-[A-Za-z],)?(--[a-z][a-z0-9-]*)");
  for (const std::string& line : Lines(r.out)) {
    std::smatch m;
    if (std::regex_search(line, m, option) && kGlobalFlags.count(m[1]) == 0) {
      flags.push_back(m[1]);
    }
  }
  return flags;
}

// `name` backticked as the start of a code span: "`job:list`" or "`job:list ...".
bool MentionsVerb(const std::string& text, const std::string& name) {
  for (std::size_t p = text.find("`" + name); p != std::string::npos;
       p = text.find("`" + name, p + 1)) {
    const char next = p + 1 + name.size() < text.size() ? text[p + 1 + name.size()] : '\0';
    if (next == '`' || next == ' ') return true;
  }
  return false;
}

// The rows of the doc's tables whose first cell names `verb` as above.
std::vector<std::string> VerbRows(const std::string& doc, const std::string& verb) {
  std::vector<std::string> rows;
  for (const std::string& line : Lines(doc)) {
    if (!line.starts_with("| `")) continue;
    // The first cell ends at the first " | " (escaped pipes inside are "\|").
    const std::string first = line.substr(0, line.find(" | ", 1));
    if (MentionsVerb(first, verb)) rows.push_back(line);
  }
  return rows;
}

TEST(OperationsDocTest, EveryVerbAndItsFlagsAreDocumented) {
  const std::string doc = OperationsDoc();
  const std::vector<std::string> verbs = Verbs();
  ASSERT_GE(verbs.size(), 40u) << "taskengine --help lists too few verbs to be parsed right";
  for (const std::string& verb : verbs) {
    if (!MentionsVerb(doc, verb)) {
      ADD_FAILURE() << "verb " << verb << " is not in docs/operations.md as `" << verb << "`";
      continue;
    }
    const std::vector<std::string> rows = VerbRows(doc, verb);
    if (rows.empty()) {
      ADD_FAILURE() << "verb " << verb
                    << " has no row in a table of docs/operations.md (a row whose first cell "
                       "starts with `"
                    << verb << "`)";
      continue;
    }
    for (const std::string& flag : FlagsOf(verb)) {
      bool found = false;
      for (const std::string& row : rows) found = found || row.find(flag) != std::string::npos;
      EXPECT_TRUE(found) << "flag " << flag << " of " << verb
                         << " is not in its row of docs/operations.md";
    }
  }
}

TEST(OperationsDocTest, EveryConfigKeyIsDocumented) {
  const std::string doc = OperationsDoc();
  const std::vector<std::string> keys = ConfigKeys();
  ASSERT_GE(keys.size(), 60u);
  for (const std::string& key : keys) {
    EXPECT_NE(doc.find("`" + key + "`"), std::string::npos)
        << "config key " << key << " is not in docs/operations.md as `" << key << "`";
  }
}

// Every TASKENGINE_* name in the sources of src/ and apps/ (tests, test
// helpers (testing/, testing_support/) and preprocessor lines left out:
// TASKENGINE_HAVE_* are build definitions).
std::set<std::string> VariablesInSources() {
  std::set<std::string> names;
  const std::regex name("TASKENGINE_[A-Z0-9][A-Z0-9_]*");
  for (const char* top : {"src", "apps"}) {
    for (const auto& entry :
         fs::recursive_directory_iterator(std::string(TE_SOURCE_DIR) + "/" + top)) {
      const std::string path = entry.path().string();
      if (!entry.is_regular_file() || path.ends_with("_test.cc") ||
          path.find("/testing/") != std::string::npos ||
          path.find("/testing_support/") != std::string::npos ||
          !(path.ends_with(".cc") || path.ends_with(".h"))) {
        continue;
      }
      for (const std::string& line : Lines(ReadFile(path))) {
        if (line.starts_with("#")) continue;
        for (std::sregex_iterator it(line.begin(), line.end(), name), end; it != end; ++it) {
          names.insert(it->str());
        }
      }
    }
  }
  return names;
}

TEST(OperationsDocTest, EveryEnvironmentVariableIsDocumented) {
  const std::string doc = OperationsDoc();
  const std::set<std::string> names = VariablesInSources();
  ASSERT_GE(names.size(), 15u) << "the scan of src/ and apps/ found too few variables";
  for (const std::string& n : names) {
    EXPECT_NE(doc.find("`" + n + "`"), std::string::npos)
        << "environment variable " << n << " is not in docs/operations.md as `" << n << "`";
  }
}

}  // namespace
}  // namespace taskengine::testing
