// The setup wizard: connect to the daemon → add the robot → its script → wait for it → kinematic
// model → record the reference → calibrate (with a sensitivity control) → shadow run → DETECT.
// Every step reads the daemon's state when it is entered, so the wizard can be left and resumed.
#pragma once

#include <QWizard>

namespace warpguard::panel {

class ControlLink;

class SetupWizard : public QWizard {
    Q_OBJECT
public:
    enum Page { Connect, Robot, Script, WaitRobot, Model, Record, Calibrate, Shadow, Activate };
    explicit SetupWizard(ControlLink* link, QWidget* parent = nullptr);
    ControlLink* link() const { return link_; }
    QString robotId() const;

private:
    ControlLink* link_;
};

}  // namespace warpguard::panel
