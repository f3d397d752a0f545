#include "oracle/shard.h"

#include <charconv>

namespace msa {
namespace {

// Where a launcher keeps this process's rank and the job's size. Tried in this order: the most specific first,
// so that torchrun or mpirun inside a Slurm allocation (which sets SLURM_PROCID too) reads its own variables.
struct ShardLauncher {
  const char* name;
  const char* rank;   // the variable holding this process's rank (or array task id)
  const char* size;   // the variable holding the number of processes; null: --shard-count gives it
  const char* first;  // the first array task id (rank = (id - first) / step); null: 0
  const char* step;   // the array's step; null: 1
};

constexpr ShardLauncher kShardLaunchers[] = {
    {"Slurm array", "SLURM_ARRAY_TASK_ID", "SLURM_ARRAY_TASK_COUNT", "SLURM_ARRAY_TASK_MIN", "SLURM_ARRAY_TASK_STEP"},
    {"torchrun", "RANK", "WORLD_SIZE", nullptr, nullptr},
    {"Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", nullptr, nullptr},
    {"Kubernetes indexed Job", "JOB_COMPLETION_INDEX", nullptr, nullptr, nullptr},
    {"Slurm", "SLURM_PROCID", "SLURM_NTASKS", nullptr, nullptr},
};

bool ParseInt(std::string_view text, int64_t* value) {
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), *value);
  return !text.empty() && error == std::errc() && end == text.data() + text.size();
}

// The integer value of `name`, or `fallback` when unset; an error names the variable and its text.
Status ReadVariable(const EnvironmentLookup& lookup, const char* name, int64_t fallback, int64_t* value) {
  const char* text = name == nullptr ? nullptr : lookup(name);
  if (text == nullptr) {
    *value = fallback;
    return Status::Ok();
  }
  if (!ParseInt(text, value)) {
    return InvalidArgument("--shard auto: " + std::string(name) + "=" + text + " is not an integer");
  }
  return Status::Ok();
}

}  // namespace

Status ParseShard(const std::string& flag, std::string_view text, Shard* shard) {
  const size_t slash = text.find('/');
  int64_t index = 0, count = 0;
  if (slash == std::string_view::npos || !ParseInt(text.substr(0, slash), &index) ||
      !ParseInt(text.substr(slash + 1), &count)) {
    return InvalidArgument(flag + " " + std::string(text) + ": must be I/N (shard I of N, counted from 0), or auto");
  }
  if (count < 1 || count > kMaxShards) {
    return InvalidArgument(flag + " " + std::string(text) + ": N must be in [1, " + std::to_string(kMaxShards) + "]");
  }
  if (index < 0 || index >= count) {
    return InvalidArgument(flag + " " + std::string(text) + ": I must be in [0, N-1] = [0, " +
                           std::to_string(count - 1) + "]");
  }
  shard->index = int(index);
  shard->count = int(count);
  return Status::Ok();
}

Status ShardFromEnvironment(const EnvironmentLookup& lookup, int count_flag, Shard* shard, std::string* source) {
  for (const ShardLauncher& launcher : kShardLaunchers) {
    const char* rank_text = lookup(launcher.rank);
    if (rank_text == nullptr) continue;
    int64_t rank = 0, size = 0, first = 0, step = 1;
    MSA_RETURN_IF_ERROR(ReadVariable(lookup, launcher.rank, 0, &rank));
    MSA_RETURN_IF_ERROR(ReadVariable(lookup, launcher.size, count_flag, &size));
    MSA_RETURN_IF_ERROR(ReadVariable(lookup, launcher.first, 0, &first));
    MSA_RETURN_IF_ERROR(ReadVariable(lookup, launcher.step, 1, &step));
    std::string values = std::string(launcher.rank) + "=" + rank_text;
    for (const char* name : {launcher.first, launcher.step, launcher.size}) {
      if (name != nullptr && lookup(name) != nullptr) values += ", " + std::string(name) + "=" + lookup(name);
    }
    if (launcher.size == nullptr && count_flag != 0) values += ", --shard-count " + std::to_string(count_flag);
    const std::string where = "--shard auto (" + std::string(launcher.name) + ": " + values + ")";
    if (launcher.size == nullptr && count_flag == 0) {
      return InvalidArgument(where + ": the launcher does not say how many shards there are: give --shard-count N");
    }
    if (launcher.size != nullptr && lookup(launcher.size) == nullptr) {
      return InvalidArgument(where + ": " + launcher.size + " is not set");
    }
    if (launcher.size != nullptr && count_flag != 0 && count_flag != size) {
      return InvalidArgument(where + ": --shard-count " + std::to_string(count_flag) + " disagrees with " +
                             launcher.size + "=" + std::to_string(size));
    }
    if (step < 1 || (rank - first) % step != 0) {
      return InvalidArgument(where + ": the task id is not first + a multiple of the step");
    }
    const int64_t index = (rank - first) / step;
    if (size < 1 || size > kMaxShards || index < 0 || index >= size) {
      return InvalidArgument(where + ": gives shard " + std::to_string(index) + " of " + std::to_string(size) +
                             ", outside [0, N-1] with N in [1, " + std::to_string(kMaxShards) + "]");
    }
    shard->index = int(index);
    shard->count = int(size);
    *source = std::string(launcher.name) + ": " + values;
    return Status::Ok();
  }
  std::string names;
  for (const ShardLauncher& launcher : kShardLaunchers) {
    names += (names.empty() ? "" : ", ") + std::string(launcher.rank);
  }
  return InvalidArgument("--shard auto: no launcher's rank variable is set (looked for " + names + ")");
}

}  // namespace msa
