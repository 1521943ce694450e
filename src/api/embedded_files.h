// Files embedded into the binary at build time (cmake/EmbedFiles.cmake):
// docs/openapi.json and the dashboard's pages, scripts and styles. Each table
// is generated; the bytes live in read-only data for the life of the process.
#pragma once

#include <span>
#include <string_view>

namespace taskengine::api {

// One embedded file. Immutable; every view points into static storage.
struct EmbeddedFile {
  std::string_view name;          // as served, e.g. "app.js"
  std::string_view bytes;         // the file's content
  std::string_view content_type;  // from the extension, e.g. "text/javascript; charset=utf-8"
  std::string_view etag;          // "\"<sha256 hex of bytes>\""
};

// The file named `name` in `files`, or nullptr.
const EmbeddedFile* FindEmbeddedFile(std::span<const EmbeddedFile> files, std::string_view name);

// Generated tables.
std::span<const EmbeddedFile> OpenApiFiles();    // openapi.json
std::span<const EmbeddedFile> DashboardFiles();  // dashboard/: index.html, login.html, assets

}  // namespace taskengine::api
