package hosted

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/replyctl"
	"github.com/switchboard-hub/switchboard/internal/secrets"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// Mode is how a hosted bot receives updates from Telegram.
type Mode string

// The receive modes.
const (
	// ModePoll long-polls getUpdates from the hub: works behind NAT and on
	// a laptop, with no public URL. The default.
	ModePoll Mode = "poll"
	// ModeWebhook has Telegram POST updates to the hub's public URL
	// (/v1/telegram/webhook/{bot}); it needs a URL Telegram can reach.
	ModeWebhook Mode = "webhook"
)

// AddBotParams is the body of POST /v1/replyctl/bots. Only Token and
// AgentID are required.
type AddBotParams struct {
	// Token is the bot token from @BotFather. It is verified with getMe,
	// stored sealed, and never shown again.
	Token string `json:"token"`
	// AgentID is the runtime agent the bot is bound to: it receives the
	// chats' messages and choices, and may send replies and read policies.
	AgentID string `json:"agentId"`
	Mode    Mode   `json:"mode,omitempty"`
	// Scope says which chats get controls: off, dm, group or all (default all).
	Scope replyctl.Scope `json:"scope,omitempty"`
	// APIURL points the bot at a self-hosted Bot API server (default
	// https://api.telegram.org).
	APIURL string `json:"apiUrl,omitempty"`
	// Resolve is how a keyboard looks once chosen: mark (default), disable or remove.
	Resolve replyctl.ResolveMode `json:"resolve,omitempty"`
	// DefaultLocale labels the buttons when neither the chat nor the user
	// says: en (default), zh-TW or zh-CN.
	DefaultLocale replyctl.Locale `json:"defaultLocale,omitempty"`
	// PerUserInGroups gives each member of a group chat a conversation (and
	// choice) of their own.
	PerUserInGroups bool `json:"perUserInGroups,omitempty"`
}

// Bot is a hosted bot as the API shows it. Secrets never appear.
type Bot struct {
	ID              string               `json:"id"`
	AgentID         string               `json:"agentId"`
	Mode            Mode                 `json:"mode"`
	Scope           replyctl.Scope       `json:"scope"`
	APIURL          string               `json:"apiUrl,omitempty"`
	TelegramID      int64                `json:"telegramId"`
	Username        string               `json:"username"`
	WebhookURL      string               `json:"webhookUrl,omitempty"`
	Resolve         replyctl.ResolveMode `json:"resolve"`
	DefaultLocale   replyctl.Locale      `json:"defaultLocale"`
	PerUserInGroups bool                 `json:"perUserInGroups"`
	CreatedAt       time.Time            `json:"createdAt"`
}

// BotList is the answer to GET /v1/replyctl/bots.
type BotList struct {
	Bots []Bot `json:"bots"`
}

// settings is the JSON column of per-bot reply-end settings.
type settings struct {
	Resolve         replyctl.ResolveMode `json:"resolve,omitempty"`
	DefaultLocale   replyctl.Locale      `json:"defaultLocale,omitempty"`
	PerUserInGroups bool                 `json:"perUserInGroups,omitempty"`
}

// record is a bot with its opened secrets.
type record struct {
	Bot
	token         string
	webhookSecret string
	hmacKey       []byte
}

// config is the bot's reply-end configuration for replyctl.
func (r *record) config() replyctl.BotConfig {
	return replyctl.BotConfig{
		BotID: r.ID, Scope: r.Scope, PerUserInGroups: r.PerUserInGroups,
		Keys: [][]byte{r.hmacKey}, Resolve: r.Resolve, DefaultLocale: r.DefaultLocale,
	}
}

// tokenPattern is the shape of a Bot API token: "<bot id>:<secret>".
var tokenPattern = regexp.MustCompile(`^[0-9]{1,20}:[A-Za-z0-9_-]{20,100}$`)

