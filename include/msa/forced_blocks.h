// The forced blocks of one selection row (SPEC section 2), one definition for every backend, host and device.
//
// For a query whose visible blocks are 0..local (local = visible - 1), the forced set F is the init ("sink")
// blocks 0..init_blocks-1 and the last local_blocks visible blocks, each counted once where they overlap. The
// ranked candidates are the visible blocks outside F, which always form one range [init_end, local_begin).
// A row holds the first `take` ranked candidates, then the init blocks [0, init_end) ascending, then the
// trailing forced blocks [local_begin, local] ascending (the local block last), then -1 padding.
#ifndef MSA_FORCED_BLOCKS_H_
#define MSA_FORCED_BLOCKS_H_

#include <cstdint>

#include "msa/host_device.h"

namespace msa {

struct ForcedBlocks {
  int64_t init_end = 0;     // init blocks [0, init_end), all below local_begin
  int64_t local_begin = 0;  // trailing forced blocks [local_begin, local]
  int64_t local = 0;        // the local block (the query's own), visible - 1
  int64_t take = 0;         // ranked candidates in the row: min(top_k - |F|, local_begin - init_end)

  MSA_HOST_DEVICE int64_t count() const { return init_end + (local - local_begin + 1); }  // |F|
  MSA_HOST_DEVICE int64_t candidates() const { return local_begin - init_end; }
  MSA_HOST_DEVICE bool IsForced(int64_t block) const { return block < init_end || block >= local_begin; }
};

// Preconditions: visible >= 1, init_blocks >= 0, local_blocks >= 1, top_k >= init_blocks + local_blocks.
MSA_HOST_DEVICE inline ForcedBlocks ForcedBlocksOf(int64_t visible, int64_t init_blocks, int64_t local_blocks,
                                                   int64_t top_k) {
  ForcedBlocks f;
  f.local = visible - 1;
  f.local_begin = visible > local_blocks ? visible - local_blocks : 0;
  f.init_end = init_blocks < f.local_begin ? init_blocks : f.local_begin;
  const int64_t room = top_k - f.count();
  f.take = room < f.candidates() ? room : f.candidates();
  return f;
}

}  // namespace msa

#endif  // MSA_FORCED_BLOCKS_H_
