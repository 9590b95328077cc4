package mcpserver

import (
	"context"
	"encoding/json"
	"time"

	"github.com/switchboard-hub/switchboard/internal/bus"
	"github.com/switchboard-hub/switchboard/internal/pipeline"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/social"
)

// RequestChatInput asks another agent for a live conversation.
type RequestChatInput struct {
	ToAgentID      string `json:"toAgentId,omitempty" jsonschema:"the peer's agent id (or give identity, or displayName with agentCode)"`
	Identity       string `json:"identity,omitempty" jsonschema:"the peer's public identity Name#CODE"`
	DisplayName    string `json:"displayName,omitempty" jsonschema:"the peer's display name (with agentCode)"`
	AgentCode      string `json:"agentCode,omitempty" jsonschema:"the peer's identity code (with displayName)"`
	OpeningMessage string `json:"openingMessage" jsonschema:"a brief for YOUR OWN conversation agent, not a message to the peer: how to open, what this chat should find out, and when it has achieved enough to end. Write it with your user."`
	WorldID        string `json:"worldId,omitempty" jsonschema:"the world the chat belongs to, when you found the peer there"`
	IdempotencyKey string `json:"idempotencyKey,omitempty" jsonschema:"repeat-safe key: a retry with the same key returns the same request"`
}

// ChatInboxInput lists or answers chat requests.
type ChatInboxInput struct {
	Action        string            `json:"action" jsonschema:"list: your chat requests and chats; accept or reject: answer an inbound request (needs chatRequestId)"`
	ChatRequestID string            `json:"chatRequestId,omitempty" jsonschema:"the request to accept or reject"`
	Filters       *ChatInboxFilters `json:"filters,omitempty" jsonschema:"list: which requests and chats to show"`
	Direction     string            `json:"direction,omitempty" jsonschema:"same as filters.direction (older callers)"`
	Status        string            `json:"status,omitempty" jsonschema:"same as filters.status (older callers)"`
	Limit         int               `json:"limit,omitempty" jsonschema:"list: at most this many (default 20)"`
}

// ChatInboxFilters narrow chat_inbox's list, as the seed's skills write them
// (`chat_inbox(action=list, filters.direction=inbound)`).
type ChatInboxFilters struct {
	Direction     string `json:"direction,omitempty" jsonschema:"inbound or outbound"`
	Status        string `json:"status,omitempty" jsonschema:"pending, accepted, rejected, expired, closed"`
	WorldID       string `json:"worldId,omitempty" jsonschema:"only requests in this world"`
	ChatRequestID string `json:"chatRequestId,omitempty" jsonschema:"only this request"`
}

// AccountInput views or updates the agent's account.
type AccountInput struct {
	Action         string  `json:"action" jsonschema:"view, update_identity (displayName), update_profile (humanProfile, agentProfile, headline) or update_chat_policy (chatPolicy, contactPolicy, visibilityMode)"`
	DisplayName    *string `json:"displayName,omitempty" jsonschema:"update_identity: the new display name"`
	HumanProfile   *string `json:"humanProfile,omitempty" jsonschema:"update_profile: who your user is, in their words"`
	AgentProfile   *string `json:"agentProfile,omitempty" jsonschema:"update_profile: what you (the agent) do"`
	Headline       *string `json:"headline,omitempty" jsonschema:"update_profile: one line shown in search results"`
	ChatPolicy     *string `json:"chatPolicy,omitempty" jsonschema:"update_chat_policy: how your conversation agent should behave in chats"`
	ContactPolicy  *string `json:"contactPolicy,omitempty" jsonschema:"update_chat_policy: who may send you chat requests"`
	VisibilityMode *string `json:"visibilityMode,omitempty" jsonschema:"update_chat_policy: who can find you"`
}

// WorldsInput browses and manages world membership.
type WorldsInput struct {
	Action                 string `json:"action" jsonschema:"list, get, join, leave, update_profile, candidates (people to talk to in a world) or search"`
	WorldID                string `json:"worldId,omitempty" jsonschema:"the world (get, join, leave, update_profile, candidates)"`
	Query                  string `json:"query,omitempty" jsonschema:"list/search: words to look for"`
	Scope                  string `json:"scope,omitempty" jsonschema:"search: worlds, world_members, people or mixed"`
	ParticipantContextText string `json:"participantContextText,omitempty" jsonschema:"join/update_profile: who you are in this world and what you look for"`
	Subscribed             *bool  `json:"subscribed,omitempty" jsonschema:"update_profile: receive the world's broadcasts"`
	Joined                 bool   `json:"joined,omitempty" jsonschema:"list: only worlds you joined"`
	Limit                  int    `json:"limit,omitempty" jsonschema:"at most this many results"`
	Page                   int    `json:"page,omitempty" jsonschema:"list/search: page number from 1"`
}

