#include "warpguard/identification.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <stdexcept>
#include <string_view>

#include <Eigen/Dense>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace warpguard {

namespace {

using Eigen::Matrix3d;
using Eigen::Vector3d;

constexpr double kRadToDeg = 180.0 / M_PI;
// A joint that holds still may read slightly differently from point to point (servo error, encoder
// resolution). The joint-by-joint fits take its first value; the whole-chain adjustment uses every
// reading as reported, so such small differences cost no accuracy.
constexpr double kHeldTolerance = 1e-3;  // rad (m for prismatic joints)

// ---------------------------------------------------------------------------------------------
// CSV with a fixed header of numeric columns.

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
    return s;
}

std::vector<std::string_view> split(std::string_view line) {
    std::vector<std::string_view> out;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= line.size(); ++i) {
        if (i == line.size() || line[i] == ',') {
            out.push_back(trim(line.substr(start, i - start)));
            start = i + 1;
        }
    }
    return out;
}

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

struct NumericTable {
    std::vector<std::string> header;
    std::vector<std::vector<double>> rows;
    std::vector<std::size_t> lines;
};

// Reads a CSV whose first non-comment line is the header; `check_header` validates it.
template <typename CheckHeader>
NumericTable read_numeric_csv(const std::string& path, const char* what, CheckHeader check_header) {
    std::ifstream in(path);
    if (!in) throw std::runtime_error(fmt::format("cannot open {} file '{}'", what, path));
    NumericTable t;
    std::string line;
    std::size_t number = 0;
    while (std::getline(in, line)) {
        ++number;
        const std::string_view view = trim(line);
        if (view.empty() || view.front() == '#') continue;
        const auto fields = split(view);
        if (t.header.empty()) {
            for (auto f : fields) t.header.push_back(lower(f));
            check_header(t.header);
            continue;
        }
        if (fields.size() != t.header.size()) {
            throw std::runtime_error(fmt::format("{} line {}: {} fields, expected {} ({})", path, number, fields.size(),
                                                 t.header.size(), fmt::join(t.header, ",")));
        }
        std::vector<double> row(fields.size());
        for (std::size_t k = 0; k < fields.size(); ++k) {
            const auto f = fields[k];
            const auto [ptr, ec] = std::from_chars(f.data(), f.data() + f.size(), row[k]);
            if (ec != std::errc() || ptr != f.data() + f.size() || !std::isfinite(row[k])) {
                throw std::runtime_error(fmt::format("{} line {}: {} = '{}' is not a finite number", path, number,
                                                     t.header[k], f));
            }
        }
        t.rows.push_back(std::move(row));
        t.lines.push_back(number);
    }
    if (t.header.empty()) throw std::runtime_error(fmt::format("{} file '{}' is empty (no header)", what, path));
    return t;
}

// ---------------------------------------------------------------------------------------------
// Geometry helpers

Matrix3d skew(const Vector3d& v) {
    Matrix3d s;
    s << 0, -v.z(), v.y(), v.z(), 0, -v.x(), -v.y(), v.x(), 0;
    return s;
}

Matrix3d rotation_about(const Vector3d& axis, double angle) { return Eigen::AngleAxisd(angle, axis.normalized()).toRotationMatrix(); }

// Signed angle from u to v about `axis` (u, v perpendicular to axis).
double signed_angle(const Vector3d& u, const Vector3d& v, const Vector3d& axis) {
    return std::atan2(u.cross(v).dot(axis), u.dot(v));
}

// Any unit vector perpendicular to v.
Vector3d perpendicular(const Vector3d& v) {
    const Vector3d trial = std::abs(v.x()) < 0.9 ? Vector3d::UnitX() : Vector3d::UnitY();
    return (trial - trial.dot(v) * v).normalized();
}

// Thesis §4.2, Figure 33: the axis direction is AB x BC; its point is where the perpendicular
// bisectors of AB and BC (in the circle's plane) come closest.
struct Circle3 {
    Vector3d normal, centre;
    double radius;
};

Circle3 circle_from_three_points(const Vector3d& a, const Vector3d& b, const Vector3d& c) {
    const Vector3d ab = b - a, bc = c - b;
    const Vector3d n = ab.cross(bc);
    if (n.norm() < 1e-12 * std::max(1.0, ab.norm() * bc.norm())) throw std::invalid_argument("three collinear points");
    const Vector3d normal = n.normalized();
    // Bisector lines: through the midpoints, along normal x AB and normal x BC.
    const Vector3d m1 = 0.5 * (a + b), m2 = 0.5 * (b + c);
    const Vector3d u1 = normal.cross(ab).normalized(), u2 = normal.cross(bc).normalized();
    // Closest points of the lines m1 + s u1 and m2 + t u2.
    const Vector3d w = m1 - m2;
    const double p = u1.dot(u2), d1 = u1.dot(w), d2 = u2.dot(w);
    const double den = 1.0 - p * p;
    const double s = (p * d2 - d1) / den, t = (d2 - p * d1) / den;
    const Vector3d centre = 0.5 * ((m1 + s * u1) + (m2 + t * u2));
    return {normal, centre, (a - centre).norm()};
}

struct JointGroup {
    std::vector<Vector3d> p;
    std::vector<double> q;       // the moving joint's value
    std::vector<std::size_t> rows;  // indices into the input
};

// Revolute joint: p(theta) = c + R0 (r cos theta, r sin theta, 0); the axis is R0 e_z.
struct CircleModel {
    Vector3d c;
    Matrix3d r0;
    double r;
    Vector3d at(double theta) const { return c + r0 * Vector3d(r * std::cos(theta), r * std::sin(theta), 0.0); }
};

