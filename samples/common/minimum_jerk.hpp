// Minimum-jerk time scaling of a point-to-point move, shared by the sample robots.
#pragma once

#include <algorithm>

namespace warpguard::samples {

// Position, velocity and acceleration factors at normalised time tau in [0, 1]:
// s = 10 tau^3 - 15 tau^4 + 6 tau^5 and its derivatives with respect to tau.
inline void minimum_jerk(double tau, double& s, double& sd, double& sdd) {
    tau = std::clamp(tau, 0.0, 1.0);
    const double t2 = tau * tau, t3 = t2 * tau;
    s = t3 * (10.0 - 15.0 * tau + 6.0 * t2);
    sd = 30.0 * t2 * (1.0 - 2.0 * tau + t2);
    sdd = 60.0 * tau * (1.0 - 3.0 * tau + 2.0 * t2);
}

}  // namespace warpguard::samples
