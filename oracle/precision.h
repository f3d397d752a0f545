// The number formats of each Precision: rounding to them and their spacing (ulps).
#ifndef MSA_ORACLE_PRECISION_H_
#define MSA_ORACLE_PRECISION_H_

#include "msa/config.h"

namespace msa {

// Rounds to the storage format of `precision` (kExact: double, unchanged).
double RoundToPrecision(double value, Precision precision);
// Significand bits of the format: 53, 24, 8, 11.
int SignificandBits(Precision precision);
// The spacing of the format's numbers at |x| (subnormal spacing below the normal range).
double UlpAt(double x, Precision precision);

}  // namespace msa

#endif  // MSA_ORACLE_PRECISION_H_
