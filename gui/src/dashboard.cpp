#include "dashboard.hpp"

#include <cmath>

#include <QCheckBox>
#include <QComboBox>
#include <QLegendMarker>
#include <QGridLayout>
#include <QHeaderView>
#include <QJsonArray>
#include <QKeyEvent>
#include <QLabel>
#include <QMessageBox>
#include <QPushButton>
#include <QShortcut>
#include <QSplitter>
#include <QTableWidget>
#include <QTimer>
#include <QVBoxLayout>

#include "control_link.hpp"
#include "evidence_dialog.hpp"

namespace warpguard::panel {

TileLook tile_look(const QJsonObject& r) {
    const QString state = r.value("state").toString();
    if (r.value("latched").toBool() || state == "stopped") return {QObject::tr("STOPPED"), QColor(205, 30, 30)};
    if (!r.value("connected").toBool(state != "disconnected") || state == "disconnected") return {QObject::tr("disconnected"), QColor(90, 90, 90)};
    if (state == "record") return {QObject::tr("recording"), QColor(40, 100, 210)};
    if (state == "shadow") return {QObject::tr("shadow"), QColor(215, 150, 20)};
    if (state == "detect") return {QObject::tr("detecting"), QColor(30, 150, 60)};
    return {QObject::tr("idle"), QColor(130, 130, 130)};
}

QString learned_text(const QJsonObject& adaptation, const QString& unit, const QList<int>& linear) {
    if (adaptation.isEmpty()) return {};
    QStringList parts;
    if (adaptation.value("has_speed_model").toBool()) {
        // Known: settled, or reported by the robot from the stream's first sample (older daemons: settled).
        parts << (adaptation.value("speed_known").toBool(adaptation.value("speed_settled").toBool())
                      ? QObject::tr("speed %1 % of the recorded").arg(adaptation.value("speed_ratio").toDouble() * 100.0, 0, 'f', 0)
                      : QObject::tr("speed still being estimated"));
    }
    QStringList joints;
    for (const auto& v : adaptation.value("friction").toArray()) {
        const QJsonObject j = v.toObject();
        // The Coulomb change, signed or in a current's magnitude, whichever is larger.
        const double signed_term = j.value("coulomb").toDouble(), magnitude = j.value("magnitude_coulomb").toDouble();
        const double c = std::abs(magnitude) > std::abs(signed_term) ? magnitude : signed_term;
        joints << QObject::tr("joint %1 %2%3 %4%5")
                      .arg(j.value("joint").toInt())
                      .arg(c >= 0 ? "+" : "")
                      .arg(c, 0, 'f', 3)
                      .arg(joint_unit(unit, linear.contains(j.value("joint").toInt())))
                      .arg(j.value("friction_changed").toBool() ? QObject::tr(" (changed)") : QString());
    }
    if (!joints.isEmpty()) parts << QObject::tr("friction drift %1").arg(joints.join(", "));
    return QObject::tr("Learned in operation: %1.").arg(parts.join("; "));
}

Dashboard::Dashboard(ControlLink* link, QWidget* parent) : QWidget(parent), link_(link) {
    setObjectName("dashboard");
    auto* layout = new QVBoxLayout(this);
    status_ = new QLabel(tr("Not connected to warpguardd"), this);
    status_->setObjectName("dashboardStatus");
    layout->addWidget(status_);
    auto* tile_box = new QWidget(this);
    tiles_ = new QGridLayout(tile_box);
    layout->addWidget(tile_box);

    auto* split = new QSplitter(Qt::Vertical, this);
    auto* detail = new QWidget(split);
    auto* dl = new QVBoxLayout(detail);
    auto* row = new QHBoxLayout();
    detail_title_ = new QLabel(tr("Select a robot"), detail);
    detail_title_->setStyleSheet("font-size: 16pt; font-weight: bold;");
    detail_title_->setWordWrap(true);  // a long stop reason wraps instead of widening the window
    joint_ = new QComboBox(detail);
    joint_->setObjectName("jointSelector");
    joint_->setToolTip(tr("Joint shown in the live chart"));
    resume_ = new QPushButton(tr("&Resume robot…"), detail);
    resume_->setObjectName("resumeButton");
    resume_->setEnabled(false);
    row->addWidget(detail_title_, 1);
    row->addWidget(new QLabel(tr("&Joint:"), detail));
    static_cast<QLabel*>(row->itemAt(1)->widget())->setBuddy(joint_);
    row->addWidget(joint_);
    deviation_ = new QCheckBox(tr("As &deviation from the reference"), detail);
    deviation_->setObjectName("deviationView");
    deviation_->setToolTip(tr("Show the measured value less the reference, with the limits around it"));
    connect(deviation_, &QCheckBox::toggled, this, [this] { redraw(); });
    row->addWidget(deviation_);
    row->addWidget(resume_);
    dl->addLayout(row);
    matched_ = new QLabel(detail);
    matched_->setObjectName("matchedSignal");
    matched_->setWordWrap(true);
    dl->addWidget(matched_);
    learned_ = new QLabel(detail);
    learned_->setObjectName("learnedInOperation");
    learned_->setWordWrap(true);
    learned_->setToolTip(tr("What the detector adapted since its profile was activated: the speed override it follows and the "
                            "friction drift it learned per joint (Coulomb term). Each change is in the event log as "
                            "an 'adaptation' event."));
    dl->addWidget(learned_);
    chart_ = make_chart(tr("Live signal"), tr("robot time (s)"), tr("torque (Nm)"), detail);
    chart_.view->setObjectName("liveChart");
    signal_ = add_series(chart_, tr("measured"), QColor(200, 30, 30), 2.0);
    reference_ = add_series(chart_, tr("reference where it matched"), QColor(30, 90, 200), 2.0);
    upper_ = add_series(chart_, tr("limits (beyond them: over the threshold)"), QColor(30, 90, 200, 110), 1.0, Qt::DashLine);
    lower_ = add_series(chart_, QString(), QColor(30, 90, 200, 110), 1.0, Qt::DashLine);
    chart_.chart->legend()->markers(lower_).first()->setVisible(false);
    dl->addWidget(chart_.view, 1);
    events_ = new QTableWidget(0, 5, split);
    events_->setObjectName("eventTable");
    events_->setHorizontalHeaderLabels({tr("#"), tr("time"), tr("robot"), tr("kind"), tr("what happened")});
    events_->horizontalHeader()->setStretchLastSection(true);
    // Every column but the reason as wide as what it shows: the time must read in full.
    for (int c = 0; c < 4; ++c) events_->horizontalHeader()->setSectionResizeMode(c, QHeaderView::ResizeToContents);
    events_->verticalHeader()->hide();
    events_->setSelectionBehavior(QAbstractItemView::SelectRows);
    events_->setEditTriggers(QAbstractItemView::NoEditTriggers);
    split->addWidget(detail);
    split->addWidget(events_);
    layout->addWidget(split, 1);

    connect(events_, &QTableWidget::cellActivated, this, [this](int r, int) { openEvidence(events_->item(r, 0)->text().toLongLong()); });
    connect(joint_, &QComboBox::currentIndexChanged, this, [this] { redraw(); });
    connect(resume_, &QPushButton::clicked, this, &Dashboard::resumeSelected);
    connect(link_, &ControlLink::eventPushed, this, [this](const QJsonObject& e) { add_event(e, true); });
    connect(link_, &ControlLink::feedPushed, this, &Dashboard::on_feed);
    connect(link_, &ControlLink::readyChanged, this, [this](bool ready) {
        status_->setText(ready ? tr("Connected to warpguardd at %1:%2").arg(link_->host()).arg(link_->port())
                               : tr("Reconnecting to warpguardd at %1:%2 …").arg(link_->host()).arg(link_->port()));
        status_->setStyleSheet(ready ? "" : "color: white; background: rgb(205,30,30); font-weight: bold; padding: 4px;");
        if (!ready) {
            // The last known states are no longer known: say so instead of showing them as current.
            for (auto it = tile_.begin(); it != tile_.end(); ++it) {
                it.value()->setText(tr("%1\nno contact").arg(it.key()));
                it.value()->setProperty("state", tr("no contact"));
                it.value()->setToolTip(tr("warpguardd cannot be reached: this robot's state is unknown here. "
                                          "Its background task stops the robot on its own when the daemon is silent."));
                it.value()->setStyleSheet("QPushButton { font-size: 26pt; font-weight: bold; color: white; background: rgb(90,90,90); "
                                          "border-radius: 8px; border: 5px dashed rgb(205,30,30); }");
            }
            return;
        }
        events_->setRowCount(0);
        link_->request({{"cmd", "events"}, {"limit", 200}}, [this](const QJsonObject& a, const QString& error) {
            if (!error.isEmpty()) return;
            history_ = true;
            for (const auto& e : a.value("events").toArray()) add_event(e.toObject(), true);
            history_ = false;
        });
        if (!selected_.isEmpty()) load_reference();
    });
    auto* timer = new QTimer(this);
    timer->setInterval(500);
    connect(timer, &QTimer::timeout, this, &Dashboard::poll);
    timer->start();
}

void Dashboard::poll() {
    if (!link_->isReady()) return;
    link_->request({{"cmd", "robots"}}, [this](const QJsonObject& a, const QString& error) {
        if (error.isEmpty()) show_robots(a.value("robots").toArray());
    });
}

void Dashboard::show_robots(const QJsonArray& robots) {
    int k = 0;
    for (const auto& value : robots) {
        const QJsonObject r = value.toObject();
        const QString id = r.value("id").toString();
        QPushButton* tile = tile_.value(id);
        if (!tile) {
            tile = new QPushButton(this);
            tile->setObjectName("tile-" + id);
            tile->setMinimumSize(260, 120);
            tile->setCheckable(true);
            connect(tile, &QPushButton::clicked, this, [this, id] { selectRobot(id); });
            tile_[id] = tile;
            tiles_->addWidget(tile, k / 4, k % 4);
        }
        const TileLook look = tile_look(r);
        tile->setText(QString("%1\n%2").arg(id, look.text));
        tile->setProperty("state", look.text);
        tile->setToolTip(r.value("latched").toBool() ? r.value("reason").toString()
                                                     : tr("cycle %1, %2 samples").arg(r.value("cycle").toInteger()).arg(r.value("samples").toInteger()));
        tile->setStyleSheet(QString("QPushButton { font-size: 26pt; font-weight: bold; color: white; background: %1; border-radius: 8px; }"
                                    "QPushButton:checked, QPushButton:focus { border: 5px solid black; }")
                                .arg(look.background.name()));
        tile->setChecked(id == selected_);
        if (id == selected_) {
            resume_->setEnabled(r.value("latched").toBool());
            unit_ = r.value("unit").toString(unit_);
            linear_.clear();
            for (const auto& l : r.value("linear").toArray()) linear_.append(l.toInt());
            detail_title_->setText(tr("%1 — %2%3").arg(id, look.text,
                                                     r.value("latched").toBool() ? ": " + r.value("reason").toString() : QString()));
            learned_->setText(learned_text(r.value("adaptation").toObject(), unit_, linear_));
            const int joints = r.value("joints").toInt(6);
            if (joint_->count() != joints) {
                joint_->clear();
                for (int j = 1; j <= joints; ++j) joint_->addItem(tr("joint %1").arg(j));
            }
        }
        ++k;
    }
    if (selected_.isEmpty() && !robots.isEmpty()) selectRobot(robots.first().toObject().value("id").toString());
}

void Dashboard::selectRobot(const QString& id) {
    if (id == selected_) return;
    selected_ = id;
    points_.clear();
    for (auto it = tile_.begin(); it != tile_.end(); ++it) it.value()->setChecked(it.key() == id);
    load_reference();
    redraw();
}

void Dashboard::load_reference() {
    matched_->clear();
    link_->request({{"cmd", "reference"}, {"robot", selected_}}, [this](const QJsonObject& a, const QString& error) {
        if (!error.isEmpty()) return;
        const QJsonObject info = a.value("reference").toObject();
        const QString matched = info.value("matched").toString();
        if (!matched.isEmpty()) {
            matched_->setText(tr("Judged: %1 (profile %2, %3 detector). The chart shows the reference and the limits beyond which "
                                 "a sample is over its threshold, in the robot's own units.")
                                  .arg(matched)
                                  .arg(info.value("profile").toInteger())
                                  .arg(info.value("detector").toString()));
        }
    });
}

void Dashboard::add_event(const QJsonObject& e, bool at_top) {
    const int row = at_top ? 0 : events_->rowCount();
    events_->insertRow(row);
    // The daemon stores UTC (ISO 8601); the shop floor reads its wall clock: local time, to the
    // second, with the stored UTC time on the cell's tooltip.
    const QString stored = e.value("time").toString();
    const QStringList cells = {QString::number(e.value("id").toInteger()), local_time(stored), e.value("robot").toString(),
                               e.value("kind").toString(), e.value("reason").toString()};
    // Stops in red, SHADOW's would-be stops in amber (what DETECT would have done); a row with
    // evidence says how to open it.
    const QString kind = e.value("kind").toString();
    for (int c = 0; c < cells.size(); ++c) {
        auto* item = new QTableWidgetItem(cells[c]);
        if (kind == "stop") item->setForeground(QColor(190, 20, 20));
        if (kind == "would_stop") item->setForeground(QColor(170, 95, 0));
        QStringList tip;
        if (c == 1) tip << tr("%1 UTC").arg(stored);
        if (e.value("has_evidence").toBool()) tip << tr("Enter or double click: the evidence of this %1").arg(kind == "stop" ? tr("stop") : tr("event"));
        item->setToolTip(tip.join('\n'));
        events_->setItem(row, c, item);
    }
    // A newly activated profile may match another signal: its line above the chart is reloaded.
    if (e.value("kind").toString() == "profile" && e.value("robot").toString() == selected_ && !history_) load_reference();
    if (e.value("kind").toString() == "stop" && e.value("robot").toString() == selected_) {
        // Show the joint that stopped the robot.
        const int j = e.value("joint").toInt(0);
        if (!history_ && j >= 1 && j <= joint_->count()) joint_->setCurrentIndex(j - 1);
    }
}

void Dashboard::on_feed(const QJsonObject& feed) {
    if (feed.value("feed").toString() != selected_) return;
    for (const auto& v : feed.value("points").toArray()) {
        const QJsonObject p = v.toObject();
        points_.push_back({p.value("t").toDouble(), p.value("signal").toArray(), p.value("reference").toArray(), p.value("lower").toArray(),
                           p.value("upper").toArray()});
    }
    while (points_.size() > 600) points_.pop_front();
    redraw();
}

void Dashboard::redraw() {
    const int j = std::max(0, joint_->currentIndex());
    const bool deviation = deviation_->isChecked();
    // (Short: the chart is low on a shop-floor screen, and the joint is named beside it.)
    chart_.y->setTitleText(signal_axis_title(unit_, deviation, linear_.contains(j + 1)));
    signal_->setName(deviation ? tr("measured less the reference") : tr("measured"));
    QList<QPointF> s;
    std::vector<std::array<QList<QPointF>, 4>> stretches;  // reference, upper, lower, measured (as deviation)
    bool in_stretch = false;
    for (const Point& p : points_) {
        if (j >= p.signal.size()) continue;
        const double measured = p.signal[j].toDouble();
        if (!deviation) s.append({p.t, measured});
        const bool judged = j < p.reference.size() && !p.reference[j].isNull();
        if (judged && !in_stretch) stretches.emplace_back();
        in_stretch = judged;
        // The daemon sends the reference and the limits the rules allow in the robot's own units,
        // whatever the detector matches (Detector::judged); null where nothing was judged. The
        // limits need not be symmetric: the reference's range around the matched phase, a speed
        // still converging and a resting joint's held offset widen one side.
        if (judged) {
            auto& [r, up, lo, m] = stretches.back();
            const double reference = p.reference[j].toDouble(), zero = deviation ? reference : 0.0;
            r.append({p.t, reference - zero});
            if (j < p.upper.size() && !p.upper[j].isNull() && j < p.lower.size() && !p.lower[j].isNull()) {
                up.append({p.t, p.upper[j].toDouble() - zero});
                lo.append({p.t, p.lower[j].toDouble() - zero});
            }
            if (deviation) m.append({p.t, measured - reference});
        }
    }
    for (std::size_t k = 0; k < std::max(stretches.size(), 1 + more_stretches_.size()); ++k) {
        const Stretch series = stretch_series(k);
        const bool used = k < stretches.size();
        series.reference->replace(used ? stretches[k][0] : QList<QPointF>());
        series.upper->replace(used ? stretches[k][1] : QList<QPointF>());
        series.lower->replace(used ? stretches[k][2] : QList<QPointF>());
        // Measured: the whole signal, or each stretch's deviation on its own line.
        if (k == 0 && !deviation) series.measured->replace(s);
        else series.measured->replace(used && deviation ? stretches[k][3] : QList<QPointF>());
    }
    fit_axes(chart_);
}

Dashboard::Stretch Dashboard::stretch_series(std::size_t k) {
    if (k == 0) return {reference_, upper_, lower_, signal_};
    while (more_stretches_.size() < k) {
        Stretch more;
        more.reference = add_series(chart_, QString(), reference_->pen().color(), reference_->pen().widthF());
        more.upper = add_series(chart_, QString(), upper_->pen().color(), upper_->pen().widthF(), Qt::DashLine);
        more.lower = add_series(chart_, QString(), lower_->pen().color(), lower_->pen().widthF(), Qt::DashLine);
        more.measured = add_series(chart_, QString(), signal_->pen().color(), signal_->pen().widthF());
        for (QLineSeries* s : {more.reference, more.upper, more.lower, more.measured}) {
            chart_.chart->legend()->markers(s).first()->setVisible(false);
        }
        more_stretches_.push_back(more);
    }
    return more_stretches_[k - 1];
}

EvidenceDialog* Dashboard::openEvidence(qint64 event_id) {
    auto* d = new EvidenceDialog(link_, event_id, this);
    d->setAttribute(Qt::WA_DeleteOnClose);
    connect(d, &QObject::destroyed, this, [this, d] {
        if (last_evidence_ == d) last_evidence_ = nullptr;
    });
    last_evidence_ = d;
    d->show();
    return d;
}

void Dashboard::resumeSelected() {
    if (selected_.isEmpty()) return;
    auto* box = new QMessageBox(QMessageBox::Warning, tr("Resume %1").arg(selected_),
                                tr("Resume robot %1?\n\nMake sure the cause of the stop is removed and nobody is in the cell.").arg(selected_),
                                QMessageBox::Yes | QMessageBox::Cancel, this);
    box->setObjectName("resumeConfirmation");
    box->setDefaultButton(QMessageBox::Cancel);
    box->setAttribute(Qt::WA_DeleteOnClose);
    connect(box, &QMessageBox::finished, this, [this, box](int) {
        if (box->clickedButton() != box->button(QMessageBox::Yes)) return;
        link_->request({{"cmd", "resume"}, {"robot", selected_}, {"by", "warpguard-panel"}}, [this](const QJsonObject&, const QString& error) {
            if (!error.isEmpty()) QMessageBox::warning(this, tr("Resume refused"), error);
        });
    });
    box->open();
}

}  // namespace warpguard::panel
