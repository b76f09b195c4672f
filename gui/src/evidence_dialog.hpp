// The evidence of one stop event (thesis Figures 15 and 19): the measurement window, the matched
// reference span, and every joint's rule values against their thresholds. For the default
// detector: the newest samples as it judged them, with the limits its rules allowed.
#pragma once

#include <QDialog>
#include <QJsonArray>
#include <QJsonObject>
#include <vector>

#include "charts.hpp"

class QCheckBox;
class QLabel;
class QPushButton;
class QScatterSeries;

namespace warpguard::panel {

class ControlLink;

class EvidenceDialog : public QDialog {
    Q_OBJECT
public:
    EvidenceDialog(ControlLink* link, qint64 event_id, QWidget* parent = nullptr);
    bool loaded() const { return loaded_; }
    // Writes BASE.png (the dialog as shown), BASE.csv (the samples charted, one row each) and
    // BASE.json (the event as the daemon stored it). False with `error` set when a file cannot be written.
    bool save(const QString& base, QString* error);

signals:
    void evidenceLoaded();

private:
    void show_event(const QJsonObject& event);
    // One joint's newest samples as judged (evidence "judged"), drawn as measured or as deviation.
    struct JudgedChart {
        Chart chart;
        QLineSeries *measured = nullptr, *reference = nullptr, *upper = nullptr, *lower = nullptr;
        QScatterSeries* stop = nullptr;
        QJsonArray signal, ref, low, high;
        bool linear = false;  // the joint slides: its signal is a force
    };
    void draw_judged();
    std::vector<JudgedChart> judged_;
    std::vector<double> judged_ms_;  // each judged sample's robot time, ms before the stop
    QCheckBox* deviation_ = nullptr;
    QString unit_;
    QJsonObject event_;
    qint64 event_id_ = 0;
    QPushButton* save_ = nullptr;
    QLabel* saved_ = nullptr;  // what the last save wrote, or why it failed
    bool loaded_ = false;
};

}  // namespace warpguard::panel