// SendMessageInput sends an envelope on the bus.
type SendMessageInput struct {
	ToAgentID string          `json:"toAgentId" jsonschema:"the recipient agent id"`
	Type      string          `json:"type,omitempty" jsonschema:"request (default) or notification"`
	Action    string          `json:"action,omitempty" jsonschema:"request: what you ask the recipient to do"`
	Params    json.RawMessage `json:"params,omitempty" jsonschema:"request: a JSON object with the details"`
	Event     string          `json:"event,omitempty" jsonschema:"notification: the event name"`
	Message   string          `json:"message,omitempty" jsonschema:"notification: the text"`
	Priority  string          `json:"priority,omitempty" jsonschema:"low, normal (default), high or critical"`
	TTL       int             `json:"ttl,omitempty" jsonschema:"seconds before an undelivered message expires (default 1 hour)"`
}

// InboxInput claims or acknowledges deliveries.
type InboxInput struct {
	Action      string `json:"action" jsonschema:"claim: take up to limit deliveries (leased to you); ack: mark one processed (needs deliveryId)"`
	Limit       int    `json:"limit,omitempty" jsonschema:"claim: at most this many (default 10)"`
	WaitSeconds int    `json:"waitSeconds,omitempty" jsonschema:"claim: wait up to this long (max 30) for something to arrive"`
	DeliveryID  string `json:"deliveryId,omitempty" jsonschema:"ack: the delivery you processed"`
	Attempt     int    `json:"attempt,omitempty" jsonschema:"ack: the attempt number you claimed (0 = current lease)"`
}

// PipelineRunInput starts a pipeline.
type PipelineRunInput struct {
	Pipeline       string          `json:"pipeline" jsonschema:"the pipeline definition (YAML or JSON text)"`
	Input          json.RawMessage `json:"input,omitempty" jsonschema:"the execution input: a JSON object"`
	IdempotencyKey string          `json:"idempotencyKey,omitempty" jsonschema:"repeat-safe key"`
}

// PipelineStatusInput asks about an execution.
type PipelineStatusInput struct {
	ExecutionID string `json:"executionId" jsonschema:"the execution id pipeline_run returned"`
}

// ReportInput files a report to the agent's owner.
type ReportInput struct {
	ReportText string `json:"reportText" jsonschema:"a short, honest report for your owner: what happened and what, if anything, they should do"`
	Source     string `json:"source" jsonschema:"what the report is about (e.g. the chatRequestId or task); one report per source"`
	Announce   *bool  `json:"announce,omitempty" jsonschema:"deliver it to the owner now (default true)"`
}

func (s *Server) defineTools() []*toolDef {
	return []*toolDef{
		define("request_chat", "Ask another agent for a live agent-to-agent conversation. The hub runs the chat with your own conversation agent once the peer accepts. openingMessage is a brief for YOUR conversation agent (goal, tone, when to stop), not a message to the peer.",
			nil, s.requestChat),
		define("chat_inbox", "List your chat requests and chats, or accept/reject an inbound request.",
			map[string][]string{"action": {"list", "accept", "reject"}}, s.chatInbox),
		define("account", "View your account (identity, profiles, policies, readiness) or update your identity, profile or chat policy.",
			map[string][]string{"action": {"view", "update_identity", "update_profile", "update_chat_policy"}}, s.account),
		define("worlds", "Browse worlds (communities), join or leave them, update your profile in one, find candidates to talk to, or search worlds and people.",
			map[string][]string{"action": {"list", "get", "join", "leave", "update_profile", "candidates", "search"}}, s.worlds),
		define("send_message", "Send a request or notification to another agent on the team bus. Routing rules apply (command → pm → worker).",
			nil, s.sendMessage),
		define("inbox", "Claim deliveries waiting for you (requests, answers, notifications) or acknowledge one you processed.",
			map[string][]string{"action": {"claim", "ack"}}, s.inbox),
		define("pipeline_run", "Start a skill pipeline from its definition and input; returns the execution to follow with pipeline_status.",
			nil, s.pipelineRun),
		define("pipeline_status", "The state of a pipeline execution: status, current skill and each step.",
			nil, s.pipelineStatus),
		define("report_to_owner", "File a short report for your owner (one per source); it reaches them on their channel.",
			nil, s.report),
	}
}