AxisFit fit_revolute(std::size_t joint, const JointGroup& g, CircleModel& model) {
    const std::size_t n = g.p.size();
    Vector3d mean = Vector3d::Zero();
    for (const auto& p : g.p) mean += p;
    mean /= static_cast<double>(n);
    Eigen::MatrixXd centred(n, 3);
    for (std::size_t k = 0; k < n; ++k) centred.row(static_cast<Eigen::Index>(k)) = (g.p[k] - mean).transpose();
    Eigen::JacobiSVD<Eigen::MatrixXd> svd(centred, Eigen::ComputeThinV);
    const auto sv = svd.singularValues();
    if (sv(0) < 1e-9) {
        throw std::invalid_argument(fmt::format("joint {}: the tracked point did not move (spread {:.3g} m); move the joint "
                                                "further or put the tracked point off its axis", joint, sv(0)));
    }
    if (sv(1) < 1e-9 * sv(0) + 1e-12) {
        throw std::invalid_argument(fmt::format("joint {}: the tracked point moved on a straight line; if the joint is "
                                                "prismatic say so (--prismatic {}), else move it over a wider range", joint, joint));
    }
    Vector3d normal = svd.matrixV().col(2);
    const Vector3d e1 = perpendicular(normal), e2 = normal.cross(e1);

    // Initial circle: least squares in the plane (with three points it is the thesis's construction).
    Vector3d centre;
    if (n == 3) {
        const Circle3 c3 = circle_from_three_points(g.p[0], g.p[1], g.p[2]);
        centre = c3.centre;
        normal = c3.normal;
    } else {
        Eigen::MatrixXd a(n, 3);
        Eigen::VectorXd b(n);
        for (std::size_t k = 0; k < n; ++k) {
            const Vector3d d = g.p[k] - mean;
            const double u = d.dot(e1), v = d.dot(e2);
            a.row(static_cast<Eigen::Index>(k)) << 2 * u, 2 * v, 1.0;
            b(static_cast<Eigen::Index>(k)) = u * u + v * v;
        }
        const Eigen::Vector3d sol = a.colPivHouseholderQr().solve(b);
        centre = mean + sol(0) * e1 + sol(1) * e2;
    }
    // Sign of the axis: a positive joint motion turns the point right-handed about it. The slope of
    // the point's angle against the joint's angle must be +-1 (else the units are wrong).
    const Vector3d f1 = (g.p[0] - centre - (g.p[0] - centre).dot(normal) * normal).normalized();
    const Vector3d f2 = normal.cross(f1);
    std::vector<std::size_t> order(n);
    for (std::size_t k = 0; k < n; ++k) order[k] = k;
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return g.q[a] < g.q[b]; });
    std::vector<double> psi(n);
    double previous = 0.0;
    for (std::size_t r = 0; r < n; ++r) {  // in the order of the joint's angle; steps < 180 deg
        const std::size_t k = order[r];
        const Vector3d d = g.p[k] - centre;
        double a = std::atan2(d.dot(f2), d.dot(f1));
        while (r > 0 && a - previous > M_PI) a -= 2 * M_PI;
        while (r > 0 && a - previous < -M_PI) a += 2 * M_PI;
        psi[k] = previous = a;
    }
    double mq = 0, mp = 0;
    for (std::size_t k = 0; k < n; ++k) mq += g.q[k], mp += psi[k];
    mq /= static_cast<double>(n), mp /= static_cast<double>(n);
    double sqq = 0, sqp = 0;
    for (std::size_t k = 0; k < n; ++k) sqq += (g.q[k] - mq) * (g.q[k] - mq), sqp += (g.q[k] - mq) * (psi[k] - mp);
    if (sqq <= 0) throw std::invalid_argument(fmt::format("joint {}: its angle did not change between the points", joint));
    const double slope = sqp / sqq;
    if (std::abs(std::abs(slope) - 1.0) > 0.2) {
        throw std::invalid_argument(fmt::format(
            "joint {}: the tracked point turned {:.4g} times as far as the joint's reported angle changed; expected 1 "
            "(angles must be in rad, consecutive points less than 180 deg apart)", joint, std::abs(slope)));
    }
    if (slope < 0) normal = -normal;

    // Refine c, R0, r by Gauss-Newton on the 3D positions tied to the reported angles.
    const Vector3d g1 = (g.p[0] - centre - (g.p[0] - centre).dot(normal) * normal).normalized();
    const Vector3d g2 = normal.cross(g1);
    Matrix3d frame;
    frame << g1, g2, normal;
    model.c = centre;
    model.r = (g.p[0] - centre - (g.p[0] - centre).dot(normal) * normal).norm();
    model.r0 = frame * rotation_about(Vector3d::UnitZ(), -g.q[0]);
    for (int iteration = 0; iteration < 50; ++iteration) {
        Eigen::Matrix<double, 7, 7> jtj = Eigen::Matrix<double, 7, 7>::Zero();
        Eigen::Matrix<double, 7, 1> jtr = Eigen::Matrix<double, 7, 1>::Zero();
        for (std::size_t k = 0; k < n; ++k) {
            const Vector3d unit(std::cos(g.q[k]), std::sin(g.q[k]), 0.0);
            const Vector3d v = model.r0 * (model.r * unit);
            const Vector3d res = model.c + v - g.p[k];
            Eigen::Matrix<double, 3, 7> j;
            j.block<3, 3>(0, 0) = Matrix3d::Identity();
            j.block<3, 3>(0, 3) = -skew(v);
            j.col(6) = model.r0 * unit;
            jtj += j.transpose() * j;
            jtr += j.transpose() * res;
        }
        const Eigen::Matrix<double, 7, 1> step = -jtj.ldlt().solve(jtr);
        if (!step.allFinite()) break;
        model.c += step.segment<3>(0);
        const Vector3d w = step.segment<3>(3);
        if (w.norm() > 0) model.r0 = rotation_about(w, w.norm()) * model.r0;
        model.r += step(6);
        if (step.norm() < 1e-15) break;
    }
    if (model.r < 0) {  // the same circle with the opposite phase
        model.r = -model.r;
        model.r0 = model.r0 * rotation_about(Vector3d::UnitZ(), M_PI);
    }

    AxisFit fit;
    fit.type = JointType::Revolute;
    fit.direction = model.r0.col(2);
    fit.points = n;
    fit.radius = model.r;
    // The circle's centre: the foot of the points' plane on the axis.
    fit.centre = model.c;
    double sum = 0, sum_angle = 0;
    for (std::size_t k = 0; k < n; ++k) {
        const double e = (model.at(g.q[k]) - g.p[k]).norm();
        sum += e * e;
        fit.max_residual = std::max(fit.max_residual, e);
        const Vector3d local = model.r0.transpose() * (g.p[k] - model.c);
        double da = std::atan2(local.y(), local.x()) - g.q[k];
        da = std::remainder(da, 2 * M_PI);
        sum_angle += da * da;
    }
    fit.rms_residual = std::sqrt(sum / static_cast<double>(n));
    fit.angle_rms = std::sqrt(sum_angle / static_cast<double>(n));
    return fit;
}