// validate checks p and fills the defaults. It never echoes the token.
func (p *AddBotParams) validate() error {
	fe := protocol.FieldErrors{}
	p.Token = strings.TrimSpace(p.Token)
	if p.Token == "" {
		fe.Add("token", "required: the bot token from @BotFather")
	} else if !tokenPattern.MatchString(p.Token) {
		fe.Add("token", "does not look like a bot token (<digits>:<secret>); copy it again from @BotFather")
	}
	if p.AgentID == "" {
		fe.Add("agentId", "required: the runtime agent the bot delivers to")
	}
	switch p.Mode {
	case "":
		p.Mode = ModePoll
	case ModePoll, ModeWebhook:
	default:
		fe.Add("mode", "must be webhook or poll")
	}
	scope, err := replyctl.ParseScope(string(p.Scope))
	if err != nil {
		fe.Add("scope", "must be one of off, dm, group, all")
	}
	p.Scope = scope
	if p.APIURL != "" {
		u, err := url.Parse(p.APIURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
			fe.Add("apiUrl", "must be an http(s) base URL such as http://127.0.0.1:8081 (the Bot API server, without /bot<token>)")
		} else {
			p.APIURL = strings.TrimRight(p.APIURL, "/")
		}
	}
	if p.Resolve == "" {
		p.Resolve = replyctl.ResolveMark
	}
	if p.DefaultLocale == "" {
		p.DefaultLocale = replyctl.LocaleEN
	}
	if err := fe.Err(); err != nil {
		return err
	}
	// The remaining checks are replyctl's own.
	cfg := replyctl.BotConfig{BotID: "bot_check", Scope: p.Scope, Resolve: p.Resolve, DefaultLocale: p.DefaultLocale}
	return cfg.Validate()
}

// registry keeps bots in the telegram_bots table.
type registry struct {
	db  *store.DB
	box *secrets.Box
}

const botCols = `id, agent_id, mode, scope, api_url, telegram_id, username, token, webhook_secret, hmac_key, key_id, settings, created_at`

func sealContext(id, column string) string { return "telegram_bots/" + id + "/" + column }

func (g *registry) insert(ctx context.Context, r *record, now time.Time) error {
	st, err := json.Marshal(settings{Resolve: r.Resolve, DefaultLocale: r.DefaultLocale, PerUserInGroups: r.PerUserInGroups})
	if err != nil {
		return err
	}
	return g.db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.Exec(ctx, `INSERT INTO telegram_bots (`+botCols+`, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			r.ID, r.AgentID, string(r.Mode), string(r.Scope), r.APIURL, r.TelegramID, r.Username,
			g.box.Seal([]byte(r.token), sealContext(r.ID, "token")),
			g.box.Seal([]byte(r.webhookSecret), sealContext(r.ID, "webhook_secret")),
			g.box.Seal(r.hmacKey, sealContext(r.ID, "hmac_key")),
			g.box.KeyID(), string(st), store.Millis(now), store.Millis(now))
		if store.IsUniqueViolation(err) {
			return &protocol.Error{Class: protocol.ClassInvalid, Code: "bot_exists", Status: 409,
				Message:    fmt.Sprintf("Telegram bot @%s (id %d) is already hosted by this hub", r.Username, r.TelegramID),
				NextAction: "list bots with GET /v1/replyctl/bots; remove the old registration first to bind it to another agent"}
		}
		if err != nil {
			return fmt.Errorf("telegram: insert bot: %w", err)
		}
		tx.Notify(botsChannel, r.ID)
		return nil
	})
}

// botsChannel wakes every node's reconciler when a bot is added or removed.
const botsChannel = "telegram_bots"

func (g *registry) scan(row interface{ Scan(...any) error }) (*record, error) {
	var r record
	var mode, scope, tok, sec, key, keyID, st string
	var created int64
	if err := row.Scan(&r.ID, &r.AgentID, &mode, &scope, &r.APIURL, &r.TelegramID, &r.Username, &tok, &sec, &key, &keyID, &st, &created); err != nil {
		return nil, err
	}
	r.Mode, r.Scope, r.CreatedAt = Mode(mode), replyctl.Scope(scope), store.FromMillis(created)
	var s settings
	if err := json.Unmarshal([]byte(st), &s); err != nil {
		return nil, fmt.Errorf("telegram: bot %s has unreadable settings: %w", r.ID, err)
	}
	r.Resolve, r.DefaultLocale, r.PerUserInGroups = s.Resolve, s.DefaultLocale, s.PerUserInGroups
	open := func(sealed, column string) ([]byte, error) {
		b, err := g.box.Open(sealed, sealContext(r.ID, column))
		if errors.Is(err, secrets.ErrWrongKey) {
			return nil, &protocol.Error{Class: protocol.ClassSystem, Code: "bot_secret_key_mismatch", Err: err,
				Message:        fmt.Sprintf("bot %s was stored with secret key %s but this hub runs with key %s", r.ID, keyID, g.box.KeyID()),
				RequiredAction: "start every node with the same SWITCHBOARD_SECRET_KEY (or restore the data directory's secret-key file)"}
		}
		if err != nil {
			return nil, fmt.Errorf("telegram: bot %s %s: %w", r.ID, column, err)
		}
		return b, nil
	}
	b, err := open(tok, "token")
	if err != nil {
		return nil, err
	}
	r.token = string(b)
	if b, err = open(sec, "webhook_secret"); err != nil {
		return nil, err
	}
	r.webhookSecret = string(b)
	if r.hmacKey, err = open(key, "hmac_key"); err != nil {
		return nil, err
	}
	return &r, nil
}

func botNotFound(id string) error {
	return &protocol.Error{Class: protocol.ClassUnavailable, Code: "bot_not_found", Status: 404,
		Message: "no hosted Telegram bot " + id, NextAction: "list bots with GET /v1/replyctl/bots (or switchboard telegram list)"}
}

func (g *registry) get(ctx context.Context, id string) (*record, error) {
	r, err := g.scan(g.db.QueryRow(ctx, `SELECT `+botCols+` FROM telegram_bots WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, botNotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("telegram: read bot: %w", err)
	}
	return r, nil
}

