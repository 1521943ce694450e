#include "storage/sqlite/wal_batch_vfs.h"

#include <sqlite3.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>

namespace taskengine::sqlite {
namespace {

// Appends held past this size are written at once (a large transaction).
constexpr std::size_t kMaxHeld = std::size_t{1} << 20;
// The most one write passes to the inner VFS: SQLite's unix VFS takes at
// most 128 KiB - 1 in one call (it masks the length to 17 bits).
constexpr std::size_t kMaxWrite = 124 * 1024;
constexpr std::uint32_t kDbMagic = 0x54455742;  // "TEWB"
// A WAL frame's header: page number, database size after the commit (not
// zero only in a commit frame), salts and checksums (SQLite's file format).
constexpr int kFrameHeaderSize = 24;

// The database size in pages after the commit, from a frame header (a
// big-endian 32-bit field at offset 4): not zero for a commit frame.
std::uint32_t CommitSize(const void* header) {
  const auto* b = static_cast<const unsigned char*>(header) + 4;
  return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) |
         std::uint32_t{b[3]};
}

std::atomic<std::uint64_t> g_asked{0};
std::atomic<std::uint64_t> g_made{0};

sqlite3_vfs* g_inner = nullptr;  // the default VFS at registration
sqlite3_vfs g_vfs;

constexpr int RoundUp16(int n) { return (n + 15) & ~15; }

// What the VFS keeps beside a main database file, which is the inner VFS's
// own file (its methods unchanged) placed at the start of the memory SQLite
// gives xOpen; this follows it (ExtraOf).
struct DbExtra {
  std::uint32_t magic = kDbMagic;
  bool batching = false;
};

int ExtraOffset() { return RoundUp16(g_inner->szOsFile); }

DbExtra* ExtraOf(sqlite3_file* main) {
  auto* extra = reinterpret_cast<DbExtra*>(reinterpret_cast<char*>(main) + ExtraOffset());
  return extra->magic == kDbMagic ? extra : nullptr;
}

// A WAL file: this header, then the inner VFS's file.
struct WalFile {
  sqlite3_file base;  // pMethods = &kWalMethods
  sqlite3_file* inner = nullptr;
  DbExtra* db = nullptr;  // null when the main file was not found
  std::string held;       // appends not yet written, from held_at on
  sqlite3_int64 held_at = 0;
  bool commit_frame = false;  // the last append held was a commit frame's header

  bool Batching() const { return db != nullptr && db->batching; }
  sqlite3_int64 HeldEnd() const { return held_at + static_cast<sqlite3_int64>(held.size()); }