// Prismatic joint: p(q) = c + u q, |u| = 1.
struct LineModel {
    Vector3d c, u;
};

bool fit_line(const JointGroup& g, LineModel& line, double& rms, double& max_residual) {
    const std::size_t n = g.p.size();
    Eigen::MatrixXd a(3 * n, 6);
    Eigen::VectorXd b(3 * n);
    a.setZero();
    for (std::size_t k = 0; k < n; ++k) {
        const auto r = static_cast<Eigen::Index>(3 * k);
        a.block<3, 3>(r, 0) = Matrix3d::Identity();
        a.block<3, 3>(r, 3) = g.q[k] * Matrix3d::Identity();
        b.segment<3>(r) = g.p[k];
    }
    const Eigen::VectorXd sol = a.colPivHouseholderQr().solve(b);
    line.c = sol.segment<3>(0);
    line.u = sol.segment<3>(3);
    double sum = 0;
    max_residual = 0;
    for (std::size_t k = 0; k < n; ++k) {
        const double e = (line.c + line.u * g.q[k] - g.p[k]).norm();
        sum += e * e;
        max_residual = std::max(max_residual, e);
    }
    rms = std::sqrt(sum / static_cast<double>(n));
    return line.u.allFinite();
}

struct Line {
    Vector3d point, dir;
};

double fk_rms(const DhModel& model, const std::vector<TrackedPointSample>& samples) {
    double sum = 0;
    for (const auto& s : samples) sum += (model.tool_pose(s.q).translation() - s.p).squaredNorm();
    return std::sqrt(sum / static_cast<double>(samples.size()));
}

// Levenberg-Marquardt over the base (6), the DH rows but the last (4 each) and the tracked point
// (3). The start is the joint-by-joint solution, so the problem is small and well started; damping
// handles the redundancy between the base and joint 1's offsets. The last row stays as the
// geometry built it (the flange's z on the last joint's axis, its x at the home angle): a point
// fixes only where it is, not how the flange frame is turned, so its four numbers and the tracked
// point's three are one 3-vector seen seven ways. Left free they drifted (UR5e-like, 0.05 mm noise:
// alpha_6 26 deg, the point fitted as well as before), and the flange frame tilted with them - the
// frame a tool-frame force of KA-mDTW is given in.
DhModel refine_chain(const DhModel& start, const std::vector<TrackedPointSample>& samples) {
    const std::size_t n = start.dof();
    const std::size_t params = 6 + 4 * (n - 1) + 3;
    const auto build = [&](const Eigen::VectorXd& x) {
        Eigen::Isometry3d base = start.base();
        const Vector3d w = x.segment<3>(3);
        base.linear() = (w.norm() > 0 ? rotation_about(w, w.norm()) : Matrix3d::Identity()) * start.base().linear();
        base.translation() += x.segment<3>(0);
        std::vector<DhJoint> joints = start.joints();
        for (std::size_t k = 0; k + 1 < n; ++k) {
            const auto b = static_cast<Eigen::Index>(6 + 4 * k);
            joints[k].a += x(b);
            joints[k].alpha += x(b + 1);
            joints[k].d += x(b + 2);
            joints[k].theta += x(b + 3);
        }
        Eigen::Isometry3d tool = start.tool();
        tool.translation() += x.segment<3>(static_cast<Eigen::Index>(6 + 4 * (n - 1)));
        return DhModel(std::move(joints), tool, base);
    };
    const auto residuals = [&](const DhModel& m, Eigen::VectorXd& r) {
        for (std::size_t s = 0; s < samples.size(); ++s) {
            r.segment<3>(static_cast<Eigen::Index>(3 * s)) = m.tool_pose(samples[s].q).translation() - samples[s].p;
        }
    };
    const auto rows = static_cast<Eigen::Index>(3 * samples.size());
    Eigen::VectorXd x = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(params));
    Eigen::VectorXd r(rows), r_try(rows), r_plus(rows), r_minus(rows);
    residuals(start, r);
    double cost = r.squaredNorm();
    double lambda = 1e-3;
    Eigen::MatrixXd jac(rows, static_cast<Eigen::Index>(params));
    for (int iteration = 0; iteration < 100 && cost > 0; ++iteration) {
        for (Eigen::Index p = 0; p < static_cast<Eigen::Index>(params); ++p) {
            constexpr double h = 1e-7;
            Eigen::VectorXd xp = x, xm = x;
            xp(p) += h;
            xm(p) -= h;
            residuals(build(xp), r_plus);
            residuals(build(xm), r_minus);
            jac.col(p) = (r_plus - r_minus) / (2 * h);
        }
        const Eigen::MatrixXd jtj = jac.transpose() * jac;
        const Eigen::VectorXd jtr = jac.transpose() * r;
        bool improved = false;
        for (int attempt = 0; attempt < 10; ++attempt) {
            Eigen::MatrixXd a = jtj;
            for (Eigen::Index p = 0; p < a.rows(); ++p) a(p, p) += lambda * (jtj(p, p) + 1e-12);
            const Eigen::VectorXd step = -a.ldlt().solve(jtr);
            if (!step.allFinite()) break;
            const Eigen::VectorXd x_try = x + step;
            residuals(build(x_try), r_try);
            const double cost_try = r_try.squaredNorm();
            if (cost_try < cost) {
                const double gain = (cost - cost_try) / cost;
                x = x_try;
                r = r_try;
                cost = cost_try;
                lambda = std::max(lambda / 10, 1e-12);
                improved = gain > 1e-12;
                break;
            }
            lambda *= 10;
        }
        if (!improved) break;
    }
    return build(x);
}

}  // namespace

