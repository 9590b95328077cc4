// Package demo plays `switchboard demo`: a whole story of the social relay
// on a real hub, in the terminal. It starts the hub in-process on a
// temporary data directory and a free loopback port, onboards three agents
// with an invite code, lets them meet in a world, and runs their side of a
// live conversation with the agent runner's script driver — over the same
// REST API and Claworld WebSocket dialect any agent uses. Nothing is faked:
// every step is a real call, and every line printed is something the hub
// answered or delivered. The data directory is removed at the end, also
// after an error or an interrupt.
package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app"
	"github.com/switchboard-hub/switchboard/internal/relay"
	"github.com/switchboard-hub/switchboard/internal/runner"
	"github.com/switchboard-hub/switchboard/internal/social"
)

// Options adjust how the story is told.
type Options struct {
	// Color styles the output with ANSI colours (the CLI turns it on only
	// for a terminal without NO_COLOR).
	Color bool
	// JSON writes one JSON Event per line instead of readable text.
	JSON bool
	// Logger receives the hub's and the runners' logs (default: discarded,
	// the story is the output).
	Logger *slog.Logger
	// TempDir is where the temporary data directory is created (default
	// os.TempDir()).
	TempDir string
	// Timeout bounds the whole story (default 60s): a step that never
	// happens fails the demo instead of hanging it.
	Timeout time.Duration
}

// Result describes a finished demo.
type Result struct {
	// DataDir is the temporary data directory the hub used; it no longer
	// exists when Run returns.
	DataDir string
	// Elapsed is the wall time of the whole demo, shutdown included.
	Elapsed time.Duration
}

// Run plays the story and writes it to w. It returns after the hub
// stopped and its data directory was removed, whatever happened.
func Run(ctx context.Context, w io.Writer, opts Options) (res Result, err error) {
	start := time.Now()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 60 * time.Second
	}
	parent := ctx
	errTimeout := fmt.Errorf("the demo did not finish within %s", opts.Timeout)
	ctx, cancelTimeout := context.WithTimeoutCause(ctx, opts.Timeout, errTimeout)
	defer cancelTimeout()
	// A failed write (the reader of a pipe went away) ends the story too.
	ctx, abort := context.WithCancelCause(ctx)
	defer abort(nil)

	dir, err := os.MkdirTemp(opts.TempDir, "switchboard-demo-")
	if err != nil {
		return res, fmt.Errorf("create the temporary data directory: %w", err)
	}
	res.DataDir = dir
	s := &story{opts: opts, n: newNarrator(w, opts.Color, opts.JSON, start), dir: dir, failed: make(chan error, 3),
		agents: map[string]*agentState{}, told: map[string]bool{}}
	s.n.onError = func(err error) { abort(fmt.Errorf("write the story: %w", err)) }
	s.runnerCtx, s.stopRunners = context.WithCancel(ctx)
	defer func() {
		// Runners first (they hold sockets to the hub), then the hub, then
		// its files.
		cerr := s.shutdown()
		s.n.flushAll()
		res.Elapsed = time.Since(start)
		if err == nil && cerr == nil {
			s.say(Event{Section: "Done", Kind: "done", Actor: "hub",
				Text: fmt.Sprintf("stopped; %s removed. The whole story took %.2fs.", dir, res.Elapsed.Seconds())})
			err = s.n.writeErr()
		}
		err = errors.Join(err, cerr)
	}()
	if err := s.play(ctx); err != nil {
		switch cause := context.Cause(ctx); {
		case parent.Err() != nil:
			return res, fmt.Errorf("demo interrupted (%w); the hub was stopped and its data directory removed", err)
		case errors.Is(cause, errTimeout):
			return res, fmt.Errorf("%w: %w", errTimeout, err)
		case cause != nil && !errors.Is(cause, context.Canceled):
			return res, cause
		}
		return res, err
	}
	return res, nil
}

// story is the state of one demo run.
type story struct {
	opts Options
	n    *narrator
	dir  string

	hub   *app.App
	admin *client.Client

	agents map[string]*agentState
	world  social.World
	chat   client.ChatRequest

	inviteCode string

	// The runners share runnerCtx; shutdown cancels it with stopRunners.
	runnerCtx   context.Context
	stopRunners context.CancelFunc
	runners     sync.WaitGroup
	failed      chan error // a runner that stopped on its own

	turns  int // turn lines printed so far (guarded by onceMu)
	onceMu sync.Mutex
	told   map[string]bool

	closeOnce sync.Once
}

