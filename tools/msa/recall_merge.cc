#include "tools/msa/recall_merge.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "io/atomic_file.h"
#include "tools/msa/recall_report.h"

namespace msa {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

struct RecallShardFiles {
  std::string dir;
  Json json;                    // recall.json, whose "shard" is {index, count, setups, backends, msa_version}
  std::vector<RecallRow> rows;  // recall.csv without its header
  int index = 0, count = 0;
};

Status ReadText(const fs::path& path, std::string* text) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return IoError(path.string() + ": cannot open: " + std::strerror(errno));
  *text = std::string((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  return Status::Ok();
}

Status ReadShard(const std::string& dir, RecallShardFiles* shard) {
  shard->dir = dir;
  const fs::path json_path = fs::path(dir) / "recall.json", csv_path = fs::path(dir) / "recall.csv";
  std::string text;
  MSA_RETURN_IF_ERROR(ReadText(json_path, &text));
  try {
    shard->json = Json::parse(text);
  } catch (const Json::parse_error& error) {
    return InvalidArgument(json_path.string() + ": not valid JSON: " + error.what());
  }
  const Json& s = shard->json.is_object() && shard->json.contains("shard") ? shard->json["shard"] : Json();
  for (const char* field : {"index", "count", "setups", "backends"}) {
    if (!s.is_object() || !s.contains(field) || !s[field].is_number_integer()) {
      return InvalidArgument(json_path.string() + ": shard." + field +
                             " missing: not written by msa recall --shard I/N");
    }
  }
  if (!s.contains("msa_version") || !s["msa_version"].is_string() || !shard->json.contains("command") ||
      !shard->json.contains("settings")) {
    return InvalidArgument(json_path.string() + ": command, settings or shard.msa_version missing");
  }
  shard->index = s["index"].get<int>();
  shard->count = s["count"].get<int>();
  if (shard->count < 1 || shard->index < 0 || shard->index >= shard->count || s["setups"].get<int64_t>() < 0 ||
      s["backends"].get<int64_t>() < 1) {
    return InvalidArgument(json_path.string() + ": shard " + std::to_string(shard->index) + "/" +
                           std::to_string(shard->count) + " with " + s["setups"].dump() + " setups, " +
                           s["backends"].dump() + " backends is not a valid shard");
  }
  MSA_RETURN_IF_ERROR(ReadText(csv_path, &text));
  std::istringstream lines(text);
  std::string line;
  if (!std::getline(lines, line) || line != kRecallColumns) {
    return InvalidArgument(csv_path.string() + ": the header is not msa recall's columns");
  }
  const size_t columns = size_t(std::count(line.begin(), line.end(), ',')) + 1;
  while (std::getline(lines, line)) {
    RecallRow cells;
    std::stringstream row(line);
    for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
    if (cells.size() != columns) {
      return InvalidArgument(csv_path.string() + ": line " + std::to_string(shard->rows.size() + 2) + " has " +
                             std::to_string(cells.size()) + " cells, the header " + std::to_string(columns));
    }
    shard->rows.push_back(std::move(cells));
  }
  const int64_t setups = s["setups"].get<int64_t>(), backends = s["backends"].get<int64_t>();
  const int64_t held = setups / shard->count + (shard->index < setups % shard->count ? 1 : 0);
  if (int64_t(shard->rows.size()) != held * backends) {
    return InvalidArgument(csv_path.string() + ": " + std::to_string(shard->rows.size()) + " rows, but shard " +
                           std::to_string(shard->index) + "/" + std::to_string(shard->count) + " of " +
                           std::to_string(setups) + " setups x " + std::to_string(backends) + " backends has " +
                           std::to_string(held * backends));
  }
  return Status::Ok();
}

// The shards agree on what was run and cover every shard once.
Status CheckShards(const std::vector<RecallShardFiles>& shards, std::map<int, const RecallShardFiles*>* by_index) {
  const RecallShardFiles& a = shards.front();
  const Json& a_shard = a.json["shard"];
  for (const RecallShardFiles& b : shards) {
    const Json& b_shard = b.json["shard"];
    const std::string pair = " (" + a.dir + " and " + b.dir + ")";
    if (b_shard["msa_version"] != a_shard["msa_version"]) {
      return InvalidArgument("shards of different msa versions: " + a_shard["msa_version"].get<std::string>() +
                             " and " + b_shard["msa_version"].get<std::string>() + pair);
    }
    if (b.json["command"] != a.json["command"] || b.json["settings"] != a.json["settings"] ||
        b_shard["setups"] != a_shard["setups"] || b_shard["backends"] != a_shard["backends"]) {
      return InvalidArgument("shards of different sweeps: " + a.json["command"].dump() + " and " +
                             b.json["command"].dump() + pair);
    }
    if (b.count != a.count) {
      return InvalidArgument("shards of different shard counts: " + std::to_string(a.index) + "/" +
                             std::to_string(a.count) + " and " + std::to_string(b.index) + "/" +
                             std::to_string(b.count) + pair);
    }
    const auto [it, inserted] = by_index->emplace(b.index, &b);
    if (!inserted) {
      return InvalidArgument("shard " + std::to_string(b.index) + "/" + std::to_string(b.count) +
                             " appears twice (overlapping shards): " + it->second->dir + " and " + b.dir);
    }
  }
  for (int index = 0; index < a.count; ++index) {
    if (by_index->count(index) == 0) {
      return InvalidArgument("shard " + std::to_string(index) + "/" + std::to_string(a.count) +
                             " is missing: no directory given holds it");
    }
  }
  return Status::Ok();
}

}  // namespace

Status MergeRecall(const std::string& out_dir, const std::vector<std::string>& shard_dirs, RecallMergeResult* result) {
  if (shard_dirs.empty()) return InvalidArgument("no shard directories given");
  std::vector<RecallShardFiles> shards(shard_dirs.size());
  for (size_t i = 0; i < shard_dirs.size(); ++i) MSA_RETURN_IF_ERROR(ReadShard(shard_dirs[i], &shards[i]));
  std::map<int, const RecallShardFiles*> by_index;
  MSA_RETURN_IF_ERROR(CheckShards(shards, &by_index));
  const Json& first = shards.front().json;
  const int64_t setups = first["shard"]["setups"].get<int64_t>(), backends = first["shard"]["backends"].get<int64_t>();
  const int count = shards.front().count;
  // Setup p is shard p % N's setup number p / N; its rows are that setup's `backends` consecutive rows.
  std::vector<RecallRow> rows;
  for (int64_t p = 0; p < setups; ++p) {
    const std::vector<RecallRow>& from = by_index[int(p % count)]->rows;
    const int64_t first_row = (p / count) * backends;
    rows.insert(rows.end(), from.begin() + first_row, from.begin() + first_row + backends);
  }
  std::error_code error;
  fs::create_directories(out_dir, error);
  if (error) return IoError(out_dir + ": cannot create it: " + error.message());
  AtomicFileSet files;
  MSA_RETURN_IF_ERROR(files.Stage((fs::path(out_dir) / "recall.csv").string(), RecallCsv(rows)));
  MSA_RETURN_IF_ERROR(files.Stage((fs::path(out_dir) / "recall.json").string(),
                                  RecallJson(first["command"].get<std::string>(), first["settings"], rows)));
  MSA_RETURN_IF_ERROR(files.Commit());
  *result = RecallMergeResult{setups, int64_t(rows.size()), count, RecallRowsPassed(rows)};
  return Status::Ok();
}

}  // namespace msa
