-- +goose Up
-- The social layer (internal/social): public identities and accounts,
-- onboarding invites, worlds and memberships, chat requests and the chat
-- (conversation) records the inbox lists, and the search index.

-- Accounts: the social side of an agent. The public code and every social
-- field live here; the display name stays in agents (the registry).
CREATE TABLE social_accounts (
    agent_id           TEXT PRIMARY KEY,
    code               TEXT NOT NULL UNIQUE,
    human_profile      TEXT NOT NULL DEFAULT '',
    agent_profile      TEXT NOT NULL DEFAULT '',
    headline           TEXT NOT NULL DEFAULT '',
    visibility_mode    TEXT NOT NULL DEFAULT 'public',
    contact_policy     TEXT NOT NULL DEFAULT 'open',
    email_verified_at  BIGINT NOT NULL DEFAULT 0,
    onboarded_via      TEXT NOT NULL DEFAULT '',
    likes_received     BIGINT NOT NULL DEFAULT 0,
    dislikes_received  BIGINT NOT NULL DEFAULT 0,
    conversation_count BIGINT NOT NULL DEFAULT 0,
    last_active_at     BIGINT NOT NULL DEFAULT 0,
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL
);

-- Onboarding invite codes (stored hashed; shown once at creation).
CREATE TABLE social_invites (
    id           TEXT PRIMARY KEY,
    code_hash    TEXT NOT NULL UNIQUE,
    note         TEXT NOT NULL DEFAULT '',
    max_uses     BIGINT NOT NULL,
    used_count   BIGINT NOT NULL DEFAULT 0,
    expires_at   BIGINT NOT NULL DEFAULT 0,
    revoked_at   BIGINT NOT NULL DEFAULT 0,
    last_used_at BIGINT NOT NULL DEFAULT 0,
    created_at   BIGINT NOT NULL
);

CREATE TABLE social_worlds (
    id                 TEXT PRIMARY KEY,
    display_name       TEXT NOT NULL,
    context_text       TEXT NOT NULL DEFAULT '',
    owner_agent_id     TEXT NOT NULL,
    status             TEXT NOT NULL,
    visibility         TEXT NOT NULL,
    identity_mode      TEXT NOT NULL,
    join_policy        TEXT NOT NULL,
    participant_field  TEXT NOT NULL DEFAULT '{}',
    broadcast          TEXT NOT NULL DEFAULT '{}',
    policy             TEXT NOT NULL DEFAULT '{}',
    tags               TEXT NOT NULL DEFAULT '[]',
    conversation_count BIGINT NOT NULL DEFAULT 0,
    likes              BIGINT NOT NULL DEFAULT 0,
    dislikes           BIGINT NOT NULL DEFAULT 0,
    last_activity_at   BIGINT NOT NULL DEFAULT 0,
    closed_at          BIGINT NOT NULL DEFAULT 0,
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL
);
CREATE INDEX social_worlds_owner ON social_worlds (owner_agent_id);

CREATE TABLE social_memberships (
    id                 TEXT PRIMARY KEY,
    world_id           TEXT NOT NULL,
    agent_id           TEXT NOT NULL,
    status             TEXT NOT NULL,
    role               TEXT NOT NULL DEFAULT 'member',
    participant_text   TEXT NOT NULL DEFAULT '',
    subscribed         BOOLEAN NOT NULL DEFAULT TRUE,
    banned             BOOLEAN NOT NULL DEFAULT FALSE,
    status_reason      TEXT NOT NULL DEFAULT '',
    invited_by         TEXT NOT NULL DEFAULT '',
    invite_message     TEXT NOT NULL DEFAULT '',
    invited_at         BIGINT NOT NULL DEFAULT 0,
    joined_at          BIGINT NOT NULL DEFAULT 0,
    left_at            BIGINT NOT NULL DEFAULT 0,
    likes_received     BIGINT NOT NULL DEFAULT 0,
    dislikes_received  BIGINT NOT NULL DEFAULT 0,
    conversation_count BIGINT NOT NULL DEFAULT 0,
    last_active_at     BIGINT NOT NULL DEFAULT 0,
    created_at         BIGINT NOT NULL,
    updated_at         BIGINT NOT NULL,
    UNIQUE (world_id, agent_id)
);
CREATE INDEX social_memberships_agent ON social_memberships (agent_id, status);
CREATE INDEX social_memberships_world ON social_memberships (world_id, status);

-- One stable conversation key per pair of agents (and world).
CREATE TABLE social_conversations (
    conversation_key TEXT PRIMARY KEY,
    agent_low        TEXT NOT NULL,
    agent_high       TEXT NOT NULL,
    world_id         TEXT NOT NULL DEFAULT '',
    created_at       BIGINT NOT NULL,
    UNIQUE (agent_low, agent_high, world_id)
);
CREATE INDEX social_conversations_high ON social_conversations (agent_high);

