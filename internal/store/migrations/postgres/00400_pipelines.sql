-- +goose Up
-- Skill registry: skill files per owner (an agent id, or "" for the
-- deployment's own library). content is the Markdown file as submitted.
CREATE TABLE pipeline_skills (
    owner      TEXT NOT NULL,
    skill_id   TEXT NOT NULL,
    version    TEXT NOT NULL DEFAULT '',
    hash       TEXT NOT NULL,
    source     TEXT NOT NULL DEFAULT '',
    content    TEXT NOT NULL,
    allow_exec BOOLEAN NOT NULL DEFAULT FALSE,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    PRIMARY KEY (owner, skill_id)
);

-- Pinned pipeline definitions, shared by every execution of the same content.
CREATE TABLE pipeline_definitions (
    hash       TEXT PRIMARY KEY,
    definition TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

-- One row per execution. version guards every update (optimistic
-- concurrency); wake_at is when the scheduler must look at it next (0: only
-- when something happens to it).
CREATE TABLE pipeline_executions (
    id           TEXT PRIMARY KEY,
    owner        TEXT NOT NULL,
    pipeline_id  TEXT NOT NULL,
    def_hash     TEXT NOT NULL REFERENCES pipeline_definitions (hash),
    def_version  TEXT NOT NULL DEFAULT '',
    trace_id     TEXT NOT NULL,
    status       TEXT NOT NULL,
    input        TEXT NOT NULL,
    metadata     TEXT NOT NULL DEFAULT '{}',
    parent_id    TEXT NOT NULL DEFAULT '',
    parent_skill TEXT NOT NULL DEFAULT '',
    depth        INTEGER NOT NULL DEFAULT 0,
    reply_to     TEXT NOT NULL DEFAULT '',
    idem_key     TEXT NOT NULL DEFAULT '',
    version      BIGINT NOT NULL DEFAULT 1,
    event_seq    BIGINT NOT NULL DEFAULT 0,
    wake_at      BIGINT NOT NULL DEFAULT 0,
    created_at   BIGINT NOT NULL,
    started_at   BIGINT NOT NULL DEFAULT 0,
    completed_at BIGINT NOT NULL DEFAULT 0,
    updated_at   BIGINT NOT NULL
);
CREATE INDEX pipeline_executions_wake ON pipeline_executions (wake_at) WHERE wake_at > 0;
CREATE INDEX pipeline_executions_owner ON pipeline_executions (owner, id);
CREATE INDEX pipeline_executions_done ON pipeline_executions (completed_at) WHERE completed_at > 0;
CREATE INDEX pipeline_executions_parent ON pipeline_executions (parent_id) WHERE parent_id <> '';
CREATE UNIQUE INDEX pipeline_executions_idem ON pipeline_executions (owner, idem_key) WHERE idem_key <> '';

-- One row per step: each step writes only its own row. attempt is the
-- fencing token of the current try; lease_until is the agent's deadline or
-- the exec lease of the node running it.
CREATE TABLE pipeline_steps (
    execution_id    TEXT NOT NULL REFERENCES pipeline_executions (id) ON DELETE CASCADE,
    skill_id        TEXT NOT NULL,
    position        INTEGER NOT NULL,
    status          TEXT NOT NULL,
    attempt         INTEGER NOT NULL DEFAULT 0,
    failures        INTEGER NOT NULL DEFAULT 0,
    interruptions   INTEGER NOT NULL DEFAULT 0,
    input           TEXT NOT NULL DEFAULT '',
    output          TEXT NOT NULL DEFAULT '',
    error           TEXT NOT NULL DEFAULT '',
    request_id      TEXT NOT NULL DEFAULT '',
    lease_owner     TEXT NOT NULL DEFAULT '',
    lease_until     BIGINT NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL DEFAULT 0,
    version         BIGINT NOT NULL DEFAULT 1,
    started_at      BIGINT NOT NULL DEFAULT 0,
    completed_at    BIGINT NOT NULL DEFAULT 0,
    updated_at      BIGINT NOT NULL,
    PRIMARY KEY (execution_id, skill_id)
);

-- Bus requests sent for agent steps, to correlate replies and refuse
-- answers from superseded attempts.
CREATE TABLE pipeline_requests (
    request_id   TEXT PRIMARY KEY,
    execution_id TEXT NOT NULL REFERENCES pipeline_executions (id) ON DELETE CASCADE,
    skill_id     TEXT NOT NULL,
    attempt      INTEGER NOT NULL,
    agent_id     TEXT NOT NULL,
    settled_by   TEXT NOT NULL DEFAULT '',
    outcome      TEXT NOT NULL DEFAULT '',
    created_at   BIGINT NOT NULL,
    settled_at   BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX pipeline_requests_exec ON pipeline_requests (execution_id);

-- Per-execution event log, ordered by seq.
CREATE TABLE pipeline_events (
    execution_id TEXT NOT NULL REFERENCES pipeline_executions (id) ON DELETE CASCADE,
    seq          BIGINT NOT NULL,
    type         TEXT NOT NULL,
    skill_id     TEXT NOT NULL DEFAULT '',
    data         TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (execution_id, seq)
);

-- Event subscriptions made through the API, per agent, scoped to an owner's
-- executions and optionally to one pipeline or execution.
CREATE TABLE pipeline_subscriptions (
    id           TEXT PRIMARY KEY,
    agent_id     TEXT NOT NULL,
    owner        TEXT NOT NULL,
    event        TEXT NOT NULL,
    pipeline_id  TEXT NOT NULL DEFAULT '',
    execution_id TEXT NOT NULL DEFAULT '',
    created_at   BIGINT NOT NULL
);
CREATE UNIQUE INDEX pipeline_subscriptions_key ON pipeline_subscriptions (agent_id, owner, event, pipeline_id, execution_id);
CREATE INDEX pipeline_subscriptions_owner ON pipeline_subscriptions (owner);

-- +goose Down
DROP TABLE pipeline_subscriptions;
DROP TABLE pipeline_events;
DROP TABLE pipeline_requests;
DROP TABLE pipeline_steps;
DROP TABLE pipeline_executions;
DROP TABLE pipeline_definitions;
DROP TABLE pipeline_skills;
