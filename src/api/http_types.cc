#include "api/http_types.h"

#include "api/errors.h"

namespace taskengine::api {

std::string_view ToString(HttpMethod method) {
  switch (method) {
    case HttpMethod::kGet:
      return "GET";
    case HttpMethod::kHead:
      return "HEAD";
    case HttpMethod::kPost:
      return "POST";
    case HttpMethod::kPut:
      return "PUT";
    case HttpMethod::kPatch:
      return "PATCH";
    case HttpMethod::kDelete:
      return "DELETE";
    case HttpMethod::kOptions:
      return "OPTIONS";
    case HttpMethod::kOther:
      break;
  }
  return "OTHER";
}

HttpMethod ParseHttpMethod(std::string_view name) {
  if (name == "GET") return HttpMethod::kGet;
  if (name == "HEAD") return HttpMethod::kHead;
  if (name == "POST") return HttpMethod::kPost;
  if (name == "PUT") return HttpMethod::kPut;
  if (name == "PATCH") return HttpMethod::kPatch;
  if (name == "DELETE") return HttpMethod::kDelete;
  if (name == "OPTIONS") return HttpMethod::kOptions;
  return HttpMethod::kOther;
}

void HttpRequest::SetTarget(std::string request_target) {
  target = std::move(request_target);
  const std::size_t q = target.find('?');
  path = target.substr(0, q);
  query = q == std::string::npos ? std::string() : target.substr(q + 1);
}

const std::string* HttpRequest::Header(std::string_view lower_case_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lower_case_name) return &value;
  }
  return nullptr;
}

namespace internal {

ResponderState::~ResponderState() {
  if (!sent_.exchange(true) && deliver_) {
    // A handler dropped its Responder without answering: a bug, not input.
    try {
      deliver_(ErrorResponse(500, "internal", "the request handler did not produce a response"));
    } catch (...) {
      // Out of memory while answering: the connection is closed at server stop.
    }
  }
}

bool ResponderState::Send(HttpResponse response) {
  if (sent_.exchange(true)) return false;
  if (deliver_) deliver_(std::move(response));
  return true;
}

bool ResponderState::SendBuilt(ResponseBuilder build) {
  if (sent_.exchange(true)) return false;
  if (deliver_built_) {
    deliver_built_(std::move(build));
  } else if (deliver_) {
    deliver_(build());
  }
  return true;
}

}  // namespace internal

Responder Responder::Wrap(std::function<void(HttpResponse&)> adjust) const {
  auto shared = std::make_shared<const std::function<void(HttpResponse&)>>(std::move(adjust));
  const Responder inner = *this;
  return Responder(
      [inner, shared](HttpResponse response) {
        (*shared)(response);
        inner.Send(std::move(response));
      },
      [inner, shared](ResponseBuilder build) {
        inner.SendBuilt([shared, build = std::move(build)] {
          HttpResponse response = build();
          (*shared)(response);
          return response;
        });
      });
}
}  // namespace taskengine::api
