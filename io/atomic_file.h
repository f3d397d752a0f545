// Files that appear complete or not at all. Each file is written under a temporary name in its own directory
// (<path>.tmp.<pid>, so the rename never crosses a file system), flushed to disk, then renamed over `path`.
// On any failure the temporary is removed and `path` keeps what it held before (or stays absent).
// Errors are kIoError and name `path`, the temporary and the OS error.
#ifndef MSA_IO_ATOMIC_FILE_H_
#define MSA_IO_ATOMIC_FILE_H_

#include <cstdio>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "msa/status.h"

namespace msa {

// Writes the file's bytes to an open stream; returns false when a write fails (errno says why).
using StreamWriter = std::function<bool(std::FILE* file)>;
// Creates the file at `temporary` by itself (for writers that take a file name, such as an external program).
using PathWriter = std::function<Status(const std::string& temporary)>;

// One file: `bytes`, or what `write` produces.
Status WriteFileAtomically(const std::string& path, std::string_view bytes);
Status WriteFileAtomically(const std::string& path, const StreamWriter& write);
Status WriteFileThroughTemporary(const std::string& path, const PathWriter& write);

// Several files that become visible together: every file is staged first, and Commit renames them into place,
// in the order staged, only once all were written. Temporaries not committed are removed on destruction.
class AtomicFileSet {
 public:
  AtomicFileSet() = default;
  AtomicFileSet(const AtomicFileSet&) = delete;
  AtomicFileSet& operator=(const AtomicFileSet&) = delete;
  ~AtomicFileSet();

  Status Stage(const std::string& path, std::string_view bytes);
  Status Stage(const std::string& path, const StreamWriter& write);
  Status StageThroughTemporary(const std::string& path, const PathWriter& write);
  // A file whose staging failed is not part of the set (its temporary is already removed).
  Status Commit();

 private:
  std::vector<std::pair<std::string, std::string>> staged_;  // (temporary, path)
};

}  // namespace msa

#endif  // MSA_IO_ATOMIC_FILE_H_
