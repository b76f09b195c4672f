#include "main_window.hpp"

#include <QAction>
#include <QStatusBar>
#include <QToolBar>

#include "control_link.hpp"
#include "dashboard.hpp"
#include "setup_wizard.hpp"

namespace warpguard::panel {

MainWindow::MainWindow(ControlLink* link, QWidget* parent) : QMainWindow(parent), link_(link) {
    setObjectName("mainWindow");
    setWindowTitle(tr("WarpGuard"));
    resize(1280, 860);
    dashboard_ = new Dashboard(link, this);
    setCentralWidget(dashboard_);
    auto* bar = addToolBar(tr("Main"));
    bar->setObjectName("mainToolbar");
    auto* setup = bar->addAction(tr("&Set up a robot…"));
    setup->setShortcut(QKeySequence(Qt::CTRL | Qt::Key_N));
    connect(setup, &QAction::triggered, this, [this] { openWizard(); });
    auto* full = bar->addAction(tr("&Full screen"));
    full->setShortcut(QKeySequence(Qt::Key_F11));
    full->setCheckable(true);
    connect(full, &QAction::toggled, this, [this](bool on) { on ? showFullScreen() : showNormal(); });
    connect(link_, &ControlLink::problem, this, [this](const QString& text) { statusBar()->showMessage(text, 10000); });
}

SetupWizard* MainWindow::openWizard() {
    if (!wizard_) {
        wizard_ = new SetupWizard(link_, this);
        // Closing the wizard keeps its pages: opening it again resumes where it was left.
    }
    wizard_->show();
    wizard_->raise();
    return wizard_;
}

}  // namespace warpguard::panel
