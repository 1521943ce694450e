// Tenants (product.md §1, I1, X2, X4): list, detail, create or update.
// A principal bound to tenants sees only its own; another tenant's id answers
// 404 exactly like a missing one. Creating and updating needs admin scope and
// access to every tenant, and is audited (tenant.create, tenant.update).
#include <memory>

#include "api/routes.h"

namespace taskengine::api {
namespace {

constexpr std::size_t kMaxTenantId = 50;
constexpr std::size_t kMaxTenantName = 200;

std::string TenantUrl(const TenantId& id) { return "/api/v1/tenants/" + id.value; }

Status TenantNotFound(std::string_view id_text) {
  return NotFound("tenant " + std::string(id_text.substr(0, kMaxTenantId)) + " not found");
}

// GET /api/v1/tenants?active_only=true|false -> {"items": [Tenant...]} by id.
HttpResponse ListTenants(ApiContext& ctx, const RouteRequest& req) {
  const Principal& principal = PrincipalOf(req);
  auto query = QueryParams::Parse(req.http.query);
  if (!query.ok()) return StatusResponse(query.status());
  if (Status s = query->RejectUnknown({"active_only"}); !s.ok()) return StatusResponse(s);
  bool active_only = false;
  if (const std::string* a = query->Get("active_only")) {
    if (*a == "true") {
      active_only = true;
    } else if (*a != "false") {
      return StatusResponse(InvalidArgument("active_only: must be true or false"));
    }
  }
  auto tenants = ctx.store->ListTenants(active_only);
  if (!tenants.ok()) return StatusResponse(tenants.status());
  Json items = Json::array();
  for (const Tenant& t : *tenants) {
    if (principal.MayAccessTenant(t.id)) items.push_back(TenantToJson(t));
  }
  return JsonResponse(200, Json{{"items", std::move(items)}});
}

// GET /api/v1/tenants/{id} -> Tenant; 404 for a missing tenant and for one the
// caller may not see (X2).
HttpResponse GetTenant(ApiContext& ctx, const RouteRequest& req) {
  const std::string& id = req.Param("id");
  if (!IsValidTenantId(id)) {
    return StatusResponse(InvalidArgument("tenant id: must match [a-z0-9][a-z0-9_-]{0,49}"));
  }
  if (!PrincipalOf(req).MayAccessTenant(TenantId(id))) return StatusResponse(TenantNotFound(id));
  auto tenant = ctx.store->GetTenant(TenantId(id));
  if (!tenant.ok()) {
    if (tenant.status().code() == ErrorCode::kNotFound) return StatusResponse(TenantNotFound(id));
    return StatusResponse(tenant.status());
  }
  return JsonResponse(200, TenantToJson(*tenant));
}

// POST /api/v1/tenants   {"id": "acme", "name": "Acme" (default: the id),
//                         "active": true (default), "reason": "..."}
// -> 201 Tenant (created, with Location) | 200 Tenant (updated).
// Audited with the caller, the state before and after, and the reason.
HttpResponse UpsertTenant(ApiContext& ctx, Mutex& mu, const RouteRequest& req) EXCLUDES(mu) {
  const Principal& principal = PrincipalOf(req);
  if (!principal.all_tenants) return NeedsAllTenants("creating or changing tenants");
  auto body = ParseJsonBody(req.http, /*allow_empty=*/false);
  if (!body.ok()) return StatusResponse(body.status());
  StrictObject in(*body, "request body");
  in.Require("id");
  std::optional<std::string> id = in.String("id", kMaxTenantId);
  std::optional<std::string> name = in.String("name", kMaxTenantName);
  std::optional<bool> active = in.Bool("active");
  std::optional<std::string> reason = in.String("reason", kMaxReason);
  if (id && !IsValidTenantId(*id)) in.Fail("id", "must match [a-z0-9][a-z0-9_-]{0,49}");
  if (name && name->empty()) in.Fail("name", "must not be empty");
  if (Status s = in.Finish(); !s.ok()) return StatusResponse(s);

  // One edit at a time in this process: before/after of the audit record and
  // created-or-updated stay truthful.
  MutexLock lock(mu);
  const TenantId tenant_id(*id);
  auto before = ctx.store->GetTenant(tenant_id);
  if (!before.ok() && before.status().code() != ErrorCode::kNotFound) {
    return StatusResponse(before.status());
  }
  const bool created = !before.ok();
  Tenant tenant = created ? Tenant{} : *before;
  tenant.id = tenant_id;
  if (name) {
    tenant.name = *name;
  } else if (created) {
    tenant.name = *id;
  }
  if (active) tenant.active = *active;
  if (Status s = ctx.store->UpsertTenant(tenant); !s.ok()) return StatusResponse(s);
  auto after = ctx.store->GetTenant(tenant_id);
  if (!after.ok()) return StatusResponse(after.status());

  AuditRecord audit;
  audit.actor = principal.name;
  audit.tenant = tenant_id.value;
  audit.action = created ? "tenant.create" : "tenant.update";
  audit.target = "tenant:" + tenant_id.value;
  if (!created) audit.before_json = DumpJson(TenantToJson(*before));
  audit.after_json = DumpJson(TenantToJson(*after));
  audit.reason = reason.value_or("");
  if (Status s = ctx.store->AppendAudit(audit); !s.ok()) return StatusResponse(s);

  HttpResponse response = JsonResponse(created ? 201 : 200, TenantToJson(*after));
  if (created) response.headers.emplace_back("Location", TenantUrl(tenant_id));
  return response;
}

}  // namespace

void RegisterTenantRoutes(ApiContext& ctx, Router& router) {
  auto edit_mu = std::make_shared<Mutex>();
  router.Add(HttpMethod::kGet, "/api/v1/tenants", RouteAccess::Requires(Scope::kRead),
             [&ctx](const RouteRequest& r) { return ListTenants(ctx, r); });
  router.Add(HttpMethod::kGet, "/api/v1/tenants/{id}", RouteAccess::Requires(Scope::kRead),
             [&ctx](const RouteRequest& r) { return GetTenant(ctx, r); });
  router.Add(HttpMethod::kPost, "/api/v1/tenants", RouteAccess::Requires(Scope::kAdmin),
             [&ctx, edit_mu](const RouteRequest& r) { return UpsertTenant(ctx, *edit_mu, r); });
}

}  // namespace taskengine::api