func (s *Server) requestChat(ctx context.Context, agentID string, in RequestChatInput) (Result, error) {
	if s.d.Social == nil {
		return Result{}, unavailable("the social layer")
	}
	if in.ToAgentID == "" && in.Identity == "" && (in.DisplayName == "" || in.AgentCode == "") {
		return Result{}, &protocol.Error{Class: protocol.ClassInvalid, Code: "target_required",
			Message:       "name the peer: toAgentId, identity (Name#CODE), or displayName with agentCode",
			FieldErrors:   map[string]string{"toAgentId": "required unless identity or displayName+agentCode is given"},
			MissingFields: []string{"toAgentId"}, NextAction: "find the peer with worlds (action candidates or search), then call request_chat again", NextTool: "worlds"}
	}
	out, err := s.d.Social.CreateRequest(ctx, social.AgentActor(agentID), social.CreateRequestInput{FromAgentID: agentID, ToAgentID: in.ToAgentID,
		Identity: in.Identity, DisplayName: in.DisplayName, AgentCode: in.AgentCode, OpeningMessage: in.OpeningMessage, WorldID: in.WorldID, IdempotencyKey: in.IdempotencyKey})
	if err != nil {
		return Result{}, err
	}
	return Result{Status: out.Status, NextAction: orDefault(out.NextAction, "wait for the peer to accept; check chat_inbox"), NextTool: "chat_inbox", Result: out}, nil
}

func (s *Server) chatInbox(ctx context.Context, agentID string, in ChatInboxInput) (Result, error) {
	if s.d.Social == nil {
		return Result{}, unavailable("the social layer")
	}
	actor := social.AgentActor(agentID)
	switch in.Action {
	case "accept", "reject":
		if in.ChatRequestID == "" {
			return Result{}, missing("chatRequestId", "the request to "+in.Action+" (list shows pending inbound requests)")
		}
		var out social.RequestView
		var err error
		if in.Action == "accept" {
			out, err = s.d.Social.AcceptRequest(ctx, actor, in.ChatRequestID)
		} else {
			out, err = s.d.Social.RejectRequest(ctx, actor, in.ChatRequestID)
		}
		if err != nil {
			return Result{}, err
		}
		return Result{Status: out.Status, NextAction: orDefault(out.NextAction, "nothing more to do for this request"), Result: out}, nil
	default:
		limit := in.Limit
		if limit == 0 {
			limit = 20
		}
		f := social.InboxFilters{AgentID: agentID, Direction: in.Direction, Status: in.Status, Limit: limit}
		if in.Filters != nil {
			f.Direction = orDefault(in.Filters.Direction, f.Direction)
			f.Status = orDefault(in.Filters.Status, f.Status)
			f.WorldID, f.ChatRequestID = in.Filters.WorldID, in.Filters.ChatRequestID
		}
		out, err := s.d.Social.Inbox(ctx, actor, f)
		if err != nil {
			return Result{}, err
		}
		return Result{Status: "ok", NextAction: "accept or reject pending inbound requests with chat_inbox; wait for outbound ones", Result: out}, nil
	}
}

func (s *Server) account(ctx context.Context, agentID string, in AccountInput) (Result, error) {
	if s.d.Social == nil {
		return Result{}, unavailable("the social layer")
	}
	actor := social.AgentActor(agentID)
	if in.Action == "view" {
		out, err := s.d.Social.Account(ctx, actor)
		if err != nil {
			return Result{}, err
		}
		return Result{Status: "ok", NextAction: "complete anything the readiness section lists, then find peers with worlds", NextTool: "worlds", Result: out}, nil
	}
	out, err := s.d.Social.UpdateAccount(ctx, actor, social.AccountUpdate{Action: in.Action, AgentID: agentID, DisplayName: in.DisplayName,
		HumanProfile: in.HumanProfile, AgentProfile: in.AgentProfile, Headline: in.Headline, ChatPolicy: in.ChatPolicy,
		ContactPolicy: in.ContactPolicy, VisibilityMode: in.VisibilityMode})
	if err != nil {
		return Result{}, err
	}
	return Result{Status: "updated", NextAction: "view the account to check readiness", NextTool: "account", Result: out}, nil
}

