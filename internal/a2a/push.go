package a2a

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv/push"

	"github.com/switchboard-hub/switchboard/internal/clock"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// PushStore keeps the push notification configs of one agent's tasks in
// the hub's database. It refuses webhook URLs that name loopback, private,
// link-local or unspecified addresses (unless the hub allows private
// targets): the sender re-checks every resolved address when it dials, so
// a host name that resolves to such an address is refused there too.
type PushStore struct {
	db           *store.DB
	clock        clock.Clock
	agentID      string
	allowPrivate bool
}

var _ push.ConfigStore = (*PushStore)(nil)

// NewPushStore returns the push config store of agentID.
func NewPushStore(db *store.DB, c clock.Clock, agentID string, allowPrivate bool) *PushStore {
	if c == nil {
		c = clock.Real{}
	}
	return &PushStore{db: db, clock: c, agentID: agentID, allowPrivate: allowPrivate}
}

// MaxPushConfigs bounds the webhooks of one task.
const MaxPushConfigs = 10

// CheckPushURL reports why a webhook URL may not be used ("" when it may).
func CheckPushURL(raw string, allowPrivate bool) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "must be an absolute http or https URL"
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return "must use http or https"
	}
	if u.User != nil {
		return "must not carry credentials; use the authentication field"
	}
	if allowPrivate {
		return ""
	}
	// A trailing dot names the same host ("localhost." is localhost).
	host := strings.TrimSuffix(strings.ToLower(u.Hostname()), ".")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return "must not name this machine (loopback addresses are refused)"
	}
	if ip := net.ParseIP(host); ip != nil {
		if ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() || ip.IsUnspecified() || ip.IsMulticast() {
			return "must be a public address (loopback, private, link-local and unspecified addresses are refused)"
		}
	}
	return ""
}

// Save implements push.ConfigStore.
func (s *PushStore) Save(ctx context.Context, taskID a2a.TaskID, cfg *a2a.PushConfig) (*a2a.PushConfig, error) {
	if cfg == nil {
		return nil, fmt.Errorf("push config is required: %w", a2a.ErrInvalidParams)
	}
	if why := CheckPushURL(cfg.URL, s.allowPrivate); why != "" {
		return nil, fmt.Errorf("push notification url %s: %w", why, a2a.ErrInvalidParams)
	}
	c := *cfg
	c.TaskID = taskID
	if c.ID == "" {
		c.ID = protocol.NewID("pnc_")
	}
	raw, err := json.Marshal(&c)
	if err != nil {
		return nil, fmt.Errorf("encode push config: %w", err)
	}
	err = s.db.Write(ctx, func(tx *store.Tx) error {
		var n int
		if err := tx.QueryRow(ctx, `SELECT COUNT(*) FROM a2a_push_configs WHERE agent_id = ? AND task_id = ? AND id <> ?`,
			s.agentID, string(taskID), c.ID).Scan(&n); err != nil {
			return err
		}
		if n >= MaxPushConfigs {
			return fmt.Errorf("a task has at most %d push configs: %w", MaxPushConfigs, a2a.ErrInvalidParams)
		}
		_, err := tx.Exec(ctx, `INSERT INTO a2a_push_configs (agent_id, task_id, id, config, created_at) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (agent_id, task_id, id) DO UPDATE SET config = excluded.config`,
			s.agentID, string(taskID), c.ID, string(raw), store.Millis(s.clock.Now()))
		return err
	})
	if err != nil {
		return nil, err
	}
	return &c, nil
}

// Get implements push.ConfigStore.
func (s *PushStore) Get(ctx context.Context, taskID a2a.TaskID, id string) (*a2a.PushConfig, error) {
	var raw string
	err := s.db.QueryRow(ctx, `SELECT config FROM a2a_push_configs WHERE agent_id = ? AND task_id = ? AND id = ?`, s.agentID, string(taskID), id).Scan(&raw)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, push.ErrPushConfigNotFound
	}
	if err != nil {
		return nil, err
	}
	var c a2a.PushConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		return nil, fmt.Errorf("decode push config: %w", err)
	}
	return &c, nil
}

// List implements push.ConfigStore.
func (s *PushStore) List(ctx context.Context, taskID a2a.TaskID) ([]*a2a.PushConfig, error) {
	rows, err := s.db.Query(ctx, `SELECT config FROM a2a_push_configs WHERE agent_id = ? AND task_id = ? ORDER BY created_at, id`, s.agentID, string(taskID))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []*a2a.PushConfig{}
	for rows.Next() {
		var raw string
		if err := rows.Scan(&raw); err != nil {
			return nil, err
		}
		var c a2a.PushConfig
		if err := json.Unmarshal([]byte(raw), &c); err != nil {
			return nil, fmt.Errorf("decode push config: %w", err)
		}
		out = append(out, &c)
	}
	return out, rows.Err()
}

// Delete implements push.ConfigStore.
func (s *PushStore) Delete(ctx context.Context, taskID a2a.TaskID, id string) error {
	return s.db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.Exec(ctx, `DELETE FROM a2a_push_configs WHERE agent_id = ? AND task_id = ? AND id = ?`, s.agentID, string(taskID), id)
		return err
	})
}

// DeleteAll implements push.ConfigStore.
func (s *PushStore) DeleteAll(ctx context.Context, taskID a2a.TaskID) error {
	return s.db.Write(ctx, func(tx *store.Tx) error {
		_, err := tx.Exec(ctx, `DELETE FROM a2a_push_configs WHERE agent_id = ? AND task_id = ?`, s.agentID, string(taskID))
		return err
	})
}
