// warpguard-panel's window: the dashboard, the setup wizard, full-screen shop-floor mode.
#pragma once

#include <QMainWindow>

namespace warpguard::panel {

class ControlLink;
class Dashboard;
class SetupWizard;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(ControlLink* link, QWidget* parent = nullptr);
    Dashboard* dashboard() const { return dashboard_; }
    SetupWizard* openWizard();

private:
    ControlLink* link_;
    Dashboard* dashboard_;
    SetupWizard* wizard_ = nullptr;
};

}  // namespace warpguard::panel
