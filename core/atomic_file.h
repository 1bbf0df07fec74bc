#pragma once
// defines: write_file_atomically — replace a file so that a crash or an error at any moment
//          leaves either the old file or the complete new one, never a torn mix;
//          check_writable_destination — fail early for a file a program will write later.
#include <cstddef>
#include <functional>
#include <string>

namespace sg {

// Appends bytes to the file being written; throws sg::Error when the write fails.
using ByteWriter = std::function<void(const void* data, size_t nbytes)>;

// Calls `fill` to write the new contents into "<path>.tmp.<pid>" (same directory, so the rename
// cannot cross file systems), flushes and fsyncs it, renames it over `path`, then fsyncs the
// directory so the rename itself survives a power cut. If anything fails — `fill` throwing
// included — the temporary file is removed, `path` keeps its old contents, and an sg::Error
// naming `path` and the cause is thrown (an exception not derived from std::exception passes
// through unchanged, after the same clean-up). A writer killed before its rename leaves its
// temporary file; the next write of `path` removes those whose process no longer exists.
void write_file_atomically(const std::string& path, const std::function<void(const ByteWriter& write)>& fill);

// Throws an sg::Error beginning with `what` (a flag or config key) unless `path`'s directory
// exists and is writable and `path` is not a directory; an empty path passes. For a file a run
// writes later (a checkpoint after the first epoch): a typo should cost a second, not an epoch.
void check_writable_destination(const std::string& what, const std::string& path);

}  // namespace sg
