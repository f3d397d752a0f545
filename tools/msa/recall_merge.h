// `msa recall merge`: the files of `msa recall --shard I/N --out-dir D` runs into the recall.csv and recall.json
// one unsharded run writes, byte for byte.
#ifndef MSA_TOOLS_MSA_RECALL_MERGE_H_
#define MSA_TOOLS_MSA_RECALL_MERGE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "msa/status.h"

namespace msa {

struct RecallMergeResult {
  int64_t setups = 0, rows = 0;
  int shards = 0;
  bool passed = false;  // every backend reached the reference's recall (msa recall's exit status 0)
};

// Reads recall.json (with its "shard" object) and recall.csv from every directory in `shard_dirs` and writes
// out_dir/recall.csv and out_dir/recall.json together (staged, then renamed). Refuses, naming the directories:
// shards of different commands, settings, msa versions or shard counts, a shard twice, a shard missing, a CSV
// whose header or row count does not match its JSON.
Status MergeRecall(const std::string& out_dir, const std::vector<std::string>& shard_dirs, RecallMergeResult* result);

}  // namespace msa

#endif  // MSA_TOOLS_MSA_RECALL_MERGE_H_
