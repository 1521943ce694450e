// Canonical JSON (A2): a strict RFC 8259 parser that writes the canonical form
// while it reads, in one pass over the input.
//
// The parser is iterative (an explicit stack of open containers), so hostile
// nesting cannot exhaust the call stack whatever `max_depth` is; the depth
// limit is checked before a container is opened. Object members are written
// to the output in input order, each as `"key":value`; when the object closes
// they are reordered by their decoded key bytes (not the escaped text: `"`
// escapes to `\"`, which would sort differently) and duplicates are rejected.
// Already-sorted objects, the common case for canonical input, are left in
// place. Scratch buffers are reused across the whole document, so the cost per
// input byte is a copy, not an allocation.
//
// Numbers: an integer literal (no fraction, no exponent) is kept exactly when
// it lies in [-2^63, 2^64 - 1] ("-0" prints as "0") and refused otherwise; it
// never passes through a double. Every other number is an IEEE-754 double, as
// in RFC 8785: read with std::from_chars (correctly rounded) and printed with
// std::to_chars in its shortest round-trip form, except that an integral
// double in [-2^63, 2^64) is printed as the integer literal of the same value,
// so 1.0, 1e0 and 10e-1 all become 1 and 1e19 becomes 10000000000000000000.
// Larger integral doubles keep an exponent ("1e+20"), so the output never
// holds an integer literal that would be refused. A nonzero value too large
// or too small for a double (1e999, 1e-999) is refused rather than turned
// into infinity or 0.
#include "core/canonical_json.h"

#include <sodium.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <system_error>
#include <vector>

