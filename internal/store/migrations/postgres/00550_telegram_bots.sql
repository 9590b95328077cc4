-- +goose Up
-- Telegram bots hosted by the hub (internal/telegram/hosted). Secrets
-- (token, webhook secret, callback HMAC key) are sealed with the
-- deployment secret (internal/secrets); key_id names the key that sealed them.
CREATE TABLE telegram_bots (
    id               TEXT PRIMARY KEY,
    agent_id         TEXT NOT NULL,
    mode             TEXT NOT NULL,
    scope            TEXT NOT NULL,
    api_url          TEXT NOT NULL DEFAULT '',
    telegram_id      BIGINT NOT NULL,
    username         TEXT NOT NULL DEFAULT '',
    token            TEXT NOT NULL,
    webhook_secret   TEXT NOT NULL,
    hmac_key         TEXT NOT NULL,
    key_id           TEXT NOT NULL,
    settings         TEXT NOT NULL DEFAULT '{}',
    poll_owner       TEXT NOT NULL DEFAULT '',
    poll_lease_until BIGINT NOT NULL DEFAULT 0,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);
CREATE UNIQUE INDEX telegram_bots_telegram_id ON telegram_bots (telegram_id);
CREATE INDEX telegram_bots_agent ON telegram_bots (agent_id);

-- Typed messages forwarded to the runtime as telegram.message requests:
-- where to send the runtime's answer when it replies with a response.
CREATE TABLE telegram_requests (
    request_id TEXT PRIMARY KEY,
    bot_id     TEXT NOT NULL,
    target     TEXT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX telegram_requests_created ON telegram_requests (created_at);

-- Replies the runtime gave as bus responses, waiting to be sent.
CREATE TABLE telegram_outbox (
    id           TEXT PRIMARY KEY,
    bot_id       TEXT NOT NULL,
    body         TEXT NOT NULL,
    state        TEXT NOT NULL DEFAULT 'pending',
    attempts     BIGINT NOT NULL DEFAULT 0,
    available_at BIGINT NOT NULL,
    last_error   TEXT NOT NULL DEFAULT '',
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL
);
CREATE INDEX telegram_outbox_due ON telegram_outbox (available_at) WHERE state = 'pending';
CREATE INDEX telegram_outbox_updated ON telegram_outbox (updated_at) WHERE state <> 'pending';

-- +goose Down
DROP TABLE telegram_outbox;
DROP TABLE telegram_requests;
DROP TABLE telegram_bots;
