package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/agent"
	"github.com/switchboard-hub/switchboard/internal/bus"
	"github.com/switchboard-hub/switchboard/internal/contextdoc"
	"github.com/switchboard-hub/switchboard/internal/pipeline"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/relay"
	"github.com/switchboard-hub/switchboard/internal/replyctl"
	"github.com/switchboard-hub/switchboard/internal/social"
)

// maxAgents bounds the agents a page lists.
const maxAgents = 1000

func notFound(what, id string) error {
	return protocol.NotFound(strings.ReplaceAll(what, " ", "_")+"_not_found", "no "+what+" "+id+" that you may see")
}

// names resolves agent ids to display names for the page ("" for unknown
// ids, such as system senders).
func (c *Console) names(ctx context.Context, ids ...string) map[string]string {
	var want []string
	seen := map[string]bool{}
	for _, id := range ids {
		if id != "" && !seen[id] && strings.HasPrefix(id, protocol.PrefixAgent) {
			seen[id] = true
			want = append(want, id)
		}
	}
	out := map[string]string{}
	if len(want) == 0 {
		return out
	}
	as, err := c.d.Agents.List(ctx, agent.Filter{IDs: want})
	if err != nil {
		c.d.Log.Warn("console: agent names", "err", err)
		return out
	}
	for _, a := range as {
		out[a.ID] = a.DisplayName
	}
	return out
}

// ---- overview ---------------------------------------------------------------------------

// Overview is the overview page.
type Overview struct {
	Online, Total int
	Self          *AgentRow // an agent viewer's own row
	Rates         Rates
	Depths        []AgentRow // agents with pending deliveries, deepest first
	Health        bus.Health
	Thresholds    bus.Thresholds
	Reasons       []KV
	Overdue       []KV
	Now           time.Time
}

// KV is a name and a value, for ordered lists in templates.
type KV struct {
	Key, Value string
	N          int
}

// AgentRow is an agent in a list.
type AgentRow struct {
	agent.Agent
	ParentName string
	Liveness   string
	LastSeen   time.Time
	Depth      int
}

func (c *Console) agentRows(ctx context.Context, v *viewer) ([]AgentRow, error) {
	f := agent.Filter{Limit: maxAgents}
	if !v.Admin {
		f.IDs = []string{v.AgentID}
	}
	as, err := c.d.Agents.List(ctx, f)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(as))
	names := map[string]string{}
	var parents []string
	for i, a := range as {
		ids[i] = a.ID
		names[a.ID] = a.DisplayName
		if a.ParentID != "" {
			parents = append(parents, a.ParentID)
		}
	}
	for id, n := range c.names(ctx, parents...) {
		names[id] = n
	}
	pres := map[string]bus.AgentPresence{}
	if len(ids) > 0 {
		if pres, err = c.d.Bus.Presence(ctx, ids); err != nil {
			return nil, err
		}
	}
	depths, err := c.d.Bus.QueueDepths(ctx)
	if err != nil {
		return nil, err
	}
	rows := make([]AgentRow, len(as))
	for i, a := range as {
		p := pres[a.ID]
		l := p.Liveness
		if l == "" {
			l = "offline"
		}
		rows[i] = AgentRow{Agent: a, ParentName: names[a.ParentID], Liveness: l, LastSeen: p.LastSeen, Depth: depths[a.ID]}
	}
	return rows, nil
}

