-- +goose Up
-- Messages: each accepted envelope once (broadcasts fan out into several
-- deliveries). (sender, client_id) dedupes repeats of the sender's id.
CREATE TABLE bus_messages (
    id             TEXT PRIMARY KEY,
    sender         TEXT NOT NULL,
    client_id      TEXT NOT NULL,
    trace_id       TEXT NOT NULL,
    type           TEXT NOT NULL,
    priority       INTEGER NOT NULL,
    envelope       TEXT NOT NULL,
    accepted_at    INTEGER NOT NULL,
    expires_at     INTEGER NOT NULL,
    request_ref    TEXT NOT NULL DEFAULT '',
    deadline_at    INTEGER NOT NULL DEFAULT 0,
    deadline_state TEXT NOT NULL DEFAULT '',
    result         TEXT NOT NULL DEFAULT '',
    UNIQUE (sender, client_id)
);
CREATE INDEX bus_messages_deadline ON bus_messages (deadline_state, deadline_at);
CREATE INDEX bus_messages_trace ON bus_messages (trace_id);
CREATE INDEX bus_messages_client ON bus_messages (client_id);

-- Deliveries: one per recipient; the unit of leasing, acking and dead letters.
CREATE TABLE bus_deliveries (
    id           TEXT PRIMARY KEY,
    message_id   TEXT NOT NULL REFERENCES bus_messages (id),
    agent_id     TEXT NOT NULL,
    session      TEXT NOT NULL DEFAULT '',
    priority     INTEGER NOT NULL,
    state        TEXT NOT NULL,
    available_at INTEGER NOT NULL,
    lease_until  INTEGER NOT NULL DEFAULT 0,
    attempt      INTEGER NOT NULL DEFAULT 0,
    expires_at   INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    first_delivered_at INTEGER NOT NULL DEFAULT 0,
    dead_reason  TEXT NOT NULL DEFAULT '',
    last_error   TEXT NOT NULL DEFAULT '',
    replayed_as  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX bus_deliveries_claim ON bus_deliveries (agent_id, state, priority, id);
CREATE INDEX bus_deliveries_lease ON bus_deliveries (state, lease_until);
CREATE INDEX bus_deliveries_expiry ON bus_deliveries (state, expires_at);
CREATE INDEX bus_deliveries_available ON bus_deliveries (state, available_at);
CREATE INDEX bus_deliveries_message ON bus_deliveries (message_id);

-- Message log: every transition, for traces and debugging.
CREATE TABLE bus_log (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    at          INTEGER NOT NULL,
    level       TEXT NOT NULL,
    msg_id      TEXT NOT NULL,
    trace_id    TEXT NOT NULL,
    from_agent  TEXT NOT NULL,
    to_agent    TEXT NOT NULL,
    type        TEXT NOT NULL,
    status      TEXT NOT NULL,
    latency_ms  INTEGER NOT NULL,
    delivery_id TEXT NOT NULL DEFAULT '',
    attempt     INTEGER NOT NULL DEFAULT 0,
    detail      TEXT NOT NULL DEFAULT ''
);
CREATE INDEX bus_log_trace ON bus_log (trace_id, id);
CREATE INDEX bus_log_delivery ON bus_log (delivery_id);
CREATE INDEX bus_log_msg ON bus_log (msg_id);

-- Presence: liveness per agent and session.
CREATE TABLE bus_presence (
    agent_id     TEXT NOT NULL,
    session      TEXT NOT NULL,
    kind         TEXT NOT NULL,
    node         TEXT NOT NULL DEFAULT '',
    connected    INTEGER NOT NULL DEFAULT 0,
    status       TEXT NOT NULL DEFAULT '',
    last_seen    INTEGER NOT NULL,
    connected_at INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (agent_id, session)
);

-- +goose Down
DROP TABLE bus_presence;
DROP TABLE bus_log;
DROP TABLE bus_deliveries;
DROP TABLE bus_messages;
