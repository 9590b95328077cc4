package social_test

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/agent"
	"github.com/switchboard-hub/switchboard/internal/clock"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/social"
	"github.com/switchboard-hub/switchboard/internal/store"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

// env is a social service over a fresh store with a fake clock and a
// recording notifier.
type env struct {
	t     *testing.T
	ctx   context.Context
	db    *store.DB
	reg   *agent.Registry
	svc   *social.Service
	clock *clock.Fake
	rec   *social.Recorder
}

func newEnv(t *testing.T, db *store.DB, cfg ...social.Config) *env {
	t.Helper()
	c := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	reg := agent.New(db, c)
	var conf social.Config
	if len(cfg) > 0 {
		conf = cfg[0]
	}
	if conf.Onboarding == "" {
		conf.Onboarding = social.OnboardingOpen
	}
	svc, err := social.New(db, reg, c, conf, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	rec := &social.Recorder{}
	svc.SetNotifier(rec)
	return &env{t: t, ctx: context.Background(), db: db, reg: reg, svc: svc, clock: c, rec: rec}
}

// each runs fn on every store backend with a fresh env.
func each(t *testing.T, fn func(t *testing.T, e *env)) {
	storetest.Each(t, func(t *testing.T, db *store.DB) { fn(t, newEnv(t, db)) })
}

// agent onboards a ready agent (profiles filled) and returns its account.
func (e *env) agent(name string, opts ...func(*social.AccountUpdate)) social.Account {
	e.t.Helper()
	act, err := e.svc.Activate(e.ctx, social.ActivateInput{DisplayName: name,
		HumanProfile: name + "'s human likes trail running and coffee", AgentProfile: name + " is a friendly agent who talks about hiking"})
	if err != nil {
		e.t.Fatalf("activate %s: %v", name, err)
	}
	if len(opts) > 0 {
		u := social.AccountUpdate{Action: social.ActionUpdate}
		for _, o := range opts {
			o(&u)
		}
		if _, err := e.svc.UpdateAccount(e.ctx, social.AgentActor(act.AgentID), u); err != nil {
			e.t.Fatalf("update %s: %v", name, err)
		}
	}
	a, err := e.svc.Account(e.ctx, social.AgentActor(act.AgentID))
	if err != nil {
		e.t.Fatal(err)
	}
	if a.Readiness != social.ReadinessReady {
		e.t.Fatalf("%s not ready: %+v", name, a)
	}
	return a
}

func policy(p string) func(*social.AccountUpdate) {
	return func(u *social.AccountUpdate) { u.ContactPolicy = &p }
}

func visibility(v string) func(*social.AccountUpdate) {
	return func(u *social.AccountUpdate) { u.VisibilityMode = &v }
}

func ptr[T any](v T) *T { return &v }

// world creates a world owned by owner.
func (e *env) world(owner social.Account, name string, mods ...func(*social.WorldInput)) social.World {
	e.t.Helper()
	in := social.WorldInput{DisplayName: ptr(name), WorldContextText: ptr("A world about " + name),
		ParticipantContextText: ptr("I am the owner of " + name)}
	for _, m := range mods {
		m(&in)
	}
	w, err := e.svc.CreateWorld(e.ctx, social.AgentActor(owner.AgentID), in)
	if err != nil {
		e.t.Fatalf("create world %s: %v", name, err)
	}
	return w
}

func (e *env) join(a social.Account, w social.World, text string) social.Membership {
	e.t.Helper()
	m, err := e.svc.Join(e.ctx, social.AgentActor(a.AgentID), w.WorldID, social.JoinInput{ParticipantContextText: text})
	if err != nil {
		e.t.Fatalf("join %s: %v", a.DisplayName, err)
	}
	return m
}

func (e *env) request(from, to social.Account, worldID string) (social.RequestView, error) {
	return e.svc.CreateRequest(e.ctx, social.AgentActor(from.AgentID), social.CreateRequestInput{
		DisplayName: to.DisplayName, AgentCode: to.AgentCode, OpeningMessage: "Find out whether they like trail running; stop once clear.", WorldID: worldID})
}

func (e *env) mustRequest(from, to social.Account, worldID string) social.RequestView {
	e.t.Helper()
	v, err := e.request(from, to, worldID)
	if err != nil {
		e.t.Fatalf("request %s→%s: %v", from.DisplayName, to.DisplayName, err)
	}
	return v
}

func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	if got := protocol.CodeOf(err); got != code {
		t.Fatalf("error code = %q (%v), want %q", got, err, code)
	}
}

// counts is a fingerprint of the social tables, to check that refused
// calls change nothing.
func (e *env) counts() map[string]int {
	e.t.Helper()
	out := map[string]int{}
	for _, tbl := range []string{"social_accounts", "social_worlds", "social_memberships", "social_chat_requests", "social_chats",
		"social_conversations", "social_broadcasts", "social_invites", "agents"} {
		var n int
		if err := e.db.QueryRow(e.ctx, `SELECT COUNT(*) FROM `+tbl).Scan(&n); err != nil {
			e.t.Fatal(err)
		}
		out[tbl] = n
	}
	var st string
	rows, err := e.db.Query(e.ctx, `SELECT id, status, updated_at FROM social_chat_requests ORDER BY id`)
	if err != nil {
		e.t.Fatal(err)
	}
	defer rows.Close()
	i := 0
	for rows.Next() {
		var id string
		var up int64
		if err := rows.Scan(&id, &st, &up); err != nil {
			e.t.Fatal(err)
		}
		out["req:"+id+":"+st] = int(up % 1000000)
		i++
	}
	return out
}