// ---------------------------------------------------------------------------------------------

std::vector<TrackedPointSample> read_tracked_points_csv(const std::string& path) {
    std::size_t joints = 0;
    const NumericTable t = read_numeric_csv(path, "tracked-point", [&](const std::vector<std::string>& h) {
        const auto expected = [&](std::size_t n) {
            std::vector<std::string> e{"joint"};
            for (std::size_t k = 1; k <= n; ++k) e.push_back(fmt::format("q{}", k));
            for (const char* c : {"x", "y", "z"}) e.emplace_back(c);
            return e;
        };
        if (h.size() < 5 || h != expected(h.size() - 4)) {
            throw std::runtime_error(fmt::format("{}: header is '{}'; expected joint,q1..qN,x,y,z (e.g. '{}')", path,
                                                 fmt::join(h, ","), fmt::join(expected(6), ",")));
        }
        joints = h.size() - 4;
    });
    std::vector<TrackedPointSample> out;
    for (std::size_t r = 0; r < t.rows.size(); ++r) {
        const auto& row = t.rows[r];
        const double joint = row[0];
        if (joint != std::floor(joint) || joint < 0 || joint > static_cast<double>(joints)) {
            throw std::runtime_error(fmt::format("{} line {}: joint = {} is not a joint number 1..{} (or 0 for a check point)",
                                                 path, t.lines[r], joint, joints));
        }
        TrackedPointSample s;
        s.joint = static_cast<std::size_t>(joint);
        s.q.assign(row.begin() + 1, row.begin() + 1 + static_cast<std::ptrdiff_t>(joints));
        s.p = Vector3d(row[joints + 1], row[joints + 2], row[joints + 3]);
        s.line = t.lines[r];
        out.push_back(std::move(s));
    }
    if (out.empty()) throw std::runtime_error(fmt::format("{}: no points after the header", path));
    return out;
}

void write_tracked_points_csv(const std::string& path, const std::vector<TrackedPointSample>& samples) {
    std::ofstream out(path);
    if (!out) throw std::runtime_error(fmt::format("cannot write '{}'", path));
    const std::size_t joints = samples.empty() ? 0 : samples[0].q.size();
    out << "joint";
    for (std::size_t k = 1; k <= joints; ++k) out << ",q" << k;
    out << ",x,y,z\n";
    for (const auto& s : samples) {
        out << s.joint;
        for (double q : s.q) out << fmt::format(",{:.17g}", q);
        out << fmt::format(",{:.17g},{:.17g},{:.17g}\n", s.p.x(), s.p.y(), s.p.z());
    }
    if (!out) throw std::runtime_error(fmt::format("writing '{}' failed", path));
}