// list returns every bot, or those bound to agentID when it is set.
func (g *registry) list(ctx context.Context, agentID string) ([]*record, error) {
	q := `SELECT ` + botCols + ` FROM telegram_bots`
	var args []any
	if agentID != "" {
		q += ` WHERE agent_id = ?`
		args = append(args, agentID)
	}
	rows, err := g.db.Query(ctx, q+` ORDER BY id`, args...)
	if err != nil {
		return nil, fmt.Errorf("telegram: list bots: %w", err)
	}
	defer rows.Close()
	var out []*record
	for rows.Next() {
		r, err := g.scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("telegram: list bots: %w", err)
	}
	return out, nil
}

// ids lists the ids of all bots (no secrets opened).
func (g *registry) ids(ctx context.Context) (map[string]Mode, error) {
	rows, err := g.db.Query(ctx, `SELECT id, mode FROM telegram_bots`)
	if err != nil {
		return nil, fmt.Errorf("telegram: list bots: %w", err)
	}
	defer rows.Close()
	out := map[string]Mode{}
	for rows.Next() {
		var id, mode string
		if err := rows.Scan(&id, &mode); err != nil {
			return nil, fmt.Errorf("telegram: list bots: %w", err)
		}
		out[id] = Mode(mode)
	}
	return out, rows.Err()
}

func (g *registry) delete(ctx context.Context, id string) error {
	return g.db.Write(ctx, func(tx *store.Tx) error {
		res, err := tx.Exec(ctx, `DELETE FROM telegram_bots WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("telegram: delete bot: %w", err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return botNotFound(id)
		}
		tx.Notify(botsChannel, id)
		return nil
	})
}

// claimPoll takes or renews the polling lease of bot id for node until
// until; it reports whether node holds the lease. One node polls a bot at a
// time: Telegram answers a second concurrent getUpdates with 409.
func (g *registry) claimPoll(ctx context.Context, id, node string, now, until time.Time) (bool, error) {
	var held bool
	err := g.db.Write(ctx, func(tx *store.Tx) error {
		res, err := tx.Exec(ctx, `UPDATE telegram_bots SET poll_owner = ?, poll_lease_until = ?
			WHERE id = ? AND mode = ? AND (poll_owner = ? OR poll_owner = '' OR poll_lease_until < ?)`,
			node, store.Millis(until), id, string(ModePoll), node, store.Millis(now))
		if err != nil {
			return err
		}
		n, err := res.RowsAffected()
		held = n == 1
		return err
	})
	if err != nil {
		return false, fmt.Errorf("telegram: claim polling lease: %w", err)
	}
	return held, nil
}

// releasePolls gives up node's polling leases (on shutdown), so another
// node — or this one restarted — takes over at once.
func (g *registry) releasePolls(ctx context.Context, node string) error {
	return g.db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.Exec(ctx, `UPDATE telegram_bots SET poll_owner = '', poll_lease_until = 0 WHERE poll_owner = ?`, node)
		return err
	})
}
