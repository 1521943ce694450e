#include "storage/sql_session.h"

#include <gtest/gtest.h>

namespace taskengine::storage_internal {
namespace {

TEST(TranslatePlaceholdersTest, NumberedStaysAsWritten) {
  const TranslatedSql t = TranslatePlaceholders("a = ?1 AND b = ?12", PlaceholderStyle::kNumbered);
  EXPECT_EQ(t.text, "a = ?1 AND b = ?12");
  EXPECT_TRUE(t.order.empty());
}

TEST(TranslatePlaceholdersTest, DollarKeepsTheNumbers) {
  const TranslatedSql t =
      TranslatePlaceholders("SET a = ?2, b = ?10 WHERE id = ?1", PlaceholderStyle::kDollar);
  EXPECT_EQ(t.text, "SET a = $2, b = $10 WHERE id = $1");
}

TEST(TranslatePlaceholdersTest, PositionalRecordsWhichArgumentEachTakes) {
  const TranslatedSql t =
      TranslatePlaceholders("x = ?2 OR y = ?1 OR z = ?2 LIMIT ?11", PlaceholderStyle::kPositional);
  EXPECT_EQ(t.text, "x = ? OR y = ? OR z = ? LIMIT ?");
  EXPECT_EQ(t.order, (std::vector<int>{1, 0, 1, 10}));
}

TEST(TranslatePlaceholdersTest, QuotedTextAndBareQuestionMarksAreLeftAlone) {
  const TranslatedSql t = TranslatePlaceholders(
      "SELECT '?1', 'it''s ?2', \"?3\", `?4`, j ? 'k', ?5", PlaceholderStyle::kPositional);
  EXPECT_EQ(t.text, "SELECT '?1', 'it''s ?2', \"?3\", `?4`, j ? 'k', ?");
  EXPECT_EQ(t.order, (std::vector<int>{4}));
  EXPECT_EQ(TranslatePlaceholders("a ?| b, ?", PlaceholderStyle::kDollar).text, "a ?| b, ?");
}

TEST(SqlArgsTest, KeepsKindsAndOrder) {
  SqlArgs a;
  a.Add(std::int64_t{-5}).Add("text").AddNull().AddOrNull("").AddOrNull("x").Add(7);
  ASSERT_EQ(a.size(), 6);
  EXPECT_EQ(a.values()[0].kind, SqlValue::Kind::kInt);
  EXPECT_EQ(a.values()[0].number, -5);
  EXPECT_EQ(a.values()[1].kind, SqlValue::Kind::kText);
  EXPECT_EQ(a.values()[1].text, "text");
  EXPECT_EQ(a.values()[2].kind, SqlValue::Kind::kNull);
  EXPECT_EQ(a.values()[3].kind, SqlValue::Kind::kNull);
  EXPECT_EQ(a.values()[4].text, "x");
  EXPECT_EQ(a.values()[5].number, 7);
}

TEST(FunctionRefTest, CallsTheCallableItRefersTo) {
  int calls = 0;
  auto add = [&](int n) {
    calls += n;
    return calls;
  };
  FunctionRef<int(int)> f(add);
  EXPECT_EQ(f(2), 2);
  EXPECT_EQ(f(3), 5);
  EXPECT_EQ(calls, 5);
}

}  // namespace
}  // namespace taskengine::storage_internal