DhIdentification identify_dh(const std::vector<TrackedPointSample>& samples, const DhIdentifyOptions& options) {
    if (samples.empty()) throw std::invalid_argument("no tracked-point samples");
    const std::size_t n = samples[0].q.size();
    if (n < 1 || n > kMaxDhJoints) throw std::invalid_argument(fmt::format("{} joints; expected 1..{}", n, kMaxDhJoints));
    std::vector<JointGroup> groups(n);
    for (std::size_t s = 0; s < samples.size(); ++s) {
        const auto& x = samples[s];
        if (x.q.size() != n) {
            throw std::invalid_argument(fmt::format("sample {} has {} joint values; the first has {}", s + 1, x.q.size(), n));
        }
        if (x.joint < 1 || x.joint > n) {
            throw std::invalid_argument(fmt::format("{}: joint {} is not the moving joint 1..{} (0 marks a check point, not "
                                                    "a procedure point)", x.line ? fmt::format("line {}", x.line) : fmt::format("sample {}", s + 1),
                                                    x.joint, n));
        }
        auto& g = groups[x.joint - 1];
        g.p.push_back(x.p);
        g.q.push_back(x.q[x.joint - 1]);
        g.rows.push_back(s);
    }
    const auto where = [&](std::size_t row) {
        return samples[row].line ? fmt::format("line {}", samples[row].line) : fmt::format("sample {}", row + 1);
    };
    for (std::size_t k = 0; k < n; ++k) {
        if (groups[k].p.size() < 3) {
            throw std::invalid_argument(fmt::format("joint {} has {} points; at least 3 are needed (more, over its whole "
                                                    "range, give a better fit)", k + 1, groups[k].p.size()));
        }
        // Every other joint stays where it is while joint k moves.
        const auto& first = samples[groups[k].rows[0]].q;
        for (std::size_t row : groups[k].rows) {
            for (std::size_t o = 0; o < n; ++o) {
                if (o == k) continue;
                if (std::abs(samples[row].q[o] - first[o]) > kHeldTolerance) {
                    throw std::invalid_argument(fmt::format("{}: joint {} is at {:.6g} while joint {} moves, but was at {:.6g} "
                                                            "at its first point; only the moving joint may change",
                                                            where(row), o + 1, samples[row].q[o], k + 1, first[o]));
                }
            }
        }
    }
    // Home: where each joint stays while the others move. The axis of joint k is measured with
    // joints 1..k-1 at home, so they must agree across the groups.
    DhIdentification id;
    id.home.resize(n);
    for (std::size_t j = 0; j < n; ++j) {
        const std::size_t from = j + 1 < n ? j + 1 : (j > 0 ? j - 1 : j);
        id.home[j] = from == j ? groups[j].q[0] : samples[groups[from].rows[0]].q[j];
        for (std::size_t k = j + 1; k < n; ++k) {
            const double v = samples[groups[k].rows[0]].q[j];
            if (std::abs(v - id.home[j]) > kHeldTolerance) {
                throw std::invalid_argument(fmt::format(
                    "joint {} is at {:.6g} while joint {} moves but at {:.6g} while joint {} moves; the joints before a "
                    "moving joint must be at the same home position in every group", j + 1, v, k + 1, id.home[j], from + 1));
            }
        }
    }

    // Axes at home.
    std::vector<bool> prismatic(n, false);
    for (std::size_t j : options.prismatic) {
        if (j < 1 || j > n) throw std::invalid_argument(fmt::format("prismatic joint {} is not 1..{}", j, n));
        prismatic[j - 1] = true;
    }
    std::vector<Line> axes(n);
    std::vector<CircleModel> circles(n);
    std::vector<LineModel> lines(n);
    id.axes.resize(n);
    for (std::size_t k = 0; k < n; ++k) {
        const auto& g = groups[k];
        LineModel line;
        double line_rms = 0, line_max = 0;
        const bool line_ok = fit_line(g, line, line_rms, line_max);
        double spread = 0;
        for (const auto& p : g.p) spread = std::max(spread, (p - g.p[0]).norm());
        const bool looks_prismatic = line_ok && spread > 0 && line_rms < 0.01 * spread && std::abs(line.u.norm() - 1.0) < 0.05;
        if (prismatic[k] || looks_prismatic) {
            if (!line_ok || std::abs(line.u.norm() - 1.0) > 0.2) {
                throw std::invalid_argument(fmt::format("joint {}: the tracked point moved {:.4g} m per unit of the joint's "
                                                        "value; a prismatic joint moves it 1 m per m", k + 1, line.u.norm()));
            }
            prismatic[k] = true;
            AxisFit& f = id.axes[k];
            f.type = JointType::Prismatic;
            f.direction = line.u.normalized();
            f.centre = line.c + line.u * id.home[k];
            f.points = g.p.size();
            f.rms_residual = line_rms;
            f.max_residual = line_max;
            f.angle_rms = line_rms / line.u.norm();
            lines[k] = line;
            axes[k] = {f.centre, f.direction};
        } else {
            id.axes[k] = fit_revolute(k + 1, g, circles[k]);
            axes[k] = {id.axes[k].centre, id.axes[k].direction};
        }
    }

    for (std::size_t k = 0; k < n; ++k) {
        const auto& a = id.axes[k];
        // A joint whose circle is much smaller than a later joint's: its axis is tilted by the noise
        // far more than the later ones, and the error grows with the arm's reach.
        double later = 0;
        for (std::size_t j = k; j < n; ++j) later = std::max(later, id.axes[j].radius);
        if (a.type == JointType::Revolute && a.radius < 0.25 * later) {
            id.warnings.push_back(fmt::format(
                "joint {}: the tracked point circles its axis at {:.0f} mm only (joint {} at {:.0f} mm): measurement noise "
                "tilts this axis the most; choose a home pose with the tool far from it", k + 1, a.radius * 1e3,
                [&] { std::size_t b = k; for (std::size_t j = k; j < n; ++j) if (id.axes[j].radius > id.axes[b].radius) b = j; return b + 1; }(),
                later * 1e3));
        }
        if (a.points < 6) {
            id.warnings.push_back(fmt::format("joint {}: {} points; 12 or more over the joint's whole range average the "
                                              "measurement noise out", k + 1, a.points));
        }
    }

    // Tolerances from the fits: below them two axes are taken as parallel / intersecting.
    const auto position_sigma = [&](std::size_t k) {
        return id.axes[k].rms_residual / std::sqrt(static_cast<double>(id.axes[k].points)) + 1e-10;
    };
    const auto direction_sigma = [&](std::size_t k) {
        const double lever = id.axes[k].type == JointType::Revolute ? std::max(id.axes[k].radius, 1e-3) : 0.1;
        return id.axes[k].rms_residual / (lever * std::sqrt(static_cast<double>(id.axes[k].points))) + 1e-12;
    };

    // Frame 0: z along joint 1's axis, origin at the base origin's foot on it, x from the base x.
    std::vector<Vector3d> z(n + 1), x(n + 1), o(n + 1);
    z[0] = axes[0].dir;
    o[0] = prismatic[0] ? Vector3d(Vector3d::Zero()) : Vector3d(axes[0].point - axes[0].point.dot(z[0]) * z[0]);
    {
        Vector3d bx = Vector3d::UnitX() - Vector3d::UnitX().dot(z[0]) * z[0];
        if (bx.norm() < 1e-6) bx = Vector3d::UnitY() - Vector3d::UnitY().dot(z[0]) * z[0];
        x[0] = bx.normalized();
    }
    Eigen::Isometry3d base = Eigen::Isometry3d::Identity();
    base.linear() << x[0], z[0].cross(x[0]), z[0];
    base.translation() = o[0];
    id.base_aligned = z[0].dot(Vector3d::UnitZ()) > std::cos(1e-3) && o[0].norm() < 1e-3;

    std::vector<DhJoint> dh(n);
    id.frames.resize(n);
    for (std::size_t i = 1; i <= n; ++i) {
        // Frame i from axis i (z_{i-1} through o_{i-1}) and axis i+1 (or the flange for i = n).
        Vector3d foot_prev;  // on axis i, where the common normal leaves it
        if (i < n) {
            Line next = axes[i];
            if (prismatic[i]) next.point = o[i - 1];  // a prismatic axis may be put anywhere: through o_{i-1}
            z[i] = next.dir;
            const double tol_angle = 3 * (direction_sigma(i - 1) + direction_sigma(i));
            const double tol_pos = 3 * (position_sigma(i - 1) + position_sigma(i));
            const Vector3d cross = z[i - 1].cross(z[i]);
            if (cross.norm() < tol_angle) {
                // Parallel (within the fits' accuracy): take them as exactly parallel; the normal
                // through o_{i-1}.
                z[i] = z[i - 1].dot(z[i]) >= 0 ? z[i - 1] : Vector3d(-z[i - 1]);
                const Vector3d w = next.point - o[i - 1];
                const Vector3d perp = w - w.dot(z[i - 1]) * z[i - 1];
                foot_prev = o[i - 1];
                if (perp.norm() < tol_pos) {
                    x[i] = x[i - 1];
                    o[i] = o[i - 1];
                } else {
                    x[i] = perp.normalized();
                    o[i] = o[i - 1] + perp;
                }
            } else {
                // Closest points of the two axes.
                const Vector3d w0 = o[i - 1] - next.point;
                const double b = z[i - 1].dot(z[i]), d = z[i - 1].dot(w0), e = z[i].dot(w0);
                const double den = 1.0 - b * b;
                const double s = (b * e - d) / den, t = (e - b * d) / den;
                foot_prev = o[i - 1] + s * z[i - 1];
                const Vector3d foot_next = next.point + t * z[i];
                const Vector3d normal = foot_next - foot_prev;
                if (normal.norm() < tol_pos) {
                    x[i] = cross.normalized();  // intersecting: x_i = z_{i-1} x z_i
                    o[i] = foot_next;
                } else {
                    x[i] = normal.normalized();  // points away from the previous axis
                    o[i] = foot_next;
                }
            }
        } else {
            // The flange: on the last axis, x as x_{n-1} turned by the joint's home angle.
            z[n] = z[n - 1];
            const double turn = prismatic[n - 1] ? 0.0 : id.home[n - 1];
            x[n] = rotation_about(z[n - 1], turn) * x[n - 1];
            const Vector3d tp = prismatic[n - 1] ? Vector3d(lines[n - 1].c + lines[n - 1].u * id.home[n - 1])
                                                 : circles[n - 1].at(id.home[n - 1]);
            const double along = options.flange_offset ? *options.flange_offset : (tp - o[n - 1]).dot(z[n - 1]);
            foot_prev = o[n - 1];
            o[n] = o[n - 1] + along * z[n - 1];
        }
        DhJoint& p = dh[i - 1];
        p.type = prismatic[i - 1] ? JointType::Prismatic : JointType::Revolute;
        const double d_home = (foot_prev - o[i - 1]).dot(z[i - 1]) + (i == n ? (o[n] - o[n - 1]).dot(z[n - 1]) : 0.0);
        const double theta_home = signed_angle(x[i - 1], x[i], z[i - 1]);
        p.a = (o[i] - foot_prev).dot(x[i]);
        p.alpha = signed_angle(z[i - 1], z[i], x[i]);
        if (p.type == JointType::Revolute) {
            p.theta = std::remainder(theta_home - id.home[i - 1], 2 * M_PI);
            if (p.theta <= -M_PI + 1e-12) p.theta += 2 * M_PI;  // (-180, 180]
            p.d = d_home;
        } else {
            p.theta = theta_home;
            p.d = d_home - id.home[i - 1];
        }
        DhFrameRow& row = id.frames[i - 1];
        row.z = z[i - 1];
        row.centre = axes[i - 1].point;
        row.x = x[i - 1];
        row.origin = o[i - 1];
        row.a = p.a;
        row.d = d_home;
        row.alpha = p.alpha;
        row.theta_at_home = theta_home <= -M_PI + 1e-12 ? theta_home + 2 * M_PI : theta_home;
    }

    // The tracked point in the flange frame.
    const Vector3d tp_home = prismatic[n - 1] ? Vector3d(lines[n - 1].c + lines[n - 1].u * id.home[n - 1])
                                              : circles[n - 1].at(id.home[n - 1]);
    Eigen::Isometry3d flange = Eigen::Isometry3d::Identity();
    flange.linear() << x[n], z[n].cross(x[n]), z[n];
    flange.translation() = o[n];
    id.tracked_point = flange.inverse() * tp_home;
    Eigen::Isometry3d tool = Eigen::Isometry3d::Identity();
    tool.translation() = id.tracked_point;
    id.model = DhModel(std::move(dh), tool, base);

    // The axes were fitted joint by joint; one least-squares adjustment of the whole chain (every
    // DH parameter, the base and the tracked point) against every point uses all of them together.
    id.fk_rms_before_refinement = fk_rms(id.model, samples);
    if (options.refine) {
        id.model = refine_chain(id.model, samples);
        id.tracked_point = id.model.tool().translation();
    }

    // How well the model reproduces every input point.
    double sum = 0;
    for (const auto& s : samples) {
        const double e = (id.model.tool_pose(s.q).translation() - s.p).norm();
        sum += e * e;
        id.fk_max = std::max(id.fk_max, e);
    }
    id.fk_rms = std::sqrt(sum / static_cast<double>(samples.size()));
    return id;
}