func (c *Console) loadOverview(ctx context.Context, v *viewer, r *http.Request) (any, error) {
	rows, err := c.agentRows(ctx, v)
	if err != nil {
		return nil, err
	}
	o := Overview{Total: len(rows), Rates: c.rates.observe(time.Now()), Health: c.d.Bus.Metrics().Health(),
		Thresholds: c.d.Bus.Config().Thresholds, Now: c.d.Clock.Now()}
	for i, a := range rows {
		if a.Liveness == bus.Online {
			o.Online++
		}
		if a.Depth > 0 {
			o.Depths = append(o.Depths, a)
		}
		if !v.Admin && a.ID == v.AgentID {
			o.Self = &rows[i]
		}
	}
	sort.SliceStable(o.Depths, func(i, j int) bool { return o.Depths[i].Depth > o.Depths[j].Depth })
	if len(o.Depths) > 25 {
		o.Depths = o.Depths[:25]
	}
	keys := make([]string, 0, len(o.Health.Reasons))
	for k := range o.Health.Reasons {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		o.Reasons = append(o.Reasons, KV{Key: k, Value: o.Health.Reasons[k]})
	}
	for _, p := range protocol.Priorities {
		o.Overdue = append(o.Overdue, KV{Key: string(p), N: o.Health.Overdue[string(p)]})
	}
	return o, nil
}

// ---- agents -------------------------------------------------------------------------------

func (c *Console) loadAgents(ctx context.Context, v *viewer, r *http.Request) (any, error) {
	return c.agentRows(ctx, v)
}

// AgentPage is one agent with its sessions and recent deliveries.
type AgentPage struct {
	Row        AgentRow
	Presence   bus.AgentPresence
	Deliveries []bus.DeliveryInfo
	Names      map[string]string
}

func (c *Console) loadAgent(ctx context.Context, v *viewer, r *http.Request) (any, error) {
	id := r.PathValue("id")
	if !v.Can(id) {
		return nil, notFound("agent", id)
	}
	a, err := c.d.Agents.Get(ctx, id)
	if err != nil {
		if protocol.ClassOf(err) == protocol.ClassUnavailable || protocol.AsError(err).HTTPStatus() == http.StatusNotFound {
			return nil, notFound("agent", id)
		}
		return nil, err
	}
	pres, err := c.d.Bus.Presence(ctx, []string{id})
	if err != nil {
		return nil, err
	}
	p := pres[id]
	depth, err := c.d.Bus.Depth(ctx, id)
	if err != nil {
		return nil, err
	}
	ds, err := c.d.Bus.RecentDeliveries(ctx, id, 50)
	if err != nil {
		return nil, err
	}
	ids := []string{a.ParentID}
	for _, d := range ds {
		ids = append(ids, d.Sender)
	}
	names := c.names(ctx, ids...)
	l := p.Liveness
	if l == "" {
		l = "offline"
	}
	return AgentPage{Row: AgentRow{Agent: a, ParentName: names[a.ParentID], Liveness: l, LastSeen: p.LastSeen, Depth: depth},
		Presence: p, Deliveries: ds, Names: names}, nil
}

// DeliveryPage is one delivery with its envelope and history.
type DeliveryPage struct {
	Info     bus.DeliveryInfo
	Envelope string
	History  []bus.LogRow
	Names    map[string]string
}

func (c *Console) loadDelivery(ctx context.Context, v *viewer, r *http.Request) (any, error) {
	info, hist, err := c.d.Bus.Delivery(ctx, r.PathValue("id"), v.AgentID, v.Admin)
	if err != nil {
		return nil, err
	}
	return DeliveryPage{Info: info, Envelope: prettyJSON(info.Envelope), History: hist, Names: c.names(ctx, info.AgentID, info.Sender)}, nil
}

// ---- conversations ------------------------------------------------------------------------

// ConversationsPage lists chats.
type ConversationsPage struct {
	Status   string
	Statuses []string
	Chats    []social.Chat
	Names    map[string]string
}

var chatStatusFilters = []string{"live", social.ChatOpening, social.ChatActive, social.ChatEnding, social.ChatEnded, social.ChatSilent, social.ChatKickoffFailed}

func (c *Console) actor(v *viewer) social.Actor {
	if v.Admin {
		return social.Actor{Admin: true}
	}
	return social.AgentActor(v.AgentID)
}

