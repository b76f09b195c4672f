#include "charts.hpp"

#include <QCoreApplication>
#include <QDateTime>
#include <QValueAxis>
#include <algorithm>
#include <limits>

namespace warpguard::panel {

Chart make_chart(const QString& title, const QString& x_title, const QString& y_title, QWidget* parent) {
    Chart c;
    c.chart = new QChart();
    c.chart->setTitle(title);
    c.chart->legend()->setAlignment(Qt::AlignBottom);
    c.x = new QValueAxis();
    c.y = new QValueAxis();
    c.x->setTitleText(x_title);
    c.y->setTitleText(y_title);
    c.chart->addAxis(c.x, Qt::AlignBottom);
    c.chart->addAxis(c.y, Qt::AlignLeft);
    c.view = new QChartView(c.chart, parent);
    c.view->setRenderHint(QPainter::Antialiasing);
    c.view->setMinimumHeight(220);
    return c;
}

QLineSeries* add_series(Chart& c, const QString& name, const QColor& color, qreal width, Qt::PenStyle style) {
    auto* s = new QLineSeries();
    s->setName(name);
    QPen pen(color);
    pen.setWidthF(width);
    pen.setStyle(style);
    s->setPen(pen);
    c.chart->addSeries(s);
    s->attachAxis(c.x);
    s->attachAxis(c.y);
    return s;
}

void fit_axes(Chart& c) {
    qreal x0 = std::numeric_limits<qreal>::max(), x1 = -x0, y0 = x0, y1 = -x0;
    for (auto* abstract : c.chart->series()) {
        auto* s = qobject_cast<QXYSeries*>(abstract);
        if (!s) continue;
        for (const QPointF& p : s->points()) {
            x0 = std::min(x0, p.x());
            x1 = std::max(x1, p.x());
            y0 = std::min(y0, p.y());
            y1 = std::max(y1, p.y());
        }
    }
    if (x0 > x1) return;
    if (x1 - x0 < 1e-9) x1 = x0 + 1;
    const qreal pad = std::max<qreal>((y1 - y0) * 0.08, 1e-3);
    c.x->setRange(x0, x1);
    c.y->setRange(y0 - pad, y1 + pad);
    c.y->applyNiceNumbers();  // round tick values that read at a glance
}

QString joint_unit(const QString& unit, bool linear) { return linear && unit == "Nm" ? QStringLiteral("N") : unit; }

QString signal_axis_title(const QString& unit, bool deviation, bool linear) {
    const char* title = deviation ? "deviation (%1)" : unit == "A" ? "current (%1)" : linear ? "force (%1)" : "torque (%1)";
    return QCoreApplication::translate("warpguard::panel::Chart", title).arg(joint_unit(unit, linear));
}

QString local_time(const QString& stored, const QString& format) {
    const QDateTime when = QDateTime::fromString(stored, Qt::ISODateWithMs);
    return when.isValid() ? when.toLocalTime().toString(format) : stored;
}

}  // namespace warpguard::panel