ModelCheck check_model(const DhModel& model, const std::vector<TrackedPointSample>& points) {
    ModelCheck c;
    double sum = 0;
    for (std::size_t k = 0; k < points.size(); ++k) {
        if (points[k].q.size() != model.dof()) {
            throw std::invalid_argument(fmt::format("check point {} has {} joint values; the model has {} joints", k + 1,
                                                    points[k].q.size(), model.dof()));
        }
        const double e = (model.tool_pose(points[k].q).translation() - points[k].p).norm();
        sum += e * e;
        if (e > c.max) c.max = e, c.worst = k;
    }
    c.points = points.size();
    c.rms = points.empty() ? 0.0 : std::sqrt(sum / static_cast<double>(points.size()));
    return c;
}

nlohmann::json to_json(const DhIdentification& id) {
    const auto vec = [](const Vector3d& v) { return nlohmann::json::array({v.x(), v.y(), v.z()}); };
    nlohmann::json axes = nlohmann::json::array();
    for (std::size_t k = 0; k < id.axes.size(); ++k) {
        const auto& a = id.axes[k];
        const auto& f = id.frames[k];
        axes.push_back({{"joint", k + 1},
                        {"type", a.type == JointType::Revolute ? "revolute" : "prismatic"},
                        {"axis_direction", vec(a.direction)},
                        {"circle_centre_m", vec(f.centre)},
                        {"radius_m", a.radius},
                        {"points", a.points},
                        {"fit_rms_m", a.rms_residual},
                        {"fit_max_m", a.max_residual},
                        {"angle_rms", a.angle_rms},
                        {"frame", {{"z", vec(f.z)}, {"x", vec(f.x)}, {"origin_m", vec(f.origin)}}},
                        {"dh_at_home", {{"a_m", f.a}, {"d_m", f.d}, {"alpha_deg", f.alpha * kRadToDeg},
                                        {"theta_deg", f.theta_at_home * kRadToDeg}}}});
    }
    nlohmann::json out = to_json(id.model);
    out["identification"] = {{"home", id.home},
                             {"tracked_point_in_flange_m", vec(id.tracked_point)},
                             {"base_aligned", id.base_aligned},
                             {"fk_rms_m", id.fk_rms},
                             {"fk_rms_before_refinement_m", id.fk_rms_before_refinement},
                             {"warnings", id.warnings},
                             {"fk_max_m", id.fk_max},
                             {"axes", axes}};
    return out;
}

