// The panel's connection to warpguardd's control API (docs/daemon.md): newline-delimited JSON over
// TCP, a "hello" with the token first, requests matched to answers by "req", pushed events and feed.
// It reconnects by itself every second while the daemon is away and subscribes again.
#pragma once

#include <QJsonObject>
#include <QObject>
#include <QTcpSocket>
#include <QTimer>
#include <functional>
#include <map>

namespace warpguard::panel {

class ControlLink : public QObject {
    Q_OBJECT
public:
    using Handler = std::function<void(const QJsonObject& answer, const QString& error)>;

    explicit ControlLink(QObject* parent = nullptr);
    // Drops the pending handlers without calling them: their owners may already be gone.
    ~ControlLink() override;
    // Connects (and keeps reconnecting) to the daemon; `feed` = robot ids for the live feed ("all").
    void open(const QString& host, quint16 port, const QString& token);
    void close();
    bool isReady() const { return ready_; }
    QString host() const { return host_; }
    quint16 port() const { return port_; }
    QString lastError() const { return last_error_; }
    // Sends a request; the handler gets the answer or an error text (also when the link drops).
    void request(QJsonObject request, Handler handler = {});

signals:
    void readyChanged(bool ready);          // connected and authenticated
    void eventPushed(const QJsonObject& event);
    void feedPushed(const QJsonObject& feed);
    void problem(const QString& text);      // what went wrong, in words for the operator

private:
    void attempt();
    void onConnected();
    void onReadable();
    void onDropped();
    void setReady(bool ready);

    QTcpSocket socket_;
    QTimer retry_;
    QString host_, token_, last_error_;
    quint16 port_ = 0;
    bool wanted_ = false, ready_ = false;
    qint64 next_req_ = 1;
    QByteArray buffer_;
    std::map<qint64, Handler> pending_;
};

}  // namespace warpguard::panel
