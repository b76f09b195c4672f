#include "evidence_dialog.hpp"

#include <QCheckBox>
#include <QDialogButtonBox>
#include <QDir>
#include <QFile>
#include <QFileDialog>
#include <QFileInfo>
#include <QJsonDocument>
#include <QPixmap>
#include <QPushButton>
#include <QTextStream>
#include <QHeaderView>
#include <QJsonArray>
#include <QLabel>
#include <QLegendMarker>
#include <QScatterSeries>
#include <QTabWidget>
#include <QTableWidget>
#include <QVBoxLayout>

#include "control_link.hpp"

namespace warpguard::panel {

EvidenceDialog::EvidenceDialog(ControlLink* link, qint64 event_id, QWidget* parent) : QDialog(parent) {
    setObjectName("evidenceDialog");
    setWindowTitle(tr("Event #%1 — evidence").arg(event_id));
    resize(1000, 720);
    auto* layout = new QVBoxLayout(this);
    auto* loading = new QLabel(tr("Loading event #%1 from warpguardd…").arg(event_id), this);
    loading->setObjectName("evidenceStatus");
    layout->addWidget(loading);
    event_id_ = event_id;
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    // For a maintenance report: the dialog as a picture, the charted samples as CSV, the event as JSON.
    save_ = buttons->addButton(tr("&Save…"), QDialogButtonBox::ActionRole);
    save_->setObjectName("evidenceSave");
    save_->setToolTip(tr("Save this evidence as a picture (.png), its samples (.csv) and the whole event (.json)"));
    save_->setEnabled(false);
    connect(save_, &QPushButton::clicked, this, [this] {
        const QString base = QFileDialog::getSaveFileName(this, tr("Save the evidence"), QString("stop-%1").arg(event_id_),
                                                          tr("Evidence (*.png *.csv *.json)"));
        if (base.isEmpty()) return;
        QString error;
        const QFileInfo info(base);
        const QString stem = info.dir().filePath(info.completeBaseName());
        saved_->setText(save(stem, &error) ? tr("Saved %1.png, .csv and .json.").arg(stem) : tr("Not saved: %1").arg(error));
        saved_->setStyleSheet(error.isEmpty() ? QString() : QString("color: rgb(170,20,20);"));
        saved_->show();
    });
    saved_ = new QLabel(this);
    saved_->setObjectName("evidenceSaved");
    saved_->hide();
    layout->addWidget(saved_);
    layout->addWidget(buttons);
    link->request({{"cmd", "event"}, {"id", event_id}}, [this, loading](const QJsonObject& a, const QString& error) {
        if (!error.isEmpty()) {
            loading->setText(tr("The event could not be loaded: %1").arg(error));
            return;
        }
        loading->hide();
        show_event(a);
    });
}

void EvidenceDialog::show_event(const QJsonObject& event) {
    event_ = event;
    save_->setEnabled(true);
    auto* layout = static_cast<QVBoxLayout*>(this->layout());
    auto* head = new QLabel(this);
    head->setObjectName("evidenceHeadline");
    head->setWordWrap(true);
    head->setText(tr("<b>%1</b> — %2 — %3<br>%4")
                      .arg(event.value("robot").toString(), event.value("kind").toString(), local_time(event.value("time").toString()),
                           event.value("reason").toString().toHtmlEscaped()));
    layout->insertWidget(0, head);
    const QJsonObject evidence = event.value("evidence").toObject();
    if (evidence.isEmpty()) {
        layout->insertWidget(1, new QLabel(tr("This event carries no evidence window (it is not a detection)."), this));
        loaded_ = true;
        emit evidenceLoaded();
        return;
    }
    const QString unit = evidence.value("unit").toString();
    unit_ = unit;
    const QJsonArray joints = evidence.value("joints").toArray();
    const int stop_joint = event.value("joint").toInt(1);
    // The default detector's evidence carries its own rule values (at the shared partner).
    const bool phase_aware = evidence.value("detector").toString() == "phase-aware";
    // SHADOW's would-be stops carry the same evidence: they say what DETECT would have done.
    const bool would = event.value("kind").toString() == "would_stop";

    // The decision itself: which rule, on which joint, how far over its limit.
    {
        const double value = event.value("value").toDouble(), limit = event.value("threshold").toDouble();
        auto* decision = new QLabel(this);
        decision->setObjectName("evidenceDecision");
        decision->setWordWrap(true);
        decision->setStyleSheet("font-size: 13pt; color: rgb(170,20,20);");
        const QString key = event.value("rule").toString();
        const QString rule = key == "rule1" && phase_aware
                                 ? tr("the deviation from the reference at the matched phase, beyond its bands (%1)").arg(unit)
                             : key == "rule1"         ? tr("rule 1 (absolute difference, %1)").arg(unit)
                             : key == "rule2"         ? tr("rule 2 (eigenvalue, %1)").arg(unit + QChar(0x00B2))
                             : key == "accumulated"   ? tr("the accumulated deviation (CUSUM, in multiples of the phase threshold)")
                             : key == "envelope"      ? tr("the envelope limit (%1)").arg(unit)
                             : key == "envelope_step" ? tr("the envelope step limit (%1)").arg(unit)
                                                      : key;
        decision->setText((would ? tr("In SHADOW, would have stopped the robot by %1 on joint %2: %3 against a limit of %4 (%5 × the limit).")
                                 : tr("Stopped by %1 on joint %2: %3 against a limit of %4 (%5 × the limit)."))
                              .arg(rule)
                              .arg(stop_joint)
                              .arg(value, 0, 'g', 4)
                              .arg(limit, 0, 'g', 4)
                              .arg(limit > 0 ? value / limit : 0.0, 0, 'f', 2));
        layout->insertWidget(1, decision);
    }
    // What the windows below are: the signal as the detector matched it (events stored before
    // 2026-11-27 do not say).
    int at = 2;  // where the next widget goes, under the headline and the decision
    // The default detector's events (since 2026-11-27) carry the newest samples as it judged them,
    // in the robot's units: those are drawn; older events and the published detector's show the
    // window in the matched form against the matched reference span.
    const QJsonArray judged_t = evidence.value("judged_t").toArray();
    const bool judged = phase_aware && !judged_t.isEmpty();
    if (judged) {
        for (const auto& t : judged_t) judged_ms_.push_back((t.toDouble() - judged_t.last().toDouble()) * 1e3);
    }
    if (evidence.contains("matched")) {
        auto* matched = new QLabel(judged ? tr("Matched signal: %1. The charts show the newest samples in the robot's units against the "
                                               "reference and the limits the detector judged them by, as the dashboard drew them.")
                                                .arg(evidence.value("matched").toString())
                                          : tr("Matched signal: %1. The windows below are in that form.").arg(evidence.value("matched").toString()),
                                   this);
        matched->setObjectName("evidenceMatched");
        matched->setWordWrap(true);
        layout->insertWidget(at++, matched);
    }

    // Rule values against thresholds, every joint: the default (phase-aware) detector's own rules
    // at the shared partner, or the published rules 1 and 2 over the matched span.
    const double cusum_limit = evidence.value("cusum_limit").toDouble();
    auto* table = new QTableWidget(joints.size(), 6, this);
    table->setObjectName("evidenceRules");
    if (phase_aware) {
        table->setHorizontalHeaderLabels({tr("joint"), tr("deviation (%1)").arg(unit), tr("threshold (%1)").arg(unit), tr("× threshold"),
                                          tr("CUSUM (limit %1)").arg(cusum_limit, 0, 'g', 4), tr("matched sample")});
        const QStringList tips = {QString(),
                                  tr("The newest sample's deviation from the reference at the matched phase, beyond the reference's "
                                     "range there and the speed, friction and payload bands"),
                                  tr("The threshold at the matched phase: over it for the persistence samples stops the robot"),
                                  tr("The deviation in multiples of the threshold"),
                                  tr("The accumulated deviation in multiples of the threshold: over the limit stops the robot"),
                                  tr("The reference sample matched to the newest one, shared by all joints (the chart shows "
                                     "the reference up to it)")};
        for (int c = 1; c < tips.size(); ++c) table->horizontalHeaderItem(c)->setToolTip(tips[c]);
    } else {
        table->setHorizontalHeaderLabels({tr("joint"), tr("rule 1 |a − b| (%1)").arg(unit), tr("θ1 (%1)").arg(unit),
                                          tr("rule 2 λ2 (%1)").arg(unit + QChar(0x00B2)), tr("θ2 (%1)").arg(unit + QChar(0x00B2)),
                                          tr("matched reference span")});
    }
    table->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
    table->verticalHeader()->hide();
    table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    auto* tabs = new QTabWidget(this);
    tabs->setObjectName("evidenceCharts");
    for (int r = 0; r < joints.size(); ++r) {
        const QJsonObject j = joints[r].toObject();
        const double rule1 = j.value("rule1").toDouble(), theta1 = j.value("theta1").toDouble();
        const double rule2 = j.value("rule2").toDouble(), theta2 = j.value("theta2").toDouble();
        const auto cell = [&](int col, const QString& text, bool over = false) {
            auto* item = new QTableWidgetItem(text);
            if (over) {
                item->setBackground(QColor(220, 40, 40));
                item->setForeground(Qt::white);
            }
            table->setItem(r, col, item);
        };
        cell(0, QString::number(j.value("joint").toInt()));
        if (phase_aware) {
            const double deviation = j.value("deviation").toDouble(), threshold = j.value("phase_threshold").toDouble();
            const double cusum = j.value("cusum").toDouble();
            cell(1, QString::number(deviation, 'g', 4), deviation > threshold);
            cell(2, QString::number(threshold, 'g', 4));
            cell(3, QString::number(threshold > 0 ? deviation / threshold : 0.0, 'f', 2), deviation > threshold);
            cell(4, QString::number(cusum, 'g', 4), cusum_limit > 0 && cusum > cusum_limit);
            cell(5, QString::number(j.value("partner").toInt()));
        } else {
            cell(1, QString::number(rule1, 'g', 4), rule1 > theta1);
            cell(2, QString::number(theta1, 'g', 4));
            cell(3, QString::number(rule2, 'g', 4), rule2 > theta2);
            cell(4, QString::number(theta2, 'g', 4));
            cell(5, tr("%1 … %2").arg(j.value("ref_start").toInt()).arg(j.value("ref_end").toInt()));
        }

        const int joint = j.value("joint").toInt();
        const QString tab = tr("joint %1%2").arg(joint).arg(joint == stop_joint ? " ●" : "");
        if (judged && j.value("judged").isObject()) {
            // The newest samples as judged: measured, the reference paired with each and the limits
            // (beyond them a sample is over its threshold); the stop is the last sample.
            const QJsonObject in = j.value("judged").toObject();
            JudgedChart jc;
            jc.chart = make_chart(tr("Joint %1: the newest samples as the detector judged them").arg(joint),
                                  would ? tr("time before the would-be stop (ms)") : tr("time before the stop (ms)"), QString());
            jc.measured = add_series(jc.chart, tr("measured"), QColor(200, 30, 30), 2.5);
            jc.reference = add_series(jc.chart, tr("reference at the matched phase"), QColor(30, 90, 200), 2.0);
            jc.upper = add_series(jc.chart, tr("limits (beyond them: over the threshold)"), QColor(30, 90, 200, 150), 1.2, Qt::DashLine);
            jc.lower = add_series(jc.chart, QString(), QColor(30, 90, 200, 150), 1.2, Qt::DashLine);
            jc.chart.chart->legend()->markers(jc.lower).first()->setVisible(false);
            jc.stop = new QScatterSeries();
            jc.stop->setName(would ? tr("the sample that would have stopped") : tr("the sample that stopped"));
            jc.stop->setMarkerSize(9.0);
            jc.stop->setColor(QColor(200, 30, 30));
            jc.stop->setBorderColor(Qt::black);
            jc.chart.chart->addSeries(jc.stop);
            jc.stop->attachAxis(jc.chart.x);
            jc.stop->attachAxis(jc.chart.y);
            jc.chart.view->setObjectName(QString("judgedChart%1").arg(joint));
            jc.signal = in.value("signal").toArray();
            jc.linear = evidence.value("linear").toArray().contains(joint);
            jc.ref = in.value("reference").toArray();
            jc.low = in.value("lower").toArray();
            jc.high = in.value("upper").toArray();
            tabs->addTab(jc.chart.view, tab);
            judged_.push_back(std::move(jc));
            continue;
        }
        // Figure 15/19: the window and the matched reference span, each over its own samples (the
        // phase-aware detector: the reference up to the sample it matched to the newest one).
        Chart c = make_chart(phase_aware ? tr("Joint %1: measurement window and the reference up to the matched sample").arg(j.value("joint").toInt())
                                         : tr("Joint %1: measurement window and matched reference span").arg(j.value("joint").toInt()),
                             tr("sample in window / in matched span"), tr("signal (%1)").arg(unit));
        auto* window = add_series(c, tr("measurement window (m = %1)").arg(evidence.value("window").toInt()), QColor(200, 30, 30), 2.5);
        auto* reference = add_series(c, tr("matched reference %1 … %2").arg(j.value("ref_start").toInt()).arg(j.value("ref_end").toInt()),
                                     QColor(30, 90, 200), 2.0);
        // The phase-aware detector's θ1 changes along the reference (theta1_span, per sample of
        // the span); the published one has one per joint.
        const QJsonArray along = j.value("theta1_span").toArray();
        const bool per_phase = !along.isEmpty();
        auto* upper = add_series(c, per_phase ? tr("reference ± θ1 at each phase") : tr("reference + θ1"), QColor(30, 90, 200, 120), 1.0,
                                 Qt::DashLine);
        auto* lower = add_series(c, per_phase ? QString() : tr("reference − θ1"), QColor(30, 90, 200, 120), 1.0, Qt::DashLine);
        if (per_phase) c.chart->legend()->markers(lower).first()->setVisible(false);
        const QJsonArray w = j.value("window").toArray(), ref = j.value("reference").toArray();
        for (int k = 0; k < w.size(); ++k) window->append(k, w[k].toDouble());
        // The span is stretched over the window's length so both read against one axis.
        const double stretch = ref.size() > 1 ? double(w.size() - 1) / double(ref.size() - 1) : 1.0;
        for (int k = 0; k < ref.size(); ++k) {
            reference->append(k * stretch, ref[k].toDouble());
            const double at = per_phase && k < along.size() ? along[k].toDouble() : theta1;
            upper->append(k * stretch, ref[k].toDouble() + at);
            lower->append(k * stretch, ref[k].toDouble() - at);
        }
        fit_axes(c);
        tabs->addTab(c.view, tab);
    }
    tabs->setCurrentIndex(std::max(0, stop_joint - 1));
    if (!judged_.empty()) {
        // A collision's 100 Nm hides limits a few Nm apart: by default the samples are drawn as
        // their deviation from the reference, the limits around 0.
        deviation_ = new QCheckBox(tr("As &deviation from the reference"), this);
        deviation_->setObjectName("evidenceDeviation");
        deviation_->setChecked(true);
        deviation_->setToolTip(tr("Show the measured value less the reference, with the limits around it"));
        connect(deviation_, &QCheckBox::toggled, this, [this] { draw_judged(); });
        layout->insertWidget(at++, deviation_);
        draw_judged();
    }
    layout->insertWidget(at, tabs, 3);
    layout->insertWidget(at + 1, table, 1);
    loaded_ = true;
    emit evidenceLoaded();
}

bool EvidenceDialog::save(const QString& base, QString* error) {
    const auto fail = [&](const QString& path, const QString& why) {
        if (error) *error = tr("cannot write %1: %2").arg(path, why);
        return false;
    };
    if (!loaded_) return fail(base, tr("the event has not been loaded"));
    const QString png = base + ".png", csv = base + ".csv", json = base + ".json";
    if (!grab().save(png, "PNG")) return fail(png, tr("the picture could not be written"));
    {
        QFile f(json);
        if (!f.open(QIODevice::WriteOnly)) return fail(json, f.errorString());
        if (f.write(QJsonDocument(event_).toJson()) < 0) return fail(json, f.errorString());
    }
    QFile f(csv);
    if (!f.open(QIODevice::WriteOnly | QIODevice::Text)) return fail(csv, f.errorString());
    QTextStream out(&f);
    const QJsonObject evidence = event_.value("evidence").toObject();
    const QJsonArray joints = evidence.value("joints").toArray();
    const auto number = [](const QJsonValue& v) { return v.isDouble() ? QString::number(v.toDouble(), 'g', 10) : QString(); };
    out << "# robot: " << event_.value("robot").toString() << "\n";
    out << "# event: " << event_id_ << " (" << event_.value("kind").toString() << ", " << event_.value("time").toString() << ")\n";
    out << "# reason: " << event_.value("reason").toString() << "\n";
    out << "# unit: " << unit_ << "\n";
    const QJsonArray judged_t = evidence.value("judged_t").toArray();
    if (!judged_t.isEmpty()) {
        // The newest samples as judged: measured, the reference paired with each and its limits.
        out << "# the newest samples as the detector judged them, in the robot's units; the last stopped the robot\n";
        out << "t,ms_before_stop";
        for (const auto& j : joints) {
            const int k = j.toObject().value("joint").toInt();
            out << QString(",measured%1,reference%1,lower%1,upper%1").arg(k);
        }
        out << "\n";
        for (qsizetype i = 0; i < judged_t.size(); ++i) {
            out << number(judged_t[i]) << "," << QString::number((judged_t[i].toDouble() - judged_t.last().toDouble()) * 1e3, 'f', 3);
            for (const auto& j : joints) {
                const QJsonObject in = j.toObject().value("judged").toObject();
                for (const char* key : {"signal", "reference", "lower", "upper"}) out << "," << number(in.value(key).toArray().at(i));
            }
            out << "\n";
        }
    } else {
        // The measurement window as the detector matched it.
        out << "# the measurement window as the detector matched it; the last sample stopped the robot\n";
        out << "sample";
        for (const auto& j : joints) out << QString(",window%1").arg(j.toObject().value("joint").toInt());
        out << "\n";
        const qsizetype w = joints.isEmpty() ? 0 : joints[0].toObject().value("window").toArray().size();
        for (qsizetype i = 0; i < w; ++i) {
            out << i;
            for (const auto& j : joints) out << "," << number(j.toObject().value("window").toArray().at(i));
            out << "\n";
        }
    }
    out.flush();
    if (f.error() != QFileDevice::NoError) return fail(csv, f.errorString());
    return true;
}

void EvidenceDialog::draw_judged() {
    const bool deviation = deviation_ && deviation_->isChecked();
    for (JudgedChart& jc : judged_) {
        jc.chart.y->setTitleText(signal_axis_title(unit_, deviation, jc.linear));
        jc.measured->setName(deviation ? tr("measured less the reference") : tr("measured"));
        QList<QPointF> measured, reference, upper, lower, stop;
        const qsizetype count = std::min<qsizetype>(jc.signal.size(), qsizetype(judged_ms_.size()));
        for (qsizetype k = 0; k < count; ++k) {
            const double x = judged_ms_[std::size_t(k)];
            const bool has = !jc.ref[k].isNull() && !jc.low[k].isNull() && !jc.high[k].isNull();
            const double ref = has ? jc.ref[k].toDouble() : 0.0, zero = deviation ? ref : 0.0;
            if (jc.signal[k].isNull() || (deviation && !has)) continue;  // not judged: nothing to compare with
            const QPointF m(x, jc.signal[k].toDouble() - zero);
            measured.append(m);
            if (k + 1 == count) stop.append(m);
            if (!has) continue;
            reference.append({x, ref - zero});
            upper.append({x, jc.high[k].toDouble() - zero});
            lower.append({x, jc.low[k].toDouble() - zero});
        }
        jc.measured->replace(measured);
        jc.reference->replace(reference);
        jc.upper->replace(upper);
        jc.lower->replace(lower);
        jc.stop->replace(stop);
        fit_axes(jc.chart);
    }
}

}  // namespace warpguard::panel
