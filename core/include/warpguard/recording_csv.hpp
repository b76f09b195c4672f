// The recording file format, read and written by every WarpGuard program.
//
//   # robot: ur5e-like
//   # joints: 6
//   # signal: torque          (torque | current)
//   # unit: Nm                (Nm | A | percent)
//   # source: warpguard-sim
//   t,seq,cycle,mode,tau1,...,tauN,q1,...,qN[,payload][,contact,contact_force,contact_link[,contact_age]]
//   0.000,0,1,0,...
//
// t in seconds on the robot's clock, q in radians. Other `# key: value` lines are kept as metadata.
#pragma once

#include <iosfwd>
#include <stdexcept>
#include <string>

#include "warpguard/recording.hpp"

namespace warpguard {

// A malformed file. what() is one line: "FILE:LINE:COLUMN: message (got 'TEXT')".
class CsvError : public std::runtime_error {
public:
    CsvError(std::string file, std::size_t line, std::size_t column, const std::string& message);
    const std::string& file() const { return file_; }
    std::size_t line() const { return line_; }      // 1-based, 0 = whole file
    std::size_t column() const { return column_; }  // 1-based, 0 = whole line

private:
    std::string file_;
    std::size_t line_;
    std::size_t column_;
};

Recording read_recording(const std::string& path);
// `name` is used in error messages only.
Recording read_recording(std::istream& in, const std::string& name);

void write_recording(const Recording& recording, const std::string& path);
void write_recording(const Recording& recording, std::ostream& out);

}  // namespace warpguard
