// The machine's ceilings, measured in the same run as the kernels they judge: the fp32 FMA rate of a
// register-resident loop and the memory copy bandwidth.
#ifndef MSA_BENCH_CEILINGS_H_
#define MSA_BENCH_CEILINGS_H_

#include <cstdint>

namespace msa::bench {

// One thread: `iterations` rounds of independent fp32 FMA chains that live in registers (no loads or stores),
// on the best Highway target of this CPU. Returns the FLOPs done (2 per lane per FMA); `*sink` receives a value
// that depends on every chain so the compiler cannot drop the work.
double FmaLoop(int64_t iterations, float* sink);

// The Highway target FmaLoop dispatches to ("AVX3", "AVX2", ...).
const char* FmaTargetName();

}  // namespace msa::bench

#endif  // MSA_BENCH_CEILINGS_H_