// ---------------------------------------------------------------------------------------------
// Tool centre point

Matrix3d rotation_xyz(double rx, double ry, double rz) {
    return (Eigen::AngleAxisd(rz, Vector3d::UnitZ()) * Eigen::AngleAxisd(ry, Vector3d::UnitY()) *
            Eigen::AngleAxisd(rx, Vector3d::UnitX()))
        .toRotationMatrix();
}

Vector3d euler_xyz(const Matrix3d& r) {
    // T = R^T is the thesis's (28); (33)-(35): Rx = atan(T23/T33), Ry = asin(-T13), Rz = atan(T12/T11).
    const Matrix3d t = r.transpose();
    return {std::atan2(t(1, 2), t(2, 2)), std::asin(std::clamp(-t(0, 2), -1.0, 1.0)), std::atan2(t(0, 1), t(0, 0))};
}

std::vector<FlangePose> read_flange_poses_csv(const std::string& path) {
    const NumericTable t = read_numeric_csv(path, "flange-pose", [&](const std::vector<std::string>& h) {
        const std::vector<std::string> expected{"x", "y", "z", "rx", "ry", "rz"};
        if (h != expected) {
            throw std::runtime_error(fmt::format("{}: header is '{}'; expected x,y,z,rx,ry,rz (m and rad)", path, fmt::join(h, ",")));
        }
    });
    std::vector<FlangePose> out;
    for (std::size_t r = 0; r < t.rows.size(); ++r) {
        const auto& row = t.rows[r];
        FlangePose p;
        p.p = Vector3d(row[0], row[1], row[2]);
        p.rxyz = Vector3d(row[3], row[4], row[5]);
        p.line = t.lines[r];
        for (int k = 3; k < 6; ++k) {
            if (std::abs(row[static_cast<std::size_t>(k)]) > 2 * M_PI + 1e-9) {
                throw std::runtime_error(fmt::format("{} line {}: {} = {} is not an angle in rad (|angle| <= 2 pi); degrees?",
                                                     path, t.lines[r], t.header[static_cast<std::size_t>(k)], row[static_cast<std::size_t>(k)]));
            }
        }
        out.push_back(p);
    }
    return out;
}

namespace {

void tcp_residuals(const std::vector<FlangePose>& poses, TcpResult& r) {
    Vector3d sum = Vector3d::Zero();
    for (const auto& p : poses) sum += p.rotation() * r.tcp + p.p;
    r.point = sum / static_cast<double>(poses.size());
    double s2 = 0;
    r.max_residual = 0;
    for (const auto& p : poses) {
        const double e = (p.rotation() * r.tcp + p.p - r.point).norm();
        s2 += e * e;
        r.max_residual = std::max(r.max_residual, e);
    }
    r.rms_residual = std::sqrt(s2 / static_cast<double>(poses.size()));
}

void require_poses(const std::vector<FlangePose>& poses) {
    if (poses.size() < 2) {
        throw std::invalid_argument(fmt::format("{} flange pose(s); at least 2 are needed and 4 or more recommended", poses.size()));
    }
}

}  // namespace

