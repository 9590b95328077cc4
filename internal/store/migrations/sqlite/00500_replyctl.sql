-- +goose Up
-- Reply-end controls (internal/replyctl). Conversations: one row per
-- conversation key (bot, business connection, chat, thread, user): the last
-- recorded choice and the one live keyboard.
CREATE TABLE replyctl_conversations (
    conv_key          TEXT PRIMARY KEY,
    bot_id            TEXT NOT NULL,
    chat_id           INTEGER NOT NULL,
    last_choice       TEXT NOT NULL DEFAULT 'none',
    source            TEXT NOT NULL DEFAULT '',
    choice_at         INTEGER NOT NULL DEFAULT 0,
    reply_id          TEXT NOT NULL DEFAULT '',
    message_id        INTEGER NOT NULL DEFAULT 0,
    choice_user_id    INTEGER NOT NULL DEFAULT 0,
    choice_expires_at INTEGER NOT NULL DEFAULT 0,
    live_nonce        TEXT NOT NULL DEFAULT '',
    live_message_id   INTEGER NOT NULL DEFAULT 0,
    live_reply_id     TEXT NOT NULL DEFAULT '',
    live_issued_at    INTEGER NOT NULL DEFAULT 0,
    live_expires_at   INTEGER NOT NULL DEFAULT 0,
    version           INTEGER NOT NULL DEFAULT 0,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
);
CREATE INDEX replyctl_conversations_bot ON replyctl_conversations (bot_id, chat_id);
CREATE INDEX replyctl_conversations_live_exp ON replyctl_conversations (live_expires_at) WHERE live_nonce <> '';
CREATE INDEX replyctl_conversations_choice_exp ON replyctl_conversations (choice_expires_at) WHERE choice_expires_at > 0;

-- Nonces: one row per reply that carried (or was about to carry) buttons;
-- callback data holds only the nonce.
CREATE TABLE replyctl_nonces (
    nonce             TEXT PRIMARY KEY,
    conv_key          TEXT NOT NULL,
    bot_id            TEXT NOT NULL,
    chat_id           INTEGER NOT NULL,
    message_id        INTEGER NOT NULL DEFAULT 0,
    reply_id          TEXT NOT NULL DEFAULT '',
    addressed_user_id INTEGER NOT NULL DEFAULT 0,
    locale            TEXT NOT NULL DEFAULT '',
    status            TEXT NOT NULL,
    choice            TEXT NOT NULL DEFAULT '',
    chosen_by         INTEGER NOT NULL DEFAULT 0,
    issued_at         INTEGER NOT NULL,
    expires_at        INTEGER NOT NULL,
    resolved_at       INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX replyctl_nonces_expires ON replyctl_nonces (expires_at);
CREATE INDEX replyctl_nonces_conv ON replyctl_nonces (conv_key, issued_at);

-- History: every change of a conversation's last choice.
CREATE TABLE replyctl_history (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    conv_key   TEXT NOT NULL,
    bot_id     TEXT NOT NULL,
    choice     TEXT NOT NULL,
    source     TEXT NOT NULL,
    reply_id   TEXT NOT NULL DEFAULT '',
    message_id INTEGER NOT NULL DEFAULT 0,
    nonce      TEXT NOT NULL DEFAULT '',
    user_id    INTEGER NOT NULL DEFAULT 0,
    created_at INTEGER NOT NULL
);
CREATE INDEX replyctl_history_conv ON replyctl_history (conv_key, id);
CREATE INDEX replyctl_history_created ON replyctl_history (created_at);

-- Chats: per-chat settings (/controls on|off, locale).
CREATE TABLE replyctl_chats (
    chat_key   TEXT PRIMARY KEY,
    bot_id     TEXT NOT NULL,
    controls   TEXT NOT NULL DEFAULT '',
    locale     TEXT NOT NULL DEFAULT '',
    updated_at INTEGER NOT NULL
);

-- Updates: platform update ids already seen, per bot, for deduplication.
CREATE TABLE replyctl_updates (
    bot_id    TEXT NOT NULL,
    update_id INTEGER NOT NULL,
    seen_at   INTEGER NOT NULL,
    PRIMARY KEY (bot_id, update_id)
);
CREATE INDEX replyctl_updates_seen ON replyctl_updates (seen_at);

-- +goose Down
DROP TABLE replyctl_updates;
DROP TABLE replyctl_chats;
DROP TABLE replyctl_history;
DROP TABLE replyctl_nonces;
DROP TABLE replyctl_conversations;
