// What `msa recall` writes: a table on stdout, CSV and JSON files (one row per backend per setup).
#ifndef MSA_TOOLS_MSA_RECALL_REPORT_H_
#define MSA_TOOLS_MSA_RECALL_REPORT_H_

#include <string>
#include <vector>

#include "tools/msa/recall_sweep.h"

namespace msa {

// The CSV header, one line, comma-separated: the column names of RecallCsv (and the keys of each JSON point).
extern const char* const kRecallColumns;

// Header plus one line per point.
std::string RecallCsv(const std::vector<RecallPoint>& points);
// {"command": ..., "settings": {...}, "passed": bool, "points": [{column: value, ...}, ...]}.
std::string RecallJson(const std::string& command, const RecallSweep& sweep, const std::vector<RecallPoint>& points);
// A fixed-width table for people, one line per point, then a verdict line per non-reference backend.
std::string RecallTable(const std::vector<RecallPoint>& points);

// True when every non-reference point agrees with the reference up to counted near ties.
bool RecallPassed(const std::vector<RecallPoint>& points);

}  // namespace msa

#endif  // MSA_TOOLS_MSA_RECALL_REPORT_H_
