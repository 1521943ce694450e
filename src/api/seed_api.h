// Seed 001's dashboard API (issue 16, docs/seed-api.md): the routes and
// shapes a PHP team built against —
//   /api/<tenant>/tasks/{jobs, jobs/{id}, jobs/{id}/dispatch, executions,
//                        executions/{id}, executions/{id}/retry,
//                        executions/{id}/abort, stats, workers}
//   /api/tasks/{stats, executions, workers}            (every tenant)
// with the {"success": true, ...} envelope and camelCase fields — as a thin
// adapter over /api/v1. Each request is answered by calling the /api/v1
// router with the caller's own headers, so authentication, scopes, CSRF,
// rate limits, validation, tenant isolation and audit are exactly the API's;
// the adapter only renames fields and checks that an id under
// /api/<tenant>/ belongs to that tenant (another tenant's answers 404, as a
// missing one does).
#pragma once

#include <string_view>

#include "api/http_types.h"
#include "api/router.h"

namespace taskengine::api {

class SeedApi {
 public:
  // `v1` answers /api/v1 (not owned; must outlive this).
  explicit SeedApi(const Router* v1) : v1_(v1) {}

  // True for /api/tasks/... and /api/<tenant>/tasks/...
  static bool Handles(std::string_view path);

  void Handle(HttpRequest request, Responder respond) const;

 private:
  const Router* v1_;
};

}  // namespace taskengine::api