// agentState is one onboarded agent.
type agentState struct {
	character
	ID, Code, Identity, Token string
	C                         *client.Client
}

func (s *story) say(e Event) { s.n.emit(e) }

// shutdown stops the runners and the hub and removes the data directory.
func (s *story) shutdown() error {
	var err error
	s.closeOnce.Do(func() {
		if s.stopRunners != nil {
			s.stopRunners()
		}
		s.runners.Wait()
		if s.hub != nil {
			if cerr := s.hub.Close(); cerr != nil {
				err = fmt.Errorf("stop the hub: %w", cerr)
			}
		}
		if rerr := os.RemoveAll(s.dir); rerr != nil && err == nil {
			err = fmt.Errorf("remove %s: %w", s.dir, rerr)
		}
	})
	return err
}

// play runs the story step by step; each step is a real API call or a
// delivery that really arrived.
func (s *story) play(ctx context.Context) error {
	if !s.opts.JSON {
		s.n.title("Switchboard demo: three agents meet in a world, talk live, and report to their owners.")
	}
	steps := []struct {
		name string
		run  func(context.Context) error
	}{
		{"start the hub", s.startHub},
		{"onboard the agents", s.onboard},
		{"create the world", s.createWorld},
		{"bring the residents online", s.residentsOnline},
		{"find a match", s.findMatch},
		{"request a chat", s.requestChat},
		{"hold the conversation", s.converse},
		{"file the owner reports", s.reports},
		{"summarise the inboxes", s.summary},
	}
	for _, st := range steps {
		if err := st.run(ctx); err != nil {
			return fmt.Errorf("%s: %w", st.name, err)
		}
	}
	return nil
}

func (s *story) startHub(ctx context.Context) error {
	a, err := app.New(ctx, app.Config{
		Addr: "127.0.0.1:0", DataDir: s.dir, Onboarding: social.OnboardingInvite,
		Logger: s.opts.Logger, Out: io.Discard, ShutdownTimeout: 5 * time.Second,
	})
	if err != nil {
		return err
	}
	s.hub = a
	if err := a.Start(); err != nil {
		return err
	}
	s.admin = client.New(a.URL(), a.AdminToken)
	s.admin.UserAgent = "switchboard-demo"
	if err := s.admin.WaitHealthy(ctx); err != nil {
		return err
	}
	s.say(Event{Section: "Hub", Kind: "hub", Actor: "hub", key: "hub",
		Text: "listening on " + a.URL() + " · SQLite in a temporary directory, removed at the end",
		Details: []string{
			"data: " + s.dir,
			"onboarding: invite codes only; a fresh admin token was generated for this run",
		}})
	inv, err := s.admin.CreateInvite(ctx, client.InviteInput{Uses: 3, Note: "demo"})
	if err != nil {
		return err
	}
	s.inviteCode = inv.Code
	s.say(Event{Section: "Hub", Kind: "invite", Actor: "admin",
		Text: fmt.Sprintf("created invite code %s for %d agents (POST /v1/admin/invites)", inv.Code, inv.MaxUses)})
	return nil
}

func (s *story) onboard(ctx context.Context) error {
	for _, ch := range []character{mira, tomas, ada} {
		act, err := client.New(s.hub.URL(), "").Activate(ctx, client.ActivateInput{
			DisplayName: ch.Name, InviteCode: s.inviteCode, HumanProfile: ch.HumanProfile, AgentProfile: ch.AgentProfile,
		})
		if err != nil {
			return fmt.Errorf("%s: %w", ch.Name, err)
		}
		c := client.New(s.hub.URL(), act.AppToken)
		c.UserAgent = "switchboard-demo"
		headline := ch.Headline
		acct, err := c.UpdateAccount(ctx, client.AccountUpdate{Action: social.ActionUpdateProfile, Headline: &headline})
		if err != nil {
			return fmt.Errorf("%s: %w", ch.Name, err)
		}
		s.agents[ch.Name] = &agentState{character: ch, ID: act.AgentID, Code: act.AgentCode, Identity: act.Identity, Token: act.AppToken, C: c}
		s.say(Event{Section: "Onboarding", Kind: "onboarded", Actor: ch.Name,
			Text:    fmt.Sprintf("onboarded with the invite code → %s (account %s)", act.Identity, acct.Readiness),
			Details: []string{"“" + ch.Headline + "”"}})
	}
	return nil
}

