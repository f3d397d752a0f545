// What `msa recall` writes: a table on stdout, CSV and JSON files (one row per backend per setup).
#ifndef MSA_TOOLS_MSA_RECALL_REPORT_H_
#define MSA_TOOLS_MSA_RECALL_REPORT_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tools/msa/recall_sweep.h"

namespace msa {

// The CSV header, one line, comma-separated: the column names of RecallCsv (and the keys of each JSON point).
extern const char* const kRecallColumns;

// One point's values as the CSV writes them, in kRecallColumns order.
using RecallRow = std::vector<std::string>;
std::vector<RecallRow> RecallRows(const std::vector<RecallPoint>& points);

// Header plus one line per row.
std::string RecallCsv(const std::vector<RecallRow>& rows);
// What the sweep did not vary: heads, dims, queries, sequences, needles, distractors, seed, precision.
nlohmann::ordered_json RecallSettings(const RecallSweep& sweep);
// {"command": ..., "settings": {...}, "passed": bool, "points": [{column: value, ...}, ...]}, and "shard": {...}
// after them when `shard` is not null (a shard's file, which msa recall merge reads).
std::string RecallJson(const std::string& command, const nlohmann::ordered_json& settings,
                       const std::vector<RecallRow>& rows, const nlohmann::ordered_json& shard = nullptr);
// True when every row's "agrees" column is true.
bool RecallRowsPassed(const std::vector<RecallRow>& rows);
// A fixed-width table for people, one line per point, then a verdict line per non-reference backend.
std::string RecallTable(const std::vector<RecallPoint>& points);

// True when every non-reference point agrees with the reference up to counted near ties.
bool RecallPassed(const std::vector<RecallPoint>& points);

}  // namespace msa

#endif  // MSA_TOOLS_MSA_RECALL_REPORT_H_
