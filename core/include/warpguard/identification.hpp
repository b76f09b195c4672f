// Kinematic self-identification, thesis §4.2 (DH parameters from a tracked point) and §4.3 (tool
// centre point, camera/robot frame alignment, true tool angles). No external measuring equipment:
// the inputs are what the robot controller reports about itself (joint angles and the position of a
// point fixed to the last link, from its own forward kinematics) or measured angles.
//
// DH from partial poses: one joint moves at a time from a home configuration while the tracked
// point (TP) is recorded. A revolute joint moves the TP on a circle: the plane's normal is the axis
// direction (signed so that a positive joint motion turns right-handed about it) and the circle's
// centre is a point of the axis; a prismatic joint moves it along a line (the axis direction; its
// position is free). From consecutive axes: the common normal gives a_i and x_i, its foot on the
// next axis the origin O_i, the offset along the previous axis d_i, and the signed angles between
// the x and z axes give theta_i and alpha_i. Parallel axes: the normal through the previous origin.
// Intersecting axes: x_i = z_{i-1} x z_i. The home configuration need not be zero (VP-6242 with
// joint 3 at 90 deg, Table 5): theta_i is measured at home and the joint's home angle subtracted.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include <Eigen/Core>
#include <Eigen/Geometry>
#include <nlohmann/json_fwd.hpp>

#include "warpguard/kinematics.hpp"