  int Flush() {
    int rc = SQLITE_OK;
    for (std::size_t done = 0; done < held.size() && rc == SQLITE_OK;) {
      const std::size_t n = std::min(kMaxWrite, held.size() - done);
      rc = inner->pMethods->xWrite(inner, held.data() + done, static_cast<int>(n),
                                   held_at + static_cast<sqlite3_int64>(done));
      g_made.fetch_add(1, std::memory_order_relaxed);
      done += n;
    }
    // On an error SQLite fails the commit (its frames are not counted);
    // they are not offered again.
    held.clear();
    commit_frame = false;
    return rc;
  }
};

constexpr int WalHeaderSize() { return RoundUp16(static_cast<int>(sizeof(WalFile))); }

WalFile* Wal(sqlite3_file* f) { return reinterpret_cast<WalFile*>(f); }

int WalClose(sqlite3_file* f) {
  WalFile* w = Wal(f);
  const int flushed = w->Flush();
  const int rc = w->inner->pMethods->xClose(w->inner);
  w->~WalFile();
  return flushed != SQLITE_OK ? flushed : rc;
}

int WalRead(sqlite3_file* f, void* out, int n, sqlite3_int64 offset) {
  WalFile* w = Wal(f);
  if (!w->held.empty() && offset < w->HeldEnd() && offset + n > w->held_at) {
    if (int rc = w->Flush(); rc != SQLITE_OK) return rc;
  }
  return w->inner->pMethods->xRead(w->inner, out, n, offset);
}

int WalWrite(sqlite3_file* f, const void* data, int n, sqlite3_int64 offset) {
  WalFile* w = Wal(f);
  g_asked.fetch_add(1, std::memory_order_relaxed);
  if (!w->held.empty() && offset != w->HeldEnd()) {
    if (int rc = w->Flush(); rc != SQLITE_OK) return rc;
  }
  if (w->Batching()) {
    if (w->held.empty()) w->held_at = offset;
    try {
      w->held.append(static_cast<const char*>(data), static_cast<std::size_t>(n));
      // After a commit frame's header comes its page, the commit's last
      // write: SQLite may make the commit visible next, without a sync.
      const bool ends_commit = w->commit_frame;
      w->commit_frame = n == kFrameHeaderSize && CommitSize(data) != 0;
      return ends_commit || w->held.size() >= kMaxHeld ? w->Flush() : SQLITE_OK;
    } catch (const std::bad_alloc&) {
      // Written through below (append changed nothing).
    }
  }
  if (int rc = w->Flush(); rc != SQLITE_OK) return rc;
  g_made.fetch_add(1, std::memory_order_relaxed);
  return w->inner->pMethods->xWrite(w->inner, data, n, offset);
}

int WalTruncate(sqlite3_file* f, sqlite3_int64 size) {
  WalFile* w = Wal(f);
  if (int rc = w->Flush(); rc != SQLITE_OK) return rc;
  return w->inner->pMethods->xTruncate(w->inner, size);
}

int WalSync(sqlite3_file* f, int flags) {
  WalFile* w = Wal(f);
  if (int rc = w->Flush(); rc != SQLITE_OK) return rc;
  return w->inner->pMethods->xSync(w->inner, flags);
}

int WalFileSize(sqlite3_file* f, sqlite3_int64* size) {
  WalFile* w = Wal(f);
  if (int rc = w->Flush(); rc != SQLITE_OK) return rc;
  return w->inner->pMethods->xFileSize(w->inner, size);
}

int WalLock(sqlite3_file* f, int lock) {
  return Wal(f)->inner->pMethods->xLock(Wal(f)->inner, lock);
}

int WalUnlock(sqlite3_file* f, int lock) {
  return Wal(f)->inner->pMethods->xUnlock(Wal(f)->inner, lock);
}

int WalCheckReservedLock(sqlite3_file* f, int* out) {
  return Wal(f)->inner->pMethods->xCheckReservedLock(Wal(f)->inner, out);
}

int WalFileControl(sqlite3_file* f, int op, void* arg) {
  WalFile* w = Wal(f);
  if (int rc = w->Flush(); rc != SQLITE_OK) return rc;
  return w->inner->pMethods->xFileControl(w->inner, op, arg);
}

int WalSectorSize(sqlite3_file* f) { return Wal(f)->inner->pMethods->xSectorSize(Wal(f)->inner); }

int WalDeviceCharacteristics(sqlite3_file* f) {
  return Wal(f)->inner->pMethods->xDeviceCharacteristics(Wal(f)->inner);
}

// Version 1: SQLite maps no shared memory and no pages of a WAL file.
sqlite3_io_methods MakeWalMethods() {
  sqlite3_io_methods m{};
  m.iVersion = 1;
  m.xClose = WalClose;
  m.xRead = WalRead;
  m.xWrite = WalWrite;
  m.xTruncate = WalTruncate;
  m.xSync = WalSync;
  m.xFileSize = WalFileSize;
  m.xLock = WalLock;
  m.xUnlock = WalUnlock;
  m.xCheckReservedLock = WalCheckReservedLock;
  m.xFileControl = WalFileControl;
  m.xSectorSize = WalSectorSize;
  m.xDeviceCharacteristics = WalDeviceCharacteristics;
  return m;
}
const sqlite3_io_methods kWalMethods = MakeWalMethods();

int Open(sqlite3_vfs*, const char* name, sqlite3_file* f, int flags, int* out_flags) {
  if ((flags & SQLITE_OPEN_WAL) == 0) {
    // The inner VFS's own file in SQLite's memory; a main database gets its
    // DbExtra after it.
    const int rc = g_inner->xOpen(g_inner, name, f, flags, out_flags);
    if (rc == SQLITE_OK && (flags & SQLITE_OPEN_MAIN_DB) != 0) {
      new (reinterpret_cast<char*>(f) + ExtraOffset()) DbExtra();
    }
    return rc;
  }
  auto* w = new (f) WalFile();
  w->base.pMethods = nullptr;  // until the inner file is open: SQLite skips xClose
  w->inner = reinterpret_cast<sqlite3_file*>(reinterpret_cast<char*>(f) + WalHeaderSize());
  const int rc = g_inner->xOpen(g_inner, name, w->inner, flags, out_flags);
  if (rc != SQLITE_OK) {
    w->~WalFile();
    return rc;
  }
  w->base.pMethods = &kWalMethods;
  if (name != nullptr) {
    if (sqlite3_file* main = sqlite3_database_file_object(name)) {
      w->db = ExtraOf(main);
    }
  }
  return SQLITE_OK;
}

// The rest is the inner VFS's.
int Delete(sqlite3_vfs*, const char* name, int sync_dir) {
  return g_inner->xDelete(g_inner, name, sync_dir);
}
int Access(sqlite3_vfs*, const char* name, int flags, int* out) {
  return g_inner->xAccess(g_inner, name, flags, out);
}
int FullPathname(sqlite3_vfs*, const char* name, int n, char* out) {
  return g_inner->xFullPathname(g_inner, name, n, out);
}
void* DlOpen(sqlite3_vfs*, const char* name) { return g_inner->xDlOpen(g_inner, name); }
void DlError(sqlite3_vfs*, int n, char* out) { g_inner->xDlError(g_inner, n, out); }
void (*DlSym(sqlite3_vfs*, void* lib, const char* sym))(void) {
  return g_inner->xDlSym(g_inner, lib, sym);
}
void DlClose(sqlite3_vfs*, void* lib) { g_inner->xDlClose(g_inner, lib); }
int Randomness(sqlite3_vfs*, int n, char* out) { return g_inner->xRandomness(g_inner, n, out); }
int Sleep(sqlite3_vfs*, int us) { return g_inner->xSleep(g_inner, us); }
int CurrentTime(sqlite3_vfs*, double* out) { return g_inner->xCurrentTime(g_inner, out); }
int GetLastError(sqlite3_vfs*, int n, char* out) { return g_inner->xGetLastError(g_inner, n, out); }
int CurrentTimeInt64(sqlite3_vfs*, sqlite3_int64* out) {
  return g_inner->xCurrentTimeInt64(g_inner, out);
}

bool Register() {
  if (sqlite3_initialize() != SQLITE_OK) return false;
  g_inner = sqlite3_vfs_find(nullptr);
  if (g_inner == nullptr || g_inner->iVersion < 2 || g_inner->xCurrentTimeInt64 == nullptr) {
    return false;
  }
  g_vfs = sqlite3_vfs{};
  g_vfs.iVersion = 2;
  // The larger of: a WAL file's header and the inner file; the inner file
  // and a main database's DbExtra.
  g_vfs.szOsFile = std::max(WalHeaderSize(), RoundUp16(static_cast<int>(sizeof(DbExtra)))) +
                   RoundUp16(g_inner->szOsFile);
  g_vfs.mxPathname = g_inner->mxPathname;
  g_vfs.zName = kWalBatchVfs;
  g_vfs.xOpen = Open;
  g_vfs.xDelete = Delete;
  g_vfs.xAccess = Access;
  g_vfs.xFullPathname = FullPathname;
  g_vfs.xDlOpen = DlOpen;
  g_vfs.xDlError = DlError;
  g_vfs.xDlSym = DlSym;
  g_vfs.xDlClose = DlClose;
  g_vfs.xRandomness = Randomness;
  g_vfs.xSleep = Sleep;
  g_vfs.xCurrentTime = CurrentTime;
  g_vfs.xGetLastError = GetLastError;
  g_vfs.xCurrentTimeInt64 = CurrentTimeInt64;
  return sqlite3_vfs_register(&g_vfs, /*makeDflt=*/0) == SQLITE_OK;
}

}  // namespace

bool RegisterWalBatchVfs() {
  static const bool registered = Register();
  return registered;
}

int SetWalBatching(sqlite3* db, bool on) {
  sqlite3_vfs* vfs = nullptr;
  if (sqlite3_file_control(db, "main", SQLITE_FCNTL_VFS_POINTER, &vfs) != SQLITE_OK ||
      vfs != &g_vfs) {
    return SQLITE_MISUSE;
  }
  sqlite3_file* main = nullptr;
  if (sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &main) != SQLITE_OK ||
      main == nullptr) {
    return SQLITE_MISUSE;
  }
  DbExtra* extra = ExtraOf(main);
  if (extra == nullptr) return SQLITE_MISUSE;
  extra->batching = on;
  return SQLITE_OK;
}

WalBatchCounts WalBatchCountsNow() {
  return WalBatchCounts{g_asked.load(std::memory_order_relaxed),
                        g_made.load(std::memory_order_relaxed)};
}

}  // namespace taskengine::sqlite