func (s *Server) worlds(ctx context.Context, agentID string, in WorldsInput) (Result, error) {
	if s.d.Social == nil {
		return Result{}, unavailable("the social layer")
	}
	actor := social.AgentActor(agentID)
	needWorld := func() error {
		if in.WorldID == "" {
			return missing("worldId", "the world to "+in.Action+" (list or search shows world ids)")
		}
		return nil
	}
	switch in.Action {
	case "list":
		out, err := s.d.Social.ListWorlds(ctx, actor, social.ListWorldsInput{Query: in.Query, Joined: in.Joined, Limit: in.Limit, Page: in.Page})
		if err != nil {
			return Result{}, err
		}
		return Result{Status: "ok", NextAction: "get a world for its rules, then join it", NextTool: "worlds", Result: out}, nil
	case "search":
		out, err := s.d.Social.Search(ctx, actor, social.SearchInput{AgentID: agentID, Scope: in.Scope, Query: in.Query, Limit: in.Limit, Page: in.Page, WorldID: in.WorldID})
		if err != nil {
			return Result{}, err
		}
		return Result{Status: "ok", NextAction: "request a chat with a person you found, or join a world you found", NextTool: "request_chat", Result: out}, nil
	}
	if err := needWorld(); err != nil {
		return Result{}, err
	}
	switch in.Action {
	case "get":
		out, err := s.d.Social.GetWorld(ctx, actor, in.WorldID)
		if err != nil {
			return Result{}, err
		}
		return Result{Status: "ok", NextAction: "join the world with a participantContextText that fits its rules", NextTool: "worlds", Result: out}, nil
	case "join":
		out, err := s.d.Social.Join(ctx, actor, in.WorldID, social.JoinInput{AgentID: agentID, ParticipantContextText: in.ParticipantContextText})
		if err != nil {
			return Result{}, err
		}
		return Result{Status: "joined", NextAction: "look at candidates in this world", NextTool: "worlds", Result: out}, nil
	case "leave":
		out, err := s.d.Social.Leave(ctx, actor, in.WorldID)
		if err != nil {
			return Result{}, err
		}
		return Result{Status: "left", NextAction: "nothing more to do", Result: out}, nil
	case "update_profile":
		upd := social.MembershipUpdate{AgentID: agentID, Subscribed: in.Subscribed}
		if in.ParticipantContextText != "" {
			upd.ParticipantContextText = &in.ParticipantContextText
		}
		out, err := s.d.Social.UpdateMembership(ctx, actor, in.WorldID, upd)
		if err != nil {
			return Result{}, err
		}
		return Result{Status: "updated", NextAction: "look at candidates in this world", NextTool: "worlds", Result: out}, nil
	default: // candidates
		out, err := s.d.Social.Candidates(ctx, actor, in.WorldID, in.Limit)
		if err != nil {
			return Result{}, err
		}
		return Result{Status: "ok", NextAction: "request a chat with a candidate that fits what your user wants", NextTool: "request_chat", Result: out}, nil
	}
}

// SendResult is the answer of send_message.
type SendResult struct {
	ID         string `json:"id"`
	TraceID    string `json:"traceId"`
	Deliveries int    `json:"deliveries"`
	Duplicate  bool   `json:"duplicate,omitempty"`
}

func (s *Server) sendMessage(ctx context.Context, agentID string, in SendMessageInput) (Result, error) {
	if s.d.Bus == nil {
		return Result{}, unavailable("the bus")
	}
	env := &protocol.Envelope{From: protocol.Address{Agent: agentID}, To: protocol.Address{Agent: in.ToAgentID},
		Priority: protocol.Priority(in.Priority), TTL: in.TTL}
	var payload any
	switch in.Type {
	case "", "request":
		if in.Action == "" {
			return Result{}, missing("action", "what you ask the recipient to do")
		}
		env.Type = protocol.TypeRequest
		payload = protocol.RequestPayload{Action: in.Action, Params: in.Params}
	case "notification":
		if in.Event == "" {
			return Result{}, missing("event", "the notification's event name")
		}
		env.Type = protocol.TypeNotification
		payload = protocol.NotificationPayload{Event: in.Event, Message: in.Message}
	default:
		return Result{}, &protocol.Error{Class: protocol.ClassInvalid, Code: "invalid_type", Message: "type must be request or notification",
			FieldErrors: map[string]string{"type": "request or notification"}}
	}
	env.Payload, _ = json.Marshal(payload)
	if err := s.d.Bus.Prepare(env, ""); err != nil {
		return Result{}, err
	}
	res, err := s.d.Bus.Send(ctx, env)
	if err != nil {
		return Result{}, err
	}
	next := "the recipient gets it in its inbox"
	if env.Type == protocol.TypeRequest {
		next = "claim your inbox later for the response (it answers with requestId " + env.ID + ")"
	}
	return Result{Status: "sent", NextAction: next, NextTool: "inbox", Result: SendResult{ID: res.ID, TraceID: res.TraceID, Deliveries: res.Deliveries, Duplicate: res.Duplicate}}, nil
}

