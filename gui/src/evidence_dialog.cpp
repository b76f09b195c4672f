#include "evidence_dialog.hpp"

#include <QDialogButtonBox>
#include <QHeaderView>
#include <QJsonArray>
#include <QLabel>
#include <QTabWidget>
#include <QTableWidget>
#include <QVBoxLayout>

#include "charts.hpp"
#include "control_link.hpp"

namespace warpguard::panel {

EvidenceDialog::EvidenceDialog(ControlLink* link, qint64 event_id, QWidget* parent) : QDialog(parent) {
    setObjectName("evidenceDialog");
    setWindowTitle(tr("Stop event #%1 — evidence").arg(event_id));
    resize(1000, 720);
    auto* layout = new QVBoxLayout(this);
    auto* loading = new QLabel(tr("Loading event #%1 from warpguardd…").arg(event_id), this);
    loading->setObjectName("evidenceStatus");
    layout->addWidget(loading);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Close, this);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
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
    auto* layout = static_cast<QVBoxLayout*>(this->layout());
    auto* head = new QLabel(this);
    head->setObjectName("evidenceHeadline");
    head->setWordWrap(true);
    head->setText(tr("<b>%1</b> — %2 — %3<br>%4")
                      .arg(event.value("robot").toString(), event.value("kind").toString(), event.value("time").toString(),
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
    const QJsonArray joints = evidence.value("joints").toArray();
    const int stop_joint = event.value("joint").toInt(1);

    // The decision itself: which rule, on which joint, how far over its limit.
    {
        const double value = event.value("value").toDouble(), limit = event.value("threshold").toDouble();
        auto* decision = new QLabel(this);
        decision->setObjectName("evidenceDecision");
        decision->setWordWrap(true);
        decision->setStyleSheet("font-size: 13pt; color: rgb(170,20,20);");
        const QString key = event.value("rule").toString();
        const QString rule = key == "rule1"           ? tr("rule 1 (absolute difference, %1)").arg(unit)
                             : key == "rule2"         ? tr("rule 2 (eigenvalue, %1)").arg(unit + QChar(0x00B2))
                             : key == "accumulated"   ? tr("the accumulated deviation (CUSUM, in multiples of the phase threshold)")
                             : key == "envelope"      ? tr("the envelope limit (%1)").arg(unit)
                             : key == "envelope_step" ? tr("the envelope step limit (%1)").arg(unit)
                                                      : key;
        decision->setText(tr("Stopped by %1 on joint %2: %3 against a limit of %4 (%5 × the limit).")
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
    if (evidence.contains("matched")) {
        auto* matched = new QLabel(tr("Matched signal: %1. The windows below are in that form.").arg(evidence.value("matched").toString()), this);
        matched->setObjectName("evidenceMatched");
        matched->setWordWrap(true);
        layout->insertWidget(at++, matched);
    }

    // Rule values against thresholds, every joint.
    auto* table = new QTableWidget(joints.size(), 6, this);
    table->setObjectName("evidenceRules");
    table->setHorizontalHeaderLabels({tr("joint"), tr("rule 1 |a − b| (%1)").arg(unit), tr("θ1 (%1)").arg(unit),
                                      tr("rule 2 λ2 (%1)").arg(unit + QChar(0x00B2)), tr("θ2 (%1)").arg(unit + QChar(0x00B2)), tr("matched reference span")});
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
        cell(1, QString::number(rule1, 'g', 4), rule1 > theta1);
        cell(2, QString::number(theta1, 'g', 4));
        cell(3, QString::number(rule2, 'g', 4), rule2 > theta2);
        cell(4, QString::number(theta2, 'g', 4));
        cell(5, tr("%1 … %2").arg(j.value("ref_start").toInt()).arg(j.value("ref_end").toInt()));

        // Figure 15/19: the window and the matched reference span, each over its own samples.
        Chart c = make_chart(tr("Joint %1: measurement window and matched reference span").arg(j.value("joint").toInt()),
                             tr("sample in window / in matched span"), tr("signal (%1)").arg(unit));
        auto* window = add_series(c, tr("measurement window (m = %1)").arg(evidence.value("window").toInt()), QColor(200, 30, 30), 2.5);
        auto* reference = add_series(c, tr("matched reference %1 … %2").arg(j.value("ref_start").toInt()).arg(j.value("ref_end").toInt()),
                                     QColor(30, 90, 200), 2.0);
        auto* upper = add_series(c, tr("reference + θ1"), QColor(30, 90, 200, 120), 1.0, Qt::DashLine);
        auto* lower = add_series(c, tr("reference − θ1"), QColor(30, 90, 200, 120), 1.0, Qt::DashLine);
        const QJsonArray w = j.value("window").toArray(), ref = j.value("reference").toArray();
        for (int k = 0; k < w.size(); ++k) window->append(k, w[k].toDouble());
        // The span is stretched over the window's length so both read against one axis.
        const double stretch = ref.size() > 1 ? double(w.size() - 1) / double(ref.size() - 1) : 1.0;
        for (int k = 0; k < ref.size(); ++k) {
            reference->append(k * stretch, ref[k].toDouble());
            upper->append(k * stretch, ref[k].toDouble() + theta1);
            lower->append(k * stretch, ref[k].toDouble() - theta1);
        }
        fit_axes(c);
        tabs->addTab(c.view, tr("joint %1%2").arg(j.value("joint").toInt()).arg(j.value("joint").toInt() == stop_joint ? " ●" : ""));
    }
    tabs->setCurrentIndex(std::max(0, stop_joint - 1));
    layout->insertWidget(at, tabs, 3);
    layout->insertWidget(at + 1, table, 1);
    loaded_ = true;
    emit evidenceLoaded();
}

}  // namespace warpguard::panel