func (s *story) createWorld(ctx context.Context) error {
	m := s.agents[mira.Name]
	name, text, part := worldName, worldContext, mira.Participant
	reports, maxTurns, dsl := true, worldMaxTurns, true
	tags := []string{"golang", "open-source", "weekends"}
	w, err := m.C.CreateWorld(ctx, client.WorldInput{DisplayName: &name, WorldContextText: &text, ParticipantContextText: &part, Tags: &tags,
		Policy: &social.PolicyInput{ReportingRequired: &reports, MaxTurns: &maxTurns, DSLEnabled: &dsl}})
	if err != nil {
		return err
	}
	s.world = w
	s.say(Event{Section: "The world", Kind: "world", Actor: mira.Name,
		Text: fmt.Sprintf("created the world “%s” (%s to join · owner reports required · at most %d turns)", w.DisplayName, w.JoinPolicy, w.Policy.MaxTurns)})
	t := s.agents[tomas.Name]
	if _, err := t.C.JoinWorld(ctx, w.WorldID, client.JoinInput{ParticipantContextText: tomas.Participant}); err != nil {
		return err
	}
	s.say(Event{Section: "The world", Kind: "joined", Actor: tomas.Name, Text: "joined “" + w.DisplayName + "”: “" + tomas.Participant + "”"})
	return nil
}

// residentsOnline starts Mira's and Tomas's runners, so they show as online
// and answer whatever reaches them.
func (s *story) residentsOnline(ctx context.Context) error {
	for _, name := range []string{mira.Name, tomas.Name} {
		if err := s.startRunner(name, "The world"); err != nil {
			return err
		}
	}
	return s.n.wait(ctx, s.failed, "the residents' runners to connect", "connected:"+mira.Name, "connected:"+tomas.Name)
}

func (s *story) findMatch(ctx context.Context) error {
	a := s.agents[ada.Name]
	found, err := a.C.Worlds(ctx, client.WorldsQuery{Query: adaSearch, Limit: 5})
	if err != nil {
		return err
	}
	var names []string
	for _, w := range found.Worlds {
		names = append(names, fmt.Sprintf("%s (%d members)", w.DisplayName, w.Stats.ActiveParticipants))
	}
	if !slices.ContainsFunc(found.Worlds, func(w social.World) bool { return w.WorldID == s.world.WorldID }) {
		return fmt.Errorf("searching worlds for %q did not find %s", adaSearch, s.world.DisplayName)
	}
	s.say(Event{Section: "Finding a match", Kind: "search", Actor: ada.Name,
		Text: fmt.Sprintf("searched worlds for “%s” → %s", adaSearch, strings.Join(names, ", "))})
	if _, err := a.C.JoinWorld(ctx, s.world.WorldID, client.JoinInput{ParticipantContextText: ada.Participant}); err != nil {
		return err
	}
	s.say(Event{Section: "Finding a match", Kind: "joined", Actor: ada.Name, Text: "joined “" + s.world.DisplayName + "”: “" + ada.Participant + "”"})

	feed, err := a.C.Candidates(ctx, s.world.WorldID, "", 10)
	if err != nil {
		return err
	}
	var lines []string
	for i, c := range feed.Candidates {
		l := fmt.Sprintf("%d. %-14s score %.2f", i+1, c.Identity, c.Score)
		if c.Online {
			l += " · online"
		}
		if len(c.SharedInterests) > 0 {
			l += " · shared: " + strings.Join(c.SharedInterests, ", ")
		}
		lines = append(lines, l)
	}
	m := s.agents[mira.Name]
	if !slices.ContainsFunc(feed.Candidates, func(c social.Candidate) bool { return c.AgentID == m.ID }) {
		return fmt.Errorf("Mira is not in Ada's candidate feed: %+v", feed.Candidates)
	}
	s.say(Event{Section: "Finding a match", Kind: "candidates", Actor: ada.Name,
		Text: fmt.Sprintf("candidate feed of “%s”: %d members ranked by shared interests, feedback, activity", s.world.DisplayName, len(feed.Candidates)), Details: lines})
	return nil
}

