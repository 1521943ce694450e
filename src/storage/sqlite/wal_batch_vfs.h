// A SQLite VFS over the default one that writes a transaction's WAL frames
// with one system call instead of two per frame.
//
// Why: SQLite appends each frame of a commit to the WAL with two pwrite(2)
// calls (its 24-byte header, then the page), and on a virtual machine a
// system call is dear. docs/architecture.md ("WAL frames in one write")
// gives the calls saved and the throughput gained, with their commands.
//
// How: while batching is on for a connection, appends to its WAL are kept
// in memory, contiguous, and written in one call right after the last frame
// of each commit (its commit frame: a frame header whose field "database
// size after the commit" is not zero, then that frame's page), or earlier
// when something else touches the file first: a sync, a read of a range not
// yet written, a truncation, a size query, a write elsewhere, or 1 MiB
// gathered. SQLite writes a commit's frames, syncs them when its synchronous
// mode asks, and only then makes the commit visible to other connections
// (the wal-index): the data is in the file before that, with or without a
// sync. A crash loses only frames of a commit that had not synced, as
// without the VFS. Between transactions the VFS holds nothing, or only
// frames a rolled-back transaction spilled (past the last commit, never
// read); the next write sends them first.
#pragma once

#include <cstdint>

struct sqlite3;

namespace taskengine::sqlite {

// The VFS's name (sqlite3_open_v2's zVfs). Registered, not as the default,
// by RegisterWalBatchVfs.
inline constexpr char kWalBatchVfs[] = "taskengine-wal-batch";

// Registers the VFS over SQLite's default one. Thread-safe; once per
// process. False when SQLite refused it.
bool RegisterWalBatchVfs();

// Turns batching of `db`'s WAL appends on or off (its main database must
// have been opened with kWalBatchVfs). Call it on the thread that uses `db`,
// between transactions. Off until turned on. SQLITE_OK, or SQLITE_MISUSE for
// a connection of another VFS.
int SetWalBatching(sqlite3* db, bool on);

// Process-wide counts, for tests and benchmarks: writes SQLite asked of a
// WAL file of this VFS, and writes made of them.
struct WalBatchCounts {
  std::uint64_t asked = 0;
  std::uint64_t made = 0;
};
WalBatchCounts WalBatchCountsNow();

}  // namespace taskengine::sqlite