TcpResult identify_tcp_lsq(const std::vector<FlangePose>& poses) {
    require_poses(poses);
    const std::size_t n = poses.size();
    Eigen::MatrixXd a(3 * n, 6);
    Eigen::VectorXd b(3 * n);
    for (std::size_t k = 0; k < n; ++k) {
        const auto r = static_cast<Eigen::Index>(3 * k);
        a.block<3, 3>(r, 0) = poses[k].rotation();
        a.block<3, 3>(r, 3) = -Matrix3d::Identity();
        b.segment<3>(r) = -poses[k].p;
    }
    Eigen::JacobiSVD<Eigen::MatrixXd> svd(a, Eigen::ComputeThinU | Eigen::ComputeThinV);
    const auto sv = svd.singularValues();
    TcpResult r;
    r.condition = sv(0) / std::max(sv(5), 1e-300);
    if (r.condition > 1e6) {
        throw std::invalid_argument(fmt::format("the flange orientations are too alike to locate the tool tip (condition "
                                                "{:.3g}); use poses that differ in at least two rotation angles", r.condition));
    }
    const Eigen::VectorXd x = svd.solve(b);
    r.tcp = x.segment<3>(0);
    tcp_residuals(poses, r);
    return r;
}

TcpResult identify_tcp_grid(const std::vector<FlangePose>& poses, double region, double resolution) {
    require_poses(poses);
    if (!(region > 0) || !(resolution > 0)) throw std::invalid_argument("grid search needs a positive region and resolution");
    // Objective (38), expanded once: f(t) = sum_{i<j} |A_ij t + b_ij|^2 = t'Q t + 2 c't + k.
    std::vector<Matrix3d> rot;
    for (const auto& p : poses) rot.push_back(p.rotation());
    const auto objective = [&](const Vector3d& t) {
        double f = 0;
        for (std::size_t i = 0; i + 1 < poses.size(); ++i) {
            const Vector3d ti = rot[i] * t + poses[i].p;
            for (std::size_t j = i + 1; j < poses.size(); ++j) f += (ti - rot[j] * t - poses[j].p).squaredNorm();
        }
        return f;
    };
    constexpr int kSteps = 10;  // 11 x 11 x 11 points per iteration
    Vector3d centre = Vector3d::Zero();
    double half = region;
    TcpResult r;
    while (true) {
        ++r.iterations;
        const double step = 2 * half / kSteps;
        Vector3d best = centre;
        double best_f = std::numeric_limits<double>::infinity();
        for (int a = 0; a <= kSteps; ++a) {
            for (int b = 0; b <= kSteps; ++b) {
                for (int c = 0; c <= kSteps; ++c) {
                    const Vector3d t = centre + Vector3d(-half + a * step, -half + b * step, -half + c * step);
                    const double f = objective(t);
                    if (f < best_f) best_f = f, best = t;
                }
            }
        }
        centre = best;
        if (step < resolution || r.iterations > 200) break;
        half = 2 * step;  // the next grid spans the best cell's neighbours
    }
    r.tcp = centre;
    tcp_residuals(poses, r);
    return r;
}

Vector3d tcp_from_known_point(const FlangePose& pose, const Vector3d& point_base) {
    // (39): TCP_f = T (TCP_b - V) with T = R^T.
    return pose.rotation().transpose() * (point_base - pose.p);
}

// ---------------------------------------------------------------------------------------------
// Cameras

ToolAngles apparent_tool_angles(double alpha, double beta, bool x_first) {
    if (x_first) return {std::atan(std::sin(alpha) / (std::cos(alpha) * std::cos(beta))), beta};  // (23)
    return {alpha, std::atan(std::sin(beta) / (std::cos(alpha) * std::cos(beta)))};               // (24)
}

std::array<ToolAngles, 2> true_tool_angles(double alpha_apparent, double beta_apparent) {
    // (25) and its counterpart from (24).
    return {ToolAngles{std::atan(std::tan(alpha_apparent) * std::cos(beta_apparent)), beta_apparent},
            ToolAngles{alpha_apparent, std::atan(std::tan(beta_apparent) * std::cos(alpha_apparent))}};
}

CameraAlignment align_camera_frame(const Vector3d& move_x_c, const Vector3d& move_y_c, const Vector3d& move_z_c,
                                   const Vector3d& point_c, const Vector3d& point_b) {
    Matrix3d m;
    m << move_x_c, move_y_c, move_z_c;  // (27): columns are the base unit vectors seen by the cameras
    for (int k = 0; k < 3; ++k) {
        if (m.col(k).norm() < 1e-9) {
            throw std::invalid_argument(fmt::format("the move along base {} was not seen by the cameras (zero displacement)",
                                                    "xyz"[k]));
        }
    }
    Eigen::JacobiSVD<Matrix3d> svd(m, Eigen::ComputeFullU | Eigen::ComputeFullV);
    Matrix3d r = svd.matrixU() * svd.matrixV().transpose();
    if (r.determinant() < 0) {
        throw std::invalid_argument("the three moves seen by the cameras form a left-handed frame; check the camera axes' signs");
    }
    CameraAlignment out;
    out.t_cb = r;
    out.orthogonality_error = (m - r).norm();
    if (out.orthogonality_error > 0.2 * m.norm()) {
        throw std::invalid_argument(fmt::format("the moves seen by the cameras are far from orthogonal unit moves (error "
                                                "{:.3g}); were they made along the base axes, by one unit each?", out.orthogonality_error));
    }
    out.v_cb = point_b - r.transpose() * point_c;  // from (36)
    out.euler = euler_xyz(r.transpose());
    return out;
}

}  // namespace warpguard
