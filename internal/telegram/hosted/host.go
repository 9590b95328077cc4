package hosted

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-hub/switchboard/internal/agent"
	"github.com/switchboard-hub/switchboard/internal/bus"
	"github.com/switchboard-hub/switchboard/internal/clock"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/replyctl"
	"github.com/switchboard-hub/switchboard/internal/secrets"
	"github.com/switchboard-hub/switchboard/internal/store"
	"github.com/switchboard-hub/switchboard/internal/telegram"
)

// Tuning adjusts the host's timing. Zero values pick the defaults; tests
// shorten them.
type Tuning struct {
	// PollTimeout is the long-poll wait of getUpdates (default 30s).
	PollTimeout time.Duration
	// ReconcileInterval is how often a node checks which bots exist and
	// renews its polling leases (default 5s). Adding or removing a bot
	// reconciles at once on every node.
	ReconcileInterval time.Duration
	// SweepInterval is how often expired keyboards and choices are written
	// down and old rows pruned (default 30s).
	SweepInterval time.Duration
	// OutboxInterval is how often replies given as bus responses are
	// retried when nothing wakes the sender (default 5s).
	OutboxInterval time.Duration
	// HTTPClient carries Bot API calls (default: a plain http.Client).
	HTTPClient *http.Client
	// TelegramSleep replaces the wait before retrying a Bot API call that
	// was rate limited (tests observe it instead of sleeping).
	TelegramSleep func(ctx context.Context, d time.Duration) error
}

func (t *Tuning) setDefaults() {
	if t.PollTimeout <= 0 {
		t.PollTimeout = 30 * time.Second
	}
	if t.ReconcileInterval <= 0 {
		t.ReconcileInterval = 5 * time.Second
	}
	if t.SweepInterval <= 0 {
		t.SweepInterval = 30 * time.Second
	}
	if t.OutboxInterval <= 0 {
		t.OutboxInterval = 5 * time.Second
	}
	if t.HTTPClient == nil {
		t.HTTPClient = &http.Client{}
	}
}

// Options are what a Host is built from.
type Options struct {
	DB     *store.DB
	Bus    *bus.Service
	Agents *agent.Registry
	// Box seals bot tokens, webhook secrets and HMAC keys at rest.
	Box *secrets.Box
	// PublicURL returns the base URL Telegram reaches this hub at; webhook
	// URLs are built from it. It is called when a webhook is registered
	// (after the listener exists).
	PublicURL func() string
	Clock     clock.Clock
	Logger    *slog.Logger
	// Metrics registers the host's metrics (nil: not exported).
	Metrics prometheus.Registerer
	Tuning  Tuning
}

// Host runs the hub's Telegram bots: it keeps the bot registry, receives
// updates (webhook or long polling), applies reply-end controls through
// replyctl, forwards typed messages and choices to each bot's runtime agent
// over the bus, and sends the runtime's replies with the controls attached.
// Every node of a multi-node hub runs one; all state is in the store, and
// one node at a time polls a given bot (a lease in telegram_bots).
type Host struct {
	o       Options
	reg     registry
	rc      *replyctl.Service
	log     *slog.Logger
	metrics *metrics
	node    string

	ctx    context.Context // background work (handlers, edits, pollers)
	cancel context.CancelFunc
	wg     sync.WaitGroup // edits and pollers

	mu   sync.Mutex
	bots map[string]*bot

	kick       chan struct{} // reconcile now
	outboxKick chan struct{} // send pending outbox rows now
}

// bot is a loaded bot: its record and the transport objects built from it.
type bot struct {
	rec    *record
	cfg    replyctl.BotConfig
	client *telegram.Client
	recv   *telegram.Receiver
	hook   *telegram.Webhook

	// guarded by Host.mu
	webhookSet bool
	pollCancel context.CancelFunc
	pollDone   chan struct{}
}

