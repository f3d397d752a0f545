#include "tools/msa/recall_report.h"

#include <cstdio>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

namespace msa {
namespace {

std::string Number(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.6g", value);
  return text;
}

// The values of one point, in kRecallColumns order.
std::vector<std::string> Cells(const RecallPoint& p) {
  const RecallSetup& s = p.setup;
  const RecallMeasure& m = p.measure;
  return {std::to_string(s.context),
          std::to_string(s.queries),
          std::to_string(s.sequences),
          std::to_string(s.distance),
          Number(s.strength),
          std::to_string(s.needles),
          std::to_string(s.distractors),
          Number(s.distractor_strength),
          std::to_string(s.config.top_k),
          std::to_string(s.config.block_size),
          std::string(PoolingName(s.config.pooling)),
          p.backend,
          std::string(PrecisionName(p.precision)),
          std::to_string(m.needles),
          std::to_string(m.hits),
          Number(m.needle_recall),
          Number(m.mass_recall_mean),
          Number(m.mass_recall_min),
          Number(m.kept_fraction),
          std::to_string(p.recall_flips),
          std::to_string(p.near_tie_rows),
          std::to_string(p.violation_rows),
          std::to_string(p.invalid_rows),
          Number(p.tau),
          p.agrees ? "true" : "false"};
}

std::vector<std::string> ColumnNames() {
  std::vector<std::string> names;
  std::stringstream columns(kRecallColumns);
  for (std::string name; std::getline(columns, name, ',');) names.push_back(name);
  return names;
}

}  // namespace

const char* const kRecallColumns =
    "context,queries,sequences,distance,strength,needles,distractors,distractor_strength,top_k,block_size,"
    "pooling,backend,precision,needles_planted,needles_recalled,needle_recall,mass_recall_mean,mass_recall_min,"
    "kept_fraction,recall_flips,near_tie_rows,violation_rows,invalid_rows,tau,agrees";

std::vector<RecallRow> RecallRows(const std::vector<RecallPoint>& points) {
  std::vector<RecallRow> rows;
  for (const RecallPoint& point : points) rows.push_back(Cells(point));
  return rows;
}

std::string RecallCsv(const std::vector<RecallRow>& rows) {
  std::string csv = std::string(kRecallColumns) + "\n";
  for (const RecallRow& cells : rows) {
    for (size_t i = 0; i < cells.size(); ++i) csv += (i == 0 ? "" : ",") + cells[i];
    csv += "\n";
  }
  return csv;
}

nlohmann::ordered_json RecallSettings(const RecallSweep& sweep) {
  const RecallSetup& base = sweep.base;
  return {{"num_q_heads", base.config.num_q_heads},
          {"num_kv_heads", base.config.num_kv_heads},
          {"head_dim", base.config.head_dim},
          {"index_head_dim", base.config.index_head_dim},
          {"init_blocks", base.config.init_blocks},
          {"queries", base.queries},
          {"sequences", base.sequences},
          {"needles", base.needles},
          {"distractors", base.distractors},
          {"distractor_strength", base.distractor_strength},
          {"seed", base.seed},
          {"precision", PrecisionName(sweep.precision)}};
}

std::string RecallJson(const std::string& command, const nlohmann::ordered_json& settings,
                       const std::vector<RecallRow>& rows, const nlohmann::ordered_json& shard) {
  using Json = nlohmann::ordered_json;
  Json points = Json::array();
  const std::vector<std::string> names = ColumnNames();
  for (const RecallRow& cells : rows) {
    Json row = Json::object();
    for (size_t i = 0; i < names.size(); ++i) {
      const std::string& cell = cells[i];
      if (cell == "true" || cell == "false") {
        row[names[i]] = cell == "true";
      } else if (names[i] == "pooling" || names[i] == "backend" || names[i] == "precision") {
        row[names[i]] = cell;
      } else {
        row[names[i]] = std::stod(cell);
      }
    }
    points.push_back(std::move(row));
  }
  Json json = {{"command", command}, {"settings", settings}, {"passed", RecallRowsPassed(rows)}, {"points", points}};
  if (!shard.is_null()) json["shard"] = shard;
  return json.dump(1) + "\n";
}

bool RecallRowsPassed(const std::vector<RecallRow>& rows) {
  for (const RecallRow& cells : rows) {
    if (cells.back() != "true") return false;
  }
  return true;
}

std::string RecallTable(const std::vector<RecallPoint>& points) {
  std::string table;
  char line[256];
  std::snprintf(line, sizeof(line), "%8s %5s %8s %6s %5s %-5s %-10s %7s %6s %6s %6s %9s\n", "context", "Bk", "distance",
                "a", "top_k", "pool", "backend", "needle", "mass", "kept", "flips", "near-ties");
  table += line;
  for (const RecallPoint& p : points) {
    const RecallSetup& s = p.setup;
    std::snprintf(line, sizeof(line), "%8d %5d %8lld %6.3g %5d %-5s %-10s %7.4f %6.4f %6.4f %6lld %9lld%s\n", s.context,
                  s.config.block_size, (long long)s.distance, s.strength, s.config.top_k,
                  std::string(PoolingName(s.config.pooling)).c_str(), p.backend.c_str(), p.measure.needle_recall,
                  p.measure.mass_recall_mean, p.measure.kept_fraction, (long long)p.recall_flips,
                  (long long)p.near_tie_rows, p.agrees ? "" : "  FAILS the selection rules");
    table += line;
  }
  // One verdict per non-reference backend, over all its points.
  std::map<std::string, RecallPoint> totals;  // backend -> summed counts
  for (const RecallPoint& p : points) {
    if (p.backend == "reference") continue;
    RecallPoint& total = totals.try_emplace(p.backend, RecallPoint{}).first->second;
    total.precision = p.precision;
    total.recall_flips += p.recall_flips;
    total.near_tie_rows += p.near_tie_rows;
    total.violation_rows += p.violation_rows;
    total.invalid_rows += p.invalid_rows;
    total.agrees = total.agrees && p.agrees;
  }
  for (const auto& [backend, total] : totals) {
    table += backend + " (" + std::string(PrecisionName(total.precision)) +
             "): " + (total.agrees ? "reaches the reference's recall" : "FALLS SHORT of the reference's recall") +
             "; " + std::to_string(total.recall_flips) + " needle(s) recalled differently, " +
             std::to_string(total.near_tie_rows) + " near-tie row(s), " + std::to_string(total.violation_rows) +
             " violation(s), " + std::to_string(total.invalid_rows) + " invalid row(s)\n";
  }
  return table;
}

bool RecallPassed(const std::vector<RecallPoint>& points) {
  for (const RecallPoint& point : points) {
    if (!point.agrees) return false;
  }
  return true;
}

}  // namespace msa