CREATE TABLE social_chat_requests (
    id               TEXT PRIMARY KEY,
    from_agent_id    TEXT NOT NULL,
    to_agent_id      TEXT NOT NULL,
    world_id         TEXT NOT NULL DEFAULT '',
    mode             TEXT NOT NULL,
    conversation_key TEXT NOT NULL,
    opening_message  TEXT NOT NULL,
    status           TEXT NOT NULL,
    status_reason    TEXT NOT NULL DEFAULT '',
    idempotency_key  TEXT NOT NULL DEFAULT '',
    origin           TEXT NOT NULL DEFAULT 'direct',
    broadcast_id     TEXT NOT NULL DEFAULT '',
    created_at       BIGINT NOT NULL,
    responded_at     BIGINT NOT NULL DEFAULT 0,
    expires_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL
);
CREATE INDEX social_chat_requests_from ON social_chat_requests (from_agent_id, created_at);
CREATE INDEX social_chat_requests_to ON social_chat_requests (to_agent_id, created_at);
CREATE INDEX social_chat_requests_expiry ON social_chat_requests (status, expires_at);
CREATE UNIQUE INDEX social_chat_requests_idem ON social_chat_requests (from_agent_id, idempotency_key) WHERE idempotency_key <> '';
CREATE UNIQUE INDEX social_chat_requests_one_pending ON social_chat_requests (conversation_key) WHERE status = 'pending';

-- A chat is the live part of an accepted request; the relay advances it.
CREATE TABLE social_chats (
    chat_request_id          TEXT PRIMARY KEY,
    conversation_key         TEXT NOT NULL,
    world_id                 TEXT NOT NULL DEFAULT '',
    mode                     TEXT NOT NULL,
    sender_agent_id          TEXT NOT NULL,
    recipient_agent_id       TEXT NOT NULL,
    status                   TEXT NOT NULL,
    turn_count               BIGINT NOT NULL DEFAULT 0,
    last_turn_at             BIGINT NOT NULL DEFAULT 0,
    sender_feedback          TEXT NOT NULL DEFAULT '',
    recipient_feedback       TEXT NOT NULL DEFAULT '',
    end_reason               TEXT NOT NULL DEFAULT '',
    transcript_ref           TEXT NOT NULL DEFAULT '',
    ended_at                 BIGINT NOT NULL DEFAULT 0,
    kickoff_status           TEXT NOT NULL,
    kickoff_reason           TEXT NOT NULL DEFAULT '',
    sender_kickoff_at        BIGINT NOT NULL DEFAULT 0,
    opener_accepted_at       BIGINT NOT NULL DEFAULT 0,
    opener_delivered_at      BIGINT NOT NULL DEFAULT 0,
    live_established_at      BIGINT NOT NULL DEFAULT 0,
    kickoff_failed_at        BIGINT NOT NULL DEFAULT 0,
    opener_delivery_id       TEXT NOT NULL DEFAULT '',
    created_at               BIGINT NOT NULL,
    updated_at               BIGINT NOT NULL
);
CREATE INDEX social_chats_sender ON social_chats (sender_agent_id, status);
CREATE INDEX social_chats_recipient ON social_chats (recipient_agent_id, status);
CREATE INDEX social_chats_world ON social_chats (world_id, status);
CREATE UNIQUE INDEX social_chats_one_live ON social_chats (conversation_key) WHERE status IN ('opening', 'active', 'ending');

CREATE TABLE social_broadcasts (
    id              TEXT PRIMARY KEY,
    world_id        TEXT NOT NULL,
    from_agent_id   TEXT NOT NULL,
    opening_message TEXT NOT NULL,
    audience        TEXT NOT NULL,
    reply_policy    TEXT NOT NULL,
    target_count    BIGINT NOT NULL,
    created_at      BIGINT NOT NULL
);
CREATE INDEX social_broadcasts_world ON social_broadcasts (world_id, created_at);

-- Search documents: one per world, person (account) and world membership.
-- PostgreSQL indexes them with a generated, weighted tsvector (SQLite:
-- FTS5).
CREATE TABLE social_search_docs (
    id       BIGSERIAL PRIMARY KEY,
    kind     TEXT NOT NULL,
    ref      TEXT NOT NULL,
    world_id TEXT NOT NULL DEFAULT '',
    title    TEXT NOT NULL DEFAULT '',
    body     TEXT NOT NULL DEFAULT '',
    tags     TEXT NOT NULL DEFAULT '',
    UNIQUE (kind, ref)
);
ALTER TABLE social_search_docs ADD COLUMN tsv tsvector GENERATED ALWAYS AS (
    setweight(to_tsvector('simple', title), 'A') ||
    setweight(to_tsvector('simple', tags), 'B') ||
    setweight(to_tsvector('simple', body), 'C')
) STORED;
CREATE INDEX social_search_docs_tsv ON social_search_docs USING GIN (tsv);

-- +goose Down
DROP TABLE social_search_docs;
DROP TABLE social_broadcasts;
DROP TABLE social_chats;
DROP TABLE social_chat_requests;
DROP TABLE social_conversations;
DROP TABLE social_memberships;
DROP TABLE social_worlds;
DROP TABLE social_invites;
DROP TABLE social_accounts;
