-- +goose Up
-- Web console sessions: a signed-in person (the admin, or an agent's owner)
-- is known by a random cookie id, stored here only as its SHA-256. csrf is
-- the session's synchronizer token for state-changing forms. Signing out
-- deletes the row; expired rows are swept at the next sign-in.
CREATE TABLE console_sessions (
    id_hash    TEXT PRIMARY KEY,
    agent_id   TEXT NOT NULL DEFAULT '',
    admin      BOOLEAN NOT NULL DEFAULT FALSE,
    csrf       TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL
);
CREATE INDEX console_sessions_expires ON console_sessions (expires_at);

-- +goose Down
DROP TABLE console_sessions;
