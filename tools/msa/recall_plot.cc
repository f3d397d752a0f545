#include "tools/msa/recall_plot.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

namespace msa {
namespace {

// The value of a swept variable or metric of one point.
double Value(const RecallPoint& p, const std::string& name) {
  if (name == "distance") return double(p.setup.distance);
  if (name == "strength") return p.setup.strength;
  if (name == "top_k") return p.setup.config.top_k;
  if (name == "block_size") return p.setup.config.block_size;
  if (name == "context") return p.setup.context;
  if (name == "needle_recall") return p.measure.needle_recall;
  return p.measure.mass_recall_mean;  // "mass_recall_mean"
}

std::string Label(const std::string& name) {
  if (name == "distance") return "distance d (tokens)";
  if (name == "strength") return "needle strength a";
  if (name == "top_k") return "top_k";
  if (name == "block_size") return "block size Bk";
  if (name == "context") return "context (tokens)";
  if (name == "needle_recall") return "needle recall";
  return "attention-mass recall";
}

// How a curve's variable is written in its legend.
std::string CurveSymbol(const std::string& name) {
  if (name == "strength") return "a";
  if (name == "distance") return "d";
  if (name == "block_size") return "Bk";
  return name;  // top_k, context
}

std::string Quoted(const std::string& path) {
  std::string quoted = "'";
  for (char c : path) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

// Runs gnuplot on `script`; on failure the error holds gnuplot's first line of complaint.
Status RunGnuplot(const std::string& script, const std::string& what) {
  const std::string base = "/tmp/msa-recall-plot." + std::to_string(getpid());
  const std::string script_path = base + ".gp", error_path = base + ".err";
  {
    std::ofstream file(script_path);
    file << script;
    if (!file.flush()) return IoError("--plot: cannot write the gnuplot script " + script_path);
  }
  const int code = std::system(("gnuplot " + Quoted(script_path) + " 2> " + Quoted(error_path)).c_str());
  std::ifstream errors(error_path);
  std::string first_error;
  std::getline(errors, first_error);
  std::remove(script_path.c_str());
  std::remove(error_path.c_str());
  if (code != 0) return IoError("--plot: gnuplot failed drawing " + what + ": " + first_error);
  return Status::Ok();
}

}  // namespace

Status CheckPlotter() {
  if (std::system("command -v gnuplot > /dev/null 2>&1") != 0) {
    return Unsupported(
        "--plot: gnuplot is not on the PATH (install it with scripts/install-deps, or "
        "apt-get install gnuplot-nox)");
  }
  return RunGnuplot("set terminal pngcairo\n", "a test page");
}

std::vector<RecallFigure> FiguresFor(const RecallSweep& sweep) {
  const std::vector<std::pair<std::string, size_t>> swept = {{"strength", sweep.strengths.size()},
                                                             {"distance", sweep.distances.size()},
                                                             {"block_size", sweep.block_sizes.size()},
                                                             {"top_k", sweep.top_ks.size()},
                                                             {"context", sweep.contexts.size()}};
  // One curve per value of the first other swept variable ("" when none is).
  const auto curve_for = [&](const std::string& x) {
    for (const auto& [name, values] : swept) {
      if (name != x && values > 1) return name;
    }
    return std::string();
  };
  std::vector<RecallFigure> figures;
  for (const auto& [name, values] : swept) {
    if (values > 1) figures.push_back({"needle_recall_vs_" + name + ".png", "needle_recall", name, curve_for(name)});
  }
  if (sweep.distances.size() > 1) {
    figures.push_back({"mass_recall_vs_distance.png", "mass_recall_mean", "distance", curve_for("distance")});
  }
  if (figures.empty()) figures.push_back({"needle_recall_vs_strength.png", "needle_recall", "strength", ""});
  return figures;
}

Status DrawFigure(const RecallFigure& figure, const std::vector<RecallPoint>& points, const std::string& path) {
  // [pooling][curve value][x] -> (sum, count) over the reference's points; poolings in sweep order.
  std::vector<std::pair<std::string, std::map<double, std::map<double, std::pair<double, int>>>>> series;
  std::set<double> xs;
  for (const RecallPoint& p : points) {
    if (p.backend != "reference") continue;
    const double curve = figure.curve.empty() ? 0 : Value(p, figure.curve), x = Value(p, figure.x);
    const std::string pooling(PoolingName(p.setup.config.pooling));
    auto panel = std::find_if(series.begin(), series.end(), [&](const auto& entry) { return entry.first == pooling; });
    if (panel == series.end()) panel = series.insert(series.end(), {pooling, {}});
    auto& cell = panel->second[curve][x];
    cell.first += Value(p, figure.metric);
    cell.second += 1;
    xs.insert(x);
  }
  std::ostringstream gp;
  gp << "set terminal pngcairo noenhanced size " << 560 * series.size() << ",360 font ',10'\n"
     << "set output " << Quoted(path) << "\n"
     << "set multiplot layout 1," << series.size() << " title '" << Label(figure.metric) << " against "
     << Label(figure.x) << " (reference backend; msa recall)'\n"
     << "set yrange [0:1.05]\nset grid\nset key outside right top vertical\nset xlabel '" << Label(figure.x) << "'\n"
     << "set ylabel '" << Label(figure.metric) << "'\n";
  if (*xs.begin() > 0 && *xs.rbegin() / *xs.begin() >= 8) gp << "set logscale x 2\n";
  int block = 0;
  for (const auto& [pooling, curves] : series) {
    std::string plot = "plot ";
    for (const auto& [curve, cells] : curves) {
      gp << "$d" << block << " << EOD\n";
      for (const auto& [x, cell] : cells) gp << x << " " << cell.first / cell.second << "\n";
      gp << "EOD\n";
      std::ostringstream title;
      if (figure.curve.empty()) {
        title << pooling;
      } else {
        title << CurveSymbol(figure.curve) << " = " << curve;
      }
      plot += std::string(plot.size() > 5 ? ", " : "") + "$d" + std::to_string(block) +
              " using 1:2 with linespoints lw 2 title '" + title.str() + "'";
      ++block;
    }
    gp << "set title '" << pooling << " pooling'\n" << plot << "\n";
  }
  gp << "unset multiplot\n";
  return RunGnuplot(gp.str(), figure.file);
}

}  // namespace msa
