#include "api/embedded_files.h"

#include "api/api.h"
#include "taskengine/status.h"

namespace taskengine::api {

const EmbeddedFile* FindEmbeddedFile(std::span<const EmbeddedFile> files, std::string_view name) {
  for (const EmbeddedFile& f : files) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

std::string_view OpenApiDocument() {
  const EmbeddedFile* doc = FindEmbeddedFile(OpenApiFiles(), "openapi.json");
  TE_CHECK(doc != nullptr);
  return doc->bytes;
}

}  // namespace taskengine::api
