#include "setup_wizard.hpp"

#include <QApplication>
#include <QButtonGroup>
#include <QClipboard>
#include <QComboBox>
#include <QFile>
#include <QFileDialog>
#include <QFormLayout>
#include <QHeaderView>
#include <QJsonArray>
#include <QJsonDocument>
#include <QLabel>
#include <QLineEdit>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QRadioButton>
#include <QSlider>
#include <QSpinBox>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>
#include <cmath>

#include "charts.hpp"
#include "control_link.hpp"

namespace warpguard::panel {

namespace {

// A page whose Next button opens when the step's work is done (or at once when `optional`).
class Step : public QWizardPage {
public:
    Step(SetupWizard* w, const QString& title, const QString& subtitle) : wizard_(w) {
        setTitle(title);
        setSubTitle(subtitle);
        layout_ = new QVBoxLayout(this);
        message_ = new QLabel(this);
        message_->setWordWrap(true);
        message_->setObjectName("stepMessage");
    }
    bool isComplete() const override { return done_; }
    void setDone(bool done) {
        if (done == done_) return;
        done_ = done;
        emit completeChanged();
    }
    // Green for progress, red with what to do for errors.
    void say(const QString& text, bool error = false) {
        message_->setText(text);
        message_->setStyleSheet(error ? "color: rgb(190,20,20); font-weight: bold;" : "color: rgb(20,110,40);");
    }
    void finish_layout() {
        layout_->addStretch(1);
        layout_->addWidget(message_);
    }
    ControlLink* link() const { return wizard_->link(); }
    QString robot() const { return wizard_->robotId(); }

protected:
    SetupWizard* wizard_;
    QVBoxLayout* layout_;
    QLabel* message_;
    bool done_ = false;
};

// Repeats `tick` every 500 ms while the page is shown.
QTimer* poller(QWizardPage* page, std::function<void()> tick) {
    auto* t = new QTimer(page);
    t->setInterval(500);
    QObject::connect(t, &QTimer::timeout, page, std::move(tick));
    return t;
}

class ConnectPage : public Step {
public:
    explicit ConnectPage(SetupWizard* w)
        : Step(w, tr("1. Connect to warpguardd"), tr("The daemon on this cell PC: its control address and the token from its configuration.")) {
        auto* form = new QFormLayout();
        host_ = new QLineEdit(qEnvironmentVariable("WARPGUARD_HOST", "127.0.0.1"), this);
        host_->setObjectName("daemonHost");
        port_ = new QSpinBox(this);
        port_->setObjectName("daemonPort");
        port_->setRange(1, 65535);
        port_->setValue(qEnvironmentVariableIntValue("WARPGUARD_CONTROL_PORT") ? qEnvironmentVariableIntValue("WARPGUARD_CONTROL_PORT") : 7701);
        token_ = new QLineEdit(qEnvironmentVariable("WARPGUARD_TOKEN"), this);
        token_->setObjectName("daemonToken");
        token_->setEchoMode(QLineEdit::Password);
        form->addRow(tr("&Host:"), host_);
        form->addRow(tr("Control &port:"), port_);
        form->addRow(tr("&Token:"), token_);
        layout_->addLayout(form);
        auto* go = new QPushButton(tr("&Connect"), this);
        go->setObjectName("connectButton");
        layout_->addWidget(go);
        finish_layout();
        connect(go, &QPushButton::clicked, this, [this] {
            if (token_->text().size() < 8) {
                say(tr("The token has %1 characters; warpguardd's tokens have at least 8 (see token or token_file in its configuration).")
                        .arg(token_->text().size()), true);
                return;
            }
            say(tr("Connecting to %1:%2 …").arg(host_->text()).arg(port_->value()));
            link()->open(host_->text(), static_cast<quint16>(port_->value()), token_->text());
        });
        connect(link(), &ControlLink::readyChanged, this, [this](bool ready) {
            setDone(ready);
            if (ready) say(tr("Connected to warpguardd at %1:%2.").arg(link()->host()).arg(link()->port()));
        });
        connect(link(), &ControlLink::problem, this, [this](const QString& text) {
            if (!link()->isReady()) say(text + tr(" — is warpguardd running (systemctl status warpguardd) and is the port its control_listen?"), true);
        });
    }
    void initializePage() override { setDone(link()->isReady()); }

private:
    QLineEdit *host_, *token_;
    QSpinBox* port_;
};

class RobotPage : public Step {
public:
    explicit RobotPage(SetupWizard* w)
        : Step(w, tr("2. Add the robot"), tr("How the robot identifies itself and what it sends. The id is also written into its script.")) {
        auto* form = new QFormLayout();
        id_ = new QLineEdit("cell1-robot", this);
        id_->setObjectName("robotId");
        vendor_ = new QComboBox(this);
        vendor_->setObjectName("robotVendor");
        vendor_->addItem("Universal Robots (URScript)", "ur");
        vendor_->addItem("ABB (RAPID)", "abb");
        vendor_->addItem("Denso (PacScript)", "denso");
        address_ = new QLineEdit("127.0.0.1", this);
        address_->setObjectName("robotAddress");
        signal_ = new QComboBox(this);
        signal_->setObjectName("robotSignal");
        signal_->addItem(tr("joint torque (Nm)"), QStringList{"torque", "Nm"});
        signal_->addItem(tr("motor current (A)"), QStringList{"current", "A"});
        signal_->addItem(tr("torque (% of rated)"), QStringList{"torque", "percent"});
        joints_ = new QSpinBox(this);
        joints_->setObjectName("robotJoints");
        joints_->setRange(1, 16);
        joints_->setValue(6);
        linear_ = new QLineEdit(this);
        linear_->setObjectName("robotLinear");
        linear_->setPlaceholderText(tr("none — a SCARA's quill: 3"));
        linear_->setToolTip(tr("Joints that slide instead of turning, 1-based and comma-separated; the script sends them in mm"));
        form->addRow(tr("Robot &id:"), id_);
        form->addRow(tr("&Vendor:"), vendor_);
        form->addRow(tr("Robot's IP &address:"), address_);
        form->addRow(tr("&Signal:"), signal_);
        form->addRow(tr("&Joints:"), joints_);
        form->addRow(tr("&Linear joints:"), linear_);
        layout_->addLayout(form);
        auto* add = new QPushButton(tr("&Add robot"), this);
        add->setObjectName("addRobotButton");
        layout_->addWidget(add);
        finish_layout();
        registerField("robot", id_);
        connect(add, &QPushButton::clicked, this, [this] {
            const QStringList sig = signal_->currentData().toStringList();
            QJsonArray linear;
            for (const QString& item : linear_->text().split(',', Qt::SkipEmptyParts)) {
                bool ok = false;
                const int joint = item.trimmed().toInt(&ok);
                if (!ok) return say(tr("Linear joints: '%1' is not a joint number; expected e.g. 3 or 3,7").arg(item.trimmed()), true);
                linear.append(joint);
            }
            const QJsonObject config{{"id", id_->text()},          {"address", address_->text()}, {"vendor", vendor_->currentData().toString()},
                                     {"signal", sig[0]},          {"unit", sig[1]},              {"joints", joints_->value()},
                                     {"linear", linear}};
            link()->request({{"cmd", "add_robot"}, {"config", config}}, [this](const QJsonObject&, const QString& error) {
                if (error.isEmpty()) {
                    say(tr("Robot %1 added.").arg(id_->text()));
                    setDone(true);
                } else if (error.contains("already")) {
                    say(tr("Robot %1 is already configured; continuing with it.").arg(id_->text()));
                    setDone(true);
                } else {
                    say(error, true);
                }
            });
        });
    }

private:
    QLineEdit *id_, *address_, *linear_;
    QComboBox *vendor_, *signal_;
    QSpinBox* joints_;
};

class ScriptPage : public Step {
public:
    explicit ScriptPage(SetupWizard* w)
        : Step(w, tr("3. The robot's background task"),
               tr("Install this script on the robot controller beside its program (instructions at the top of the script).")) {
        auto* form = new QFormLayout();
        pc_ = new QLineEdit(qEnvironmentVariable("WARPGUARD_PC_ADDRESS", "192.168.0.10"), this);
        pc_->setObjectName("pcAddress");
        form->addRow(tr("This PC's address as the &robot reaches it:"), pc_);
        layout_->addLayout(form);
        auto* row = new QHBoxLayout();
        auto* make = new QPushButton(tr("&Generate"), this);
        make->setObjectName("generateScript");
        auto* copy = new QPushButton(tr("&Copy"), this);
        auto* save = new QPushButton(tr("&Save…"), this);
        row->addWidget(make);
        row->addWidget(copy);
        row->addWidget(save);
        row->addStretch(1);
        layout_->addLayout(row);
        text_ = new QPlainTextEdit(this);
        text_->setObjectName("scriptText");
        text_->setReadOnly(true);
        text_->setFont(QFont("monospace", 9));
        layout_->addWidget(text_, 1);
        finish_layout();
        connect(make, &QPushButton::clicked, this, [this] {
            link()->request({{"cmd", "script"}, {"robot", robot()}, {"host", pc_->text()}}, [this](const QJsonObject& a, const QString& error) {
                if (!error.isEmpty()) return say(error, true);
                QString all;
                for (const auto& f : a.value("files").toArray()) {
                    all += QString("==== %1 ====\n%2\n").arg(f.toObject().value("name").toString(), f.toObject().value("text").toString());
                }
                text_->setPlainText(all);
                say(tr("Script ready for %1: copy it or save it, then install it on the controller.").arg(robot()));
                setDone(true);
            });
        });
        connect(copy, &QPushButton::clicked, this, [this] { QApplication::clipboard()->setText(text_->toPlainText()); });
        connect(save, &QPushButton::clicked, this, [this] {
            const QString path = QFileDialog::getSaveFileName(this, tr("Save the robot script"), robot() + "-warpguard.txt");
            if (path.isEmpty()) return;
            QFile f(path);
            if (!f.open(QIODevice::WriteOnly)) return say(tr("Cannot write %1: %2").arg(path, f.errorString()), true);
            f.write(text_->toPlainText().toUtf8());
            say(tr("Saved to %1.").arg(path));
        });
    }

private:
    QLineEdit* pc_;
    QPlainTextEdit* text_;
};

class WaitRobotPage : public Step {
public:
    explicit WaitRobotPage(SetupWizard* w)
        : Step(w, tr("4. Wait for the robot"), tr("Start the robot's program: its background task connects to this PC.")) {
        light_ = new QLabel(this);
        light_->setObjectName("robotLight");
        light_->setAlignment(Qt::AlignCenter);
        light_->setMinimumHeight(90);
        layout_->addWidget(light_);
        help_ = new QLabel(tr("Not connecting? Check that the robot reaches this PC (ping), that the port in the script is warpguardd's "
                              "robot_listen port and open in the firewall, that the id in the script is the one added here, and the "
                              "daemon's log (refused links are logged with the reason)."),
                           this);
        help_->setWordWrap(true);
        layout_->addWidget(help_);
        finish_layout();
        timer_ = poller(this, [this] {
            link()->request({{"cmd", "robot"}, {"robot", robot()}}, [this](const QJsonObject& a, const QString& error) {
                if (!error.isEmpty()) return say(error, true);
                const bool on = a.value("connected").toBool();
                light_->setText(on ? tr("● connected from %1").arg(a.value("remote").toString()) : tr("○ waiting for %1 …").arg(robot()));
                light_->setStyleSheet(on ? "font-size: 22pt; color: white; background: rgb(30,150,60);"
                                         : "font-size: 22pt; color: white; background: rgb(120,120,120);");
                setDone(on);
            });
        });
    }
    void initializePage() override { timer_->start(); }
    void cleanupPage() override { timer_->stop(); }
    bool validatePage() override {
        timer_->stop();
        return true;
    }

private:
    QLabel *light_, *help_;
    QTimer* timer_;
};

class ModelPage : public Step {
public:
    explicit ModelPage(SetupWizard* w)
        : Step(w, tr("5. Robot model"),
               tr("KA-mDTW needs the robot's kinematics (tasks that vary in place). Plain mDTW needs none.")) {
        none_ = new QRadioButton(tr("&No model: the task repeats in place (plain mDTW)"), this);
        none_->setObjectName("modelNone");
        preset_ = new QRadioButton(tr("Load a &preset or an identified model (JSON)…"), this);
        ident_ = new QRadioButton(tr("Run the &identification procedure on the robot (thesis 4.2)"), this);
        ident_->setObjectName("modelIdentify");
        for (auto* b : {none_, preset_, ident_}) layout_->addWidget(b);
        result_ = new QLabel(this);
        result_->setObjectName("modelResult");
        result_->setWordWrap(true);
        layout_->addWidget(result_);
        finish_layout();
        timer_ = poller(this, [this] { poll(); });
        connect(none_, &QRadioButton::toggled, this, [this](bool on) {
            if (on) setDone(true);
        });
        connect(preset_, &QRadioButton::clicked, this, [this] {
            const QString path = QFileDialog::getOpenFileName(this, tr("Kinematic model"), QString(), tr("JSON (*.json)"));
            if (path.isEmpty()) return;
            QFile f(path);
            if (!f.open(QIODevice::ReadOnly)) return say(tr("Cannot read %1: %2").arg(path, f.errorString()), true);
            const QJsonObject model = QJsonDocument::fromJson(f.readAll()).object();
            link()->request({{"cmd", "set_model"}, {"robot", robot()}, {"model", model}}, [this](const QJsonObject& a, const QString& error) {
                if (!error.isEmpty()) return say(error, true);
                say(tr("Model %1 stored for %2.").arg(a.value("model_id").toInteger()).arg(robot()));
                setDone(true);
            });
        });
        connect(ident_, &QRadioButton::clicked, this, [this] {
            link()->request({{"cmd", "identify_start"}, {"robot", robot()}}, [this](const QJsonObject&, const QString& error) {
                if (!error.isEmpty()) return say(error, true);
                say(tr("Armed: run the identification program on %1 now (warpguard script … --identify). THE ROBOT WILL MOVE.").arg(robot()));
                timer_->start();
            });
        });
    }
    void poll() {
        link()->request({{"cmd", "identification"}, {"robot", robot()}}, [this](const QJsonObject& a, const QString& error) {
            if (!error.isEmpty()) return;
            const QString state = a.value("state").toString();
            result_->setText(tr("Identification: %1, %2 points received").arg(state).arg(a.value("points").toInt()));
            if (state == "done") {
                timer_->stop();
                const QJsonObject id = a.value("result").toObject().value("model").toObject().value("identification").toObject();
                result_->setText(tr("Model %1 identified from %2 points: forward kinematics against the points rms %3 mm, max %4 mm.")
                                     .arg(a.value("result").toObject().value("model_id").toInteger())
                                     .arg(a.value("points").toInt())
                                     .arg(id.value("fk_rms_m").toDouble() * 1e3, 0, 'f', 3)
                                     .arg(id.value("fk_max_m").toDouble() * 1e3, 0, 'f', 3));
                setDone(true);
            } else if (state == "failed") {
                timer_->stop();
                say(tr("Identification failed: %1").arg(a.value("result").toObject().value("error").toString()), true);
            }
        });
    }

private:
    QRadioButton *none_, *preset_, *ident_;
    QLabel* result_;
    QTimer* timer_;
};

class RecordPage : public Step {
public:
    explicit RecordPage(SetupWizard* w)
        : Step(w, tr("6. Record the reference"),
               tr("Let the robot run its normal task. The first cycles become the reference — one of every place or pose the "
                  "task goes to in turn — the rest teach the thresholds: record at least 13 complete cycles, and 10 more than "
                  "the task has variants.")) {
        auto* row = new QHBoxLayout();
        start_ = new QPushButton(tr("&Start recording"), this);
        start_->setObjectName("recordStart");
        stop_ = new QPushButton(tr("S&top and keep"), this);
        stop_->setObjectName("recordStop");
        stop_->setEnabled(false);
        counter_ = new QLabel(tr("not recording"), this);
        counter_->setObjectName("cycleCounter");
        counter_->setStyleSheet("font-size: 20pt; font-weight: bold;");
        row->addWidget(start_);
        row->addWidget(stop_);
        row->addWidget(counter_, 1);
        layout_->addLayout(row);
        chart_ = make_chart(tr("Live: joint 2"), tr("robot time (s)"), tr("signal"), this);
        series_ = add_series(chart_, tr("joint 2"), QColor(200, 30, 30));
        chart_.view->setObjectName("recordChart");
        layout_->addWidget(chart_.view, 1);
        finish_layout();
        timer_ = poller(this, [this] { poll(); });
        connect(start_, &QPushButton::clicked, this, [this] {
            link()->request({{"cmd", "record_start"}, {"robot", robot()}}, [this](const QJsonObject&, const QString& error) {
                if (!error.isEmpty()) return say(error, true);
                start_->setEnabled(false);
                stop_->setEnabled(true);
                say(tr("Recording. Stop when the counter shows 13 or more complete cycles."));
            });
        });
        connect(stop_, &QPushButton::clicked, this, [this] {
            link()->request({{"cmd", "record_stop"}, {"robot", robot()}}, [this](const QJsonObject& a, const QString& error) {
                if (!error.isEmpty()) return say(error, true);
                stop_->setEnabled(false);
                start_->setEnabled(true);
                const int cycles = a.value("cycles").toInt();
                if (cycles < 13) return say(tr("Recording %1 has %2 complete cycles; calibration needs the reference's (3 or more) and 10 more. "
                                               "Record again, longer.").arg(a.value("id").toInteger()).arg(cycles), true);
                say(tr("Recording %1 kept: %2 samples, %3 complete cycles.").arg(a.value("id").toInteger()).arg(a.value("samples").toInteger()).arg(cycles));
                setDone(true);
            });
        });
        connect(link(), &ControlLink::feedPushed, this, [this](const QJsonObject& feed) {
            if (!isVisible() || feed.value("feed").toString() != robot()) return;
            for (const auto& v : feed.value("points").toArray()) {
                const QJsonObject p = v.toObject();
                series_->append(p.value("t").toDouble(), p.value("signal").toArray().at(1).toDouble());
            }
            if (series_->count() > 1500) series_->removePoints(0, series_->count() - 1500);
            fit_axes(chart_);
        });
    }
    void initializePage() override {
        timer_->start();
        // Resuming: a committed recording that is long enough already completes the step.
        link()->request({{"cmd", "recordings"}, {"robot", robot()}}, [this](const QJsonObject& a, const QString&) {
            const QJsonArray all = a.value("recordings").toArray();
            if (!all.isEmpty() && all.last().toObject().value("cycles").toInt() >= 13) {
                say(tr("Recording %1 (%2 complete cycles) is there already; record again or go on.")
                        .arg(all.last().toObject().value("id").toInteger()).arg(all.last().toObject().value("cycles").toInt()));
                setDone(true);
            }
        });
    }
    void cleanupPage() override { timer_->stop(); }
    void poll() {
        link()->request({{"cmd", "robot"}, {"robot", robot()}}, [this](const QJsonObject& a, const QString&) {
            const QJsonObject rec = a.value("recording").toObject();
            if (!rec.isEmpty()) {
                counter_->setText(tr("%1 complete cycles, %2 samples").arg(rec.value("complete_cycles").toInt()).arg(rec.value("samples").toInteger()));
            }
            chart_.y->setTitleText(tr("joint 2 (%1)").arg(a.value("unit").toString()));
        });
    }

private:
    QPushButton *start_, *stop_;
    QLabel* counter_;
    Chart chart_;
    QLineSeries* series_;
    QTimer* timer_;
};

class CalibratePage : public Step {
public:
    explicit CalibratePage(SetupWizard* w)
        : Step(w, tr("7. Calibrate"),
               tr("Thresholds from the robot's own recording: per phase of the cycle, with a margin fitted to the nominal cycles.")) {
        auto* form = new QFormLayout();
        refs_ = new QSpinBox(this);
        refs_->setObjectName("referenceCycles");
        // 0 = automatic: the daemon takes the fewest cycles from 2 whose path covers the later ones'
        // (every place or pose the task goes to).
        refs_->setRange(0, 20);
        refs_->setSpecialValueText(tr("automatic (every variant of the task)"));
        refs_->setValue(0);
        sensitivity_ = new QSlider(Qt::Horizontal, this);
        sensitivity_->setObjectName("sensitivity");
        sensitivity_->setRange(0, 4);
        sensitivity_->setValue(2);
        sensitivity_->setPageStep(1);
        rate_ = new QLabel(this);
        rate_->setObjectName("expectedRate");
        // The task's recording (the latest by default) and, optionally, a dry run of the task: the
        // same program with no part and nothing to press, recorded on the previous page. With one,
        // the arm model is fitted on it and the profile matches what the arm's own dynamics do not
        // explain (docs/identification.md, "The deviation in the detector").
        recording_ = new QComboBox(this);
        recording_->setObjectName("taskRecording");
        dry_run_ = new QComboBox(this);
        dry_run_->setObjectName("dryRun");
        dry_run_->setToolTip(tr("The detector matches the deviation from the arm's own dynamics: it stops sooner than on the "
                                "signal as recorded. Without a dry run (the task's program with no part and nothing to press) "
                                "the arm model is fitted on the task's recording itself, when the robot has a kinematic model and its "
                                "program declares its payload."));
        // With a dry run, optionally an excitation run: each joint moved alone, fitted with the dry
        // run so that joints the task always moves together are told apart (docs/identification.md,
        // "The excitation run").
        excitation_ = new QComboBox(this);
        excitation_->setObjectName("excitationRun");
        excitation_->setToolTip(tr("An excitation run moves each joint alone. Fitted with the dry run, it tells apart joints the task "
                                   "always moves together (the wrist turned with the base), which a contact's jolt moves apart."));
        excitation_->setEnabled(false);
        form->addRow(tr("&Task recording:"), recording_);
        form->addRow(tr("&Dry run (optional):"), dry_run_);
        form->addRow(tr("&Excitation run (optional):"), excitation_);
        connect(dry_run_, &QComboBox::currentIndexChanged, this, [this] {
            const bool with_dry = dry_run_->currentData().toLongLong() > 0;
            excitation_->setEnabled(with_dry);
            if (!with_dry) excitation_->setCurrentIndex(0);
        });
        form->addRow(tr("&Reference cycles:"), refs_);
        form->addRow(tr("&Sensitivity (left: more sensitive):"), sensitivity_);
        form->addRow(tr("Expected false stops:"), rate_);
        layout_->addLayout(form);
        auto* go = new QPushButton(tr("&Calibrate and activate"), this);
        go->setObjectName("calibrateButton");
        layout_->addWidget(go);
        table_ = new QTableWidget(0, 5, this);
        table_->setObjectName("thresholdTable");
        table_->verticalHeader()->hide();
        table_->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
        layout_->addWidget(table_, 1);
        derivation_ = new QLabel(this);
        derivation_->setObjectName("derivation");
        derivation_->setWordWrap(true);
        layout_->addWidget(derivation_);
        finish_layout();
        const auto show_rate = [this] {
            rate_->setText(tr("about 1 per %L1 nominal cycles (the margin is fitted for this)").arg(target()));
        };
        show_rate();
        connect(sensitivity_, &QSlider::valueChanged, this, show_rate);
        connect(go, &QPushButton::clicked, this, [this] {
            const qint64 task = recording_->currentData().toLongLong(), choice = dry_run_->currentData().toLongLong();
            const qint64 dry = std::max<qint64>(choice, 0);  // -1: no arm model at all
            if (task == 0) return say(tr("There is no committed recording to calibrate on: go back and record the task."), true);
            if (dry == task) {
                return say(tr("Recording %1 is chosen as both the task and its dry run. The dry run is another recording: the same "
                              "program with no part and nothing to press. Choose it, or \"none\".")
                               .arg(task),
                           true);
            }
            const qint64 excitation = dry ? excitation_->currentData().toLongLong() : 0;
            if (excitation != 0 && (excitation == task || excitation == dry)) {
                return say(tr("Recording %1 is chosen as the excitation run and as the %2. The excitation run is another recording: "
                              "each joint moved alone. Choose it, or \"none\".")
                               .arg(excitation)
                               .arg(excitation == task ? tr("task") : tr("dry run")),
                           true);
            }
            say(dry ? tr("Calibrating on recording %1 with dry run %2 …").arg(task).arg(dry) : tr("Calibrating on recording %1 …").arg(task));
            QJsonObject request{{"cmd", "calibrate"}, {"robot", robot()}, {"recording", task}, {"target_cycles", target()}, {"activate", true}};
            if (dry) request["dry_run"] = dry;
            if (choice < 0) request["no_arm"] = true;
            if (excitation) request["excitation"] = excitation;
            if (refs_->value() > 0) request["reference_cycles"] = refs_->value();
            link()->request(request,
                            [this](const QJsonObject& a, const QString& error) {
                                if (!error.isEmpty()) return say(error, true);
                                show(a.value("summary").toObject());
                                say(tr("Profile %1 is active (mode idle until the next steps).").arg(a.value("profile").toInteger()));
                                setDone(true);
                            });
        });
    }
    void initializePage() override {
        link()->request({{"cmd", "recordings"}, {"robot", robot()}}, [this](const QJsonObject& a, const QString& error) {
            if (!error.isEmpty()) return say(error, true);
            recording_->clear();
            dry_run_->clear();
            dry_run_->addItem(tr("none: the arm model from the task's recording"), qint64(0));
            dry_run_->addItem(tr("no arm model: match the signal as recorded"), qint64(-1));
            excitation_->clear();
            excitation_->addItem(tr("none"), qint64(0));
            const QJsonArray all = a.value("recordings").toArray();
            for (qsizetype i = all.size(); i-- > 0;) {  // newest first: the task's recording is usually the latest
                const QJsonObject r = all.at(i).toObject();
                // When it started, in the panel's local time (the daemon stores UTC, ISO 8601).
                const QString when = local_time(r.value("started").toString(), "yyyy-MM-dd HH:mm");
                const QString text =
                    tr("recording %1: %2 complete cycles, started %3").arg(r.value("id").toInteger()).arg(r.value("cycles").toInt()).arg(when);
                recording_->addItem(text, r.value("id").toInteger());
                dry_run_->addItem(text, r.value("id").toInteger());
                excitation_->addItem(text, r.value("id").toInteger());
            }
        });
    }
    double target() const { return std::pow(10.0, 2.0 + sensitivity_->value() * 0.5); }
    void show(const QJsonObject& s) {
        const QString unit = s.value("unit").toString();
        const QJsonObject phase = s.value("phase_aware").toObject();
        const QJsonArray per_phase = phase.value("joints").toArray();
        const QJsonArray th = s.value("thresholds").toArray();
        table_->setColumnCount(5);
        table_->setHorizontalHeaderLabels({tr("joint"), tr("threshold min (%1)").arg(unit), tr("median (%1)").arg(unit),
                                           tr("max (%1)").arg(unit), tr("nominal σ (%1)").arg(unit)});
        table_->setRowCount(th.size());
        for (int j = 0; j < th.size(); ++j) {
            const QJsonObject p = per_phase.at(j).toObject(), t = th[j].toObject();
            const QStringList cells = {QString::number(j + 1), QString::number(p.value("min").toDouble(t.value("theta1").toDouble()), 'g', 4),
                                       QString::number(p.value("median").toDouble(t.value("theta1").toDouble()), 'g', 4),
                                       QString::number(p.value("max").toDouble(t.value("theta1").toDouble()), 'g', 4),
                                       QString::number(t.value("sigma").toDouble(), 'g', 4)};
            for (int c = 0; c < cells.size(); ++c) table_->setItem(j, c, new QTableWidgetItem(cells[c]));
        }
        const QJsonObject d = phase.value("derivation").toObject();
        derivation_->setText(tr("From %1 nominal cycles (reference %2 samples): margin %3 × the largest nominal deviation near each phase "
                                "(extreme-value fits to %4 per-cycle maxima: mean %5, largest %6); CUSUM limit %7; STOP after %8 samples over.")
                                 .arg(s.value("nominal_cycles").toInt())
                                 .arg(s.value("reference_samples").toInt())
                                 .arg(phase.value("margin").toDouble(), 0, 'f', 3)
                                 .arg(d.value("cycles").toInt())
                                 .arg(d.value("cycle_max_mean").toDouble(), 0, 'f', 3)
                                 .arg(d.value("cycle_max_largest").toDouble(), 0, 'f', 3)
                                 .arg(phase.value("cusum_limit").toDouble(), 0, 'f', 3)
                                 .arg(phase.value("persistence").toInt()));
        // What is matched: the signal as recorded, or its deviation from the arm model of a dry run.
        const QJsonObject arm = s.value("arm_model").toObject();
        const qint64 excitation_run = arm.value("excitation").toInteger();
        derivation_->setText(derivation_->text() +
                             (arm.isEmpty() ? (s.contains("arm_model_not_fitted")
                                                   ? tr(" Matched signal: as recorded (%1).").arg(s.value("arm_model_not_fitted").toString())
                                                   : tr(" Matched signal: as recorded."))
                              : arm.value("dry_run").toInteger() == 0
                                  ? tr(" Matched signal: the deviation from the arm model fitted on the task's recording (%1 samples).")
                                        .arg(arm.value("samples").toInt())
                              : excitation_run ? tr(" Matched signal: the deviation from the arm model fitted on dry run %1 and excitation "
                                                    "run %2 (%3 samples).")
                                                     .arg(arm.value("dry_run").toInteger())
                                                     .arg(excitation_run)
                                                     .arg(arm.value("samples").toInt())
                                               : tr(" Matched signal: the deviation from the arm model fitted on dry run %1 (%2 samples).")
                                                     .arg(arm.value("dry_run").toInteger())
                                                     .arg(arm.value("samples").toInt())));
        // Joints the runs always move together: the arm model cannot tell their inertias apart.
        for (const auto& v : arm.value("dependent_joints").toArray()) {
            const QJsonArray joints = v.toObject().value("joints").toArray();
            derivation_->setText(derivation_->text() +
                                 tr(" <b>Warning:</b> joints %1 and %2 move together in every run of the arm model: it cannot tell their "
                                    "inertias apart and mispredicts a motion of one alone (a contact's jolt); add %3.")
                                     .arg(joints.at(0).toInt())
                                     .arg(joints.at(1).toInt())
                                     .arg(arm.value("dry_run").toInteger() == 0 ? tr("a dry run and an excitation run")
                                                                                : tr("an excitation run")));
        }
        // The reference: how many cycles, and whether it has every variant of the task.
        const QJsonObject coverage = s.value("reference_coverage").toObject();
        if (!coverage.isEmpty()) {
            const bool gaps = coverage.value("uncovered").toInt() > 0;
            derivation_->setText(derivation_->text() + (gaps ? tr(" <b>Warning:</b> ") : tr(" Reference: ")) +
                                 coverage.value("note").toString().toHtmlEscaped() + ".");
        }
        // The robot reported its speed override: the reference's is kept, and a stream starts at the
        // speed its first report gives.
        if (s.contains("reference_override")) {
            const QString percent = QString::number(s.value("reference_override").toDouble() * 100.0, 'f', 0);
            derivation_->setText(derivation_->text() +
                                 (s.contains("speed_model") ? tr(" Recorded at speed override %1 %: detection starts at the speed the robot reports.")
                                                            : tr(" Recorded at speed override %1 %."))
                                     .arg(percent));
        }
        // The robot stood held or samples were lost while recording: what calibration left out.
        const QJsonObject interruptions = s.value("interruptions").toObject();
        if (!interruptions.isEmpty()) {
            QStringList parts;
            for (const auto& v : interruptions.value("list").toArray()) {
                if (parts.size() == 3) {
                    parts << tr("…");
                    break;
                }
                parts << v.toObject().value("what").toString().toHtmlEscaped();
            }
            derivation_->setText(derivation_->text() + tr(" <b>Interrupted recording:</b> ") +
                                 interruptions.value("note").toString().toHtmlEscaped() + " (" + parts.join("; ") + ").");
        }
        // Which fit set the limits: where the tail of the few largest maxima did, its 95 % bound
        // widens them, and only more nominal cycles narrow them.
        const auto from_tail = [&d](const char* prefix, const char* largest) {
            const double tail = d.value(QString(prefix) + "tail_quantile").toDouble();
            return tail > d.value(QString(prefix) + "gumbel_quantile").toDouble() && tail > d.value(largest).toDouble();
        };
        if (from_tail("", "cycle_max_largest") || from_tail("cusum_", "cusum_cycle_max_largest")) {
            derivation_->setText(derivation_->text() +
                                 tr(" The limits come from the tail of the %1 largest per-cycle maxima, widened ×%2 for the uncertainty of so few: "
                                    "recording more nominal cycles narrows them.")
                                     .arg(d.value("tail_exceedances").toInt())
                                     .arg(d.value("tail_scale_factor").toDouble(), 0, 'f', 2));
        }
        // The recorded cycles with the largest maxima (the robot's cycle counter): what set the
        // limits, worth a look when they are wide.
        const QJsonArray widest = d.value("widest_cycles").toArray();
        if (!widest.isEmpty()) {
            QStringList parts;
            for (const auto& v : widest) {
                const QJsonObject c = v.toObject();
                parts << tr("cycle %1 (%2 / %3)")
                             .arg(c.value("cycle").toInteger())
                             .arg(c.value("ratio").toDouble(), 0, 'f', 2)
                             .arg(c.value("cusum").toDouble(), 0, 'f', 2);
            }
            derivation_->setText(derivation_->text() + tr(" Cycles with the largest maxima, ratio / CUSUM: %1.").arg(parts.join(", ")));
        }
    }

private:
    QComboBox *recording_, *dry_run_, *excitation_;
    QSpinBox* refs_;
    QSlider* sensitivity_;
    QLabel *rate_, *derivation_;
    QTableWidget* table_;
};

class ShadowPage : public Step {
public:
    explicit ShadowPage(SetupWizard* w)
        : Step(w, tr("8. Shadow run"), tr("WarpGuard watches and logs the stops it would make, but never stops the robot. Let a few cycles pass.")) {
        count_ = new QLabel(this);
        count_->setObjectName("shadowCount");
        count_->setStyleSheet("font-size: 18pt; font-weight: bold;");
        count_->setWordWrap(true);
        layout_->addWidget(count_);
        list_ = new QPlainTextEdit(this);
        list_->setObjectName("shadowStops");
        list_->setReadOnly(true);
        layout_->addWidget(list_, 1);
        finish_layout();
        timer_ = poller(this, [this] { poll(); });
    }
    void initializePage() override {
        link()->request({{"cmd", "mode"}, {"robot", robot()}, {"mode", "shadow"}}, [this](const QJsonObject& a, const QString& error) {
            if (!error.isEmpty()) return say(error, true);
            start_cycle_ = a.value("cycle").toInteger();
            link()->request({{"cmd", "events"}, {"robot", robot()}, {"limit", 1}}, [this](const QJsonObject& e, const QString&) {
                const QJsonArray all = e.value("events").toArray();
                after_ = all.isEmpty() ? 0 : all.last().toObject().value("id").toInteger();
                timer_->start();
            });
        });
    }
    void cleanupPage() override { timer_->stop(); }
    bool validatePage() override {
        timer_->stop();
        return true;
    }
    void poll() {
        link()->request({{"cmd", "robot"}, {"robot", robot()}}, [this](const QJsonObject& a, const QString&) {
            cycles_ = a.value("cycle").toInteger() - start_cycle_;
        });
        link()->request({{"cmd", "events"}, {"robot", robot()}, {"kind", "would_stop"}, {"after", after_}, {"limit", 500}},
                        [this](const QJsonObject& a, const QString& error) {
                            if (!error.isEmpty()) return;
                            const QJsonArray all = a.value("events").toArray();
                            QString text;
                            for (const auto& e : all) text += e.toObject().value("reason").toString() + "\n";
                            list_->setPlainText(text);
                            count_->setText(tr("%1 cycle(s) watched in shadow: %2 stop(s) would have happened%3")
                                                .arg(cycles_)
                                                .arg(all.size())
                                                .arg(all.isEmpty() ? tr(". Watch more cycles for more confidence; then go on.")
                                                                   : tr(" — look at them below; if the robot did nothing wrong, "
                                                                        "go back and record or calibrate again (less sensitive).")));
                            setDone(cycles_ >= 1);
                        });
    }

private:
    QLabel* count_;
    QPlainTextEdit* list_;
    QTimer* timer_;
    qint64 start_cycle_ = 0, after_ = 0, cycles_ = 0;
};

class ActivatePage : public Step {
public:
    explicit ActivatePage(SetupWizard* w)
        : Step(w, tr("9. Activate detection"), tr("From now on WarpGuard stops the robot when it detects a collision.")) {
        auto* go = new QPushButton(tr("&Activate DETECT"), this);
        go->setObjectName("activateButton");
        go->setStyleSheet("font-size: 18pt; font-weight: bold;");
        layout_->addWidget(go);
        finish_layout();
        connect(go, &QPushButton::clicked, this, [this] {
            link()->request({{"cmd", "mode"}, {"robot", robot()}, {"mode", "detect"}}, [this](const QJsonObject& a, const QString& error) {
                if (!error.isEmpty()) return say(error, true);
                say(tr("%1 is in %2 mode.").arg(robot(), a.value("mode").toString()));
                setDone(a.value("mode").toString() == "detect");
            });
        });
    }
};

}  // namespace

SetupWizard::SetupWizard(ControlLink* link, QWidget* parent) : QWizard(parent), link_(link) {
    setObjectName("setupWizard");
    setWindowTitle(tr("WarpGuard — set up a robot"));
    setWizardStyle(QWizard::ModernStyle);
    setOption(QWizard::NoBackButtonOnStartPage);
    resize(900, 700);
    setPage(Connect, new ConnectPage(this));
    setPage(Robot, new RobotPage(this));
    setPage(Script, new ScriptPage(this));
    setPage(WaitRobot, new WaitRobotPage(this));
    setPage(Model, new ModelPage(this));
    setPage(Record, new RecordPage(this));
    setPage(Calibrate, new CalibratePage(this));
    setPage(Shadow, new ShadowPage(this));
    setPage(Activate, new ActivatePage(this));
}

QString SetupWizard::robotId() const { return field("robot").toString(); }

}  // namespace warpguard::panel