namespace warpguard {

// ---------------------------------------------------------------------------------------------
// DH identification

struct TrackedPointSample {
    std::size_t joint = 0;      // 1-based: the joint that was moving
    std::vector<double> q;      // all joint values (rad, m for prismatic joints)
    Eigen::Vector3d p = Eigen::Vector3d::Zero();  // tracked point in the base frame, m
    std::size_t line = 0;       // source line (for messages), 0 if none
};

// POINTS.csv: header `joint,q1..qN,x,y,z`. Throws std::runtime_error naming the line and value.
std::vector<TrackedPointSample> read_tracked_points_csv(const std::string& path);
void write_tracked_points_csv(const std::string& path, const std::vector<TrackedPointSample>& samples);

struct DhIdentifyOptions {
    // Distance of the flange frame from the last wrist frame along the last axis (a drawing value,
    // e.g. 70 mm on the VP-6242). Not observable from a tracked point; without it the last frame is
    // put at the TP's foot on the last axis and the TP lies on its x axis.
    std::optional<double> flange_offset;
    // 1-based joints known to be prismatic; the others are detected (collinear points moving by
    // exactly the joint's travel) or revolute.
    std::vector<std::size_t> prismatic;
    // After the joint-by-joint fits, adjust the whole chain to all points at once (least squares).
    bool refine = true;
};

struct AxisFit {
    JointType type = JointType::Revolute;
    Eigen::Vector3d direction = Eigen::Vector3d::UnitZ();  // unit, positive joint motion right-handed about it
    Eigen::Vector3d centre = Eigen::Vector3d::Zero();      // circle centre (revolute) / a point of the line
    double radius = 0.0;        // m (revolute)
    std::size_t points = 0;
    double rms_residual = 0.0;  // m: distance of the points from the fitted circle / line
    double max_residual = 0.0;  // m
    double angle_rms = 0.0;     // rad (m for prismatic): fitted motion vs. the joint's reported motion
};

// One row of thesis Table 5: joint i's axis and the DH frame i-1 whose z it is, at home.
struct DhFrameRow {
    Eigen::Vector3d z, centre, x, origin;
    double a = 0, d = 0, alpha = 0, theta_at_home = 0;  // DH parameters of H_{i-1}^i at the home pose
};

struct DhIdentification {
    DhModel model;                       // offsets: theta_i (revolute) / d_i (prismatic) at q = 0; tool = TP
    std::vector<AxisFit> axes;           // per joint
    std::vector<DhFrameRow> frames;      // per joint
    std::vector<double> home;            // the home configuration the joints moved from
    Eigen::Vector3d tracked_point = Eigen::Vector3d::Zero();  // TP in the flange frame, m
    bool base_aligned = true;            // base z along joint 1's axis through the base origin
    double fk_rms = 0.0, fk_max = 0.0;   // model FK of the TP against every input point, m
    double fk_rms_before_refinement = 0.0;  // the same for the joint-by-joint solution
    std::vector<std::string> warnings;   // what limits the accuracy and how to do better
};

// Throws std::invalid_argument with the joint and what is wrong (too few points, a joint that did
// not move, other joints moving at the same time, collinear points for a revolute joint, ...).
// Check points (joint 0) are refused: they belong to check_model().
DhIdentification identify_dh(const std::vector<TrackedPointSample>& samples, const DhIdentifyOptions& options = {});

nlohmann::json to_json(const DhIdentification& id);

// How well a model's tool point reproduces measured points (any rows; the joint column is ignored).
struct ModelCheck {
    std::size_t points = 0;
    double rms = 0.0, max = 0.0;  // m
    std::size_t worst = 0;        // index of the worst point
};
ModelCheck check_model(const DhModel& model, const std::vector<TrackedPointSample>& points);

// ---------------------------------------------------------------------------------------------
// Tool centre point

// Flange orientation from X-Y-Z angles about the fixed base axes (first about X, then Y, then Z):
// R = Rz(rz) Ry(ry) Rx(rx). The thesis's T of (28) is R^T, and (33)-(35) invert it.
Eigen::Matrix3d rotation_xyz(double rx, double ry, double rz);
Eigen::Vector3d euler_xyz(const Eigen::Matrix3d& r);  // (rx, ry, rz), inverse of rotation_xyz

struct FlangePose {
    Eigen::Vector3d p = Eigen::Vector3d::Zero();     // m, flange origin in the base frame
    Eigen::Vector3d rxyz = Eigen::Vector3d::Zero();  // rad
    std::size_t line = 0;
    Eigen::Matrix3d rotation() const { return rotation_xyz(rxyz.x(), rxyz.y(), rxyz.z()); }
};

// POSES.csv: header `x,y,z,rx,ry,rz`.
std::vector<FlangePose> read_flange_poses_csv(const std::string& path);

struct TcpResult {
    Eigen::Vector3d tcp = Eigen::Vector3d::Zero();    // tool tip in the flange frame, m
    Eigen::Vector3d point = Eigen::Vector3d::Zero();  // the touched point in the base frame (mean), m
    double rms_residual = 0.0;  // m: distance of each pose's tip from the common point
    double max_residual = 0.0;
    double condition = 0.0;     // of the least-squares problem: large = poses too alike
    std::size_t iterations = 0; // grid search only
};

// Linear least squares: R_i t + p_i = P for all poses (6 unknowns). >= 4 poses recommended, >= 2
// with different orientations required. Throws when the orientations are too alike.
TcpResult identify_tcp_lsq(const std::vector<FlangePose>& poses);
// The thesis's iterative grid search (38): minimise sum_{i<j} |(R_i t + p_i) - (R_j t + p_j)|^2 over
// a cube of half-size `region` m around the flange, refining the grid around the best point.
TcpResult identify_tcp_grid(const std::vector<FlangePose>& poses, double region = 0.5, double resolution = 1e-7);
// Fast recalibration (39): the tip at a point of known base coordinates.
Eigen::Vector3d tcp_from_known_point(const FlangePose& pose, const Eigen::Vector3d& point_base);

// ---------------------------------------------------------------------------------------------
// Cameras (§4.3.1, §4.3.4); the image analysis itself is outside WarpGuard.

// True angles of the tool from the apparent angles seen in the two orthogonal views, (23)-(25):
// alpha' in the yz view and beta' in the xz view. Two pairs are possible (the order of the two
// rotations is not visible): {alpha from (25), beta'} if the rotation about x came first, and
// {alpha', beta from (24)} if the rotation about y came first.
struct ToolAngles {
    double alpha = 0, beta = 0;
};
std::array<ToolAngles, 2> true_tool_angles(double alpha_apparent, double beta_apparent);
// Forward model (23)/(24), for tests and for the panel's preview.
ToolAngles apparent_tool_angles(double alpha, double beta, bool x_first);

// Camera/robot frame alignment from unit moves along the base axes (26)-(27): the displacement of
// the tool tip seen in camera coordinates for a move of +1 unit along base x, y and z. The columns
// are orthonormalised (nearest rotation); V_cb from one point known in both frames (36).
struct CameraAlignment {
    Eigen::Matrix3d t_cb = Eigen::Matrix3d::Identity();  // C_c = T_cb (C_b - V_cb)
    Eigen::Vector3d v_cb = Eigen::Vector3d::Zero();
    Eigen::Vector3d euler = Eigen::Vector3d::Zero();     // (Rx, Ry, Rz) of (33)-(35)
    double orthogonality_error = 0.0;  // |measured columns - rotation| (Frobenius), in units of the moves
    Eigen::Vector3d to_base(const Eigen::Vector3d& c) const { return t_cb.transpose() * c + v_cb; }
    Eigen::Vector3d to_camera(const Eigen::Vector3d& b) const { return t_cb * (b - v_cb); }
};
CameraAlignment align_camera_frame(const Eigen::Vector3d& move_x_c, const Eigen::Vector3d& move_y_c,
                                   const Eigen::Vector3d& move_z_c, const Eigen::Vector3d& point_c,
                                   const Eigen::Vector3d& point_b);

}  // namespace warpguard
