// What the CLI writes for people never controls their terminal (issue 13,
// finding 9). Texts printed by the verbs come from tenants and workers
// (cancel reasons, errors, lane keys, logs, payloads), and a terminal obeys
// control characters in them: ESC sequences can retitle the window, clear the
// screen, move the cursor over earlier lines or, on some terminals, answer
// back with input. Every text output of the CLI goes through one filter that
// shows those characters as visible escapes instead.
#pragma once

#include <iosfwd>
#include <string>
#include <string_view>

namespace taskengine::cli {

// `text` with every C0 control character except newline and tab, DEL, every
// C1 control character (U+0080..U+009F) and every byte that is not part of
// well-formed UTF-8 replaced by a visible escape: "\x1b" for the byte 0x1B,
// "\u009b" for U+009B. Other text (printable ASCII and UTF-8) is kept. When
// `complete` is false, a UTF-8 sequence cut off at the end is left out (its
// length is stored in *held, and the caller passes it again with more text).
std::string EscapeForTerminal(std::string_view text, bool complete = true,
                              std::size_t* held = nullptr);

// `json_text` (a serialized JSON document) with DEL and the C1 control
// characters inside its strings written as \u escapes, which JSON parsers
// read back as the same characters: the document stays exact and valid, and
// the terminal never receives them raw. (C0 characters are escaped by every
// JSON serializer already.)
std::string EscapeJsonForTerminal(std::string_view json_text);

// Routes std::cerr, and std::cout unless `json_stdout`, through
// EscapeForTerminal for the rest of the process (text is passed on at each
// newline and flush). Call once, before any output.
void ProtectTerminal(bool json_stdout);

}  // namespace taskengine::cli
