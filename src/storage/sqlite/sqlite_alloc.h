// SQLite's memory allocator (SQLITE_CONFIG_MALLOC): small blocks come from
// free lists of the calling thread, larger ones from malloc.
//
// Why: Debian builds SQLite without its lookaside allocator
// (SQLITE_OMIT_LOOKASIDE), so each cursor, record and register buffer a
// statement uses is a malloc and a free. A writer transaction frees hundreds
// of blocks of a few sizes at once, more than glibc keeps in its per-thread
// cache, and frees past it take its slow path (docs/architecture.md gives
// the instructions per job with and without this allocator).
//
// A thread keeps at most kMaxCachedPerClass free blocks of each size class;
// a block may be freed by another thread than the one that allocated it
// (it joins the freeing thread's list). A thread's free blocks go back to
// malloc when it exits. Under AddressSanitizer and ThreadSanitizer SQLite
// keeps malloc, so that a use of freed SQLite memory is still caught.
#pragma once

#include <cstddef>

namespace taskengine::sqlite {

// Installs the allocator. Must run before SQLite initializes (before the
// first connection of the process); later it changes nothing and answers
// false. Safe to call more than once.
bool InstallAllocator();

// The allocator's functions, for its tests.
namespace alloc_internal {
void* Malloc(int bytes);
void Free(void* p);
void* Realloc(void* p, int bytes);
int Size(void* p);
int Roundup(int bytes);
// Free blocks the calling thread holds (all classes).
std::size_t CachedBlocks();
// True when this library was built with ASan or TSan: SQLite keeps malloc
// (a test's own build flags may differ from the library's).
bool SanitizerKeepsMalloc();
inline constexpr int kMaxCachedPerClass = 64;
}  // namespace alloc_internal

}  // namespace taskengine::sqlite