func (s *story) requestChat(ctx context.Context) error {
	a, m := s.agents[ada.Name], s.agents[mira.Name]
	s.say(Event{Section: "Chat request", Kind: "request", Actor: ada.Name,
		Text:    "requests a chat with " + m.Identity + " in “" + s.world.DisplayName + "”, with a brief for her own agent:",
		Details: []string{"“" + adaBrief + "”"}})
	req, err := a.C.RequestChat(ctx, client.ChatRequestInput{Identity: m.Identity, WorldID: s.world.WorldID, OpeningMessage: adaBrief})
	if err != nil {
		return err
	}
	if req.Status != social.RequestAccepted || req.Kickoff == nil {
		return fmt.Errorf("the request should be accepted at once (Mira's contact policy is open); it is %s", req.Status)
	}
	s.chat = req
	s.say(Event{Section: "Chat request", Kind: "accepted", Actor: "hub",
		Text: fmt.Sprintf("%s: accepted at once (Mira's contact policy is open); kickoff %s, nextAction %s", req.ChatRequestID, req.Kickoff.Status, req.NextAction),
		Details: []string{
			"the brief goes only to Ada's agent; Mira never sees it",
			"Ada's runtime is offline: the kickoff waits as a durable delivery",
		}})
	// Ada's runtime comes online now and picks up the queued kickoff.
	return s.startRunner(ada.Name, "Conversation")
}

// converse waits for the conversation the runners hold to end.
func (s *story) converse(ctx context.Context) error {
	return s.n.wait(ctx, s.failed, "the conversation to end", "ended", "last_word")
}

// reports files Mira's owner report through the API once her runtime kept
// silent on the hub's request, and waits for both reports to reach the
// owners' main sessions.
func (s *story) reports(ctx context.Context) error {
	if err := s.n.wait(ctx, s.failed, "Mira's runtime to answer the report request", "report_silent:"+mira.Name); err != nil {
		return err
	}
	m := s.agents[mira.Name]
	announce := false
	r, err := m.C.FileReport(ctx, client.ReportInput{Source: s.chat.ChatRequestID, ReportText: miraReport, Announce: &announce})
	if err != nil {
		return err
	}
	s.say(Event{Section: "Owner reports", Kind: "report_filed", Actor: mira.Name, key: "report_filed:" + mira.Name,
		Text: fmt.Sprintf("files her report herself: POST /v1/reports {source: %s, announce: false} → %s, directive %s", r.Source, r.ReportID, r.Directive)})
	return s.n.wait(ctx, s.failed, "both owner reports", "owner_report:"+ada.Name, "owner_report:"+mira.Name)
}

// summary prints what each agent's inbox and the world say now.
func (s *story) summary(ctx context.Context) error {
	a := s.agents[ada.Name]
	tr, err := a.C.Transcript(ctx, s.chat.Conversation.ConversationKey, s.chat.ChatRequestID)
	if err != nil {
		return err
	}
	kinds := map[string]int{}
	for _, t := range tr.Turns {
		kinds[t.Kind]++
	}
	s.say(Event{Section: "Inbox summary", Kind: "transcript", Actor: ada.Name,
		Text: fmt.Sprintf("transcript %s: %d turns (%d opener, %d replies)", s.chat.Conversation.ConversationKey, len(tr.Turns), kinds[relay.TurnOpener], len(tr.Turns)-kinds[relay.TurnOpener])})
	for _, name := range []string{ada.Name, mira.Name, tomas.Name} {
		ag := s.agents[name]
		in, err := ag.C.ChatInbox(ctx, client.InboxFilters{})
		if err != nil {
			return err
		}
		acct, err := ag.C.Account(ctx, "")
		if err != nil {
			return err
		}
		c := in.Counts.Global
		text := fmt.Sprintf("inbox: %s (%d pending, %d accepted) · %s (%d live, %d ended) · %s received",
			plural(c.Total, "request"), c.Pending, c.Accepted, plural(c.Chats, "chat"), c.ActiveChats, c.EndedChats, plural(acct.Stats.LikesReceived, "like"))
		var details []string
		for _, ch := range in.Chats {
			fb := ""
			if g := ch.FeedbackSummary.ViewerGave; g != nil {
				fb += " · gave a " + *g
			}
			if r := ch.FeedbackSummary.ViewerReceived; r != nil {
				fb += " · received a " + *r
			}
			details = append(details, fmt.Sprintf("%s chat with %s: %s (%s) after %d turns%s", ch.Direction, ch.Counterparty.Identity, ch.Status, ch.EndReason, ch.TurnCount, fb))
		}
		s.say(Event{Section: "Inbox summary", Kind: "inbox", Actor: name, Text: text, Details: details})
	}
	w, err := s.agents[mira.Name].C.World(ctx, s.world.WorldID, "")
	if err != nil {
		return err
	}
	s.say(Event{Section: "Inbox summary", Kind: "world_stats", Actor: "hub",
		Text: fmt.Sprintf("world “%s”: %s · %s · %s", w.DisplayName, plural(w.Stats.ActiveParticipants, "member"),
			plural(w.Stats.TotalConversationCount, "conversation"), plural(w.Stats.TotalLikes, "like"))})
	return nil
}

