#include "control_link.hpp"

#include <QJsonDocument>

namespace warpguard::panel {

ControlLink::ControlLink(QObject* parent) : QObject(parent) {
    retry_.setInterval(1000);
    connect(&retry_, &QTimer::timeout, this, &ControlLink::attempt);
    connect(&socket_, &QTcpSocket::connected, this, &ControlLink::onConnected);
    connect(&socket_, &QTcpSocket::readyRead, this, &ControlLink::onReadable);
    connect(&socket_, &QTcpSocket::disconnected, this, &ControlLink::onDropped);
    connect(&socket_, &QTcpSocket::errorOccurred, this, [this](QAbstractSocket::SocketError) {
        last_error_ = tr("cannot reach warpguardd at %1:%2: %3").arg(host_).arg(port_).arg(socket_.errorString());
        emit problem(last_error_);
        onDropped();
    });
}

ControlLink::~ControlLink() {
    socket_.disconnect(this);
    retry_.stop();
    pending_.clear();
    socket_.abort();
}

void ControlLink::open(const QString& host, quint16 port, const QString& token) {
    close();
    host_ = host;
    port_ = port;
    token_ = token;
    wanted_ = true;
    attempt();
    retry_.start();
}

void ControlLink::close() {
    wanted_ = false;
    retry_.stop();
    socket_.abort();
    setReady(false);
}

void ControlLink::attempt() {
    if (!wanted_ || socket_.state() != QAbstractSocket::UnconnectedState) return;
    buffer_.clear();
    socket_.connectToHost(host_, port_);
}

void ControlLink::onConnected() {
    socket_.setSocketOption(QAbstractSocket::LowDelayOption, 1);
    request({{"cmd", "hello"}, {"token", token_}, {"client", "warpguard-panel"}}, [this](const QJsonObject&, const QString& error) {
        if (!error.isEmpty()) {
            last_error_ = tr("warpguardd refused the panel: %1 (check the token)").arg(error);
            emit problem(last_error_);
            wanted_ = false;  // a wrong token does not get better by retrying
            retry_.stop();
            socket_.abort();
            return;
        }
        request({{"cmd", "subscribe"}, {"events", true}, {"feed", "all"}, {"decimate", 10}});
        last_error_.clear();
        setReady(true);
    });
}

void ControlLink::onReadable() {
    buffer_ += socket_.readAll();
    for (qsizetype nl = buffer_.indexOf('\n'); nl >= 0; nl = buffer_.indexOf('\n')) {
        const QByteArray line = buffer_.left(nl);
        buffer_.remove(0, nl + 1);
        const QJsonObject msg = QJsonDocument::fromJson(line).object();
        if (msg.contains("event")) {
            emit eventPushed(msg.value("event").toObject());
        } else if (msg.contains("feed")) {
            emit feedPushed(msg);
        } else if (msg.contains("req")) {
            const auto it = pending_.find(msg.value("req").toInteger());
            if (it == pending_.end()) continue;
            Handler h = std::move(it->second);
            pending_.erase(it);
            if (h) h(msg, msg.value("ok").toBool() ? QString() : msg.value("error").toString(tr("request refused")));
        }
    }
}

void ControlLink::onDropped() {
    auto pending = std::move(pending_);
    pending_.clear();
    for (auto& [id, h] : pending) {
        if (h) h({}, tr("the connection to warpguardd was lost"));
    }
    setReady(false);
}

void ControlLink::setReady(bool ready) {
    if (ready == ready_) return;
    ready_ = ready;
    emit readyChanged(ready);
}

void ControlLink::request(QJsonObject request, Handler handler) {
    if (socket_.state() != QAbstractSocket::ConnectedState) {
        if (handler) handler({}, tr("not connected to warpguardd"));
        return;
    }
    const qint64 id = next_req_++;
    request["req"] = id;
    pending_[id] = std::move(handler);
    socket_.write(QJsonDocument(request).toJson(QJsonDocument::Compact) + '\n');
}

}  // namespace warpguard::panel
