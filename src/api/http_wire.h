// The bytes of an HTTP/1.x response as HttpServer sends them: the status
// line and header written directly into one string, instead of through
// Beast's response message and serializer (one allocation per field, and a
// serializer state machine, for an answer of a few hundred bytes).
//
// The output is byte for byte what Beast 1.74 writes for the message
// HttpServer used to build (http_wire_test.cc compares the two):
//
//   Server, Date, Content-Type (unless empty, or a 204 without a body), then
//   the response's extra fields in order, each one replacing an earlier
//   field of the same name (compared without case) and moving to the end;
//   Connection as keep-alive asks (HTTP/1.1: "close" when not kept;
//   HTTP/1.0: "keep-alive" when kept); Content-Length last, always (0 for an
//   empty body).
//
// Where Beast would have done harm, this does not: the framing fields
// (Connection, Content-Length, Transfer-Encoding) are the server's alone, so
// a response's own copies of them are dropped; CR, LF and NUL in a field
// value become spaces (no response splitting); and a 1xx, 204 or 304
// response is sent without its body (Beast threw on one with a body).
#pragma once

#include <string>
#include <string_view>

#include "api/http_types.h"

namespace taskengine::api {

// Appends to `out` the whole response (head and body): `version` is the
// request's (10 or 11), `keep` whether the connection stays open after it.
void AppendResponseBytes(std::string& out, const HttpResponse& response, unsigned version,
                         bool keep, std::string_view server_name, std::string_view date);

}  // namespace taskengine::api