func (c *Console) loadConversations(ctx context.Context, v *viewer, r *http.Request) (any, error) {
	status := r.URL.Query().Get("status")
	chats, err := c.d.Social.ListChats(ctx, c.actor(v), social.ChatFilter{Status: status, Limit: 200})
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, ch := range chats {
		ids = append(ids, ch.SenderAgentID, ch.RecipientAgentID)
	}
	return ConversationsPage{Status: status, Statuses: chatStatusFilters, Chats: chats, Names: c.names(ctx, ids...)}, nil
}

// ConversationPage is one chat: progress, transcript, documents, reports.
type ConversationPage struct {
	Chat      social.Chat
	Turns     []TurnView
	Documents []DocView
	Reports   []relay.Report
	Names     map[string]string
	Kickoff   []Step
	EndAsked  []string // who asked to end, in order
}

// TurnView is a transcript turn with which side spoke.
type TurnView struct {
	relay.TranscriptTurn
	Side string // sender | recipient
}

// DocView is a delivered context document, parsed into sections.
type DocView struct {
	relay.Document
	Doc    *DocSection
	Anchor string
}

// Step is one stage of a progress line.
type Step struct {
	Name string
	At   time.Time
	Done bool
	Note string
}

func (c *Console) loadConversation(ctx context.Context, v *viewer, r *http.Request) (any, error) {
	id := r.PathValue("id")
	chat, err := c.d.Social.ChatTx(ctx, c.d.DB, id)
	if err != nil || !(v.Admin || chat.Participant(v.AgentID)) {
		if err != nil && protocol.CodeOf(err) != "chat_not_found" {
			return nil, err
		}
		return nil, notFound("conversation", id)
	}
	tr, err := c.d.Relay.Transcript(ctx, v.AgentID, v.Admin, chat.ConversationKey, id)
	if err != nil {
		return nil, err
	}
	docs, err := c.d.Relay.Documents(ctx, v.AgentID, v.Admin, id)
	if err != nil {
		return nil, err
	}
	reps, err := c.d.Relay.ChatReports(ctx, v.AgentID, v.Admin, id)
	if err != nil {
		return nil, err
	}
	p := ConversationPage{Chat: chat, Reports: reps, Names: c.names(ctx, chat.SenderAgentID, chat.RecipientAgentID)}
	for _, t := range tr.Turns {
		side := "recipient"
		if t.From == chat.SenderAgentID {
			side = "sender"
		}
		p.Turns = append(p.Turns, TurnView{TranscriptTurn: t, Side: side})
		for _, tok := range t.Tokens {
			if tok == string(contextdoc.TokenEnd) && !contains(p.EndAsked, t.From) {
				p.EndAsked = append(p.EndAsked, t.From)
			}
		}
	}
	for i, d := range docs {
		p.Documents = append(p.Documents, DocView{Document: d, Doc: ParseDocument(d.ContextText), Anchor: fmt.Sprintf("doc-%d", i+1)})
	}
	k := chat.Kickoff
	p.Kickoff = []Step{
		{Name: "accepted", At: chat.CreatedAt, Done: true},
		{Name: "kickoff delivered to the sender", At: k.SenderKickoffDeliveredAt, Done: !k.SenderKickoffDeliveredAt.IsZero()},
		{Name: "opener written", At: k.OpenerAcceptedAt, Done: !k.OpenerAcceptedAt.IsZero()},
		{Name: "opener delivered to the recipient", At: k.OpenerDeliveredAt, Done: !k.OpenerDeliveredAt.IsZero()},
		{Name: "live conversation established", At: k.LiveChatEstablishedAt, Done: !k.LiveChatEstablishedAt.IsZero()},
	}
	if !k.FailedAt.IsZero() {
		p.Kickoff = append(p.Kickoff, Step{Name: "kickoff failed", At: k.FailedAt, Done: true, Note: k.Reason})
	}
	return p, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// ---- worlds -------------------------------------------------------------------------------

// WorldsPage lists worlds.
type WorldsPage struct {
	Worlds []social.World
	Status string
	Names  map[string]string
}

func (c *Console) loadWorlds(ctx context.Context, v *viewer, r *http.Request) (any, error) {
	status := r.URL.Query().Get("status")
	var ws []social.World
	if v.Admin {
		l, err := c.d.Social.ListWorlds(ctx, c.actor(v), social.ListWorldsInput{Status: status, Limit: social.MaxSearchLimit, Sort: "latest"})
		if err != nil {
			return nil, err
		}
		ws = l.Worlds
	} else {
		ms, err := c.d.Social.Memberships(ctx, c.actor(v), nil)
		if err != nil {
			return nil, err
		}
		for _, m := range ms.Memberships {
			w, err := c.d.Social.GetWorld(ctx, c.actor(v), m.WorldID)
			if err != nil {
				continue // closed or hidden since
			}
			ws = append(ws, w)
		}
	}
	var owners []string
	for _, w := range ws {
		owners = append(owners, w.OwnerAgentID)
	}
	return WorldsPage{Worlds: ws, Status: status, Names: c.names(ctx, owners...)}, nil
}

// WorldPage is one world with members and pending requests.
type WorldPage struct {
	World   social.World
	Members []social.Membership
	Pending []social.PendingRequest
	Names   map[string]string
}

func (c *Console) loadWorld(ctx context.Context, v *viewer, r *http.Request) (any, error) {
	id := r.PathValue("id")
	w, err := c.d.Social.GetWorld(ctx, c.actor(v), id)
	if err != nil {
		return nil, err
	}
	if !v.Admin && w.ViewerMembership == nil && w.OwnerAgentID != v.AgentID {
		// Public worlds are visible to everyone through the API; the
		// console shows an agent only the worlds it belongs to.
		return nil, notFound("world", id)
	}
	status := ""
	if v.Admin || w.OwnerAgentID == v.AgentID || (w.ViewerMembership != nil && w.ViewerMembership.Role == social.RoleAdmin) {
		status = "all"
	}
	// An invited (not yet active) member sees the world but not its people.
	ms, err := c.d.Social.WorldMembers(ctx, c.actor(v), id, social.MemberListInput{Status: status})
	if err != nil && protocol.CodeOf(err) != "world_membership_required" {
		return nil, err
	}
	pend, err := c.d.Social.WorldPendingRequests(ctx, c.actor(v), id, 100)
	if err != nil && protocol.CodeOf(err) != "world_membership_required" {
		return nil, err
	}
	ids := []string{w.OwnerAgentID}
	for _, p := range pend {
		ids = append(ids, p.FromAgentID, p.ToAgentID)
	}
	return WorldPage{World: w, Members: ms.Members, Pending: pend, Names: c.names(ctx, ids...)}, nil
}

// ---- traces -------------------------------------------------------------------------------

// TraceSearch is the trace search form (and its refusal).
type TraceSearch struct {
	Query string
	Error string
}

func (c *Console) loadTraceSearch(ctx context.Context, v *viewer, r *http.Request) (any, error) {
	q := strings.TrimSpace(r.URL.Query().Get("q"))
	if q == "" {
		return TraceSearch{}, nil
	}
	if !protocol.ValidID(q) {
		return TraceSearch{Query: q, Error: "Enter a trace id (trc_…) or a message id."}, nil
	}
	if _, err := c.d.Bus.Trace(ctx, q, v.AgentID, v.Admin); err == nil {
		return nil, redirectTo(Prefix + "/traces/" + url.PathEscape(q))
	}
	t, err := c.d.Bus.TraceOfMessage(ctx, q, v.AgentID, v.Admin)
	if err != nil {
		if protocol.ClassOf(err) == protocol.ClassUnavailable {
			return TraceSearch{Query: q, Error: "No trace or message " + q + " that you may see."}, nil
		}
		return nil, err
	}
	return nil, redirectTo(Prefix + "/traces/" + url.PathEscape(t))
}

// TracePage is a trace's message log as a timeline.
type TracePage struct {
	TraceID string
	Rows    []TraceRow
	Total   time.Duration
	Names   map[string]string
}

// TraceRow is one log row placed on the timeline (Offset from the first
// row; Bar* are the SVG bar in a 0–1000 wide box).
type TraceRow struct {
	bus.LogRow
	Offset         time.Duration
	BarX, BarW     int
	Self           bool
	DeliveryOfMine bool
}

func (c *Console) loadTrace(ctx context.Context, v *viewer, r *http.Request) (any, error) {
	id := r.PathValue("id")
	rows, err := c.d.Bus.Trace(ctx, id, v.AgentID, v.Admin)
	if err != nil {
		return nil, err
	}
	p := TracePage{TraceID: id}
	start, end := rows[0].Timestamp, rows[0].Timestamp
	for _, row := range rows {
		if row.Timestamp.After(end) {
			end = row.Timestamp
		}
	}
	p.Total = end.Sub(start)
	span := max(p.Total, time.Millisecond)
	var ids []string
	for _, row := range rows {
		off := row.Timestamp.Sub(start)
		lat := time.Duration(row.LatencyMs) * time.Millisecond
		x := int(off * 1000 / span)
		w := max(int(lat*1000/span), 4)
		if lat > off {
			// The latency counts from acceptance, before the first row of a
			// partial view: draw it up to this row.
			w = max(int(off*1000/span), 4)
			x = 0
		} else {
			x -= int(lat * 1000 / span)
		}
		x = max(0, min(x, 996))
		w = min(w, 1000-x)
		p.Rows = append(p.Rows, TraceRow{LogRow: row, Offset: off, BarX: x, BarW: w,
			DeliveryOfMine: row.DeliveryID != "" && (v.Admin || row.To == v.AgentID)})
		ids = append(ids, row.From, row.To)
	}
	p.Names = c.names(ctx, ids...)
	return p, nil
}

// redirect is a loader's answer "go there instead".
type redirect struct{ to string }

func (r redirect) Error() string { return "redirect to " + r.to }

func redirectTo(to string) error { return redirect{to} }

// ---- dead letters -------------------------------------------------------------------------

// DeadLettersPage lists dead letters with a filter.
type DeadLettersPage struct {
	Agent, Reason string
	Letters       []DeadLetterRow
	Agents        []agent.Agent
	Names         map[string]string
}

// DeadLetterRow is a dead letter with its envelope's headline.
type DeadLetterRow struct {
	bus.DeadLetter
	From, Type, MsgID, TraceID string
}

func headline(raw json.RawMessage) (from, typ, id, trace string) {
	var e protocol.Envelope
	if json.Unmarshal(raw, &e) == nil {
		return e.From.Agent, string(e.Type), e.ID, e.TraceID
	}
	return "", "", "", ""
}

func (c *Console) loadDeadLetters(ctx context.Context, v *viewer, r *http.Request) (any, error) {
	q := r.URL.Query()
	p := DeadLettersPage{Agent: q.Get("agent"), Reason: q.Get("reason")}
	f := bus.DeadLetterFilter{AgentID: p.Agent, Reason: p.Reason, Limit: 200}
	if !v.Admin {
		f.AgentID = v.AgentID
		p.Agent = v.AgentID
	} else {
		as, err := c.d.Agents.List(ctx, agent.Filter{Limit: maxAgents})
		if err != nil {
			return nil, err
		}
		p.Agents = as
	}
	dls, err := c.d.Bus.ListDeadLetters(ctx, f)
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, d := range dls {
		row := DeadLetterRow{DeadLetter: d}
		row.From, row.Type, row.MsgID, row.TraceID = headline(d.Envelope)
		p.Letters = append(p.Letters, row)
		ids = append(ids, d.AgentID, row.From)
	}
	p.Names = c.names(ctx, ids...)
	return p, nil
}

func (c *Console) loadDeadLetter(ctx context.Context, v *viewer, r *http.Request) (any, error) {
	info, hist, err := c.d.Bus.Delivery(ctx, r.PathValue("id"), v.AgentID, v.Admin)
	if err != nil {
		return nil, err
	}
	if info.State != "dead" && info.State != "replayed" {
		return nil, notFound("dead letter", info.DeliveryID)
	}
	return DeliveryPage{Info: info, Envelope: prettyJSON(info.Envelope), History: hist, Names: c.names(ctx, info.AgentID, info.Sender)}, nil
}

func (c *Console) replay(w http.ResponseWriter, r *http.Request, v *viewer) error {
	id := r.PathValue("id")
	if r.PostForm.Get("confirm") != "yes" {
		http.Redirect(w, r, Prefix+"/dead-letters/"+url.PathEscape(id)+"/replay", http.StatusSeeOther)
		return nil
	}
	// Check visibility first so another agent's id answers 404, as the pages do.
	if _, _, err := c.d.Bus.Delivery(r.Context(), id, v.AgentID, v.Admin); err != nil {
		return err
	}
	res, err := c.d.Bus.Replay(r.Context(), v.AgentID, v.Admin, id)
	if err != nil {
		return err
	}
	c.d.Log.Info("console: dead letter replayed", "deliveryId", id, "as", res.DeliveryID, "by", v.Name)
	http.Redirect(w, r, Prefix+"/dead-letters/"+url.PathEscape(id)+"?done="+url.QueryEscape("Replayed as "+res.DeliveryID), http.StatusSeeOther)
	return nil
}

// ---- pipelines ----------------------------------------------------------------------------

var errNoPipelines = &protocol.Error{Class: protocol.ClassUnavailable, Code: "pipelines_not_configured", Status: http.StatusNotFound,
	Message: "this hub runs no pipeline engine"}

// PipelinesPage lists executions.
type PipelinesPage struct {
	Enabled    bool
	Status     string
	Statuses   []string
	Executions []*pipeline.Execution
}

var pipelineStatuses = []string{"pending", "running", "waiting_input", "completed", "failed", "partial", "cancelled"}

func (c *Console) loadPipelines(ctx context.Context, v *viewer, r *http.Request) (any, error) {
	p := PipelinesPage{Status: r.URL.Query().Get("status"), Statuses: pipelineStatuses}
	eng := c.pipelines()
	if eng == nil {
		return p, nil
	}
	p.Enabled = true
	xs, err := eng.List(ctx, pipeline.ListFilter{Owner: v.Owner(), Status: pipeline.Status(p.Status), Limit: 200})
	if err != nil {
		return nil, err
	}
	p.Executions = xs
	return p, nil
}

// PipelinePage is one execution: its DAG, steps, events and controls.
type PipelinePage struct {
	X       *pipeline.Execution
	DAG     DAG
	Steps   []StepView
	Events  []EventView
	Input   string
	Waiting []string
}

// StepView is a step with its JSON pretty-printed.
type StepView struct {
	pipeline.StepState
	Input, Output, Error string
}

// EventView is one event-log line.
type EventView struct {
	pipeline.Event
	Line string
}

func (c *Console) loadPipeline(ctx context.Context, v *viewer, r *http.Request) (any, error) {
	eng := c.pipelines()
	if eng == nil {
		return nil, errNoPipelines
	}
	id := r.PathValue("id")
	x, err := eng.Get(ctx, v.Owner(), id)
	if err != nil {
		return nil, err
	}
	evs, err := eng.Events(ctx, v.Owner(), id, 0, 1000)
	if err != nil {
		return nil, err
	}
	p := PipelinePage{X: x, DAG: layoutDAG(x.Steps), Input: prettyJSON(x.Input)}
	for _, s := range x.Steps {
		sv := StepView{StepState: s, Input: prettyJSON(s.Input), Output: prettyJSON(s.Output)}
		if s.Error != nil {
			b, _ := json.Marshal(s.Error)
			sv.Error = prettyJSON(b)
		}
		p.Steps = append(p.Steps, sv)
		if s.Status == pipeline.StatusWaitingInput {
			p.Waiting = append(p.Waiting, s.SkillID)
		}
	}
	for _, e := range evs {
		p.Events = append(p.Events, EventView{Event: e, Line: e.Line()})
	}
	return p, nil
}

func (c *Console) cancelPipeline(w http.ResponseWriter, r *http.Request, v *viewer) error {
	eng := c.pipelines()
	if eng == nil {
		return errNoPipelines
	}
	id := r.PathValue("id")
	if r.PostForm.Get("confirm") != "yes" {
		http.Redirect(w, r, Prefix+"/pipelines/"+url.PathEscape(id)+"/cancel", http.StatusSeeOther)
		return nil
	}
	reason := strings.TrimSpace(r.PostForm.Get("reason"))
	if reason == "" {
		reason = "cancelled from the console by " + v.Name
	}
	if len(reason) > 500 {
		return protocol.Invalid("reason", "at most 500 characters")
	}
	if _, err := eng.Cancel(r.Context(), v.Owner(), id, reason); err != nil {
		return err
	}
	http.Redirect(w, r, Prefix+"/pipelines/"+url.PathEscape(id)+"?done=Cancelled", http.StatusSeeOther)
	return nil
}

func (c *Console) resumePipeline(w http.ResponseWriter, r *http.Request, v *viewer) error {
	eng := c.pipelines()
	if eng == nil {
		return errNoPipelines
	}
	id := r.PathValue("id")
	data := strings.TrimSpace(r.PostForm.Get("data"))
	if data != "" && !json.Valid([]byte(data)) {
		return protocol.Invalid("data", "must be JSON (for example {\"approved\": true})")
	}
	_, err := eng.Resume(r.Context(), pipeline.ResumeRequest{Owner: v.Owner(), ExecutionID: id, SkillID: r.PostForm.Get("skill"), Data: json.RawMessage(data)})
	if err != nil {
		return err
	}
	http.Redirect(w, r, Prefix+"/pipelines/"+url.PathEscape(id)+"?done="+url.QueryEscape("Resumed "+r.PostForm.Get("skill")), http.StatusSeeOther)
	return nil
}

// ---- telegram -----------------------------------------------------------------------------

// TelegramPage lists bots and reply-end conversations.
type TelegramPage struct {
	BotsConfigured  bool
	ControlsEnabled bool
	Bots            []TelegramBot
	Conversations   []replyctl.State
	Names           map[string]string
}

func (c *Console) loadTelegram(ctx context.Context, v *viewer, r *http.Request) (any, error) {
	var p TelegramPage
	var botIDs []string // nil: every bot (the admin)
	if b := c.bots(); b != nil {
		p.BotsConfigured = true
		bots, err := b.ConsoleBots(ctx, v.Owner())
		if err != nil {
			return nil, err
		}
		p.Bots = bots
		var agents []string
		for _, bot := range bots {
			agents = append(agents, bot.AgentID)
		}
		p.Names = c.names(ctx, agents...)
	}
	if !v.Admin {
		botIDs = []string{}
		for _, b := range p.Bots {
			botIDs = append(botIDs, b.ID)
		}
	}
	if c.d.Replyctl != nil {
		p.ControlsEnabled = true
		convs, err := c.d.Replyctl.Conversations(ctx, botIDs, 200)
		if err != nil {
			return nil, err
		}
		p.Conversations = convs
	}
	return p, nil
}

// ---- helpers ------------------------------------------------------------------------------

func prettyJSON(raw []byte) string {
	if len(raw) == 0 {
		return ""
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return string(raw)
	}
	return string(b)
}

func isRedirect(err error) (string, bool) {
	var r redirect
	if errors.As(err, &r) {
		return r.to, true
	}
	return "", false
}
