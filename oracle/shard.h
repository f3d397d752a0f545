// Static shards of a long run (golden suites, recall sweeps): shard I of N does the items whose position in the
// canonical order is I mod N. The position is fixed by the item list alone, so shards need no coordination and
// their merged results equal one unsharded run.
#ifndef MSA_ORACLE_SHARD_H_
#define MSA_ORACLE_SHARD_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

#include "msa/status.h"

namespace msa {

struct Shard {
  int index = 0;  // I, in [0, count)
  int count = 1;  // N >= 1; 0/1 is the whole run

  bool whole() const { return count == 1; }
  bool Holds(int64_t position) const { return position % count == index; }
  std::string ToString() const { return std::to_string(index) + "/" + std::to_string(count); }
};

inline constexpr int kMaxShards = 1 << 20;

// "I/N" with 0 <= I < N <= kMaxShards. `flag` names the option in the error ("--shard 3/3: ...").
Status ParseShard(const std::string& flag, std::string_view text, Shard* shard);

// Reads the environment variable `name`; null when unset. Tests pass their own.
using EnvironmentLookup = std::function<const char*(const char* name)>;

// The shard a launcher assigned to this process, from the first launcher in kShardLaunchers whose rank variable
// is set: a Slurm array (SLURM_ARRAY_TASK_ID, _MIN, _STEP, _COUNT), a Slurm job step (SLURM_PROCID,
// SLURM_NTASKS), torchrun (RANK, WORLD_SIZE), Open MPI (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE), a
// Kubernetes indexed Job (JOB_COMPLETION_INDEX; its size is not in the environment and comes from `count_flag`,
// the --shard-count value, 0 when not given). A given count_flag must equal a launcher's own size.
// `source` says which launcher and values were used ("torchrun: RANK=1, WORLD_SIZE=3").
Status ShardFromEnvironment(const EnvironmentLookup& lookup, int count_flag, Shard* shard, std::string* source);

}  // namespace msa

#endif  // MSA_ORACLE_SHARD_H_
