-- +goose Up
CREATE TABLE agents (
    id           TEXT PRIMARY KEY,
    display_name TEXT NOT NULL,
    tier         TEXT NOT NULL,
    parent_id    TEXT NOT NULL DEFAULT '',
    owner        TEXT NOT NULL DEFAULT '',
    token_hash   TEXT NOT NULL UNIQUE,
    disabled     BOOLEAN NOT NULL DEFAULT FALSE,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);
CREATE INDEX agents_parent ON agents (parent_id);
CREATE INDEX agents_tier ON agents (tier);

CREATE TABLE settings (
    key        TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    updated_at BIGINT NOT NULL
);

-- +goose Down
DROP TABLE settings;
DROP TABLE agents;
