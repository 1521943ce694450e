#include "storage/sqlite/sqlite_alloc.h"

#include <sqlite3.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iterator>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TE_SQLITE_KEEPS_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TE_SQLITE_KEEPS_MALLOC 1
#endif
#endif

namespace taskengine::sqlite {
namespace alloc_internal {
namespace {

// Usable bytes of each size class; larger blocks are malloc's alone.
constexpr int kClassBytes[] = {32, 64, 128, 256, 512, 1024, 2048};
constexpr int kClasses = static_cast<int>(std::size(kClassBytes));
constexpr std::int32_t kLarge = kClasses;

// Before each block: its usable size and class. 16 bytes keep malloc's
// alignment for the block itself.
struct alignas(16) Header {
  std::int64_t bytes;
  std::int32_t size_class;
};
static_assert(sizeof(Header) == 16);

Header* HeaderOf(void* p) { return reinterpret_cast<Header*>(static_cast<char*>(p) - 16); }
void* BlockOf(Header* h) { return reinterpret_cast<char*>(h) + 16; }

int ClassOf(int bytes) {
  for (int c = 0; c < kClasses; ++c) {
    if (bytes <= kClassBytes[c]) return c;
  }
  return kLarge;
}

struct FreeBlock {
  FreeBlock* next;
};

// A thread's free lists. Trivially destructible, so that a free during the
// thread's exit, after the lists went back to malloc, still finds it.
struct ThreadCache {
  FreeBlock* head[kClasses];
  int count[kClasses];
  bool registered;  // the Flusher of this thread exists
  bool exited;      // the lists went back to malloc: cache nothing more
};
thread_local ThreadCache cache{};

// Gives a thread's free blocks back to malloc when the thread exits.
struct Flusher {
  ~Flusher() {
    for (int c = 0; c < kClasses; ++c) {
      while (FreeBlock* b = cache.head[c]) {
        cache.head[c] = b->next;
        std::free(HeaderOf(b));
      }
      cache.count[c] = 0;
    }
    cache.exited = true;
  }
};

void Register() {
  thread_local Flusher flusher;
  (void)flusher;
  cache.registered = true;
}

void* NewBlock(int bytes, std::int32_t size_class) {
  void* raw = std::malloc(sizeof(Header) + static_cast<std::size_t>(bytes));
  if (raw == nullptr) return nullptr;
  auto* h = static_cast<Header*>(raw);
  h->bytes = bytes;
  h->size_class = size_class;
  return BlockOf(h);
}

int Init(void*) { return SQLITE_OK; }
void Shutdown(void*) {}

}  // namespace

void* Malloc(int bytes) {
  if (bytes <= 0) bytes = 1;
  const int c = ClassOf(bytes);
  if (c == kLarge) return NewBlock(bytes, kLarge);
  if (FreeBlock* b = cache.head[c]) {
    cache.head[c] = b->next;
    --cache.count[c];
    return b;
  }
  return NewBlock(kClassBytes[c], c);
}

void Free(void* p) {
  if (p == nullptr) return;
  Header* h = HeaderOf(p);
  const std::int32_t c = h->size_class;
  if (c != kLarge && !cache.exited && cache.count[c] < kMaxCachedPerClass) {
    if (!cache.registered) Register();
    auto* b = static_cast<FreeBlock*>(p);
    b->next = cache.head[c];
    cache.head[c] = b;
    ++cache.count[c];
    return;
  }
  std::free(h);
}

int Size(void* p) { return p == nullptr ? 0 : static_cast<int>(HeaderOf(p)->bytes); }

void* Realloc(void* p, int bytes) {
  if (p == nullptr) return Malloc(bytes);
  if (bytes <= 0) bytes = 1;
  Header* h = HeaderOf(p);
  if (h->size_class == kLarge && ClassOf(bytes) == kLarge) {
    void* raw = std::realloc(h, sizeof(Header) + static_cast<std::size_t>(bytes));
    if (raw == nullptr) return nullptr;
    static_cast<Header*>(raw)->bytes = bytes;
    return BlockOf(static_cast<Header*>(raw));
  }
  if (h->size_class != kLarge && bytes <= h->bytes) return p;
  void* q = Malloc(bytes);
  if (q == nullptr) return nullptr;
  std::memcpy(q, p, static_cast<std::size_t>(std::min<std::int64_t>(h->bytes, bytes)));
  Free(p);
  return q;
}

int Roundup(int bytes) {
  const int c = ClassOf(bytes);
  if (c != kLarge) return kClassBytes[c];
  return (bytes + 7) & ~7;
}

std::size_t CachedBlocks() {
  std::size_t n = 0;
  for (int c = 0; c < kClasses; ++c) n += static_cast<std::size_t>(cache.count[c]);
  return n;
}

bool SanitizerKeepsMalloc() {
#ifdef TE_SQLITE_KEEPS_MALLOC
  return true;
#else
  return false;
#endif
}

}  // namespace alloc_internal

bool InstallAllocator() {
  if (alloc_internal::SanitizerKeepsMalloc()) return false;
  static const bool installed = [] {
    static const sqlite3_mem_methods methods = {alloc_internal::Malloc,   alloc_internal::Free,
                                                alloc_internal::Realloc,  alloc_internal::Size,
                                                alloc_internal::Roundup,  alloc_internal::Init,
                                                alloc_internal::Shutdown, nullptr};
    return sqlite3_config(SQLITE_CONFIG_MALLOC, &methods) == SQLITE_OK;
  }();
  return installed;
}

}  // namespace taskengine::sqlite
