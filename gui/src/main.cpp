// warpguard-panel [--host H] [--port P] [--token-file F] [--setup] [--fullscreen]
// The token also comes from WARPGUARD_TOKEN. Without a token the setup wizard opens at "Connect".
#include <QApplication>
#include <QCommandLineParser>
#include <QFile>

#include "control_link.hpp"
#include "main_window.hpp"
#include "setup_wizard.hpp"

int main(int argc, char** argv) {
    QApplication app(argc, argv);
    QApplication::setApplicationName("warpguard-panel");
    QCommandLineParser cli;
    cli.setApplicationDescription("WarpGuard's setup wizard and shop-floor dashboard (a client of warpguardd's control API)");
    cli.addHelpOption();
    QCommandLineOption host("host", "warpguardd's control address", "host", "127.0.0.1");
    QCommandLineOption port("port", "warpguardd's control port", "port", "7701");
    QCommandLineOption token_file("token-file", "File whose first line is the control token", "file");
    QCommandLineOption setup("setup", "Open the setup wizard");
    QCommandLineOption full("fullscreen", "Shop-floor mode: full screen");
    cli.addOptions({host, port, token_file, setup, full});
    cli.process(app);
    QString token = qEnvironmentVariable("WARPGUARD_TOKEN");
    if (cli.isSet(token_file)) {
        QFile f(cli.value(token_file));
        if (!f.open(QIODevice::ReadOnly)) {
            qCritical("warpguard-panel: --token-file %s cannot be read: %s", qPrintable(cli.value(token_file)), qPrintable(f.errorString()));
            return 2;
        }
        token = QString::fromUtf8(f.readLine()).trimmed();
    }
    bool port_ok = false;
    const uint p = cli.value(port).toUInt(&port_ok);
    if (!port_ok || p == 0 || p > 65535) {
        qCritical("warpguard-panel: --port '%s' is not a port 1-65535", qPrintable(cli.value(port)));
        return 2;
    }
    warpguard::panel::ControlLink link;
    warpguard::panel::MainWindow window(&link);
    if (cli.isSet(full)) window.showFullScreen();
    else window.show();
    if (!token.isEmpty()) link.open(cli.value(host), static_cast<quint16>(p), token);
    if (cli.isSet(setup) || token.isEmpty()) window.openWizard();
    return app.exec();
}
