// The real warpguard-panel against the real daemon and the simulated robot on loopback, under Xvfb:
// through the whole setup wizard to DETECT (the kinematic identification run by the simulated
// controller on the way), a simulated collision appears as a stop event whose evidence opens, resume
// with its confirmation, and the panel reconnecting by itself after the daemon restarts.
// Screenshots of every wizard page and of the dashboard go to WARPGUARD_SHOTS (docs/panel/ in the
// repository holds the ones of the last run that updated them).
#include <QApplication>
#include <QCheckBox>
#include <QChartView>
#include <QXYSeries>
#include <QComboBox>
#include <QDateTime>
#include <QDir>
#include <QFile>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QLineEdit>
#include <QMessageBox>
#include <QPlainTextEdit>
#include <QSlider>
#include <QTabWidget>
#include <QImage>
#include <QJsonArray>
#include <QElapsedTimer>
#include <QProcess>
#include <QRegularExpression>
#include <QPushButton>
#include <QRadioButton>
#include <QSpinBox>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <vector>

#include <sys/prctl.h>

#include "charts.hpp"
#include "control_link.hpp"
#include "dashboard.hpp"
#include "evidence_dialog.hpp"
#include "main_window.hpp"
#include "setup_wizard.hpp"

using namespace warpguard::panel;

namespace {
const QString kToken = "panel-test-token-42";
const QString kRobot = "cellA-ur5e";
// The simulated robot collides from this cycle on: recording (25 cycles), shadow and DETECT come first.
const char* kContactsFrom = "34";

// The row of the event list holding an event of `kind` (the last such row), waiting up to
// `timeout_ms` for one to arrive; -1 if none did.
int wait_for_event(QTableWidget* events, const QString& kind, int timeout_ms) {
    QElapsedTimer waited;
    waited.start();
    while (waited.elapsed() < timeout_ms) {
        int found = -1;
        for (int r = 0; r < events->rowCount(); ++r) {
            if (events->item(r, 3)->text() == kind) found = r;
        }
        if (found >= 0) return found;
        QTest::qWait(200);
    }
    return -1;
}

// The robot cycle a stop's reason names ("... at cycle N, seq ..."); -1 if it names none.
int named_cycle(const QString& reason) {
    const QRegularExpressionMatch at = QRegularExpression("at cycle (\\d+)").match(reason);
    return at.hasMatch() ? at.captured(1).toInt() : -1;
}
}  // namespace

class PanelTest : public QObject {
    Q_OBJECT
private:
    QTemporaryDir dir_;
    QProcess daemon_, sim_;
    int robot_port_ = 0, control_port_ = 0;
    QString shots_;

    // The daemon and the simulated robot die with the test: when the test is aborted (QtTest's
    // watchdog) they would otherwise keep running and hold ctest's output pipe open until its own
    // timeout.
    static void die_with_parent(QProcess& p) {
        p.setChildProcessModifier([] { ::prctl(PR_SET_PDEATHSIG, SIGKILL); });
    }

    void start_daemon() {
        const QString ready = dir_.filePath("ready.json");
        die_with_parent(daemon_);
        QFile::remove(ready);
        daemon_.setProcessChannelMode(QProcess::ForwardedErrorChannel);
        daemon_.start(WARPGUARD_DAEMON, {"--config", dir_.filePath("warpguardd.json"), "--ready-file", ready, "--log-level", "warn"});
        QVERIFY2(daemon_.waitForStarted(5000), "warpguardd did not start");
        QTRY_VERIFY_WITH_TIMEOUT(QFile::exists(ready), 10000);
        QJsonObject r;
        const auto read_ready = [&] {
            QFile f(ready);
            if (f.open(QIODevice::ReadOnly)) r = QJsonDocument::fromJson(f.readAll()).object();
            return r.contains("control_port");
        };
        QTRY_VERIFY_WITH_TIMEOUT(read_ready(), 5000);
        robot_port_ = r.value("robot_port").toInt();
        control_port_ = r.value("control_port").toInt();
        QVERIFY(robot_port_ > 0 && control_port_ > 0);
    }
    void write_config(int robot_port, int control_port) {
        QFile f(dir_.filePath("warpguardd.json"));
        QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
        const QJsonObject cfg{{"robot_listen", QString("127.0.0.1:%1").arg(robot_port)},
                              {"control_listen", QString("127.0.0.1:%1").arg(control_port)},
                              {"token", kToken},
                              {"data_dir", dir_.filePath("data")},
                              {"robots", QJsonArray()}};
        f.write(QJsonDocument(cfg).toJson());
    }
    void shot(QWidget* w, const QString& name) {
        QApplication::processEvents();
        QTest::qWait(150);
        QVERIFY2(w->grab().save(shots_ + "/" + name + ".png"), qPrintable("cannot save " + name));
    }
    // Waits until the wizard's current page lets the user go on.
    bool complete(SetupWizard* w, int timeout_ms) {
        QElapsedTimer t;
        t.start();
        while (t.elapsed() < timeout_ms) {
            if (w->currentPage()->isComplete()) return true;
            QTest::qWait(100);
        }
        return false;
    }
    // Points of series `k` in the chart view named `name` under `w`.
    int live_points(QWidget* w, const char* name, int k) {
        auto* view = w->findChild<QChartView*>(name);
        if (!view || view->chart()->series().size() <= k) return -1;
        auto* s = qobject_cast<QXYSeries*>(view->chart()->series().at(k));
        return s ? s->count() : -1;
    }
    QString message(SetupWizard* w) { return w->currentPage()->findChild<QLabel*>("stepMessage")->text(); }

private slots:
    void initTestCase() {
        QVERIFY(dir_.isValid());
        shots_ = qEnvironmentVariable("WARPGUARD_SHOTS", dir_.filePath("shots"));
        QDir().mkpath(shots_);
        write_config(0, 0);
        start_daemon();
        write_config(robot_port_, control_port_);  // the same ports after a restart
    }

