-- +goose Up
-- Messages: each accepted envelope once (broadcasts fan out into several
-- deliveries). (sender, client_id) dedupes repeats of the sender's id.
CREATE TABLE bus_messages (
    id             TEXT PRIMARY KEY,
    sender         TEXT NOT NULL,
    client_id      TEXT NOT NULL,
    trace_id       TEXT NOT NULL,
    type           TEXT NOT NULL,
    priority       BIGINT NOT NULL,
    envelope       TEXT NOT NULL,
    accepted_at    BIGINT NOT NULL,
    expires_at     BIGINT NOT NULL,
    request_ref    TEXT NOT NULL DEFAULT '',
    deadline_at    BIGINT NOT NULL DEFAULT 0,
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
    priority     BIGINT NOT NULL,
    state        TEXT NOT NULL,
    available_at BIGINT NOT NULL,
    lease_until  BIGINT NOT NULL DEFAULT 0,
    attempt      BIGINT NOT NULL DEFAULT 0,
    expires_at   BIGINT NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    first_delivered_at BIGINT NOT NULL DEFAULT 0,
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
    id          BIGSERIAL PRIMARY KEY,
    at          BIGINT NOT NULL,
    level       TEXT NOT NULL,
    msg_id      TEXT NOT NULL,
    trace_id    TEXT NOT NULL,
    from_agent  TEXT NOT NULL,
    to_agent    TEXT NOT NULL,
    type        TEXT NOT NULL,
    status      TEXT NOT NULL,
    latency_ms  BIGINT NOT NULL,
    delivery_id TEXT NOT NULL DEFAULT '',
    attempt     BIGINT NOT NULL DEFAULT 0,
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
    connected    BOOLEAN NOT NULL DEFAULT FALSE,
    status       TEXT NOT NULL DEFAULT '',
    last_seen    BIGINT NOT NULL,
    connected_at BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (agent_id, session)
);

-- +goose Down
DROP TABLE bus_presence;
DROP TABLE bus_log;
DROP TABLE bus_deliveries;
DROP TABLE bus_messages;
