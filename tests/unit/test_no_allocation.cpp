// The per-sample path must not allocate after warm-up. This binary replaces the global operator
// new to count every allocation made while the detector runs.
#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include <catch2/catch.hpp>

#include "test_data.hpp"
#include "warpguard/detector.hpp"
#include "warpguard/envelope.hpp"

namespace {
std::atomic<std::size_t> g_allocations{0};
}

// GCC cannot see that the replacement new below pairs malloc with free.
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"

void* operator new(std::size_t size) {
    ++g_allocations;
    if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
    throw std::bad_alloc();
}
void* operator new[](std::size_t size) { return operator new(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

using namespace warpguard;

TEST_CASE("Detector::update does not allocate after construction", "[detector][realtime]") {
    const Recording& rec = test::nominal_recording();
    Detector detector(test::planar_profile());
    std::vector<double> tau(rec.joints()), q(rec.joints());
    const std::size_t before = g_allocations.load();
    std::size_t stops = 0;
    for (std::size_t i = 0; i < 1500; ++i) stops += detector.update(rec.sample(i, tau, q)).stop();
    detector.reset();
    for (std::size_t i = 1500; i < 2000; ++i) stops += detector.update(rec.sample(i, tau, q)).stop();
    CHECK(g_allocations.load() - before == 0);
    CHECK(detector.updates() == 500);
    // The detector did real work: the published thresholds flag some nominal samples (heavy tails).
    CHECK(stops > 0);
}

TEST_CASE("the KA-mDTW detector does not allocate per sample either", "[detector][realtime]") {
    Profile p = test::planar_profile();
    p.method = MatchingMethod::KaMdtw;
    p.kinematics = KinematicsSettings{planar_arm::default_arm().dh_model(),
                                      ForceDirection::make(ForceDirection::Frame::Base, {0, -1, 0}), 1e-3};
    // The planar arm never points straight up in this task, so the reference has no near-zero lever.
    Detector detector(p);
    const Recording& rec = test::nominal_recording();
    std::vector<double> tau(rec.joints()), q(rec.joints());
    const std::size_t before = g_allocations.load();
    for (std::size_t i = 0; i < 1000; ++i) detector.update(rec.sample(i, tau, q));
    CHECK(g_allocations.load() - before == 0);
}

TEST_CASE("EnvelopeChecker::update does not allocate", "[envelope][realtime]") {
    const Recording& rec = test::nominal_recording();
    EnvelopeChecker checker(derive_envelope(rec, "nominal", {}));
    std::vector<double> tau(rec.joints()), q(rec.joints());
    const std::size_t before = g_allocations.load();
    for (std::size_t i = 0; i < rec.size(); ++i) checker.update(rec.sample(i, tau, q));
    CHECK(g_allocations.load() - before == 0);
    CHECK(checker.armed());
}
