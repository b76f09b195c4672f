// The shop-floor dashboard: one tile per robot with its state readable from across the hall, the
// selected robot's live chart per joint (signal, matched reference, threshold band), the event list
// (a stop opens its evidence) and resume with a confirmation.
#pragma once

#include <QJsonArray>
#include <QJsonObject>
#include <QMap>
#include <QWidget>
#include <array>
#include <deque>
#include <vector>

#include "charts.hpp"

class QCheckBox;
class QComboBox;
class QGridLayout;
class QLabel;
class QPushButton;
class QTableWidget;

namespace warpguard::panel {

class ControlLink;
class EvidenceDialog;

// What a robot's state looks like on a tile.
struct TileLook {
    QString text;
    QColor background;
};
TileLook tile_look(const QJsonObject& robot_status);
// The status's `adaptation` as one line for the shop floor (empty when the detector learns nothing);
// `linear`: the robot's linear joints, 1-based, whose drift is a force.
QString learned_text(const QJsonObject& adaptation, const QString& unit, const QList<int>& linear = {});

class Dashboard : public QWidget {
    Q_OBJECT
public:
    explicit Dashboard(ControlLink* link, QWidget* parent = nullptr);
    QString selectedRobot() const { return selected_; }
    void selectRobot(const QString& id);
    // Opens the evidence of an event (also from the event list: double-click or Enter).
    EvidenceDialog* openEvidence(qint64 event_id);
    EvidenceDialog* lastEvidence() const { return last_evidence_; }
    QTableWidget* eventTable() const { return events_; }
    // Asks for confirmation, then resumes the selected robot; `confirm` = false skips the question
    // (the GUI test answers it through the message box instead).
    void resumeSelected();

private:
    void poll();
    void show_robots(const QJsonArray& robots);
    void add_event(const QJsonObject& e, bool at_top);
    void on_feed(const QJsonObject& feed);
    void redraw();
    void load_reference();

    ControlLink* link_;
    QLabel* status_;
    QGridLayout* tiles_;
    QMap<QString, QPushButton*> tile_;
    QString selected_;
    QLabel* detail_title_;
    QLabel* matched_;  // what the detector matches, from the `reference` answer
    QLabel* learned_;  // what the detector has learned in operation, from the status's `adaptation`
    QComboBox* joint_;
    QPushButton* resume_;
    Chart chart_;
    QLineSeries *signal_ = nullptr, *reference_ = nullptr, *upper_ = nullptr, *lower_ = nullptr;
    // The live chart as the measured value less the reference (the reference at 0, the limits
    // around it): the limits are a few units wide where a collision or a move spans hundreds.
    QCheckBox* deviation_ = nullptr;
    // Each stretch of judged samples gets its own reference and limit lines (and, as deviations,
    // its own measured line), so that none is drawn across a hold or a recording (a line series
    // cannot have gaps): the first stretch on screen uses reference_, upper_, lower_ and signal_,
    // later ones these (made as needed, never in the legend).
    struct Stretch {
        QLineSeries *reference, *upper, *lower, *measured;
    };
    std::vector<Stretch> more_stretches_;
    Stretch stretch_series(std::size_t k);
    QTableWidget* events_;
    EvidenceDialog* last_evidence_ = nullptr;
    struct Point {
        double t;
        QJsonArray signal, reference, lower, upper;
    };
    std::deque<Point> points_;
    QString unit_ = "Nm";
    QList<int> linear_;  // the selected robot's linear joints, 1-based (its configuration's "linear")
    bool history_ = false;  // adding events from the history, not live
};

}  // namespace warpguard::panel
