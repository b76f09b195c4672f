// Small helpers for what the panel shows: Qt Charts with unit-labelled axes and series replaced
// whole, and the daemon's times as the shop floor reads them.
#pragma once

#include <QChartView>
#include <QLineSeries>
#include <QValueAxis>
#include <QString>
#include <QVector>

namespace warpguard::panel {

struct Chart {
    QChartView* view = nullptr;
    QChart* chart = nullptr;
    QValueAxis* x = nullptr;
    QValueAxis* y = nullptr;
};

// A chart with an x axis titled `x_title` and a y axis titled `y_title` (both with units).
Chart make_chart(const QString& title, const QString& x_title, const QString& y_title, QWidget* parent = nullptr);
// Adds a line series attached to both axes.
QLineSeries* add_series(Chart& c, const QString& name, const QColor& color, qreal width = 2.0, Qt::PenStyle style = Qt::SolidLine);
// Sets the axes' ranges to the data of every series (with a little margin).
void fit_axes(Chart& c);
// A joint's signal unit: a linear joint's motor holds a force, in N where the robot reports Nm.
QString joint_unit(const QString& unit, bool linear);
// The y axis title of a robot signal in `unit` (A: current, otherwise torque; a force, in N where the
// robot reports Nm, for a linear joint), or of its deviation from the reference.
QString signal_axis_title(const QString& unit, bool deviation, bool linear = false);
// A time the daemon stores (UTC, ISO 8601 with milliseconds) in the panel's local time in `format`
// (Qt's date-time format); the stored text itself when it does not parse.
QString local_time(const QString& stored, const QString& format = QStringLiteral("yyyy-MM-dd HH:mm:ss"));

}  // namespace warpguard::panel