    void wizard_to_detect_then_a_stop_with_evidence_and_reconnect() {
        ControlLink link;
        MainWindow window(&link);
        window.show();
        SetupWizard* w = window.openWizard();
        QVERIFY(QTest::qWaitForWindowExposed(w));

        // 1. Connect: a wrong token is refused in words, the right one connects.
        w->findChild<QLineEdit*>("daemonHost")->setText("127.0.0.1");
        w->findChild<QSpinBox*>("daemonPort")->setValue(control_port_);
        w->findChild<QLineEdit*>("daemonToken")->setText("wrong-token-123");
        QTest::mouseClick(w->findChild<QPushButton*>("connectButton"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(message(w).contains("check the token"), 5000);
        QVERIFY(!w->currentPage()->isComplete());
        w->findChild<QLineEdit*>("daemonToken")->setText(kToken);
        QTest::mouseClick(w->findChild<QPushButton*>("connectButton"), Qt::LeftButton);
        QVERIFY2(complete(w, 5000), qPrintable(message(w)));
        shot(w, "wizard-1-connect");
        w->next();

        // 2. Add the robot.
        w->findChild<QLineEdit*>("robotId")->setText(kRobot);
        w->findChild<QComboBox*>("robotVendor")->setCurrentIndex(0);
        w->findChild<QLineEdit*>("robotAddress")->setText("127.0.0.1");
        // Linear joints (a SCARA's quill): a word is refused here, a joint the robot lacks by the daemon.
        auto* linear = w->findChild<QLineEdit*>("robotLinear");
        linear->setText("3, x");
        QTest::mouseClick(w->findChild<QPushButton*>("addRobotButton"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(message(w).contains("Linear joints: 'x' is not a joint number"), 5000);
        linear->setText("7");
        QTest::mouseClick(w->findChild<QPushButton*>("addRobotButton"), Qt::LeftButton);
        QTRY_VERIFY_WITH_TIMEOUT(message(w).contains("linear joint 7 is not one of joints 1-6"), 5000);
        QVERIFY(!w->currentPage()->isComplete());
        linear->clear();
        QTest::mouseClick(w->findChild<QPushButton*>("addRobotButton"), Qt::LeftButton);
        QVERIFY2(complete(w, 5000), qPrintable(message(w)));
        shot(w, "wizard-2-robot");
        w->next();

        // 3. The script, filled in for this PC and robot.
        w->findChild<QLineEdit*>("pcAddress")->setText("127.0.0.1");
        QTest::mouseClick(w->findChild<QPushButton*>("generateScript"), Qt::LeftButton);
        QVERIFY2(complete(w, 5000), qPrintable(message(w)));
        const QString script = w->findChild<QPlainTextEdit*>("scriptText")->toPlainText();
        QVERIFY(script.contains(QString("socket_open(\"127.0.0.1\", %1").arg(robot_port_)));
        QVERIFY(script.contains("WG1;" + kRobot + ";ur;"));
        shot(w, "wizard-3-script");
        w->next();

        // 4. Waiting for the robot, then the simulated robot's task connects (URScript behaviour).
        QTest::qWait(700);
        QVERIFY(!w->currentPage()->isComplete());
        shot(w, "wizard-4-waiting");
        sim_.setProcessChannelMode(QProcess::ForwardedErrorChannel);
        sim_.setStandardOutputFile(dir_.filePath("sim.log"));
        die_with_parent(sim_);
        // The robot-side reply timeout at 100 ms, as in the daemon's live tests (daemon_live.py): this
        // test is about the panel's workflow, and the vendor's 20 ms is a deadline for a dedicated
        // cell PC. Under ctest's parallel load on the 2-core CI machine one reply came 26.4 ms late
        // (2026-11-26): the robot stopped itself, as it must, and the recording never reached its 25
        // cycles. The timeout itself is tested by integration.daemon.kill9.
        sim_.start(WARPGUARD_SIM, {"run", "--robot", WARPGUARD_ROBOT, "--task", WARPGUARD_TASK, "--connect",
                                   QString("127.0.0.1:%1").arg(robot_port_), "--vendor", "ur", "--id", kRobot, "--period", "0.004",
                                   "--cycles", "110", "--speed", "4", "--seed", "7", "--contacts", "60", "--contacts-from-cycle", kContactsFrom,
                                   "--min-force", "150", "--max-force", "300", "--timeout-ms", "100"});
        QVERIFY(sim_.waitForStarted(5000));
        QVERIFY2(complete(w, 15000), "the simulated robot did not connect");
        shot(w, "wizard-4-connected");
        w->next();

        // 5. Robot model by the identification procedure, played by the simulated controller.
        {
            // On the radio button's indicator: a wide button only takes clicks on its indicator and text.
            auto* identify = w->findChild<QRadioButton*>("modelIdentify");
            QTest::mouseClick(identify, Qt::LeftButton, {}, QPoint(8, identify->height() / 2));
            QVERIFY(identify->isChecked());
        }
        QTRY_VERIFY2_WITH_TIMEOUT(message(w).contains("Armed"), qPrintable(message(w)), 5000);
        QProcess ident;
        ident.start(WARPGUARD_SIM, {"identify", "--robot", WARPGUARD_ROBOT, "--connect", QString("127.0.0.1:%1").arg(robot_port_), "--vendor",
                                    "ur", "--id", kRobot, "--noise-mm", "0.05"});
        QVERIFY(ident.waitForFinished(60000));
        QCOMPARE(ident.exitCode(), 0);
        QVERIFY2(complete(w, 20000), qPrintable(w->findChild<QLabel*>("modelResult")->text()));
        QVERIFY(w->findChild<QLabel*>("modelResult")->text().contains("identified from 144 points"));
        shot(w, "wizard-5-model");
        w->next();

        // 6. Record: 25 complete cycles (the reference's cycles + the rest for the thresholds; the wizard asks for >= 13).
        QTest::mouseClick(w->findChild<QPushButton*>("recordStart"), Qt::LeftButton);
        auto* counter = w->findChild<QLabel*>("cycleCounter");
        QTRY_VERIFY_WITH_TIMEOUT(counter->text().section(' ', 0, 0).toInt() >= 25, 120000);
        QVERIFY2(live_points(w, "recordChart", 0) > 50, "the recording page's live chart shows no signal");
        shot(w, "wizard-6-recording");
        QTest::mouseClick(w->findChild<QPushButton*>("recordStop"), Qt::LeftButton);
        QVERIFY2(complete(w, 10000), qPrintable(message(w)));
        w->next();

        // 7. Calibrate with the sensitivity control: the expected false-stop rate follows it.
        auto* rate = w->findChild<QLabel*>("expectedRate");
        QVERIFY(rate->text().contains("1,000"));
        w->findChild<QSlider*>("sensitivity")->setValue(4);
        QVERIFY(rate->text().contains("10,000"));
        w->findChild<QSlider*>("sensitivity")->setValue(2);
        // The task's recording is the one just kept; a dry run is optional ("none" first: the arm
        // model is then fitted on the task's recording where the robot declares its payload, which
        // this one does not; "no arm model" second), and the same recording as both is refused by
        // the panel before anything is sent.
        auto* task = w->findChild<QComboBox*>("taskRecording");
        auto* dry = w->findChild<QComboBox*>("dryRun");
        auto* excitation = w->findChild<QComboBox*>("excitationRun");
        QTRY_COMPARE_WITH_TIMEOUT(task->count(), 1, 5000);
        QCOMPARE(dry->count(), 3);
        QCOMPARE(dry->currentData().toLongLong(), 0);
        QCOMPARE(dry->itemData(1).toLongLong(), -1);
        // The excitation run goes with a dry run: "none" and shut until one is chosen.
        QCOMPARE(excitation->count(), 2);
        QCOMPARE(excitation->currentData().toLongLong(), 0);
        QVERIFY(!excitation->isEnabled());
        QVERIFY(task->currentText().contains("complete cycles"));
        dry->setCurrentIndex(1);
        QVERIFY(!excitation->isEnabled());  // no arm model: no excitation run either
        dry->setCurrentIndex(2);
        QVERIFY(excitation->isEnabled());
        QCOMPARE(dry->currentData().toLongLong(), task->currentData().toLongLong());
        QTest::mouseClick(w->findChild<QPushButton*>("calibrateButton"), Qt::LeftButton);
        QVERIFY2(message(w).contains("both the task and its dry run"), qPrintable(message(w)));
        QVERIFY(!w->currentPage()->isComplete());
        dry->setCurrentIndex(0);
        QVERIFY(!excitation->isEnabled());
        QTest::mouseClick(w->findChild<QPushButton*>("calibrateButton"), Qt::LeftButton);
        // (A functional wait, not a speed check: alone it takes 20-70 s here; beside a parallel
        // build it once took longer than 60 s.)
        QVERIFY2(complete(w, 240000), qPrintable(message(w)));
        QVERIFY2(w->findChild<QLabel*>("derivation")->text().contains("Matched signal: as recorded (the recordings do not declare the payload"),
                 qPrintable(w->findChild<QLabel*>("derivation")->text()));
        QCOMPARE(w->findChild<QTableWidget*>("thresholdTable")->rowCount(), 6);
        QVERIFY(w->findChild<QLabel*>("derivation")->text().contains("margin"));
        // The reference cycles were left to calibration: it says how many cover every place of the task.
        QVERIFY2(w->findChild<QLabel*>("derivation")->text().contains("the fewest that do"),
                 qPrintable(w->findChild<QLabel*>("derivation")->text()));
        // The recorded cycles that set the limits, by the robot's cycle counter.
        QVERIFY2(QRegularExpression("Cycles with the largest maxima, ratio / CUSUM: cycle \\d+ \\(\\d\\.\\d\\d / \\d+\\.\\d\\d\\)")
                     .match(w->findChild<QLabel*>("derivation")->text())
                     .hasMatch(),
                 qPrintable(w->findChild<QLabel*>("derivation")->text()));
        shot(w, "wizard-7-calibrate");
        w->next();

        // 8. Shadow: at least one cycle watched, the would-be stops listed.
        QVERIFY2(complete(w, 30000), "no shadow cycle");
        {
            // A would-be stop before the first collision would be a false stop in SHADOW (the list
            // names the robot's cycle of each).
            const QString listed = w->findChild<QPlainTextEdit*>("shadowStops")->toPlainText();
            for (const QString& line : listed.split('\n', Qt::SkipEmptyParts)) {
                const int cycle = named_cycle(line);
                QVERIFY2(cycle >= 0, qPrintable(line));
                QVERIFY2(cycle >= QString(kContactsFrom).toInt(), qPrintable("false would-be stop in SHADOW: " + line));
            }
        }
        shot(w, "wizard-8-shadow");
        w->next();

        // 9. DETECT.
        QTest::mouseClick(w->findChild<QPushButton*>("activateButton"), Qt::LeftButton);
        QVERIFY2(complete(w, 5000), qPrintable(message(w)));
        shot(w, "wizard-9-detect");
        w->accept();

        // The dashboard: a simulated collision becomes a stop event; its evidence opens.
        Dashboard* dash = window.dashboard();
        dash->selectRobot(kRobot);
        QTableWidget* events = dash->eventTable();
        const int stop_row = wait_for_event(events, "stop", 180000);
        QVERIFY2(stop_row >= 0, "no stop event within 180 s of DETECT");
        {
            // A stop before the first collision would be a false stop, not the collision's.
            const QString reason = events->item(stop_row, 4)->text();
            const int cycle = named_cycle(reason);
            QVERIFY2(cycle >= 0, qPrintable(reason));
            QVERIFY2(cycle >= QString(kContactsFrom).toInt(), qPrintable("false stop before the first collision: " + reason));
            // The time reads in full, in local time to the second; its tooltip holds the stored UTC
            // time: the same second, and a time of this run (within 10 minutes of now).
            const QTableWidgetItem* time = events->item(stop_row, 1);
            QVERIFY2(QRegularExpression("^\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d$").match(time->text()).hasMatch(), qPrintable(time->text()));
            const QDateTime shown = QDateTime::fromString(time->text(), "yyyy-MM-dd HH:mm:ss");
            const QDateTime stored = QDateTime::fromString(time->toolTip().section(' ', 0, 0), Qt::ISODateWithMs);
            QVERIFY2(stored.isValid() && time->toolTip().contains(" UTC"), qPrintable(time->toolTip()));
            QVERIFY2(std::abs(shown.secsTo(stored.toLocalTime())) <= 1, qPrintable(time->text() + " vs " + time->toolTip()));
            QVERIFY2(std::abs(stored.secsTo(QDateTime::currentDateTimeUtc())) < 600, qPrintable(time->toolTip()));
            QVERIFY2(events->columnWidth(1) >= events->fontMetrics().horizontalAdvance(time->text()),
                     qPrintable(QString("time column %1 px for '%2'").arg(events->columnWidth(1)).arg(time->text())));
        }
        QTRY_VERIFY_WITH_TIMEOUT(window.findChild<QPushButton*>("tile-" + kRobot)->text().contains("STOPPED"), 5000);
        QTest::qWait(1200);  // the live chart shows the stop
        QVERIFY2(live_points(&window, "liveChart", 0) > 50, "the dashboard's live chart shows no signal");
        QVERIFY2(live_points(&window, "liveChart", 1) > 10, "the dashboard's live chart shows no matched reference");
        {
            // The reference and band are drawn in the robot's own units, whatever the detector
            // matches: in the samples before the stop the measured torque lies near the reference,
            // well inside the limits (series 0 measured, 1 reference, 2 upper limit, 3 lower limit).
            auto* view = window.findChild<QChartView*>("liveChart");
            const auto series = [&](int k) { return qobject_cast<QXYSeries*>(view->chart()->series().at(k))->points(); };
            const QList<QPointF> measured = series(0), reference = series(1), upper = series(2), lower = series(3);
            QVERIFY2(upper.size() == reference.size() && lower.size() == reference.size(), "the limits are not drawn with the reference");
            std::vector<double> off, band;
            for (int k = 0, i = 0; k < reference.size() && k < reference.size() - 60; ++k) {  // the last 60 include the stop
                while (i < measured.size() && measured[i].x() < reference[k].x()) ++i;
                if (i >= measured.size() || measured[i].x() != reference[k].x()) continue;
                off.push_back(std::abs(measured[i].y() - reference[k].y()));
                band.push_back(std::min(upper[k].y() - reference[k].y(), reference[k].y() - lower[k].y()));
            }
            QVERIFY2(off.size() > 10, qPrintable(QString("only %1 reference points before the stop").arg(off.size())));
            std::sort(off.begin(), off.end());
            std::sort(band.begin(), band.end());
            const double off_median = off[off.size() / 2], band_median = band[band.size() / 2];
            QVERIFY2(band_median > 0 && off_median < band_median,
                     qPrintable(QString("measured vs reference: median %1 off, median band %2").arg(off_median).arg(band_median)));
            const QString matched = window.findChild<QLabel*>("matchedSignal")->text();
            QVERIFY2(matched.contains("Judged: the torque as recorded"), qPrintable(matched));
            // What the (phase-aware) detector learned in operation, per joint.
            const QString learned = window.findChild<QLabel*>("learnedInOperation")->text();
            QVERIFY2(learned.startsWith("Learned in operation:") && learned.contains("friction drift joint 1 ") &&
                         learned.contains(QString("joint %1 ").arg(window.findChild<QComboBox*>("jointSelector")->count())),
                     qPrintable(learned));
        }
        shot(&window, "dashboard-stop");
        {
            // As deviations: the measured value less the reference on each judged stretch, the
            // reference at 0 and the limits around it (a few Nm, lost beside a collision's 100 Nm).
            auto* as_deviation = window.findChild<QCheckBox*>("deviationView");
            QVERIFY(as_deviation && !as_deviation->isChecked());
            as_deviation->setChecked(true);
            auto* view = window.findChild<QChartView*>("liveChart");
            const auto series = [&](int k) { return qobject_cast<QXYSeries*>(view->chart()->series().at(k))->points(); };
            const QList<QPointF> measured = series(0), reference = series(1), upper = series(2), lower = series(3);
            QVERIFY2(reference.size() > 10 && measured.size() == reference.size() && upper.size() == reference.size() &&
                         lower.size() == reference.size(),
                     qPrintable(QString("as deviations: %1 measured, %2 reference, %3 / %4 limit points")
                                    .arg(measured.size()).arg(reference.size()).arg(upper.size()).arg(lower.size())));
            std::vector<double> off, band;
            int straddle = 0;
            for (int k = 0; k < reference.size(); ++k) {
                QCOMPARE(reference[k].y(), 0.0);
                straddle += lower[k].y() < 0.0 && upper[k].y() > 0.0;
                if (k >= reference.size() - 60) continue;  // the last 60 include the stop
                off.push_back(std::abs(measured[k].y()));
                band.push_back(std::min(upper[k].y(), -lower[k].y()));
            }
            QCOMPARE(straddle, reference.size());
            QVERIFY(off.size() > 10);
            std::sort(off.begin(), off.end());
            std::sort(band.begin(), band.end());
            QVERIFY2(off[off.size() / 2] < band[band.size() / 2],
                     qPrintable(QString("as deviations: median %1 off, median narrower side of the limits %2")
                                    .arg(off[off.size() / 2]).arg(band[band.size() / 2])));
            QVERIFY2(view->chart()->axes(Qt::Vertical).first()->titleText().startsWith("deviation"),
                     qPrintable(view->chart()->axes(Qt::Vertical).first()->titleText()));
            shot(&window, "dashboard-deviation");
            as_deviation->setChecked(false);
            QVERIFY2(live_points(&window, "liveChart", 0) > 50, "back to the measured signal: no signal drawn");
        }
        QVERIFY2(events->item(stop_row, 4)->toolTip().contains("evidence"), "the stop's row does not say how to open its evidence");
        const qint64 stop_id = events->item(stop_row, 0)->text().toLongLong();
        events->setCurrentCell(stop_row, 0);
        events->setFocus();
        QTest::keyClick(events, Qt::Key_Return);  // keyboard: Enter opens the evidence
        QTRY_VERIFY_WITH_TIMEOUT(dash->lastEvidence() && dash->lastEvidence()->loaded(), 5000);
        EvidenceDialog* ev = dash->lastEvidence();
        QVERIFY(ev->windowTitle().contains(QString::number(stop_id)));
        QCOMPARE(ev->findChild<QTableWidget*>("evidenceRules")->rowCount(), 6);
        QVERIFY2(ev->findChild<QLabel*>("evidenceDecision")->text().contains("limit"), qPrintable(ev->findChild<QLabel*>("evidenceDecision")->text()));
        QVERIFY2(ev->findChild<QLabel*>("evidenceMatched") && ev->findChild<QLabel*>("evidenceMatched")->text().contains("the torque as recorded"),
                 "the evidence does not say what signal was matched");
        QVERIFY(ev->findChild<QTabWidget*>("evidenceCharts")->count() == 6);
        {
            // The default detector's own rule values: the stop joint's row shows the value the stop
            // names, over its limit (red), in the column of the rule that stopped.
            auto* rules = ev->findChild<QTableWidget*>("evidenceRules");
            QVERIFY2(rules->horizontalHeaderItem(1)->text().startsWith("deviation ("), qPrintable(rules->horizontalHeaderItem(1)->text()));
            const QString reason = events->item(stop_row, 4)->text();
            const QRegularExpressionMatch m = QRegularExpression("^joint (\\d+) (.*): ([-0-9.e+]+) > limit").match(reason);
            QVERIFY2(m.hasMatch(), qPrintable(reason));
            const int row = m.captured(1).toInt() - 1, column = m.captured(2).startsWith("accumulated") ? 4 : 1;
            QTableWidgetItem* item = rules->item(row, column);
            QVERIFY2(item && item->text() == m.captured(3),
                     qPrintable(QString("stop '%1': the evidence row shows %2 in column %3").arg(reason, item ? item->text() : "nothing").arg(column)));
            QCOMPARE(item->background().color(), QColor(220, 40, 40));

            // The stop joint's chart: its newest samples as judged, by default as deviations from the
            // reference (series 0 measured, 1 reference, 2 upper limit, 3 lower limit, 4 the stopping
            // sample, at 0 ms): the limits straddle the reference at every sample; a stop by the ratio
            // rule lies beyond a limit.
            auto* as_deviation = ev->findChild<QCheckBox*>("evidenceDeviation");
            QVERIFY2(as_deviation && as_deviation->isChecked(), "the evidence does not draw the judged samples as deviations");
            auto* view = ev->findChild<QChartView*>(QString("judgedChart%1").arg(row + 1));
            QVERIFY2(view, "no chart of the stop joint's judged samples");
            const auto series = [&](int k) { return qobject_cast<QXYSeries*>(view->chart()->series().at(k))->points(); };
            const QList<QPointF> measured = series(0), reference = series(1), upper = series(2), lower = series(3), stop = series(4);
            QVERIFY2(measured.size() >= 20 && reference.size() == measured.size() && upper.size() == measured.size() &&
                         lower.size() == measured.size() && stop.size() == 1,
                     qPrintable(QString("judged chart: %1 measured, %2 reference, %3 / %4 limit points, %5 stop points")
                                    .arg(measured.size()).arg(reference.size()).arg(upper.size()).arg(lower.size()).arg(stop.size())));
            QCOMPARE(stop[0].x(), 0.0);
            QCOMPARE(stop[0], measured.last());
            for (int k = 0; k < reference.size(); ++k) {
                QCOMPARE(reference[k].y(), 0.0);
                QVERIFY2(lower[k].y() <= 0.0 && upper[k].y() >= 0.0,
                         qPrintable(QString("judged sample %1: limits %2 .. %3 do not straddle the reference").arg(k).arg(lower[k].y()).arg(upper[k].y())));
            }
            if (column == 1) {
                QVERIFY2(stop[0].y() > upper.last().y() || stop[0].y() < lower.last().y(),
                         qPrintable(QString("stop by the ratio rule inside its limits: %1 in %2 .. %3").arg(stop[0].y()).arg(lower.last().y()).arg(upper.last().y())));
            }
            qInfo("evidence of '%s': the stopping sample %.4g against limits %.4g .. %.4g", qPrintable(reason), stop[0].y(), lower.last().y(),
                  upper.last().y());
            // As measured: the reference is the matched reference again, not 0.
            as_deviation->setChecked(false);
            const QList<QPointF> raw = series(1);
            QVERIFY(raw.size() == reference.size() && std::any_of(raw.begin(), raw.end(), [](const QPointF& p) { return p.y() != 0.0; }));
            QVERIFY2(view->chart()->axes(Qt::Vertical).first()->titleText().startsWith("torque"),
                     qPrintable(view->chart()->axes(Qt::Vertical).first()->titleText()));
            shot(ev, "evidence-measured");
            as_deviation->setChecked(true);

            // Saved for a report: the picture of the dialog, the charted samples as CSV (the last row
            // the stopping sample, as charted), the event as JSON.
            auto* save = ev->findChild<QPushButton*>("evidenceSave");
            QVERIFY(save && save->isEnabled());
            const QString base = dir_.filePath(QString("stop-%1").arg(stop_id));
            QString error;
            QVERIFY2(ev->save(base, &error), qPrintable(error));
            QImage picture(base + ".png");
            QCOMPARE(picture.size(), ev->size());
            QFile csv(base + ".csv");
            QVERIFY(csv.open(QIODevice::ReadOnly | QIODevice::Text));
            QStringList rows;
            for (const QString& line : QString::fromUtf8(csv.readAll()).split('\n', Qt::SkipEmptyParts)) {
                if (!line.startsWith('#')) rows.append(line);
            }
            const QStringList header = rows.value(0).split(',');
            const int at = header.indexOf(QString("measured%1").arg(row + 1));
            QVERIFY2(at > 0 && header.value(at + 1) == QString("reference%1").arg(row + 1), qPrintable(rows.value(0)));
            QCOMPARE(rows.size() - 1, measured.size());
            const QStringList last = rows.last().split(',');
            QCOMPARE(last.value(1).toDouble(), 0.0);  // ms before the stop
            QVERIFY2(std::abs(last.value(at).toDouble() - last.value(at + 1).toDouble() - stop[0].y()) < 1e-6,
                     qPrintable(QString("CSV's last row: measured %1, reference %2; charted deviation %3")
                                    .arg(last.value(at), last.value(at + 1)).arg(stop[0].y())));
            QFile json(base + ".json");
            QVERIFY(json.open(QIODevice::ReadOnly));
            const QJsonObject saved = QJsonDocument::fromJson(json.readAll()).object();
            QCOMPARE(saved.value("reason").toString(), reason);
            QVERIFY(saved.value("evidence").toObject().value("joints").toArray().size() == 6);
        }
        shot(ev, "evidence");
        ev->close();

        // Resume only with the confirmation.
        QTest::mouseClick(window.findChild<QPushButton*>("resumeButton"), Qt::LeftButton);
        QMessageBox* box = nullptr;
        QTRY_VERIFY_WITH_TIMEOUT((box = window.findChild<QMessageBox*>("resumeConfirmation")) != nullptr, 3000);
        shot(box, "resume-confirmation");
        QTest::mouseClick(box->button(QMessageBox::Yes), Qt::LeftButton);
        // The daemon records the resume, and the robot runs again - unless the next simulated
        // contact (scheduled on the simulation clock, about one per cycle from kContactsFrom on)
        // already hit it: then a newer stop event follows the resume.
        const auto resumed = [&] {
            int resume_row = -1, newest_stop = -1;
            for (int r = 0; r < events->rowCount(); ++r) {
                const qint64 id = events->item(r, 0)->text().toLongLong();
                if (events->item(r, 3)->text() == "resume" && (resume_row < 0 || id > events->item(resume_row, 0)->text().toLongLong())) resume_row = r;
                if (events->item(r, 3)->text() == "stop" && id > stop_id) newest_stop = r;
            }
            if (resume_row < 0) return false;
            const bool running = !window.findChild<QPushButton*>("tile-" + kRobot)->text().contains("STOPPED");
            return running || newest_stop >= 0;
        };
        QTRY_VERIFY_WITH_TIMEOUT(resumed(), 5000);

        // SHADOW: the next contacts are would-be stops, listed in amber, and their evidence says what
        // DETECT would have done (resumed first if a contact latched a stop since).
        {
            int answers = 0;
            QJsonObject answer;
            const auto call = [&](const QJsonObject& request) {
                link.request(request, [&](const QJsonObject& a, const QString& error) {
                    QVERIFY2(error.isEmpty(), qPrintable(error));
                    answer = a;
                    ++answers;
                });
            };
            call({{"cmd", "mode"}, {"robot", kRobot}, {"mode", "shadow"}});
            QTRY_COMPARE_WITH_TIMEOUT(answers, 1, 5000);
            call({{"cmd", "robot"}, {"robot", kRobot}});
            QTRY_COMPARE_WITH_TIMEOUT(answers, 2, 5000);
            if (answer.value("latched").toBool()) {
                call({{"cmd", "resume"}, {"robot", kRobot}, {"by", "gui test"}});
                QTRY_COMPARE_WITH_TIMEOUT(answers, 3, 5000);
            }
            const int would_row = wait_for_event(events, "would_stop", 90000);
            QVERIFY2(would_row >= 0, "no would-be stop within 90 s of SHADOW with contacts");
            QCOMPARE(events->item(would_row, 3)->foreground().color(), QColor(170, 95, 0));
            const QString would_id = events->item(would_row, 0)->text();
            events->setCurrentCell(would_row, 0);
            events->setFocus();
            QTest::keyClick(events, Qt::Key_Return);
            QTRY_VERIFY_WITH_TIMEOUT(dash->lastEvidence() && dash->lastEvidence()->windowTitle().contains("#" + would_id) &&
                                         dash->lastEvidence()->loaded(),
                                     5000);
            // A would-be stop carries its evidence (on 2026-12-04 one did not: another event queued after
            // it in the same flush, a cycle's adaptation or a late decision, took the slot, and this
            // line crashed on the missing label).
            const auto* decision = dash->lastEvidence()->findChild<QLabel*>("evidenceDecision");
            QVERIFY2(decision, "the would-be stop's evidence dialog shows no decision (the event has no evidence window)");
            const QString said = decision->text();
            QVERIFY2(said.startsWith("In SHADOW, would have stopped the robot by"), qPrintable(said));
            // Its charts mark the sample that would have stopped, not one that stopped.
            int marked = 0;
            for (auto* view : dash->lastEvidence()->findChildren<QChartView*>()) {
                if (!view->objectName().startsWith("judgedChart")) continue;
                const QString marker = view->chart()->series().at(4)->name();
                QVERIFY2(marker == "the sample that would have stopped", qPrintable(view->objectName() + ": " + marker));
                ++marked;
            }
            QVERIFY2(marked > 0, "the would-be stop's evidence has no chart of judged samples");
            dash->lastEvidence()->close();
            QVERIFY(!window.findChild<QPushButton*>("tile-" + kRobot)->text().contains("STOPPED"));
        }

        // The daemon restarts: the panel says so, and reconnects by itself.
        daemon_.kill();
        QVERIFY(daemon_.waitForFinished(5000));
        QTRY_VERIFY_WITH_TIMEOUT(!link.isReady(), 5000);
        QTRY_VERIFY_WITH_TIMEOUT(window.findChild<QLabel*>("dashboardStatus")->text().contains("Reconnecting"), 3000);
        QVERIFY(window.findChild<QPushButton*>("tile-" + kRobot)->text().contains("no contact"));
        shot(&window, "dashboard-reconnecting");
        start_daemon();
        QTRY_VERIFY_WITH_TIMEOUT(link.isReady(), 10000);
        QTRY_VERIFY_WITH_TIMEOUT(window.findChild<QLabel*>("dashboardStatus")->text().contains("Connected"), 3000);
        QTRY_VERIFY_WITH_TIMEOUT(window.findChild<QPushButton*>("tile-" + kRobot) != nullptr, 3000);
    }

    // The y axis of a joint's chart names what its motor holds: a linear joint's (a SCARA's quill) is a force.
    void axis_titles_and_drift_name_a_linear_joints_force() {
        QCOMPARE(signal_axis_title("Nm", false), QString("torque (Nm)"));
        QCOMPARE(signal_axis_title("Nm", false, true), QString("force (N)"));
        QCOMPARE(signal_axis_title("percent", false, true), QString("force (percent)"));
        QCOMPARE(signal_axis_title("A", false, true), QString("current (A)"));
        QCOMPARE(signal_axis_title("Nm", true, true), QString("deviation (N)"));
        QCOMPARE(signal_axis_title("percent", true), QString("deviation (percent)"));
        // ... and so does the friction drift the detector has learned on it.
        const QJsonObject adaptation{{"friction", QJsonArray{QJsonObject{{"joint", 2}, {"coulomb", 0.25}},
                                                             QJsonObject{{"joint", 3}, {"coulomb", -1.5}, {"friction_changed", true}}}}};
        QCOMPARE(learned_text(adaptation, "Nm", {3}),
                 QString("Learned in operation: friction drift joint 2 +0.250 Nm, joint 3 -1.500 N (changed)."));
        // The speed: while the estimate converges, unless the robot's report gave it.
        const QJsonObject converging{{"has_speed_model", true}, {"speed_ratio", 0.93}, {"speed_settled", false}, {"speed_known", false}};
        QCOMPARE(learned_text(converging, "Nm", {}), QString("Learned in operation: speed still being estimated."));
        QJsonObject reported = converging;
        reported["speed_known"] = true;
        QCOMPARE(learned_text(reported, "Nm", {}), QString("Learned in operation: speed 93 % of the recorded."));
    }

    void cleanupTestCase() {
        if (sim_.state() != QProcess::NotRunning) {
            sim_.kill();
            sim_.waitForFinished(3000);
        }
        if (daemon_.state() != QProcess::NotRunning) {
            daemon_.terminate();
            daemon_.waitForFinished(5000);
        }
    }
};

QTEST_MAIN(PanelTest)
#include "test_panel.moc"
