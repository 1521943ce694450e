#include "terminal_output.h"

#include <cstdio>
#include <iostream>
#include <memory>
#include <streambuf>

namespace taskengine::cli {
namespace {

void AppendHex(std::string& out, const char* prefix, unsigned value, int digits) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%0*x", digits, value);
  out += prefix;
  out += buf;
}

// The length of the well-formed UTF-8 sequence starting at text[i] (1..4), 0
// when malformed, or -1 when it is cut off by the end of `text`. The code
// point goes to *cp.
int Utf8Length(std::string_view text, std::size_t i, unsigned* cp) {
  const auto b0 = static_cast<unsigned char>(text[i]);
  int n = 0;
  unsigned min = 0;
  if (b0 < 0x80) {
    *cp = b0;
    return 1;
  } else if ((b0 & 0xe0) == 0xc0) {
    n = 2, min = 0x80, *cp = b0 & 0x1f;
  } else if ((b0 & 0xf0) == 0xe0) {
    n = 3, min = 0x800, *cp = b0 & 0x0f;
  } else if ((b0 & 0xf8) == 0xf0) {
    n = 4, min = 0x10000, *cp = b0 & 0x07;
  } else {
    return 0;
  }
  for (int k = 1; k < n; ++k) {
    if (i + k >= text.size()) return -1;
    const auto b = static_cast<unsigned char>(text[i + k]);
    if ((b & 0xc0) != 0x80) return 0;
    *cp = (*cp << 6) | (b & 0x3f);
  }
  if (*cp < min || *cp > 0x10ffff || (*cp >= 0xd800 && *cp <= 0xdfff)) return 0;
  return n;
}

// A streambuf that passes text on to `out` through EscapeForTerminal, line
// by line (and at every flush). Not thread-safe, like the stream it serves.
class EscapingBuf final : public std::streambuf {
 public:
  explicit EscapingBuf(std::streambuf* out) : out_(out) {}
  ~EscapingBuf() override { Emit(/*complete=*/true); }

 protected:
  int_type overflow(int_type ch) override {
    if (traits_type::eq_int_type(ch, traits_type::eof())) return traits_type::not_eof(ch);
    pending_ += traits_type::to_char_type(ch);
    if (ch == '\n') Emit(/*complete=*/false);
    return ch;
  }
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    pending_.append(s, static_cast<std::size_t>(n));
    if (pending_.find('\n') != std::string::npos) Emit(/*complete=*/false);
    return n;
  }
  int sync() override {
    Emit(/*complete=*/false);
    return out_->pubsync();
  }

 private:
  void Emit(bool complete) {
    if (pending_.empty()) return;
    std::size_t held = 0;
    const std::string safe = EscapeForTerminal(pending_, complete, &held);
    out_->sputn(safe.data(), static_cast<std::streamsize>(safe.size()));
    pending_.erase(0, pending_.size() - held);
  }

  std::streambuf* const out_;
  std::string pending_;
};

}  // namespace

std::string EscapeForTerminal(std::string_view text, bool complete, std::size_t* held) {
  std::string out;
  out.reserve(text.size());
  if (held != nullptr) *held = 0;
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b == '\n' || b == '\t' || (b >= 0x20 && b < 0x7f)) {
      out += static_cast<char>(b);
      ++i;
      continue;
    }
    unsigned cp = 0;
    const int n = b < 0x80 ? 1 : Utf8Length(text, i, &cp);
    if (n < 0 && !complete) {
      if (held != nullptr) *held = text.size() - i;
      break;
    }
    if (b < 0x80 || n <= 0) {  // C0, DEL, or a byte outside well-formed UTF-8
      AppendHex(out, "\\x", b, 2);
      ++i;
    } else if (cp <= 0x9f) {  // C1
      AppendHex(out, "\\u", cp, 4);
      i += n;
    } else {
      out.append(text.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string EscapeJsonForTerminal(std::string_view json_text) {
  std::string out;
  out.reserve(json_text.size());
  for (std::size_t i = 0; i < json_text.size(); ++i) {
    const auto b = static_cast<unsigned char>(json_text[i]);
    if (b == 0x7f) {
      out += "\\u007f";
    } else if (b == 0xc2 && i + 1 < json_text.size() &&
               static_cast<unsigned char>(json_text[i + 1]) >= 0x80 &&
               static_cast<unsigned char>(json_text[i + 1]) <= 0x9f) {
      AppendHex(out, "\\u", static_cast<unsigned char>(json_text[i + 1]), 4);
      ++i;
    } else {
      out += static_cast<char>(b);
    }
  }
  return out;
}

void ProtectTerminal(bool json_stdout) {
  // Installed once for the life of the process; the originals stay owned by
  // the standard streams' own buffers.
  static auto* err = new EscapingBuf(std::cerr.rdbuf());
  std::cerr.rdbuf(err);
  if (!json_stdout) {
    static auto* out = new EscapingBuf(std::cout.rdbuf());
    std::cout.rdbuf(out);
  }
}

}  // namespace taskengine::cli
