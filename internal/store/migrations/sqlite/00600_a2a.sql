-- +goose Up
-- A2A opt-in per agent: whether its Agent Card and endpoints are served,
-- and what the card says about it.
CREATE TABLE a2a_agents (
    agent_id    TEXT PRIMARY KEY,
    enabled     INTEGER NOT NULL,
    description TEXT NOT NULL,
    skills      TEXT NOT NULL,
    updated_at  INTEGER NOT NULL
);

-- Callers: bearer tokens an agent issues to external A2A clients (hashed).
CREATE TABLE a2a_callers (
    id           TEXT PRIMARY KEY,
    agent_id     TEXT NOT NULL,
    name         TEXT NOT NULL,
    token_hash   TEXT NOT NULL UNIQUE,
    created_at   INTEGER NOT NULL,
    revoked_at   INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX a2a_callers_agent ON a2a_callers (agent_id, created_at);

-- Tasks: the A2A task store, one row per (agent, task), owned by a caller.
CREATE TABLE a2a_tasks (
    agent_id   TEXT NOT NULL,
    id         TEXT NOT NULL,
    caller_id  TEXT NOT NULL,
    context_id TEXT NOT NULL,
    state      TEXT NOT NULL,
    version    INTEGER NOT NULL,
    task       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (agent_id, id)
);
CREATE INDEX a2a_tasks_caller ON a2a_tasks (agent_id, caller_id, updated_at);

-- Requests: each bus request sent to an agent for a task, until answered.
CREATE TABLE a2a_requests (
    request_id  TEXT PRIMARY KEY,
    trace_id    TEXT NOT NULL,
    agent_id    TEXT NOT NULL,
    task_id     TEXT NOT NULL,
    caller_id   TEXT NOT NULL,
    deadline_at INTEGER NOT NULL,
    created_at  INTEGER NOT NULL,
    answered_at INTEGER NOT NULL DEFAULT 0,
    applied     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX a2a_requests_trace ON a2a_requests (trace_id);
CREATE INDEX a2a_requests_open ON a2a_requests (applied, deadline_at);

-- Events: what the agent sent back for a request (progress, the answer).
CREATE TABLE a2a_events (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    request_id TEXT NOT NULL,
    kind       TEXT NOT NULL,
    body       TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX a2a_events_request ON a2a_events (request_id, seq);

-- Push notification configs of tasks.
CREATE TABLE a2a_push_configs (
    agent_id   TEXT NOT NULL,
    task_id    TEXT NOT NULL,
    id         TEXT NOT NULL,
    config     TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (agent_id, task_id, id)
);

-- +goose Down
DROP TABLE a2a_push_configs;
DROP TABLE a2a_events;
DROP TABLE a2a_requests;
DROP TABLE a2a_tasks;
DROP TABLE a2a_callers;
DROP TABLE a2a_agents;
