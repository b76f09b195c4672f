#include "planar_arm.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <stdexcept>

#include <fmt/format.h>

#include "minimum_jerk.hpp"

namespace warpguard::planar_arm {

namespace {

constexpr double kGravity = 9.81;  // m/s^2 along -y of the base frame (the arm moves in a vertical plane)

double cross2(double ax, double ay, double bx, double by) { return ax * by - ay * bx; }


struct Segment {
    std::vector<double> from, to;
    double move;  // s
    double wait;  // s
};

struct CycleTimeline {
    double start = 0;
    double duration = 0;
    std::vector<Segment> segments;
};

}  // namespace

DhModel Arm::dh_model() const {
    std::vector<DhJoint> joints;
    for (const auto& l : links) joints.push_back(DhJoint{JointType::Revolute, l.length, 0.0, 0.0, 0.0});
    return DhModel(std::move(joints));
}

Arm default_arm() {
    return Arm{{
        {0.45, 9.0, 0.22, 0.16, 1.2, 0.8},
        {0.40, 6.0, 0.20, 0.09, 0.9, 0.5},
        {0.12, 1.5, 0.06, 0.004, 0.3, 0.2},
    }};
}

TaskOptions default_task() {
    TaskOptions task;
    // Pick above the table, lift, carry, place, come back: all in the vertical plane.
    task.waypoints = {
        {{0.30, 0.90, -1.10}, 0.9, 0.20},   // pick approach
        {{0.20, 1.20, -1.30}, 0.5, 0.30},   // pick
        {{0.60, 0.60, -0.90}, 0.8, 0.10},   // lift
        {{1.30, -0.20, -0.60}, 1.1, 0.15},  // place approach
        {{1.45, -0.45, -0.50}, 0.5, 0.30},  // place
        {{0.90, 0.30, -0.80}, 0.9, 0.10},   // retreat
    };
    return task;
}

void inverse_dynamics(const Arm& arm, const double* q, const double* qd, const double* qdd, double payload,
                      double* tau) {
    const std::size_t n = arm.links.size();
    std::vector<double> phi(n), omega(n), alpha(n), ex(n), ey(n), acx(n), acy(n);
    double apx = 0, apy = 0;  // acceleration of the current joint origin
    double ph = 0, om = 0, al = 0;
    for (std::size_t i = 0; i < n; ++i) {
        ph += q[i];
        om += qd[i];
        al += qdd[i];
        phi[i] = ph;
        omega[i] = om;
        alpha[i] = al;
        ex[i] = std::cos(ph);
        ey[i] = std::sin(ph);
        const auto& l = arm.links[i];
        // a = a_joint + alpha x r - omega^2 r, with r along the link; alpha x r = alpha * r * normal.
        acx[i] = apx - al * l.com * ey[i] - om * om * l.com * ex[i];
        acy[i] = apy + al * l.com * ex[i] - om * om * l.com * ey[i];
        apx += -al * l.length * ey[i] - om * om * l.length * ex[i];
        apy += al * l.length * ex[i] - om * om * l.length * ey[i];
    }
    // Payload: a point mass at the tip of the last link (acceleration apx, apy now).
    double fx = payload * apx;
    double fy = payload * (apy + kGravity);
    double torque = 0.0;
    for (std::size_t k = n; k-- > 0;) {
        const auto& l = arm.links[k];
        const double mx = l.mass * acx[k];
        const double my = l.mass * (acy[k] + kGravity);
        torque = l.inertia * alpha[k] + torque + cross2(l.com * ex[k], l.com * ey[k], mx, my) +
                 cross2(l.length * ex[k], l.length * ey[k], fx, fy);
        fx += mx;
        fy += my;
        tau[k] = torque;
    }
}

std::vector<Collision> random_collisions(std::size_t count, std::size_t first_cycle, std::size_t cycles,
                                         double min_force, double max_force, std::uint64_t seed) {
    if (first_cycle >= cycles || count > cycles - first_cycle) {
        throw std::invalid_argument(fmt::format("{} collisions do not fit in cycles {}..{} (one per cycle)", count,
                                                first_cycle, cycles));
    }
    std::mt19937_64 rng(seed);
    std::vector<std::size_t> pool(cycles - first_cycle);
    std::iota(pool.begin(), pool.end(), first_cycle);
    std::shuffle(pool.begin(), pool.end(), rng);
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    std::vector<Collision> out;
    for (std::size_t k = 0; k < count; ++k) {
        Collision c;
        c.cycle = pool[k];
        c.phase = 0.05 + 0.85 * unit(rng);
        c.link = 1 + static_cast<std::size_t>(unit(rng) * 3.0) % 3;
        c.profile = unit(rng) < 0.5 ? ContactProfile::Impact : ContactProfile::Push;
        c.magnitude = min_force * std::pow(max_force / min_force, unit(rng));  // log-uniform
        c.duration = c.profile == ContactProfile::Impact ? 0.01 + 0.04 * unit(rng) : 0.2 + 0.8 * unit(rng);
        c.direction = unit(rng) < 0.5 ? -1.0 : 1.0;
        out.push_back(c);
    }
    std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.cycle < b.cycle; });
    return out;
}

