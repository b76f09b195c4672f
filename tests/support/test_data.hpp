// Recordings and profiles the tests share, made once per test process from the analytic planar arm.
#pragma once

#include "planar_arm.hpp"
#include "warpguard/calibration.hpp"
#include "warpguard/profile.hpp"
#include "warpguard/recording.hpp"

namespace warpguard::test {

inline const Recording& reference_recording() {
    static const Recording rec = [] {
        planar_arm::RunOptions opt;
        opt.cycles = 4;
        opt.seed = 11;
        return planar_arm::simulate(planar_arm::default_arm(), planar_arm::default_task(), opt);
    }();
    return rec;
}

inline const Recording& nominal_recording() {
    static const Recording rec = [] {
        planar_arm::RunOptions opt;
        opt.cycles = 6;
        opt.seed = 12;
        return planar_arm::simulate(planar_arm::default_arm(), planar_arm::default_task(), opt);
    }();
    return rec;
}

// The planar task over `cycles` cycles whose friction rises to 1 + `drift` times its value by the
// last cycle (RunOptions::friction_drift: a warming robot), from `seed`.
inline Recording friction_rising_run(std::size_t cycles, std::uint64_t seed, double drift) {
    planar_arm::RunOptions opt;
    opt.cycles = cycles;
    opt.seed = seed;
    opt.friction_drift = drift;
    return planar_arm::simulate(planar_arm::default_arm(), planar_arm::default_task(), opt);
}

// The published detector (thesis 3.2.3). Window 20 keeps the published O(m n) matcher quick
// enough for unit tests.
inline const Profile& planar_profile() {
    static const Profile profile = [] {
        CalibrationOptions opt;
        opt.window = 20;
        opt.detector = DetectorKind::Published;
        const NamedRecording nominal[] = {{"nominal.csv", &nominal_recording()}};
        return calibrate({"reference.csv", &reference_recording()}, nominal, opt);
    }();
    return profile;
}

// The phase-aware detector (the default), calibrated on 14 nominal cycles of the planar arm.
inline const Recording& long_nominal_recording() {
    static const Recording rec = [] {
        planar_arm::RunOptions opt;
        opt.cycles = 14;
        opt.seed = 31;
        return planar_arm::simulate(planar_arm::default_arm(), planar_arm::default_task(), opt);
    }();
    return rec;
}

inline const Profile& phase_profile() {
    static const Profile profile = [] {
        CalibrationOptions opt;
        opt.window = 20;
        const NamedRecording nominal[] = {{"nominal14.csv", &long_nominal_recording()}};
        return calibrate({"reference.csv", &reference_recording()}, nominal, opt);
    }();
    return profile;
}

}  // namespace warpguard::test
