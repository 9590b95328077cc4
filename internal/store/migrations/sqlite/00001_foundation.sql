-- +goose Up
-- Agents: every participant that holds a token. Tier and parent drive the
-- bus routing rules; the token is stored as a SHA-256 hash.
CREATE TABLE agents (
    id           TEXT PRIMARY KEY,
    display_name TEXT NOT NULL,
    tier         TEXT NOT NULL,
    parent_id    TEXT NOT NULL DEFAULT '',
    owner        TEXT NOT NULL DEFAULT '',
    token_hash   TEXT NOT NULL UNIQUE,
    disabled     INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);
CREATE INDEX agents_parent ON agents (parent_id);
CREATE INDEX agents_tier ON agents (tier);

-- Settings: small deployment-wide values (admin token hash, instance id).
CREATE TABLE settings (
    key        TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    updated_at INTEGER NOT NULL
);

-- +goose Down
DROP TABLE settings;
DROP TABLE agents;
