#include "store.hpp"

#include <chrono>
#include <ctime>

#include <fmt/format.h>
#include <sqlite3.h>

namespace warpguard::daemon {

std::string now_iso() {
    const auto now = std::chrono::system_clock::now();
    const std::time_t secs = std::chrono::system_clock::to_time_t(now);
    const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
    std::tm tm{};
    gmtime_r(&secs, &tm);
    char buf[40];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    return fmt::format("{}.{:03d}Z", buf, static_cast<int>(ms));
}

namespace {

// A prepared statement that finalises itself.
class Statement {
public:
    Statement(sqlite3* db, const char* sql) : db_(db) {
        if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK) {
            throw StoreError(fmt::format("SQLite cannot prepare '{}': {}", sql, sqlite3_errmsg(db)));
        }
    }
    ~Statement() { sqlite3_finalize(stmt_); }
    Statement(const Statement&) = delete;
    Statement& operator=(const Statement&) = delete;

    Statement& bind(int i, const std::string& v) {
        sqlite3_bind_text(stmt_, i, v.c_str(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
        return *this;
    }
    Statement& bind(int i, std::int64_t v) {
        sqlite3_bind_int64(stmt_, i, v);
        return *this;
    }
    Statement& bind(int i, double v) {
        sqlite3_bind_double(stmt_, i, v);
        return *this;
    }
    Statement& bind_null(int i) {
        sqlite3_bind_null(stmt_, i);
        return *this;
    }
    // SQLITE_ROW: true; SQLITE_DONE: false; anything else throws.
    bool step() {
        const int rc = sqlite3_step(stmt_);
        if (rc == SQLITE_ROW) return true;
        if (rc == SQLITE_DONE) return false;
        throw StoreError(fmt::format("SQLite: {}", sqlite3_errmsg(db_)));
    }
    std::int64_t integer(int c) const { return sqlite3_column_int64(stmt_, c); }
    double real(int c) const { return sqlite3_column_double(stmt_, c); }
    std::string text(int c) const {
        const auto* p = sqlite3_column_text(stmt_, c);
        return p ? std::string(reinterpret_cast<const char*>(p), static_cast<std::size_t>(sqlite3_column_bytes(stmt_, c))) : std::string();
    }
    bool null(int c) const { return sqlite3_column_type(stmt_, c) == SQLITE_NULL; }

private:
    sqlite3* db_;
    sqlite3_stmt* stmt_ = nullptr;
};

constexpr const char* kSchema = R"SQL(
CREATE TABLE IF NOT EXISTS robots (id TEXT PRIMARY KEY, config TEXT NOT NULL, added TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS robot_state (robot TEXT PRIMARY KEY, mode TEXT NOT NULL, latched INTEGER NOT NULL,
  reason TEXT NOT NULL, profile_id INTEGER NOT NULL, updated TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS recordings (id INTEGER PRIMARY KEY AUTOINCREMENT, robot TEXT NOT NULL, path TEXT NOT NULL,
  started TEXT NOT NULL, ended TEXT NOT NULL, samples INTEGER NOT NULL, cycles INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS profiles (id INTEGER PRIMARY KEY AUTOINCREMENT, robot TEXT NOT NULL, created TEXT NOT NULL,
  recording_id INTEGER NOT NULL, summary TEXT NOT NULL, profile TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS models (id INTEGER PRIMARY KEY AUTOINCREMENT, robot TEXT NOT NULL, created TEXT NOT NULL,
  model TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY AUTOINCREMENT, robot TEXT NOT NULL, time TEXT NOT NULL,
  kind TEXT NOT NULL, reason TEXT NOT NULL, seq INTEGER, cycle INTEGER, joint INTEGER, rule TEXT, value REAL,
  threshold REAL, evidence TEXT);
CREATE INDEX IF NOT EXISTS events_robot ON events (robot, id);
)SQL";

}  // namespace

Store::Store(const std::string& path) : path_(path) {
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr) != SQLITE_OK) {
        const std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
        sqlite3_close(db_);
        db_ = nullptr;
        throw StoreError(fmt::format("{}: cannot open the database: {}", path, why));
    }
    sqlite3_busy_timeout(db_, 2000);
    exec("PRAGMA journal_mode=WAL");
    exec("PRAGMA synchronous=NORMAL");
    exec(kSchema);
}

Store::~Store() { sqlite3_close(db_); }

void Store::exec(const char* sql) {
    char* error = nullptr;
    if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
        const std::string why = error ? error : "unknown error";
        sqlite3_free(error);
        throw StoreError(fmt::format("{}: {}", path_, why));
    }
}

std::int64_t Store::add_event(const EventRecord& e) {
    std::lock_guard lock(mutex_);
    Statement s(db_,
                "INSERT INTO events (robot, time, kind, reason, seq, cycle, joint, rule, value, threshold, evidence) "
                "VALUES (?,?,?,?,?,?,?,?,?,?,?)");
    s.bind(1, e.robot).bind(2, now_iso()).bind(3, e.kind).bind(4, e.reason);
    if (e.seq >= 0) s.bind(5, e.seq); else s.bind_null(5);
    if (e.cycle >= 0) s.bind(6, e.cycle); else s.bind_null(6);
    s.bind(7, static_cast<std::int64_t>(e.joint)).bind(8, e.rule).bind(9, e.value).bind(10, e.threshold);
    if (e.evidence.is_null()) s.bind_null(11); else s.bind(11, e.evidence.dump());
    s.step();
    return sqlite3_last_insert_rowid(db_);
}

namespace {
nlohmann::json event_row(const Statement& s) {
    nlohmann::json j = {{"id", s.integer(0)}, {"robot", s.text(1)}, {"time", s.text(2)}, {"kind", s.text(3)},
                        {"reason", s.text(4)}};
    j["seq"] = s.null(5) ? nlohmann::json() : nlohmann::json(s.integer(5));
    j["cycle"] = s.null(6) ? nlohmann::json() : nlohmann::json(s.integer(6));
    j["joint"] = s.integer(7);
    j["rule"] = s.text(8);
    j["value"] = s.real(9);
    j["threshold"] = s.real(10);
    j["has_evidence"] = !s.null(11);
    return j;
}
}  // namespace

nlohmann::json Store::events(const std::string& robot, std::int64_t after_id, std::size_t limit, const std::string& kind) {
    std::lock_guard lock(mutex_);
    Statement s(db_,
                "SELECT id, robot, time, kind, reason, seq, cycle, joint, rule, value, threshold, evidence IS NOT NULL "
                "FROM events WHERE id > ? AND (? = '' OR robot = ?) AND (? = '' OR kind = ?) ORDER BY id DESC LIMIT ?");
    s.bind(1, after_id).bind(2, robot).bind(3, robot).bind(4, kind).bind(5, kind).bind(6, static_cast<std::int64_t>(limit));
    nlohmann::json out = nlohmann::json::array();
    while (s.step()) {
        nlohmann::json j = event_row(s);
        j["has_evidence"] = s.integer(11) != 0;
        out.push_back(std::move(j));
    }
    std::reverse(out.begin(), out.end());
    return out;
}

std::optional<nlohmann::json> Store::event(std::int64_t id) {
    std::lock_guard lock(mutex_);
    Statement s(db_, "SELECT id, robot, time, kind, reason, seq, cycle, joint, rule, value, threshold, evidence FROM events WHERE id = ?");
    s.bind(1, id);
    if (!s.step()) return std::nullopt;
    nlohmann::json j = event_row(s);
    j["evidence"] = s.null(11) ? nlohmann::json() : nlohmann::json::parse(s.text(11));
    return j;
}

std::int64_t Store::add_recording(const std::string& robot, const std::string& path, const std::string& started,
                                  std::size_t samples, std::size_t complete_cycles) {
    std::lock_guard lock(mutex_);
    Statement s(db_, "INSERT INTO recordings (robot, path, started, ended, samples, cycles) VALUES (?,?,?,?,?,?)");
    s.bind(1, robot).bind(2, path).bind(3, started).bind(4, now_iso());
    s.bind(5, static_cast<std::int64_t>(samples)).bind(6, static_cast<std::int64_t>(complete_cycles));
    s.step();
    return sqlite3_last_insert_rowid(db_);
}

namespace {
nlohmann::json recording_row(const Statement& s) {
    return {{"id", s.integer(0)}, {"robot", s.text(1)},      {"path", s.text(2)},
            {"started", s.text(3)}, {"ended", s.text(4)}, {"samples", s.integer(5)}, {"cycles", s.integer(6)}};
}
}  // namespace

nlohmann::json Store::recordings(const std::string& robot) {
    std::lock_guard lock(mutex_);
    Statement s(db_, "SELECT id, robot, path, started, ended, samples, cycles FROM recordings WHERE ? = '' OR robot = ? ORDER BY id");
    s.bind(1, robot).bind(2, robot);
    nlohmann::json out = nlohmann::json::array();
    while (s.step()) out.push_back(recording_row(s));
    return out;
}

std::optional<nlohmann::json> Store::recording(std::int64_t id) {
    std::lock_guard lock(mutex_);
    Statement s(db_, "SELECT id, robot, path, started, ended, samples, cycles FROM recordings WHERE id = ?");
    s.bind(1, id);
    if (!s.step()) return std::nullopt;
    return recording_row(s);
}

std::int64_t Store::add_profile(const std::string& robot, std::int64_t recording_id, const nlohmann::json& summary,
                                const std::string& profile_json) {
    std::lock_guard lock(mutex_);
    Statement s(db_, "INSERT INTO profiles (robot, created, recording_id, summary, profile) VALUES (?,?,?,?,?)");
    s.bind(1, robot).bind(2, now_iso()).bind(3, recording_id).bind(4, summary.dump()).bind(5, profile_json);
    s.step();
    return sqlite3_last_insert_rowid(db_);
}

std::int64_t Store::add_model(const std::string& robot, const nlohmann::json& model) {
    std::lock_guard lock(mutex_);
    Statement s(db_, "INSERT INTO models (robot, created, model) VALUES (?,?,?)");
    s.bind(1, robot).bind(2, now_iso()).bind(3, model.dump());
    s.step();
    return sqlite3_last_insert_rowid(db_);
}

std::optional<nlohmann::json> Store::latest_model(const std::string& robot) {
    std::lock_guard lock(mutex_);
    Statement s(db_, "SELECT id, created, model FROM models WHERE robot = ? ORDER BY id DESC LIMIT 1");
    s.bind(1, robot);
    if (!s.step()) return std::nullopt;
    return nlohmann::json{{"id", s.integer(0)}, {"robot", robot}, {"created", s.text(1)}, {"model", nlohmann::json::parse(s.text(2))}};
}

std::optional<nlohmann::json> Store::model(std::int64_t id) {
    std::lock_guard lock(mutex_);
    Statement s(db_, "SELECT id, robot, created, model FROM models WHERE id = ?");
    s.bind(1, id);
    if (!s.step()) return std::nullopt;
    return nlohmann::json{{"id", s.integer(0)}, {"robot", s.text(1)}, {"created", s.text(2)}, {"model", nlohmann::json::parse(s.text(3))}};
}

nlohmann::json Store::profiles(const std::string& robot) {
    std::lock_guard lock(mutex_);
    Statement s(db_, "SELECT id, robot, created, recording_id, summary FROM profiles WHERE ? = '' OR robot = ? ORDER BY id");
    s.bind(1, robot).bind(2, robot);
    nlohmann::json out = nlohmann::json::array();
    while (s.step()) {
        out.push_back({{"id", s.integer(0)}, {"robot", s.text(1)}, {"created", s.text(2)}, {"recording", s.integer(3)},
                       {"summary", nlohmann::json::parse(s.text(4))}});
    }
    return out;
}

std::optional<std::string> Store::profile_json(std::int64_t id, std::string* robot) {
    std::lock_guard lock(mutex_);
    Statement s(db_, "SELECT profile, robot FROM profiles WHERE id = ?");
    s.bind(1, id);
    if (!s.step()) return std::nullopt;
    if (robot) *robot = s.text(1);
    return s.text(0);
}

void Store::save_state(const RobotState& st) {
    std::lock_guard lock(mutex_);
    Statement s(db_, "INSERT OR REPLACE INTO robot_state (robot, mode, latched, reason, profile_id, updated) VALUES (?,?,?,?,?,?)");
    s.bind(1, st.robot).bind(2, st.mode).bind(3, static_cast<std::int64_t>(st.latched)).bind(4, st.reason);
    s.bind(5, st.profile_id).bind(6, now_iso());
    s.step();
}

std::vector<RobotState> Store::states() {
    std::lock_guard lock(mutex_);
    Statement s(db_, "SELECT robot, mode, latched, reason, profile_id FROM robot_state");
    std::vector<RobotState> out;
    while (s.step()) out.push_back(RobotState{s.text(0), s.text(1), s.integer(2) != 0, s.text(3), s.integer(4)});
    return out;
}

void Store::put_robot(const std::string& id, const nlohmann::json& config) {
    std::lock_guard lock(mutex_);
    Statement s(db_, "INSERT OR REPLACE INTO robots (id, config, added) VALUES (?,?,?)");
    s.bind(1, id).bind(2, config.dump()).bind(3, now_iso());
    s.step();
}

void Store::remove_robot(const std::string& id) {
    std::lock_guard lock(mutex_);
    Statement s(db_, "DELETE FROM robots WHERE id = ?");
    s.bind(1, id);
    s.step();
}

std::vector<nlohmann::json> Store::robots() {
    std::lock_guard lock(mutex_);
    Statement s(db_, "SELECT config FROM robots ORDER BY added");
    std::vector<nlohmann::json> out;
    while (s.step()) out.push_back(nlohmann::json::parse(s.text(0)));
    return out;
}

}  // namespace warpguard::daemon
