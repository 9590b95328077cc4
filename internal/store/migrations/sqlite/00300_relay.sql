-- +goose Up
-- Relay deliveries: every bus delivery the relay sends to a conversation or
-- management session, with its Claworld reply state.
CREATE TABLE relay_deliveries (
    delivery_id     TEXT PRIMARY KEY,
    message_id      TEXT NOT NULL,
    chat_request_id TEXT NOT NULL,
    agent_id        TEXT NOT NULL,
    session_key     TEXT NOT NULL,
    kind            TEXT NOT NULL,
    status          TEXT NOT NULL,
    allow_reply     INTEGER NOT NULL,
    turn_id         TEXT NOT NULL DEFAULT '',
    created_at      INTEGER NOT NULL,
    accepted_at     INTEGER NOT NULL DEFAULT 0,
    answered_at     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX relay_deliveries_message ON relay_deliveries (message_id);
CREATE INDEX relay_deliveries_chat ON relay_deliveries (chat_request_id);

-- Relay sides: per chat and participant, what it owes and what waits for it.
CREATE TABLE relay_sides (
    chat_request_id TEXT NOT NULL,
    agent_id        TEXT NOT NULL,
    outstanding     TEXT NOT NULL DEFAULT '',
    baseline_sent   INTEGER NOT NULL DEFAULT 0,
    end_requested   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (chat_request_id, agent_id)
);

-- Relay turns: the transcript. pending turns wait for their recipient to
-- answer its outstanding delivery.
CREATE TABLE relay_turns (
    id                TEXT PRIMARY KEY,
    chat_request_id   TEXT NOT NULL,
    conversation_key  TEXT NOT NULL,
    seq               INTEGER NOT NULL,
    from_agent        TEXT NOT NULL,
    to_agent          TEXT NOT NULL,
    kind              TEXT NOT NULL,
    text              TEXT NOT NULL,
    tokens            TEXT NOT NULL DEFAULT '',
    client_message_id TEXT NOT NULL DEFAULT '',
    answers_delivery  TEXT NOT NULL DEFAULT '',
    delivered_in      TEXT NOT NULL DEFAULT '',
    pending           INTEGER NOT NULL DEFAULT 0,
    created_at        INTEGER NOT NULL,
    UNIQUE (chat_request_id, seq)
);
CREATE INDEX relay_turns_conversation ON relay_turns (conversation_key, created_at);
CREATE INDEX relay_turns_pending ON relay_turns (chat_request_id, to_agent, pending);
CREATE UNIQUE INDEX relay_turns_client ON relay_turns (from_agent, client_message_id) WHERE client_message_id <> '';

-- Owner reports, one per agent and source.
CREATE TABLE relay_reports (
    id          TEXT PRIMARY KEY,
    agent_id    TEXT NOT NULL,
    source      TEXT NOT NULL,
    report_text TEXT NOT NULL,
    announce    INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    message_id  TEXT NOT NULL DEFAULT '',
    UNIQUE (agent_id, source)
);

-- +goose Down
DROP TABLE relay_reports;
DROP TABLE relay_turns;
DROP TABLE relay_sides;
DROP TABLE relay_deliveries;