namespace taskengine {
namespace {

constexpr char kHexDigits[] = "0123456789abcdef";
constexpr std::string_view kIntegerRange =
    "integer out of range: integers are kept exactly from -2^63 to 2^64-1; send larger ones as "
    "strings";

bool IsDigit(char c) { return c >= '0' && c <= '9'; }

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AppendUtf8(std::uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Appends the canonical escape of a code point below 0x20, `"` or `\`.
void AppendEscaped(unsigned char c, std::string* out) {
  switch (c) {
    case '"':
      out->append("\\\"");
      return;
    case '\\':
      out->append("\\\\");
      return;
    case '\b':
      out->append("\\b");
      return;
    case '\f':
      out->append("\\f");
      return;
    case '\n':
      out->append("\\n");
      return;
    case '\r':
      out->append("\\r");
      return;
    case '\t':
      out->append("\\t");
      return;
    default:
      break;
  }
  const char u[] = {'\\', 'u', '0', '0', kHexDigits[c >> 4], kHexDigits[c & 0xF]};
  out->append(u, sizeof(u));
}

// Returns the length (2..4) of the well-formed UTF-8 sequence starting with a
// byte >= 0x80 at s[0], or 0 when it is ill-formed (Unicode 15, Table 3-7:
// no overlong forms, no surrogates, nothing above U+10FFFF).
std::size_t Utf8SequenceLength(std::string_view s) {
  const auto b = [&](std::size_t i) { return static_cast<unsigned char>(s[i]); };
  const auto in = [&](std::size_t i, unsigned lo, unsigned hi) {
    return i < s.size() && b(i) >= lo && b(i) <= hi;
  };
  const unsigned lead = b(0);
  if (lead >= 0xC2 && lead <= 0xDF) return in(1, 0x80, 0xBF) ? 2 : 0;
  if (lead >= 0xE0 && lead <= 0xEF) {
    const unsigned lo = lead == 0xE0 ? 0xA0 : 0x80;
    const unsigned hi = lead == 0xED ? 0x9F : 0xBF;
    return in(1, lo, hi) && in(2, 0x80, 0xBF) ? 3 : 0;
  }
  if (lead >= 0xF0 && lead <= 0xF4) {
    const unsigned lo = lead == 0xF0 ? 0x90 : 0x80;
    const unsigned hi = lead == 0xF4 ? 0x8F : 0xBF;
    return in(1, lo, hi) && in(2, 0x80, 0xBF) && in(3, 0x80, 0xBF) ? 4 : 0;
  }
  return 0;
}

// One canonicalization. Not thread-safe; used once.
class Canonicalizer {
 public:
  Canonicalizer(std::string_view in, const CanonicalJsonOptions& options)
      : in_(in), options_(options) {}

  Result<std::string> Run();

 private:
  // An object member already written to out_ as `"key":value`.
  struct Member {
    std::size_t key_begin;  // decoded key bytes: keys_[key_begin, key_begin + key_size)
    std::size_t key_size;
    std::size_t text_begin;  // out_[text_begin, text_end)
    std::size_t text_end;
    std::size_t offset;  // input offset of the key's opening quote
  };
  // An open container.
  struct Frame {
    bool is_object;
    std::size_t out_begin;      // offset of '{' or '[' in out_
    std::size_t members_begin;  // first of this object's entries in members_
    std::size_t keys_mark;      // keys_.size() when the object opened
  };

  [[nodiscard]] std::string_view Key(const Member& m) const {
    return std::string_view(keys_).substr(m.key_begin, m.key_size);
  }

  void SkipWhitespace();
  // Each parser returns false after recording the error with Fail().
  bool BeginValue();  // a scalar, or opens a container
  bool ParseMemberKey();
  bool ParseString(std::string* decoded);
  bool ParseEscape(std::string* decoded);
  bool ParseNumber();
  bool ParseLiteral(std::string_view word);
  bool CloseObject(const Frame& frame);
  bool FailUnexpected();
  bool Fail(std::size_t offset, std::string_view reason);

  const std::string_view in_;
  const CanonicalJsonOptions options_;
  std::size_t pos_ = 0;
  std::string out_;
  std::string keys_;             // decoded keys of the open objects, as a stack
  std::string scratch_;          // reordered members of the object being closed
  std::vector<Member> members_;  // members of the open objects, as a stack
  std::vector<Frame> stack_;
  Status error_;
};

Result<std::string> Canonicalizer::Run() {
  out_.reserve(in_.size());
  SkipWhitespace();
  if (options_.require_object && (pos_ >= in_.size() || in_[pos_] != '{')) {
    Fail(pos_, pos_ >= in_.size() ? "unexpected end of input" : "expected a JSON object");
    return error_;
  }
  // Each turn reads one value; a container's value completes when it closes.
  for (;;) {
    SkipWhitespace();
    const std::size_t depth_before = stack_.size();
    if (!BeginValue()) return error_;
    if (stack_.size() > depth_before) {
      // A container opened: empty, or expect its first element.
      const Frame& frame = stack_.back();
      SkipWhitespace();
      const char close = frame.is_object ? '}' : ']';
      if (pos_ < in_.size() && in_[pos_] == close) {
        ++pos_;
        out_.push_back(close);
        stack_.pop_back();
      } else {
        if (frame.is_object && !ParseMemberKey()) return error_;
        continue;
      }
    }
    // A value is complete. Close every container it completes, then go on
    // to the next element, or finish.
    for (;;) {
      if (stack_.empty()) {
        SkipWhitespace();
        if (pos_ != in_.size()) {
          Fail(pos_, "unexpected data after the JSON value");
          return error_;
        }
        return std::move(out_);
      }
      const Frame frame = stack_.back();
      if (frame.is_object) members_.back().text_end = out_.size();
      SkipWhitespace();
      if (pos_ >= in_.size()) {
        Fail(pos_, "unexpected end of input");
        return error_;
      }
      const char c = in_[pos_];
      if (c == ',') {
        ++pos_;
        out_.push_back(',');
        if (frame.is_object && !ParseMemberKey()) return error_;
        break;
      }
      if (frame.is_object && c == '}') {
        ++pos_;
        if (!CloseObject(frame)) return error_;
        out_.push_back('}');
        stack_.pop_back();
        continue;
      }
      if (!frame.is_object && c == ']') {
        ++pos_;
        out_.push_back(']');
        stack_.pop_back();
        continue;
      }
      Fail(pos_, frame.is_object ? "expected ',' or '}'" : "expected ',' or ']'");
      return error_;
    }
  }
}

void Canonicalizer::SkipWhitespace() {
  while (pos_ < in_.size()) {
    const char c = in_[pos_];
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') return;
    ++pos_;
  }
}

bool Canonicalizer::BeginValue() {
  if (pos_ >= in_.size()) return Fail(pos_, "unexpected end of input");
  const char c = in_[pos_];
  switch (c) {
    case '{':
    case '[': {
      if (stack_.size() >= static_cast<std::size_t>(std::max(0, options_.max_depth))) {
        return Fail(pos_, "nesting deeper than " + std::to_string(options_.max_depth));
      }
      ++pos_;
      stack_.push_back(Frame{c == '{', out_.size(), members_.size(), keys_.size()});
      out_.push_back(c);
      return true;
    }
    case '"':
      return ParseString(nullptr);
    case 't':
      return ParseLiteral("true");
    case 'f':
      return ParseLiteral("false");
    case 'n':
      return ParseLiteral("null");
    default:
      if (c == '-' || IsDigit(c)) return ParseNumber();
      return FailUnexpected();
  }
}

bool Canonicalizer::ParseMemberKey() {
  SkipWhitespace();
  if (pos_ >= in_.size()) return Fail(pos_, "unexpected end of input");
  if (in_[pos_] != '"') return Fail(pos_, "expected a string key");
  Member m{};
  m.offset = pos_;
  m.key_begin = keys_.size();
  m.text_begin = out_.size();
  if (!ParseString(&keys_)) return false;
  m.key_size = keys_.size() - m.key_begin;
  SkipWhitespace();
  if (pos_ >= in_.size()) return Fail(pos_, "unexpected end of input");
  if (in_[pos_] != ':') return Fail(pos_, "expected ':'");
  ++pos_;
  out_.push_back(':');
  members_.push_back(m);
  return true;
}

bool Canonicalizer::ParseString(std::string* decoded) {
  const std::size_t quote = pos_;
  ++pos_;  // the opening quote
  out_.push_back('"');
  for (;;) {
    // Copy a run of bytes that need no attention.
    const std::size_t run = pos_;
    while (pos_ < in_.size()) {
      const auto b = static_cast<unsigned char>(in_[pos_]);
      if (b < 0x20 || b == '"' || b == '\\' || b >= 0x80) break;
      ++pos_;
    }
    if (pos_ > run) {
      const std::string_view plain = in_.substr(run, pos_ - run);
      out_.append(plain);
      if (decoded != nullptr) decoded->append(plain);
    }
    if (pos_ >= in_.size()) return Fail(quote, "unterminated string");
    const auto b = static_cast<unsigned char>(in_[pos_]);
    if (b == '"') {
      ++pos_;
      out_.push_back('"');
      return true;
    }
    if (b == '\\') {
      if (!ParseEscape(decoded)) return false;
      continue;
    }
    if (b < 0x20) return Fail(pos_, "control character in string");
    const std::size_t len = Utf8SequenceLength(in_.substr(pos_));
    if (len == 0) return Fail(pos_, "invalid UTF-8");
    const std::string_view seq = in_.substr(pos_, len);
    out_.append(seq);
    if (decoded != nullptr) decoded->append(seq);
    pos_ += len;
  }
}

bool Canonicalizer::ParseEscape(std::string* decoded) {
  const std::size_t start = pos_;
  if (pos_ + 1 >= in_.size()) return Fail(start, "unterminated escape");
  const char e = in_[pos_ + 1];
  char simple = 0;
  switch (e) {
    case '"':
      simple = '"';
      break;
    case '\\':
      simple = '\\';
      break;
    case '/':
      simple = '/';
      break;
    case 'b':
      simple = '\b';
      break;
    case 'f':
      simple = '\f';
      break;
    case 'n':
      simple = '\n';
      break;
    case 'r':
      simple = '\r';
      break;
    case 't':
      simple = '\t';
      break;
    case 'u':
      break;
    default:
      return Fail(start, "invalid escape");
  }
  std::uint32_t cp = 0;
  if (simple != 0) {
    pos_ += 2;
    cp = static_cast<unsigned char>(simple);
  } else {
    // \uXXXX, with a surrogate pair spelled as two escapes.
    const auto read_hex4 = [&](std::size_t at, std::uint32_t* value) {
      if (at + 6 > in_.size() || in_[at] != '\\' || in_[at + 1] != 'u') return false;
      std::uint32_t v = 0;
      for (std::size_t i = at + 2; i < at + 6; ++i) {
        const int h = HexValue(in_[i]);
        if (h < 0) return false;
        v = (v << 4) | static_cast<std::uint32_t>(h);
      }
      *value = v;
      return true;
    };
    if (!read_hex4(start, &cp)) return Fail(start, "invalid \\u escape");
    pos_ += 6;
    if (cp >= 0xDC00 && cp <= 0xDFFF) return Fail(start, "lone low surrogate");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
      std::uint32_t low = 0;
      if (!read_hex4(pos_, &low) || low < 0xDC00 || low > 0xDFFF) {
        return Fail(start, "high surrogate not followed by a low surrogate");
      }
      pos_ += 6;
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    }
  }
  if (decoded != nullptr) AppendUtf8(cp, decoded);
  if (cp < 0x20 || cp == '"' || cp == '\\') {
    AppendEscaped(static_cast<unsigned char>(cp), &out_);
  } else {
    AppendUtf8(cp, &out_);
  }
  return true;
}

bool Canonicalizer::ParseNumber() {
  const std::size_t start = pos_;
  const auto digits = [&] {
    const std::size_t from = pos_;
    while (pos_ < in_.size() && IsDigit(in_[pos_])) ++pos_;
    return pos_ - from;
  };
  if (in_[pos_] == '-') ++pos_;
  if (pos_ >= in_.size() || !IsDigit(in_[pos_])) return Fail(pos_, "expected a digit");
  const std::size_t int_begin = pos_;
  if (in_[pos_] == '0') {
    ++pos_;
    if (pos_ < in_.size() && IsDigit(in_[pos_])) {
      return Fail(int_begin, "leading zeros are not allowed");
    }
  } else {
    digits();
  }
  const std::size_t int_end = pos_;
  std::size_t frac_begin = pos_;
  std::size_t frac_end = pos_;
  bool is_integer = true;
  if (pos_ < in_.size() && in_[pos_] == '.') {
    ++pos_;
    frac_begin = pos_;
    if (digits() == 0) return Fail(pos_, "expected a digit after '.'");
    frac_end = pos_;
    is_integer = false;
  }
  // The exponent, saturated: only its sign and rough size matter below.
  std::int64_t exponent = 0;
  if (pos_ < in_.size() && (in_[pos_] == 'e' || in_[pos_] == 'E')) {
    ++pos_;
    bool negative = false;
    if (pos_ < in_.size() && (in_[pos_] == '+' || in_[pos_] == '-')) {
      negative = in_[pos_] == '-';
      ++pos_;
    }
    const std::size_t exp_begin = pos_;
    if (digits() == 0) return Fail(pos_, "expected a digit in the exponent");
    for (std::size_t i = exp_begin; i < pos_; ++i) {
      exponent = std::min<std::int64_t>(exponent * 10 + (in_[i] - '0'), 1'000'000'000'000);
    }
    if (negative) exponent = -exponent;
    is_integer = false;
  }
  const char* first = in_.data() + start;
  const char* last = in_.data() + pos_;
  char buf[32];
  if (is_integer) {
    // Kept exactly, or refused: an integer literal never passes through a
    // double (two different ids or amounts must not become one value).
    const bool negative = in_[start] == '-';
    if (negative) {
      std::int64_t v = 0;
      const auto [ptr, ec] = std::from_chars(first, last, v);
      if (ec != std::errc() || ptr != last) return Fail(start, kIntegerRange);
      if (v == 0) {
        out_.push_back('0');  // "-0"
        return true;
      }
      const auto printed = std::to_chars(buf, buf + sizeof(buf), v);
      out_.append(buf, printed.ptr);
      return true;
    }
    std::uint64_t v = 0;
    const auto [ptr, ec] = std::from_chars(first, last, v);
    if (ec != std::errc() || ptr != last) return Fail(start, kIntegerRange);
    const auto printed = std::to_chars(buf, buf + sizeof(buf), v);
    out_.append(buf, printed.ptr);
    return true;
  }
  double d = 0;
  const auto [ptr, ec] = std::from_chars(first, last, d, std::chars_format::general);
  if (ec == std::errc::result_out_of_range) {
    // Overflow or underflow. The value is 0.d1d2... * 10^k where d1 is the
    // first nonzero digit; k > 0 means too large (a double underflows only
    // below 1e-307), otherwise too small.
    std::int64_t k = 0;
    std::size_t first_nonzero = int_begin;
    while (first_nonzero < int_end && in_[first_nonzero] == '0') ++first_nonzero;
    bool zero = false;
    if (first_nonzero < int_end) {
      k = static_cast<std::int64_t>(int_end - first_nonzero);
    } else {
      std::size_t i = frac_begin;
      while (i < frac_end && in_[i] == '0') ++i;
      zero = i == frac_end;
      k = -static_cast<std::int64_t>(i - frac_begin);
    }
    if (!zero && k + exponent > 0) return Fail(start, "number out of range");
    // A nonzero number would silently become 0.
    if (!zero) return Fail(start, "number out of range (too small for a double)");
    d = 0;
  } else if (ec != std::errc() || ptr != last) {
    return Fail(start, "invalid number");
  }
  if (!std::isfinite(d)) return Fail(start, "number out of range");
  if (d == 0) {
    // Whatever from_chars reported: a nonzero number never becomes 0.
    for (std::size_t i = int_begin; i < frac_end || i < int_end; ++i) {
      if (in_[i] >= '1' && in_[i] <= '9') {
        return Fail(start, "number out of range (too small for a double)");
      }
    }
  }
  constexpr double kTwoTo63 = 9223372036854775808.0;
  constexpr double kTwoTo64 = 18446744073709551616.0;
  if (std::trunc(d) == d && d >= -kTwoTo63 && d < kTwoTo64) {
    // Integral: the same text as the integer literal of the same value.
    const auto printed = d < kTwoTo63
                             ? std::to_chars(buf, buf + sizeof(buf), static_cast<std::int64_t>(d))
                             : std::to_chars(buf, buf + sizeof(buf), static_cast<std::uint64_t>(d));
    out_.append(buf, printed.ptr);
    return true;
  }
  auto printed = std::to_chars(buf, buf + sizeof(buf), d);
  if (std::find_if(buf, printed.ptr, [](char c) { return c == '.' || c == 'e'; }) == printed.ptr) {
    // An integral double outside [-2^63, 2^64) in its shortest form without a
    // fraction or exponent ("18446744073709552000", "-12345678901234567168")
    // would read back as an integer literal out of range: use the exponent.
    printed = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  }
  out_.append(buf, printed.ptr);
  return true;
}

bool Canonicalizer::ParseLiteral(std::string_view word) {
  if (in_.substr(pos_, word.size()) != word) return Fail(pos_, "invalid literal");
  pos_ += word.size();
  out_.append(word);
  return true;
}

bool Canonicalizer::CloseObject(const Frame& frame) {
  const auto begin = members_.begin() + static_cast<std::ptrdiff_t>(frame.members_begin);
  const auto end = members_.end();
  const auto key_less = [&](const Member& a, const Member& b) { return Key(a) < Key(b); };
  // Strictly increasing keys: already canonical, nothing to move.
  const bool sorted = std::adjacent_find(begin, end, [&](const Member& a, const Member& b) {
                        return !key_less(a, b);
                      }) == end;
  if (!sorted) {
    std::sort(begin, end, [&](const Member& a, const Member& b) {
      const int c = Key(a).compare(Key(b));
      return c != 0 ? c < 0 : a.offset < b.offset;
    });
    // Report the duplicate that comes first in the input.
    const Member* duplicate = nullptr;
    for (auto it = begin; it + 1 < end; ++it) {
      if (Key(*it) == Key(*(it + 1)) &&
          (duplicate == nullptr || (it + 1)->offset < duplicate->offset)) {
        duplicate = &*(it + 1);
      }
    }
    if (duplicate != nullptr) {
      // Name the key when it is short enough to be useful in a message.
      std::string reason = "duplicate key";
      const std::string_view key = Key(*duplicate);
      if (key.size() <= 64) {
        reason += " \"";
        for (const char c : key) {
          const auto b = static_cast<unsigned char>(c);
          if (b < 0x20 || b == '"' || b == '\\') {
            AppendEscaped(b, &reason);
          } else {
            reason.push_back(c);
          }
        }
        reason += '"';
      }
      return Fail(duplicate->offset, reason);
    }
    scratch_.clear();
    for (auto it = begin; it != end; ++it) {
      if (it != begin) scratch_.push_back(',');
      scratch_.append(out_, it->text_begin, it->text_end - it->text_begin);
    }
    out_.resize(frame.out_begin + 1);
    out_.append(scratch_);
  }
  members_.resize(frame.members_begin);
  keys_.resize(frame.keys_mark);
  return true;
}

bool Canonicalizer::FailUnexpected() {
  const auto b = static_cast<unsigned char>(in_[pos_]);
  if (b >= 0x21 && b < 0x7F) {
    return Fail(pos_, std::string("unexpected character '") + static_cast<char>(b) + "'");
  }
  const char hex[] = {'0', 'x', kHexDigits[b >> 4], kHexDigits[b & 0xF], '\0'};
  return Fail(pos_, std::string("unexpected byte ") + hex);
}

bool Canonicalizer::Fail(std::size_t offset, std::string_view reason) {
  std::string message = "offset ";
  message += std::to_string(offset);
  message += ": ";
  message.append(reason);
  error_ = InvalidArgument(std::move(message));
  return false;
}

void HexInto(const unsigned char* bytes, std::size_t n, std::string* out) {
  out->resize(2 * n);
  for (std::size_t i = 0; i < n; ++i) {
    (*out)[2 * i] = kHexDigits[bytes[i] >> 4];
    (*out)[2 * i + 1] = kHexDigits[bytes[i] & 0xF];
  }
}

// libsodium asks for sodium_init() before use; it is idempotent and
// thread-safe. SHA-256 itself needs nothing from it, so a failure is ignored.
void EnsureSodium() {
  static const bool initialized = sodium_init() >= 0;
  (void)initialized;
}

const unsigned char* Bytes(std::string_view s) {
  static const unsigned char kEmpty = 0;  // never pass null, even for 0 bytes
  return s.empty() ? &kEmpty : reinterpret_cast<const unsigned char*>(s.data());
}

}  // namespace

Result<std::string> CanonicalizeJson(std::string_view json, CanonicalJsonOptions options) {
  Canonicalizer canonicalizer(json, options);
  return canonicalizer.Run();
}

std::string Sha256Hex(std::string_view data) {
  EnsureSodium();
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256(digest, Bytes(data), data.size());
  std::string hex;
  HexInto(digest, sizeof(digest), &hex);
  return hex;
}

// The fingerprint hashes the bytes `canonical_payload`, one '\n', then
// `requester`: SHA-256(canonical_payload + "\n" + requester), lower-case hex.
// A canonical payload never contains a raw newline (whitespace is dropped and
// strings escape control characters), so the split is unambiguous: no other
// (payload, requester) pair produces the same input to the hash.
std::string AdmissionFingerprint(std::string_view canonical_payload, std::string_view requester) {
  EnsureSodium();
  crypto_hash_sha256_state state;
  crypto_hash_sha256_init(&state);
  crypto_hash_sha256_update(&state, Bytes(canonical_payload), canonical_payload.size());
  const unsigned char newline = '\n';
  crypto_hash_sha256_update(&state, &newline, 1);
  crypto_hash_sha256_update(&state, Bytes(requester), requester.size());
  unsigned char digest[crypto_hash_sha256_BYTES];
  crypto_hash_sha256_final(&state, digest);
  std::string hex;
  HexInto(digest, sizeof(digest), &hex);
  return hex;
}

}  // namespace taskengine
