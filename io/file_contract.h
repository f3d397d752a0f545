// File contract v1 (SPEC section 7): inputs and outputs as safetensors files.
#ifndef MSA_IO_FILE_CONTRACT_H_
#define MSA_IO_FILE_CONTRACT_H_

#include <string>

#include "io/problem.h"
#include "io/safetensors.h"

namespace msa {

// Parses the file contract's msa_config JSON object (block_size, top_k, init_blocks, local_blocks, pooling, scales,
// precision, index_format, score_format) into `config`'s fields and checks the config's own rules; head counts and
// dims are left as they are (they come from the shapes). Messages read "<origin>: msa_config.<key> = <value>: ...".
Status ConfigFromJson(const std::string& text, const std::string& origin, Config* config);

// Builds a problem from an inputs file's tensors (training's dout and dlse when present) and its
// __metadata__["msa_config"]; head counts and dims come from the shapes. Checks names, ranks, dtypes and the config
// keys; `origin` prefixes messages.
// Does not run ValidateIndexInputs / ValidateAttentionInputs (RunBackend does).
Status ProblemFromSafetensors(const SafetensorsFile& file, const std::string& origin, Problem* problem);

// Reads, parses and validates (ValidateProblem) an inputs file; inputs_sha256 receives the SHA-256 of the
// file's bytes.
Status LoadProblem(const std::string& path, Problem* problem, std::string* inputs_sha256);

// The inverse of ProblemFromSafetensors: q, k, v, index_q, index_k, cu_seqlens_q, cu_seqlens_k + msa_config.
SafetensorsFile ProblemToSafetensors(const Problem& problem);

// SHA-256 over the outputs' bytes in the fixed order topk_indices, block_scores, index_lse, out, lse, then (training)
// dq, dk, dv, dqi, dki, kl_loss.
std::string OutputsSha256(const Outputs& outputs);

// The outputs file: the five tensors (and the six of training when computed), and __metadata__ with msa_config (scales
// resolved), backend, version, inputs_sha256 and outputs_sha256.
SafetensorsFile OutputsToSafetensors(const Problem& problem, const Outputs& outputs, std::string_view backend,
                                     const std::string& inputs_sha256);

}  // namespace msa

#endif  // MSA_IO_FILE_CONTRACT_H_
