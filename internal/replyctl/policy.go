package replyctl

import (
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// Choice is a conversation's last recorded outcome.
type Choice string

// The choices. ChoiceNone means nothing has been recorded (no controls shown
// yet, or the live reply still awaits a choice with nothing before it).
const (
	ChoiceNone       Choice = "none"
	ChoiceContinue   Choice = "continue"
	ChoiceStop       Choice = "stop"
	ChoiceSuperseded Choice = "superseded_by_message"
	ChoiceExpired    Choice = "expired"
)

// Source says how a choice was made.
type Source string

// The sources; SourceNone goes with ChoiceNone.
const (
	SourceNone    Source = ""
	SourceButton  Source = "button"
	SourceTyped   Source = "typed"
	SourceTimeout Source = "timeout"
)

// Decision is the policy a runtime reads before it writes its next turn or a
// proactive message. The typed fields are the contract; Hint is a one-line
// instruction an LLM runtime may paste into its prompt.
type Decision struct {
	Conversation     string    `json:"conversation"`
	LastChoice       Choice    `json:"lastChoice"`
	Source           Source    `json:"source,omitempty"`
	At               time.Time `json:"at,omitzero"`
	ReplyID          string    `json:"replyId,omitempty"`
	MessageID        int64     `json:"messageId,omitempty"`
	FollowUpAllowed  bool      `json:"followUpAllowed"`
	ProactiveAllowed bool      `json:"proactiveAllowed"`
	Closed           bool      `json:"closed"`
	Hint             string    `json:"hint"`
}

// decisionRow is one row of the decision table documented in doc.go.
type decisionRow struct {
	followUp, proactive, closed bool
	hint                        string
}

var decisionTable = map[Choice]decisionRow{
	ChoiceNone: {true, false, false,
		"No choice recorded yet: answer normally; do not start unprompted follow-ups."},
	ChoiceContinue: {true, true, false,
		"The user chose Continue: you may follow up and keep the thread going."},
	ChoiceStop: {false, false, true,
		"The user chose Stop: the thread is closed; do not follow up or send unprompted messages; answer only new user messages."},
	ChoiceSuperseded: {true, false, false,
		"The user replied by typing: answer their message; do not send unprompted follow-ups."},
	ChoiceExpired: {true, false, false,
		"The user did not choose before the controls expired: answer normally; do not start unprompted follow-ups."},
}

// Decide applies the decision table to a state as of now, treating a choice
// or live keyboard past its expiry as expired even before the sweeper has
// written that down.
func Decide(st State, now time.Time) Decision {
	st = st.asOf(now)
	c := st.LastChoice
	row, ok := decisionTable[c]
	if !ok {
		c, row = ChoiceNone, decisionTable[ChoiceNone]
	}
	d := Decision{
		LastChoice:       c,
		Source:           st.Source,
		At:               st.At,
		ReplyID:          st.ReplyID,
		MessageID:        st.MessageID,
		FollowUpAllowed:  row.followUp,
		ProactiveAllowed: row.proactive,
		Closed:           row.closed,
		Hint:             row.hint,
	}
	if st.Key.BotID != "" {
		d.Conversation = st.Key.String()
	}
	if c == ChoiceNone {
		d.Source, d.At, d.ReplyID, d.MessageID = SourceNone, time.Time{}, "", 0
	}
	return d
}

// Scope is a bot's setting for which chats get controls.
type Scope string

// The scopes.
const (
	ScopeOff   Scope = "off"
	ScopeDM    Scope = "dm"
	ScopeGroup Scope = "group"
	ScopeAll   Scope = "all"
)

// ParseScope validates a scope setting; "" means ScopeAll.
func ParseScope(s string) (Scope, error) {
	switch Scope(s) {
	case "":
		return ScopeAll, nil
	case ScopeOff, ScopeDM, ScopeGroup, ScopeAll:
		return Scope(s), nil
	}
	return "", protocol.Invalid("scope", "must be one of off, dm, group, all")
}

// ChatControls is a chat's own /controls setting.
type ChatControls string

// The chat settings; ControlsDefault defers to the bot's scope.
const (
	ControlsDefault ChatControls = ""
	ControlsOn      ChatControls = "on"
	ControlsOff     ChatControls = "off"
)

// Reasons ShouldAttach gives for its answer, for logs and metrics.
const (
	ReasonAttach         = "attach"
	ReasonReplyOptOut    = "reply_opt_out"
	ReasonBotOff         = "bot_scope_off"
	ReasonChatOff        = "chat_opt_out"
	ReasonChatOn         = "chat_opt_in"
	ReasonOutOfScope     = "out_of_scope"
	ReasonUnknownChatKey = "unknown_chat_kind"
)

// ShouldAttach decides whether a reply carries controls:
//
//  1. a reply that opts out (controls: false, e.g. it has its own keyboard) → no;
//  2. bot scope off → no (the operator's switch beats everything);
//  3. the chat said /controls off → no; /controls on → yes;
//  4. otherwise the scope decides: dm covers direct chats, group covers
//     groups and channels, all covers both.
func ShouldAttach(scope Scope, kind ChatKind, chat ChatControls, replyWants bool) (bool, string) {
	if !replyWants {
		return false, ReasonReplyOptOut
	}
	if scope == "" {
		scope = ScopeAll
	}
	if scope == ScopeOff {
		return false, ReasonBotOff
	}
	switch chat {
	case ControlsOff:
		return false, ReasonChatOff
	case ControlsOn:
		return true, ReasonChatOn
	}
	var in bool
	switch kind {
	case KindDirect:
		in = scope == ScopeDM || scope == ScopeAll
	case KindGroup, KindChannel:
		in = scope == ScopeGroup || scope == ScopeAll
	default:
		return false, ReasonUnknownChatKey
	}
	if !in {
		return false, ReasonOutOfScope
	}
	return true, ReasonAttach
}