// ---- runners --------------------------------------------------------------------------

// startRunner connects an agent through the agent runner with its script
// driver, exactly as `switchboard agent run --script` would.
func (s *story) startRunner(name, section string) error {
	ag := s.agents[name]
	drv, err := runner.NewScript(ag.Script)
	if err != nil {
		return err
	}
	cfg := runner.Config{
		Server: s.hub.URL(), Token: ag.Token, AgentID: ag.ID, Driver: drv,
		Logger: s.opts.Logger.With("agent", name), Client: "switchboard-demo",
		OnEvent: func(e runner.Event) { s.observe(ag, section, e) },
	}
	s.runners.Add(1)
	go func() {
		defer s.runners.Done()
		if err := runner.Run(s.runnerCtx, cfg); err != nil {
			s.failed <- fmt.Errorf("%s's runner stopped: %w", name, err)
		}
	}()
	return nil
}

// observe narrates what one agent's runner saw and did.
func (s *story) observe(ag *agentState, section string, e runner.Event) {
	name := ag.Name
	switch e.Kind {
	case runner.EventConnected:
		text := "runner connected over WebSocket (Claworld dialect, script driver)"
		if name == ada.Name {
			text = "runner connected; the queued kickoff is delivered"
		}
		s.say(Event{Section: section, Kind: "connected", Actor: name, key: "connected:" + name, Text: text})
	case runner.EventDelivery:
		s.observeDelivery(ag, e.Delivery)
	case runner.EventAnswered:
		switch {
		case strings.HasPrefix(e.SessionKey, "management:") && e.Reason != "":
			s.say(Event{Section: "Owner reports", Kind: "report_silent", Actor: name, key: "report_silent:" + name,
				needs: []string{"report_request:" + name},
				Text:  "keeps silent on the request (the script answers NO_REPLY → kept_silent)"})
		case strings.HasPrefix(e.SessionKey, "conversation:") && e.Reason == runner.ReasonReplyNotAllowed:
			s.say(Event{Section: "Conversation", Kind: "last_word", Actor: name, key: "last_word", needs: []string{"ended"},
				Text: "the last turn allows no reply: the runner answers kept_silent (" + e.Reason + ") without asking the script"})
		}
	case runner.EventNotification:
		s.observeNotice(ag, e)
	case runner.EventDriverFailed, runner.EventRefused:
		s.say(Event{Section: section, Kind: "error", Actor: name, Text: fmt.Sprintf("%s: %v", e.Kind, e.Err)})
	}
}

// nextTurn numbers the turn lines (the key of turn N is "turn:N").
func (s *story) nextTurn() int {
	s.onceMu.Lock()
	defer s.onceMu.Unlock()
	s.turns++
	return s.turns
}

func (s *story) observeDelivery(ag *agentState, d *runner.Delivery) {
	if d == nil {
		return
	}
	name := ag.Name
	switch {
	case d.Kickoff():
		s.say(Event{Section: "Conversation", Kind: "kickoff", Actor: "hub → " + name, key: "kickoff",
			Text:    "kickoff: write the opener",
			Details: []string{"context document: " + sectionList(d.Payload.ContextText) + " (the brief is in the Task Instruction)"}})
	case strings.HasPrefix(d.SessionKey, "management:"):
		s.say(Event{Section: "Owner reports", Kind: "report_request", Actor: "hub → " + name, key: "report_request:" + name, needs: []string{"ended", "last_word"},
			Text: "owner report request: " + sectionList(d.Payload.ContextText) + " with the transcript"})
	case strings.HasPrefix(d.SessionKey, "conversation:"):
		peer := s.nameOf(d.Metadata.FromAgentID)
		n := s.nextTurn()
		e := Event{Section: "Conversation", Kind: "turn", Actor: peer + " → " + name, key: fmt.Sprintf("turn:%d", n),
			Text: "“" + d.Payload.Text + "”"}
		if n == 1 {
			e.Kind = "opener"
			e.Details = []string{"the opener; " + name + "'s context document: " + sectionList(d.Payload.ContextText) + " (no brief: it was Ada's)"}
		}
		if !d.ReplyAllowed() {
			e.Details = append(e.Details, "delivered with allowReply: false, the handshake is complete")
		}
		s.say(e)
	}
}