Recording simulate(const Arm& arm, const TaskOptions& task, const RunOptions& opt) {
    const std::size_t n = arm.links.size();
    if (task.waypoints.size() < 2) throw std::invalid_argument("a task needs at least 2 waypoints");
    if (!(opt.speed_override > 0 && opt.speed_override <= 2)) {
        throw std::invalid_argument(fmt::format("speed override {} is outside (0, 2]", opt.speed_override));
    }
    for (const auto& w : task.waypoints) {
        if (w.q.size() != n) throw std::invalid_argument(fmt::format("waypoint has {} angles; the arm has {} joints", w.q.size(), n));
    }

    // Timeline of every cycle: from the last waypoint through all waypoints.
    std::vector<CycleTimeline> timeline(opt.cycles);
    double clock = 0.0;
    for (std::size_t c = 0; c < opt.cycles; ++c) {
        auto points = task.waypoints;
        if (!task.variants.empty()) points[task.varying_index].q = task.variants[c % task.variants.size()];
        CycleTimeline& cyc = timeline[c];
        cyc.start = clock;
        std::vector<double> from = task.waypoints.back().q;  // each cycle starts and ends at the home pose
        for (const auto& w : points) {
            cyc.segments.push_back({from, w.q, w.move_time / opt.speed_override, w.wait});
            cyc.duration += w.move_time / opt.speed_override + w.wait;
            from = w.q;
        }
        clock += cyc.duration;
    }
    const double pre = 0.15, post = 0.15;
    const double total = clock;

    std::mt19937_64 rng(opt.seed);
    std::normal_distribution<double> noise(0.0, 1.0);
    std::uniform_real_distribution<double> unit(-1.0, 1.0);
    std::vector<double> rate(opt.cycles + 2);
    for (auto& r : rate) r = 1.0 + opt.cycle_rate_jitter * unit(rng);

    RecordingInfo info;
    info.robot = opt.name;
    info.signal = SignalKind::Torque;
    info.unit = SignalUnit::Nm;
    info.source = fmt::format("warpguard-planar-arm seed={} cycles={} payload={} override={} drift={}", opt.seed,
                              opt.cycles, opt.payload, opt.speed_override, opt.friction_drift);
    Recording rec(n, info);
    rec.ground_truth = GroundTruth{};

    std::vector<double> q(n), qd(n), qdd(n), tau(n);
    std::int64_t seq = 0;
    std::size_t c = 0;
    for (double t = -pre; t <= total + post;) {
        // Which cycle and where in it.
        while (c < opt.cycles && t >= timeline[c].start + timeline[c].duration) ++c;
        std::int64_t counter = opt.first_cycle - 1;
        std::fill(qd.begin(), qd.end(), 0.0);
        std::fill(qdd.begin(), qdd.end(), 0.0);
        if (t < 0) {
            q = task.waypoints.back().q;
        } else if (c >= opt.cycles) {
            q = task.waypoints.back().q;
            counter = opt.first_cycle + static_cast<std::int64_t>(opt.cycles);
        } else {
            counter = opt.first_cycle + static_cast<std::int64_t>(c);
            double local = t - timeline[c].start;
            const Segment* seg = &timeline[c].segments.back();
            for (const auto& s : timeline[c].segments) {
                if (local < s.move + s.wait) {
                    seg = &s;
                    break;
                }
                local -= s.move + s.wait;
            }
            double s = 1, sd = 0, sdd = 0;
            if (local < seg->move) samples::minimum_jerk(local / seg->move, s, sd, sdd);
            for (std::size_t j = 0; j < n; ++j) {
                const double dq = seg->to[j] - seg->from[j];
                q[j] = seg->from[j] + dq * s;
                if (local < seg->move) {
                    qd[j] = dq * sd / seg->move;
                    qdd[j] = dq * sdd / (seg->move * seg->move);
                }
            }
        }

        inverse_dynamics(arm, q.data(), qd.data(), qdd.data(), opt.payload, tau.data());
        const double drift =
            opt.cycles > 1 ? 1.0 + opt.friction_drift * static_cast<double>(std::min(c, opt.cycles - 1)) /
                                       static_cast<double>(opt.cycles - 1)
                           : 1.0;
        for (std::size_t j = 0; j < n; ++j) {
            const auto& l = arm.links[j];
            tau[j] += drift * (l.viscous * qd[j] + l.coulomb * std::tanh(qd[j] / 0.02));
        }

        // External contact forces (ground truth).
        double force = 0.0;
        int link = 0;
        for (const auto& col : opt.collisions) {
            if (col.cycle >= opt.cycles) continue;
            const double t0 = timeline[col.cycle].start + col.phase * timeline[col.cycle].duration;
            const double dt = t - t0;
            double f = 0.0;
            if (col.profile == ContactProfile::Impact) {
                if (dt >= 0 && dt <= col.duration) f = col.magnitude * std::sin(M_PI * dt / col.duration);
            } else {
                const double hold = 0.2, release = 0.1;
                if (dt >= 0 && dt < col.duration) {
                    f = col.magnitude * dt / col.duration;
                } else if (dt >= col.duration && dt < col.duration + hold) {
                    f = col.magnitude;
                } else if (dt >= col.duration + hold && dt < col.duration + hold + release) {
                    f = col.magnitude * (1.0 - (dt - col.duration - hold) / release);
                }
            }
            if (f <= 0.0) continue;
            // Contact at 70 % of link k, normal to it in the plane.
            double px = 0, py = 0, ph = 0;
            std::vector<double> jx(n), jy(n);
            for (std::size_t i = 0; i < col.link; ++i) {
                jx[i] = px;
                jy[i] = py;
                ph += q[i];
                const double len = arm.links[i].length * (i + 1 == col.link ? 0.7 : 1.0);
                px += len * std::cos(ph);
                py += len * std::sin(ph);
            }
            const double fx = -col.direction * f * std::sin(ph);
            const double fy = col.direction * f * std::cos(ph);
            for (std::size_t i = 0; i < col.link; ++i) tau[i] -= cross2(px - jx[i], py - jy[i], fx, fy);
            if (f > force) {
                force = f;
                link = static_cast<int>(col.link);
            }
        }
        for (std::size_t j = 0; j < n; ++j) {
            const double noisy = tau[j] + opt.noise * noise(rng);
            tau[j] = opt.quantum > 0 ? std::round(noisy / opt.quantum) * opt.quantum : noisy;
        }
        const double robot_time = std::round((t + pre) * 1e6) / 1e6;  // the robot clock counts from 0, in us
        rec.append(Sample{robot_time, seq++, counter, 0u, tau, q});
        rec.ground_truth->contact.push_back(force > 0.0 ? 1 : 0);
        rec.ground_truth->contact_force.push_back(force);
        rec.ground_truth->contact_link.push_back(link);

        const std::size_t rate_index = t < 0 ? 0 : std::min(c + 1, rate.size() - 1);
        t += opt.sample_period * rate[rate_index] * (1.0 + opt.sample_jitter * unit(rng));
    }
    return rec;
}

}  // namespace warpguard::planar_arm
