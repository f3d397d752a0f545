// `msa recall --plot`: PNG figures of the study, drawn by gnuplot (scripts/install-deps installs it).
#ifndef MSA_TOOLS_MSA_RECALL_PLOT_H_
#define MSA_TOOLS_MSA_RECALL_PLOT_H_

#include <string>
#include <vector>

#include "tools/msa/recall_sweep.h"

namespace msa {

// Ok when a gnuplot with the pngcairo terminal can be run; else an error saying how to install it.
Status CheckPlotter();

// One figure to draw: `metric` (a kRecallColumns name) against the swept variable `x`, one curve per value
// of `curve` ("" for a single curve), one panel per pooling mode, averaged over everything else.
struct RecallFigure {
  std::string file;  // e.g. "needle_recall_vs_distance.png"
  std::string metric, x, curve;
};

// The figures worth drawing for this sweep: needle recall against each swept variable (one curve per value of
// the first other swept one, in the order strength, distance, block_size, top_k, context), attention-mass
// recall against distance when distance is swept; needle recall against strength when nothing is.
std::vector<RecallFigure> FiguresFor(const RecallSweep& sweep);

// Draws `figure` from the reference backend's points into the PNG file `path`.
Status DrawFigure(const RecallFigure& figure, const std::vector<RecallPoint>& points, const std::string& path);

}  // namespace msa

#endif  // MSA_TOOLS_MSA_RECALL_PLOT_H_
