// MergeGolden: shard records of one suite into the MANIFEST.json that the whole run would write.
#include <unistd.h>

#include <filesystem>
#include <map>
#include <utility>

#include "oracle/golden.h"
#include "oracle/golden_files.h"

namespace msa {
namespace {

namespace fs = std::filesystem;

struct FoundRecord {
  fs::path dir, path;
  GoldenShardRecord record;
};

// Every record in every directory; a directory without one is an error.
Status ReadRecords(const std::vector<std::string>& shard_dirs, std::vector<FoundRecord>* found) {
  if (shard_dirs.empty()) return InvalidArgument("no shard directories given");
  for (const std::string& dir : shard_dirs) {
    std::error_code error;
    if (!fs::is_directory(dir, error)) return InvalidArgument(dir + ": not a directory");
    const std::vector<fs::path> paths = FindGoldenShardRecords(dir);
    if (paths.empty()) {
      return InvalidArgument(dir + ": holds no SHARD-<I>-of-<N>.json (not written by msa golden generate --shard)");
    }
    for (const fs::path& path : paths) {
      FoundRecord entry{dir, path, {}};
      MSA_RETURN_IF_ERROR(ReadGoldenShardRecord(path, &entry.record));
      found->push_back(std::move(entry));
    }
  }
  return Status::Ok();
}

// The records agree on what was generated, cover every shard once, and each is complete.
Status CheckCoverage(const std::vector<FoundRecord>& found, std::map<int, const FoundRecord*>* by_index) {
  const FoundRecord& first = found.front();
  const GoldenShardRecord& a = first.record;
  for (const FoundRecord& other : found) {
    const GoldenShardRecord& b = other.record;
    const std::string pair = first.path.string() + " and " + other.path.string();
    if (b.msa_version != a.msa_version) {
      return InvalidArgument("shards of different msa versions: " + a.msa_version + " and " + b.msa_version + " (" +
                             pair + ")");
    }
    if (b.suite != a.suite || b.suite_sha256 != a.suite_sha256 || b.case_count != a.case_count) {
      return InvalidArgument("shards of different suites or case definitions: " + a.suite + " (" +
                             std::to_string(a.case_count) + " cases, sha256 " + a.suite_sha256.substr(0, 12) +
                             ") and " + b.suite + " (" + std::to_string(b.case_count) + " cases, sha256 " +
                             b.suite_sha256.substr(0, 12) + ") (" + pair + ")");
    }
    if (b.shard.count != a.shard.count) {
      return InvalidArgument("shards of different shard counts: " + a.shard.ToString() + " and " + b.shard.ToString() +
                             " (" + pair + ")");
    }
    if (!b.complete) {
      return InvalidArgument(
          other.path.string() + ": shard " + b.shard.ToString() + " is incomplete (" + std::to_string(b.cases.size()) +
          " cases recorded): finish it with msa golden generate --shard " + b.shard.ToString() + " --resume");
    }
    const auto [it, inserted] = by_index->emplace(b.shard.index, &other);
    if (!inserted) {
      return InvalidArgument("shard " + b.shard.ToString() + " appears twice (overlapping shards): " +
                             it->second->path.string() + " and " + other.path.string());
    }
  }
  for (int index = 0; index < a.shard.count; ++index) {
    if (by_index->count(index) == 0) {
      return InvalidArgument("shard " + Shard{index, a.shard.count}.ToString() + " is missing: no directory given " +
                             "holds " + GoldenShardRecordName(Shard{index, a.shard.count}));
    }
  }
  return Status::Ok();
}

// Puts a case directory from `from` into `to`/<name> whole: files hard-linked (else copied) into a temporary
// directory, renamed into place.
Status PlaceCase(const fs::path& from, const fs::path& to, const GoldenEntry& entry) {
  const fs::path partial = to / ("." + entry.name + ".partial." + std::to_string(getpid()));
  std::error_code error;
  fs::remove_all(partial, error);
  fs::create_directories(partial, error);
  for (const GoldenFileHash& file : entry.files) {
    if (error) break;
    fs::create_hard_link(from / entry.name / file.file, partial / file.file, error);
    if (error) {
      error.clear();
      fs::copy_file(from / entry.name / file.file, partial / file.file, error);
    }
  }
  if (!error) fs::remove_all(to / entry.name, error);
  if (!error) fs::rename(partial, to / entry.name, error);
  if (!error) return Status::Ok();
  const std::string message = error.message();
  fs::remove_all(partial, error);
  return IoError((to / entry.name).string() + ": cannot place the case from " + from.string() + ": " + message);
}

}  // namespace

Status MergeGolden(const std::string& out_dir, const std::vector<std::string>& shard_dirs, std::string* summary) {
  std::vector<FoundRecord> found;
  MSA_RETURN_IF_ERROR(ReadRecords(shard_dirs, &found));
  std::map<int, const FoundRecord*> by_index;
  MSA_RETURN_IF_ERROR(CheckCoverage(found, &by_index));
  const GoldenShardRecord& first = found.front().record;

  // Every case of the suite once, from its shard, its files as recorded.
  std::vector<std::pair<const FoundRecord*, const GoldenEntry*>> cases(size_t(first.case_count), {nullptr, nullptr});
  for (const auto& [index, source] : by_index) {
    for (const GoldenShardRecord::Case& done : source->record.cases)
      cases[size_t(done.position)] = {source, &done.entry};
  }
  for (size_t p = 0; p < cases.size(); ++p) {
    if (cases[p].first != nullptr) continue;
    const Shard owner{int(p % size_t(first.shard.count)), first.shard.count};
    return InvalidArgument(by_index[owner.index]->path.string() + ": case " + std::to_string(p) + " of " +
                           std::to_string(cases.size()) + " is missing from shard " + owner.ToString());
  }
  for (const auto& [source, entry] : cases) {
    if (const std::string problems = CheckGoldenFiles(source->dir, *entry); !problems.empty()) {
      return InvalidArgument(source->path.string() + ": " + problems);
    }
  }
  std::error_code error;
  fs::create_directories(out_dir, error);
  if (error) return IoError(out_dir + ": cannot create the directory: " + error.message());
  const fs::path out = fs::canonical(out_dir, error);
  int placed = 0;
  std::vector<GoldenEntry> entries;
  for (const auto& [source, entry] : cases) {
    if (fs::canonical(source->dir, error) != out && !CheckGoldenFiles(out, *entry).empty()) {
      MSA_RETURN_IF_ERROR(PlaceCase(source->dir, out, *entry));
      ++placed;
    }
    entries.push_back(*entry);
  }
  MSA_RETURN_IF_ERROR(WriteGoldenManifest(out, first.msa_version, first.suite, entries));
  std::map<std::string, int> computed_by;
  for (const FoundRecord& source : found) {
    for (const GoldenShardRecord::Case& done : source.record.cases) ++computed_by[done.computed_by];
  }
  std::string backends;
  for (const auto& [name, count] : computed_by) {
    backends += (backends.empty() ? "" : ", ") + name + " " + std::to_string(count);
  }
  *summary = "suite " + first.suite + ": " + std::to_string(cases.size()) + " cases from " +
             std::to_string(first.shard.count) + " shards (computed by " + backends + "), " + std::to_string(placed) +
             " case directories placed into " + out_dir;
  return Status::Ok();
}

}  // namespace msa
