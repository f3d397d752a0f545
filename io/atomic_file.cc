#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace msa {
namespace {

Status Failure(const std::string& path, const std::string& what, const std::string& temporary, int error) {
  return IoError(path + ": cannot " + what + " " + temporary + ": " + std::strerror(error));
}

// Flushes the temporary to disk before the rename, so that a crash cannot leave a renamed but empty file.
Status SyncFile(const std::string& path, const std::string& temporary) {
  const int fd = open(temporary.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Failure(path, "open", temporary, errno);
  const bool synced = fsync(fd) == 0;
  const int error = errno;
  close(fd);
  return synced ? Status::Ok() : Failure(path, "flush", temporary, error);
}

}  // namespace

AtomicFileSet::~AtomicFileSet() {
  for (const auto& [temporary, path] : staged_) std::remove(temporary.c_str());
}

Status AtomicFileSet::Stage(const std::string& path, std::string_view bytes) {
  return Stage(path, [bytes](std::FILE* file) {
    return bytes.empty() || std::fwrite(bytes.data(), 1, bytes.size(), file) == bytes.size();
  });
}

Status AtomicFileSet::Stage(const std::string& path, const StreamWriter& write) {
  return StageThroughTemporary(path, [&](const std::string& temporary) {
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(temporary.c_str(), "wb"), &std::fclose);
    if (!file) return Failure(path, "create", temporary, errno);
    if (!write(file.get())) return Failure(path, "write", temporary, errno);
    if (std::fflush(file.get()) != 0) return Failure(path, "flush", temporary, errno);
    if (std::fclose(file.release()) != 0) return Failure(path, "close", temporary, errno);
    return Status::Ok();
  });
}

Status AtomicFileSet::StageThroughTemporary(const std::string& path, const PathWriter& write) {
  // Recorded before anything is created, so that a partial temporary is removed whatever happens next.
  staged_.emplace_back(path + ".tmp." + std::to_string(getpid()), path);
  const std::string temporary = staged_.back().first;
  Status status = write(temporary);
  if (status.ok()) status = SyncFile(path, temporary);
  if (!status.ok()) {
    std::remove(temporary.c_str());
    staged_.pop_back();
  }
  return status;
}

Status AtomicFileSet::Commit() {
  while (!staged_.empty()) {
    const auto& [temporary, path] = staged_.front();
    if (std::rename(temporary.c_str(), path.c_str()) != 0) return Failure(path, "rename", temporary, errno);
    staged_.erase(staged_.begin());
  }
  return Status::Ok();
}

Status WriteFileAtomically(const std::string& path, std::string_view bytes) {
  AtomicFileSet file;
  MSA_RETURN_IF_ERROR(file.Stage(path, bytes));
  return file.Commit();
}

Status WriteFileAtomically(const std::string& path, const StreamWriter& write) {
  AtomicFileSet file;
  MSA_RETURN_IF_ERROR(file.Stage(path, write));
  return file.Commit();
}

Status WriteFileThroughTemporary(const std::string& path, const PathWriter& write) {
  AtomicFileSet file;
  MSA_RETURN_IF_ERROR(file.StageThroughTemporary(path, write));
  return file.Commit();
}

}  // namespace msa
