// The evidence of one stop event (thesis Figures 15 and 19): the measurement window, the matched
// reference span, and every joint's rule values against their thresholds.
#pragma once

#include <QDialog>
#include <QJsonObject>

namespace warpguard::panel {

class ControlLink;

class EvidenceDialog : public QDialog {
    Q_OBJECT
public:
    EvidenceDialog(ControlLink* link, qint64 event_id, QWidget* parent = nullptr);
    bool loaded() const { return loaded_; }

signals:
    void evidenceLoaded();

private:
    void show_event(const QJsonObject& event);
    bool loaded_ = false;
};

}  // namespace warpguard::panel