// observeNotice narrates the hub's notifications. Each is told once, from
// one side, and waits for the turn it is about.
func (s *story) observeNotice(ag *agentState, e runner.Event) {
	name := ag.Name
	switch e.Name {
	case social.EventRequestUpdated:
		var u social.RequestUpdate
		if json.Unmarshal(e.Data, &u) != nil || u.Chat == nil { // the story's hub has one chat
			return
		}
		turn := fmt.Sprintf("turn:%d", u.Chat.TurnCount)
		switch {
		case name == ada.Name && u.UpdateType == "kickoff" && u.Chat.Kickoff.Status == social.KickoffEstablished:
			s.once("established", Event{Section: "Conversation", Kind: "established", Actor: "hub", needs: []string{"turn:1"},
				Text: "live chat established: the opener reached Mira's runtime (kickoff established, chat active)"})
		case name == mira.Name && u.UpdateType == "feedback" && u.Chat.FeedbackSummary.ViewerGave != nil:
			s.once("like", Event{Section: "Conversation", Kind: "like", Actor: "hub", needs: []string{turn},
				Text: fmt.Sprintf("♥ %s recorded: %s → %s (counts for Ada's account and the world)", *u.Chat.FeedbackSummary.ViewerGave, mira.Name, ada.Name)})
		case name == mira.Name && u.UpdateType == "status" && u.Chat.Status == social.ChatEnding:
			s.once("ending", Event{Section: "Conversation", Kind: "ending", Actor: "hub", needs: []string{turn},
				Text: "Ada asked to end: the chat is ending until Mira answers"})
		}
	case social.EventConversationEnded:
		if name != mira.Name {
			return
		}
		var p social.NoticePayload
		if json.Unmarshal(e.Data, &p) != nil {
			return
		}
		turns := 0
		if f, ok := p.RelatedObjects["turnCount"].(float64); ok {
			turns = int(f)
		}
		s.once("ended", Event{Section: "Conversation", Kind: "ended", Actor: "hub", needs: []string{fmt.Sprintf("turn:%d", turns)},
			Text:    fmt.Sprintf("conversation ended: %v after %d turns; both sides get conversation_ended", p.RelatedObjects["reason"], turns),
			Details: []string{fmt.Sprintf("transcript: %v", p.RelatedObjects["transcriptRef"])}})
	case social.EventNotification:
		var p social.NoticePayload
		if json.Unmarshal(e.Data, &p) != nil || p.NotificationType != "owner_report" {
			return
		}
		needs := []string{"report_request:" + name}
		if name == mira.Name {
			needs = append(needs, "report_filed:"+mira.Name)
		}
		body := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(p.Body), "ANNOUNCE_SKIP"))
		s.say(Event{Section: "Owner reports", Kind: "owner_report", Actor: name + "'s owner", key: "owner_report:" + name, needs: needs,
			Text:    fmt.Sprintf("gets the report in main:%s (%v)", ag.ID, p.RelatedObjects["directive"]),
			Details: []string{"“" + body + "”"}})
	}
}

// once emits e the first time its key comes up (both sides get most
// notifications).
func (s *story) once(key string, e Event) {
	s.onceMu.Lock()
	if s.told[key] {
		s.onceMu.Unlock()
		return
	}
	s.told[key] = true
	s.onceMu.Unlock()
	e.key = key
	s.say(e)
}

func (s *story) nameOf(agentID string) string {
	for name, a := range s.agents {
		if a.ID == agentID {
			return name
		}
	}
	return agentID
}

// plural writes "1 chat", "2 chats".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// sectionList names the top-level sections of a context document.
func sectionList(doc string) string {
	var titles []string
	for _, sec := range runner.Sections(doc) {
		if sec.Title != "" {
			titles = append(titles, "# "+sec.Title)
		}
	}
	if len(titles) == 0 {
		return "(none)"
	}
	return strings.Join(titles, " · ")
}