// ClaimedDelivery is a delivery as inbox claim shows it.
type ClaimedDelivery struct {
	DeliveryID string             `json:"deliveryId"`
	Attempt    int                `json:"attempt"`
	LeaseUntil time.Time          `json:"leaseUntil"`
	Envelope   *protocol.Envelope `json:"envelope"`
}

func (s *Server) inbox(ctx context.Context, agentID string, in InboxInput) (Result, error) {
	if s.d.Bus == nil {
		return Result{}, unavailable("the bus")
	}
	if in.Action == "ack" {
		if in.DeliveryID == "" {
			return Result{}, missing("deliveryId", "the delivery you processed (from claim)")
		}
		out, err := s.d.Bus.Ack(ctx, agentID, in.DeliveryID, bus.SettleOptions{Attempt: in.Attempt})
		if err != nil {
			return Result{}, err
		}
		return Result{Status: "acked", NextAction: "claim the next delivery", NextTool: "inbox", Result: out}, nil
	}
	wait := time.Duration(min(max(in.WaitSeconds, 0), 30)) * time.Second
	ds, err := s.d.Bus.Receive(ctx, agentID, bus.ClaimOptions{Limit: in.Limit}, wait)
	if err != nil {
		return Result{}, err
	}
	out := make([]ClaimedDelivery, 0, len(ds))
	for _, d := range ds {
		env, _ := d.Decode()
		out = append(out, ClaimedDelivery{DeliveryID: d.DeliveryID, Attempt: d.Attempt, LeaseUntil: d.LeaseUntil, Envelope: env})
	}
	if len(out) == 0 {
		return Result{Status: "empty", NextAction: "nothing waits for you; claim again later", NextTool: "inbox", Result: out}, nil
	}
	return Result{Status: "claimed", NextAction: "process each delivery, answer requests with send_message-style responses, then ack each with its deliveryId and attempt", NextTool: "inbox", Result: out}, nil
}

func (s *Server) pipelineRun(ctx context.Context, agentID string, in PipelineRunInput) (Result, error) {
	if s.d.Pipelines == nil {
		return Result{}, unavailable("pipelines")
	}
	ex, err := s.d.Pipelines.Submit(ctx, pipeline.SubmitRequest{Owner: agentID, Pipeline: []byte(in.Pipeline), Input: in.Input, IdempotencyKey: in.IdempotencyKey})
	if err != nil {
		return Result{}, err
	}
	return Result{Status: string(ex.Status), NextAction: "follow it with pipeline_status {executionId: " + ex.ID + "}", NextTool: "pipeline_status", Result: ex}, nil
}

func (s *Server) pipelineStatus(ctx context.Context, agentID string, in PipelineStatusInput) (Result, error) {
	if s.d.Pipelines == nil {
		return Result{}, unavailable("pipelines")
	}
	ex, err := s.d.Pipelines.Get(ctx, agentID, in.ExecutionID)
	if err != nil {
		return Result{}, err
	}
	next := "check again later"
	switch ex.Status {
	case pipeline.StatusCompleted:
		next = "read the outputs of the steps"
	case pipeline.StatusFailed, pipeline.StatusCancelled:
		next = "read the failed step's error; fix the input or definition and run it again"
	}
	return Result{Status: string(ex.Status), NextAction: next, NextTool: "pipeline_status", Result: ex}, nil
}

func (s *Server) report(ctx context.Context, agentID string, in ReportInput) (Result, error) {
	if s.d.Relay == nil {
		return Result{}, unavailable("owner reports")
	}
	announce := in.Announce == nil || *in.Announce
	out, err := s.d.Relay.FileReport(ctx, agentID, in.Source, in.ReportText, announce)
	if err != nil {
		return Result{}, err
	}
	status := "filed"
	if out.AlreadyFiled {
		status = "already_filed"
	}
	return Result{Status: status, NextAction: "nothing more to do; the owner has it", Result: out}, nil
}

func missing(field, what string) error {
	return &protocol.Error{Class: protocol.ClassInvalid, Code: "missing_fields", Message: field + " is required: " + what,
		FieldErrors: map[string]string{field: "required"}, MissingFields: []string{field}}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
