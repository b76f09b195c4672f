// What a detector answers for every sample.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace warpguard {

enum class Verdict : std::uint8_t { Continue, Stop };

enum class Rule : std::uint8_t {
    None,
    AbsoluteDifference,   // mDTW rule 1, thesis §3.2.3
    Eigenvalue,           // mDTW rule 2, thesis §3.2.3
    EnvelopeLimit,        // envelope rule 1, thesis §3.1.2
    NeighbourDifference,  // envelope rule 2, thesis §3.1.2
    Fault,                // the sample could not be judged (wrong size, not finite): fail-safe stop
    Accumulated,          // phase-aware detector: CUSUM of the deviation ratio (slow pushes)
    ResidualLimit,        // the model-based residual's static band (model_residual.hpp, a reference method)
};

std::string to_string(Rule rule);
std::string to_string(Verdict verdict);

struct Decision {
    Verdict verdict = Verdict::Continue;
    std::size_t joint = 0;  // 1-based joint that decided; 0 when no joint is to blame
    Rule rule = Rule::None;
    double value = 0.0;      // the rule's value for that joint
    double threshold = 0.0;  // the threshold it was compared with
    std::size_t ref_start = 0;  // matched reference span of that joint (sample indices)
    std::size_t ref_end = 0;
    std::uint8_t fired = 0;     // every rule over its threshold on any joint: bit (1 << Rule)

    bool stop() const { return verdict == Verdict::Stop; }
    bool fired_rule(Rule r) const { return (fired >> static_cast<int>(r)) & 1u; }
};

}  // namespace warpguard