// New builds a Host. Nothing runs until Run.
func New(o Options) (*Host, error) {
	if o.DB == nil || o.Bus == nil || o.Agents == nil || o.Box == nil || o.PublicURL == nil {
		return nil, errors.New("hosted: DB, Bus, Agents, Box and PublicURL are required")
	}
	if o.Clock == nil {
		o.Clock = clock.Real{}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	o.Tuning.setDefaults()
	h := &Host{
		o:          o,
		reg:        registry{db: o.DB, box: o.Box},
		rc:         replyctl.New(replyctl.NewDBStore(o.DB), replyctl.Options{Clock: o.Clock}),
		log:        o.Logger.With("component", "telegram"),
		metrics:    newMetrics(o.Metrics),
		node:       o.DB.NodeID(),
		bots:       map[string]*bot{},
		kick:       make(chan struct{}, 1),
		outboxKick: make(chan struct{}, 1),
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	o.Bus.RegisterSystem(SystemSender, bus.SystemHooks{OnMessage: h.onBusMessage})
	o.DB.Listen(botsChannel, func(string) { signal(h.kick) })
	o.DB.Listen(outboxChannel, func(string) { signal(h.outboxKick) })
	return h, nil
}

// Controls is the reply-end controls service the host uses.
func (h *Host) Controls() *replyctl.Service { return h.rc }

func signal(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Run reconciles bots (starting and stopping pollers, registering
// webhooks), sweeps expiries and sends outbox replies until ctx ends; then
// it stops pollers, lets in-flight updates finish (briefly) and releases
// this node's polling leases.
func (h *Host) Run(ctx context.Context) {
	var loops sync.WaitGroup
	loops.Add(2)
	go func() { defer loops.Done(); h.sweepLoop(ctx) }()
	go func() { defer loops.Done(); h.outboxLoop(ctx) }()
	t := time.NewTicker(h.o.Tuning.ReconcileInterval)
	defer t.Stop()
	for {
		h.reconcile(ctx)
		select {
		case <-ctx.Done():
			loops.Wait()
			h.shutdown()
			return
		case <-t.C:
		case <-h.kick:
		}
	}
}

func (h *Host) shutdown() {
	h.mu.Lock()
	var hooks []*telegram.Webhook
	for _, b := range h.bots {
		if b.pollCancel != nil {
			b.pollCancel()
		}
		hooks = append(hooks, b.hook)
	}
	h.mu.Unlock()
	// Updates already accepted get a moment to finish their store work;
	// network calls after that are cut short.
	grace := time.AfterFunc(2*time.Second, h.cancel)
	for _, hk := range hooks {
		hk.Wait()
	}
	h.wg.Wait()
	grace.Stop()
	h.cancel()
	rctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := h.reg.releasePolls(rctx, h.node); err != nil {
		h.log.Warn("could not release polling leases", "err", err)
	}
}

// bot returns the loaded bot id, loading it from the store on first use.
func (h *Host) bot(ctx context.Context, id string) (*bot, error) {
	h.mu.Lock()
	b := h.bots[id]
	h.mu.Unlock()
	if b != nil {
		return b, nil
	}
	rec, err := h.reg.get(ctx, id)
	if err != nil {
		return nil, err
	}
	b, err = h.build(rec)
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if cur := h.bots[id]; cur != nil {
		return cur, nil
	}
	h.bots[id] = b
	return b, nil
}

func (h *Host) newClient(token, apiURL string) (*telegram.Client, error) {
	return telegram.NewClient(telegram.Config{Token: token, ServerURL: apiURL, HTTPClient: h.o.Tuning.HTTPClient,
		Clock: h.o.Clock, Logger: h.log, Sleep: h.o.Tuning.TelegramSleep})
}

func (h *Host) build(rec *record) (*bot, error) {
	c, err := h.newClient(rec.token, rec.APIURL)
	if err != nil {
		return nil, err
	}
	b := &bot{rec: rec, cfg: rec.config(), client: c}
	b.recv = &telegram.Receiver{BotID: rec.ID, BotUsername: rec.Username, Deduper: h.rc, Logger: h.log,
		Handler: func(_ context.Context, ev telegram.Event) { h.handle(b, ev) }}
	b.hook, err = telegram.NewWebhook(telegram.WebhookConfig{Secret: rec.webhookSecret, Receiver: b.recv, BaseContext: h.ctx})
	if err != nil {
		return nil, fmt.Errorf("telegram: bot %s: %w", rec.ID, err)
	}
	return b, nil
}

// webhookURL is where Telegram POSTs bot id's updates.
func (h *Host) webhookURL(id string) string {
	return strings.TrimRight(h.o.PublicURL(), "/") + "/v1/telegram/webhook/" + id
}

// reconcile brings this node in line with the registry: bots removed
// elsewhere are dropped, webhooks are registered once per process (the
// public URL may have changed), and poll-mode bots are polled by whichever
// node holds the lease.
func (h *Host) reconcile(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	modes, err := h.reg.ids(ctx)
	if err != nil {
		h.log.Warn("reconcile: cannot list bots", "err", err)
		return
	}
	h.mu.Lock()
	for id, b := range h.bots {
		if _, ok := modes[id]; !ok {
			h.stopPollLocked(b)
			delete(h.bots, id)
		}
	}
	h.mu.Unlock()
	now := h.o.Clock.Now()
	lease := 3 * h.o.Tuning.ReconcileInterval
	for id, mode := range modes {
		b, err := h.bot(ctx, id)
		if err != nil {
			h.log.Error("reconcile: cannot load bot", "bot", id, "err", err)
			continue
		}
		switch mode {
		case ModeWebhook:
			h.mu.Lock()
			set := b.webhookSet
			h.mu.Unlock()
			if !set {
				if err := h.setWebhook(ctx, b); err != nil {
					h.log.Warn("could not register the webhook; will retry", "bot", id, "url", h.webhookURL(id), "err", err)
					continue
				}
			}
		case ModePoll:
			held, err := h.reg.claimPoll(ctx, id, h.node, now, now.Add(lease))
			if err != nil {
				h.log.Warn("reconcile: polling lease", "bot", id, "err", err)
				continue
			}
			h.mu.Lock()
			if held {
				h.startPollLocked(b)
			} else {
				h.stopPollLocked(b)
			}
			h.mu.Unlock()
		}
	}
}

func (h *Host) setWebhook(ctx context.Context, b *bot) error {
	err := b.client.SetWebhook(ctx, telegram.WebhookParams{URL: h.webhookURL(b.rec.ID), SecretToken: b.rec.webhookSecret,
		AllowedUpdates: telegram.UpdateTypes})
	if err != nil {
		return err
	}
	h.mu.Lock()
	b.webhookSet = true
	h.mu.Unlock()
	return nil
}

func (h *Host) startPollLocked(b *bot) {
	if b.pollDone != nil {
		select {
		case <-b.pollDone:
		default:
			return // running
		}
	}
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan struct{})
	b.pollCancel, b.pollDone = cancel, done
	p, err := telegram.NewPoller(telegram.PollerConfig{Client: b.client, Receiver: b.recv, Timeout: h.o.Tuning.PollTimeout})
	if err != nil {
		cancel()
		close(done)
		h.log.Error("cannot start polling", "bot", b.rec.ID, "err", err)
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer close(done)
		// getUpdates answers 409 while a webhook is set.
		if err := b.client.DeleteWebhook(ctx, false); err != nil && ctx.Err() == nil {
			h.log.Warn("deleteWebhook before polling failed", "bot", b.rec.ID, "err", err)
		}
		h.log.Info("polling started", "bot", b.rec.ID, "username", b.rec.Username)
		if err := p.Run(ctx); err != nil {
			h.log.Error("polling stopped: Telegram rejects the bot token; retrying in a minute", "bot", b.rec.ID, "err", err)
			t := time.NewTimer(time.Minute)
			defer t.Stop()
			select {
			case <-t.C:
			case <-ctx.Done():
			}
		}
	}()
}

func (h *Host) stopPollLocked(b *bot) {
	if b.pollCancel != nil {
		b.pollCancel()
		b.pollCancel = nil
	}
}

// ---- management -------------------------------------------------------------

// AddBot verifies the token with getMe, stores the bot with freshly
// generated webhook secret and HMAC key, and starts receiving: setWebhook
// in webhook mode, polling (after deleteWebhook) in poll mode. If Telegram
// refuses the webhook, nothing is kept.
func (h *Host) AddBot(ctx context.Context, p AddBotParams) (Bot, error) {
	if err := p.validate(); err != nil {
		return Bot{}, err
	}
	ag, err := h.o.Agents.Get(ctx, p.AgentID)
	if err != nil {
		if protocol.CodeOf(err) == "agent_not_found" {
			return Bot{}, &protocol.Error{Class: protocol.ClassInvalid, Code: "unknown_agent", Status: 422,
				Message: "agentId: no agent " + p.AgentID, FieldErrors: map[string]string{"agentId": "unknown agent"},
				NextAction: "create the runtime agent first (switchboard agents create) and pass its id"}
		}
		return Bot{}, err
	}
	if ag.Disabled {
		return Bot{}, protocol.Unprocessable("agent_disabled", "agentId: agent "+ag.ID+" is disabled; enable it or bind another agent")
	}
	c, err := h.newClient(p.Token, p.APIURL)
	if err != nil {
		return Bot{}, err
	}
	me, err := c.GetMe(ctx)
	if err != nil {
		return Bot{}, getMeError(err, p.APIURL)
	}
	rec := &record{
		Bot: Bot{ID: protocol.NewID(protocol.PrefixBot), AgentID: p.AgentID, Mode: p.Mode, Scope: p.Scope, APIURL: p.APIURL,
			TelegramID: me.ID, Username: me.Username, Resolve: p.Resolve, DefaultLocale: p.DefaultLocale,
			PerUserInGroups: p.PerUserInGroups, CreatedAt: h.o.Clock.Now().UTC().Truncate(time.Millisecond)},
		token:         p.Token,
		webhookSecret: protocol.RandomToken("", 32),
		hmacKey:       []byte(protocol.RandomToken("", 32)),
	}
	if err := h.reg.insert(ctx, rec, h.o.Clock.Now()); err != nil {
		return Bot{}, err
	}
	b, err := h.bot(ctx, rec.ID)
	if err == nil {
		switch p.Mode {
		case ModeWebhook:
			err = h.setWebhook(ctx, b)
		case ModePoll:
			err = c.DeleteWebhook(ctx, false)
		}
	}
	if err != nil {
		h.forget(rec.ID)
		if derr := h.reg.delete(context.WithoutCancel(ctx), rec.ID); derr != nil {
			h.log.Error("could not undo a bot registration", "bot", rec.ID, "err", derr)
		}
		return Bot{}, telegramError(err, "registering the bot with Telegram failed; nothing was kept")
	}
	signal(h.kick)
	h.log.Info("telegram bot added", "bot", rec.ID, "username", rec.Username, "agent", rec.AgentID, "mode", rec.Mode, "scope", rec.Scope)
	return h.view(rec), nil
}

func getMeError(err error, apiURL string) error {
	var ae *telegram.APIError
	if errors.As(err, &ae) && (ae.Code == http.StatusUnauthorized || ae.Code == http.StatusNotFound) {
		return &protocol.Error{Class: protocol.ClassInvalid, Code: "invalid_bot_token", Status: 422, Err: err,
			Message: "token: Telegram rejected the bot token (getMe answered " + ae.Description + ")", FieldErrors: map[string]string{"token": "rejected by Telegram"},
			NextAction: "copy the token again from @BotFather (/token), or point apiUrl at the Bot API server the bot uses"}
	}
	if errors.As(err, &ae) {
		return ae.Protocol()
	}
	where := apiURL
	if where == "" {
		where = "https://api.telegram.org"
	}
	return &protocol.Error{Class: protocol.ClassDependency, Code: "telegram_unreachable", Err: err,
		Message: "could not reach the Bot API at " + where + ": " + err.Error(), NextAction: "check the network or apiUrl and try again"}
}

// telegramError maps a Bot API failure to the hub's error model.
func telegramError(err error, context string) error {
	var ae *telegram.APIError
	if errors.As(err, &ae) {
		pe := ae.Protocol()
		pe.Message = context + ": " + pe.Message
		return pe
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return err
	}
	return &protocol.Error{Class: protocol.ClassDependency, Code: "telegram_unreachable", Err: err,
		Message: context + ": " + err.Error(), NextAction: "check that the Bot API server is reachable and try again"}
}

// forget drops a bot from this node's cache, stopping its poller.
func (h *Host) forget(id string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if b := h.bots[id]; b != nil {
		h.stopPollLocked(b)
		delete(h.bots, id)
	}
}

// RemoveBot deletes a bot: it stops receiving on every node and, in
// webhook mode, its webhook is removed at Telegram (best effort). The
// conversations' state stays in the store.
func (h *Host) RemoveBot(ctx context.Context, id string) error {
	b, err := h.bot(ctx, id)
	if err != nil && protocol.CodeOf(err) == "bot_not_found" {
		return err
	}
	if err := h.reg.delete(ctx, id); err != nil {
		return err
	}
	h.forget(id)
	if b != nil && b.rec.Mode == ModeWebhook {
		if err := b.client.DeleteWebhook(ctx, false); err != nil {
			h.log.Warn("removed bot, but Telegram did not delete its webhook", "bot", id, "err", err)
		}
	}
	h.log.Info("telegram bot removed", "bot", id)
	return nil
}

// Bots lists the hosted bots, all of them or those bound to agentID.
func (h *Host) Bots(ctx context.Context, agentID string) ([]Bot, error) {
	recs, err := h.reg.list(ctx, agentID)
	if err != nil {
		return nil, err
	}
	out := make([]Bot, 0, len(recs))
	for _, r := range recs {
		out = append(out, h.view(r))
	}
	return out, nil
}

// Bot returns one hosted bot.
func (h *Host) Bot(ctx context.Context, id string) (Bot, error) {
	b, err := h.bot(ctx, id)
	if err != nil {
		return Bot{}, err
	}
	return h.view(b.rec), nil
}

func (h *Host) view(r *record) Bot {
	v := r.Bot
	if v.Mode == ModeWebhook {
		v.WebhookURL = h.webhookURL(v.ID)
	}
	return v
}

// Policy is the decision for a conversation of one of the hosted bots.
func (h *Host) Policy(ctx context.Context, key replyctl.Key) (replyctl.Decision, error) {
	return h.rc.Policy(ctx, key)
}
