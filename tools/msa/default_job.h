// The main job `msa run` runs with no arguments: an M3-like layer (D = Dv = Di = 128, Bk = 128, top_k = 16,
// GQA) with fewer heads than M3 so that the FP64 reference stays quick on a small machine, and a
// context long enough to be sparse (top_k * Bk = 2048 keys of 16384), with a planted distant needle.
#ifndef MSA_TOOLS_MSA_DEFAULT_JOB_H_
#define MSA_TOOLS_MSA_DEFAULT_JOB_H_

#include <cstdint>

#include "oracle/problem.h"

namespace msa {

// A needle: an index key (and a main key, for group 0) aligned with one query at distance `distance`.
struct Needle {
  int64_t query_row;  // t, the query the needle is aligned with (the last query of sequence 0)
  int64_t group;      // r, the group whose index query it is aligned with
  int64_t key_position;
  int64_t distance;  // query position - key position
  int64_t block;     // key_position / block_size
  double strength;   // a: the needle's index score, in units of the noise's standard deviation
};

struct DefaultJob {
  Problem problem;
  Needle needle;
};

DefaultJob MakeDefaultJob();

}  // namespace msa

#endif  // MSA_TOOLS_MSA_DEFAULT_JOB_H_
