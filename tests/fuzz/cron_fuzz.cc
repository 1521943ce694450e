// libFuzzer target for the cron parser and next-fire computation (RD17).
//
// Feeds arbitrary bytes to ParseCron. Properties checked on every input (a
// violation aborts, which libFuzzer reports as a crash):
//   - a rejection is kInvalidArgument shaped "<what> at position N: <reason>"
//     with <what> a field name, "expression" or "macro", and 1 <= N <= size+1;
//   - an accepted expression's ToString() re-parses to an equal expression
//     with the same text (normalization is a fixed point);
//   - NextLocal from fixed times returns a matching minute strictly after the
//     start, or nullopt -- always nullopt when !CanEverFire(), never nullopt
//     from 2026 when CanEverFire() (a fire exists within 400 years);
//   - Schedule::NextAfter in America/New_York across the 2026 DST changes
//     returns strictly increasing instants;
//   - nothing crashes, hangs (run with -timeout) or trips ASan/UBSan.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <string_view>

#include "core/cron.h"
#include "core/schedule.h"
#include "taskengine/status.h"

namespace {

using ::taskengine::CivilTime;
using ::taskengine::CronExpr;
using ::taskengine::ErrorCode;
using ::taskengine::LocalMinute;
using ::taskengine::Millis;

void CheckError(const taskengine::Status& status, std::size_t size) {
  TE_CHECK(status.code() == ErrorCode::kInvalidArgument);
  const std::string& m = status.message();
  const std::size_t at = m.find(" at position ");
  TE_CHECK(at != std::string::npos);
  const std::string what = m.substr(0, at);
  TE_CHECK(what == "minute field" || what == "hour field" || what == "day-of-month field" ||
           what == "month field" || what == "day-of-week field" || what == "expression" ||
           what == "macro");
  const char* digits = m.c_str() + at + 13;
  char* end = nullptr;
  const unsigned long long position = std::strtoull(digits, &end, 10);
  TE_CHECK(end != digits && end[0] == ':' && end[1] == ' ' && end[2] != '\0');
  TE_CHECK(position >= 1 && position <= size + 1);
}

LocalMinute At(int year, int month, int day, int hour, int minute) {
  return taskengine::ToLocalMinute(CivilTime{year, month, day, hour, minute});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const taskengine::Result<CronExpr> parsed = taskengine::ParseCron(input);
  if (!parsed.ok()) {
    CheckError(parsed.status(), size);
    return 0;
  }
  const CronExpr& cron = *parsed;

  const std::string text = cron.ToString();
  const taskengine::Result<CronExpr> again = taskengine::ParseCron(text);
  TE_CHECK(again.ok());
  TE_CHECK(*again == cron);
  TE_CHECK(again->ToString() == text);

  const LocalMinute starts[] = {At(2026, 1, 1, 0, 0), At(2096, 2, 28, 23, 59),
                                At(9999, 12, 31, 0, 0), LocalMinute{INT64_MIN}};
  for (const LocalMinute start : starts) {
    const std::optional<LocalMinute> next = taskengine::NextLocal(cron, start);
    if (!cron.CanEverFire()) TE_CHECK(!next.has_value());
    if (next) {
      TE_CHECK(*next > start);
      TE_CHECK(cron.Matches(*next));
    }
  }
  if (cron.CanEverFire()) TE_CHECK(taskengine::NextLocal(cron, starts[0]).has_value());

  const taskengine::Result<taskengine::Schedule> schedule =
      taskengine::Schedule::Create(cron, "America/New_York");
  TE_CHECK(schedule.ok());
  // 2026-03-08T05:00Z and 2026-11-01T04:00Z: local midnight before each change.
  for (const Millis from : {Millis{1'772'946'000'000}, Millis{1'793'505'600'000}}) {
    Millis prev = from;
    for (const Millis t : schedule->Preview(from, 8)) {
      TE_CHECK(t > prev);
      prev = t;
    }
  }
  return 0;
}
