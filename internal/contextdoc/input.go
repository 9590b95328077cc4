package contextdoc

import (
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// Role says which delivery a document is rendered for; it decides which
// top-level sections appear.
type Role string

const (
	// RoleSenderKickoff is the sender's first delivery after acceptance:
	// Background, Policy and a Task Instruction to write the opener.
	RoleSenderKickoff Role = "sender_kickoff"
	// RoleRecipient is the recipient's first delivery, carrying the
	// sender's opener: Background, Policy and Live Turn.
	RoleRecipient Role = "recipient"
	// RoleLiveTurn is any later delivery to a side that already has its
	// baseline: Live Turn only (earlier queued turns plus the marker for the
	// current one).
	RoleLiveTurn Role = "live_turn"
)

// Mode is the conversation scope, as in the chat request record.
type Mode string

const (
	// ModeDirect is a conversation between two identities outside any world.
	ModeDirect Mode = "direct"
	// ModeWorld is a conversation inside a world, under its rules.
	ModeWorld Mode = "world"
)

// Origin sources that change the document's wording. Other values are shown
// as given.
const (
	OriginChatRequest    = "chat_request"
	OriginWorldBroadcast = "world_broadcast"
)

// Broadcast reply policies and audiences, as in the world's broadcast settings.
const (
	ReplyPolicyZero      = "zero"
	ReplyPolicyAtMostOne = "at_most_one"

	AudienceMembers        = "members"
	AudienceAdmins         = "admins"
	AudienceAdminsAndOwner = "admins_and_owner"
)

// Input is everything a context document says, as plain data. Free-text
// fields may hold anything (they are cleaned and fenced); identifiers are
// shown inline.
type Input struct {
	Role Role

	// IntentID is the chat request id the conversation belongs to.
	IntentID string
	// ConversationKey identifies the conversation; it is the `source` of an
	// owner report, so it is required when Policy.ReportingRequired is set.
	ConversationKey string
	Mode            Mode
	// World is required in world mode and must be empty in direct mode.
	World World

	// Brief is the chat request's openingMessage (for a broadcast, the
	// announcement text). The sender always sees it; the recipient only for
	// broadcasts.
	Brief  string
	Origin Origin

	You  Participant
	Peer Participant

	Policy Policy

	// QueuedTurns are earlier peer turns, oldest first, delivered together
	// with the current one (which travels as the raw delivery text).
	QueuedTurns []string
}

// World is the world a world-mode conversation runs in.
type World struct {
	ID      string
	Name    string
	Context string // worldContextText: the world's rules and setting
}

// Origin says where the intent came from when it is more than a plain chat
// request.
type Origin struct {
	// Source defaults to OriginChatRequest, or OriginWorldBroadcast when
	// Broadcast is set.
	Source    string
	Broadcast *Broadcast
	// Context holds further key: value facts shown under
	// `## Additional Intent Context`, in order.
	Context []Field
}

// Broadcast describes a world broadcast that fanned out as this intent.
type Broadcast struct {
	ID          string
	Audience    string    // AudienceMembers, AudienceAdmins or AudienceAdminsAndOwner
	ReplyPolicy string    // ReplyPolicyZero or ReplyPolicyAtMostOne
	PublishedBy string    // publisher identity, Name#CODE
	PublishedAt time.Time // zero when unknown
}

// Field is one key: value fact.
type Field struct {
	Key   string
	Value string
}

// Participant is one side of the conversation, seen from the viewer.
type Participant struct {
	Identity      string // public identity, Name#CODE
	GlobalProfile string // the account's agent profile
	WorldProfile  string // participantContextText of the world membership (world mode)
}

// Policy is the ending, reporting and DSL policy of the conversation
// (the world's policy, or the hub's defaults in direct mode).
type Policy struct {
	// MaxTurns caps the turns of the whole conversation, both sides
	// counted; 0 means no cap.
	MaxTurns int
	// IdleTimeout ends the conversation when nobody replies for that long;
	// 0 means none.
	IdleTimeout time.Duration
	// ReportingRequired asks each side for an owner report at the end.
	ReportingRequired bool
	// DSL enables [[like]] and [[dislike]] (the end token is always on).
	DSL bool
}

// Validate checks that the input describes a document the package can
// render. It returns a *protocol.Error (E003) listing every problem; these
// are programming errors of the caller, never caused by peer text.
func (in Input) Validate() error {
	fe := protocol.FieldErrors{}
	switch in.Role {
	case RoleSenderKickoff, RoleRecipient, RoleLiveTurn:
	default:
		fe.Add("role", "must be sender_kickoff, recipient or live_turn")
	}
	if in.Role == RoleSenderKickoff && len(in.QueuedTurns) > 0 {
		fe.Add("queuedTurns", "must be empty for a sender kickoff, which has no live turn")
	}
	if in.Role == RoleLiveTurn {
		// A live-turn document renders only the turns.
		return fe.Err()
	}

	if inline(in.IntentID) == "" {
		fe.Add("intentId", "is required")
	}
	switch in.Mode {
	case ModeDirect:
		if in.World != (World{}) {
			fe.Add("world", "must be empty in direct mode")
		}
		if in.You.WorldProfile != "" {
			fe.Add("you.worldProfile", "must be empty in direct mode")
		}
		if in.Peer.WorldProfile != "" {
			fe.Add("peer.worldProfile", "must be empty in direct mode")
		}
	case ModeWorld:
		if inline(in.World.ID) == "" {
			fe.Add("world.id", "is required in world mode")
		}
	default:
		fe.Add("mode", "must be direct or world")
	}
	if inline(in.You.Identity) == "" {
		fe.Add("you.identity", "is required")
	}
	if inline(in.Peer.Identity) == "" {
		fe.Add("peer.identity", "is required")
	}
	if in.Role == RoleSenderKickoff && clean(in.Brief) == "" {
		fe.Add("brief", "is required for a sender kickoff: the opener is written from it")
	}
	if b := in.Origin.Broadcast; b != nil {
		if in.Mode != ModeWorld {
			fe.Add("origin.broadcast", "requires world mode")
		}
		if in.Origin.Source != "" && in.Origin.Source != OriginWorldBroadcast {
			fe.Add("origin.source", "must be empty or world_broadcast when a broadcast is set")
		}
		if clean(in.Brief) == "" {
			fe.Add("brief", "must hold the announcement text of a broadcast")
		}
		switch b.ReplyPolicy {
		case ReplyPolicyZero, ReplyPolicyAtMostOne:
		default:
			fe.Add("origin.broadcast.replyPolicy", "must be zero or at_most_one")
		}
		switch b.Audience {
		case AudienceMembers, AudienceAdmins, AudienceAdminsAndOwner:
		default:
			fe.Add("origin.broadcast.audience", "must be members, admins or admins_and_owner")
		}
	}
	if in.Policy.MaxTurns < 0 {
		fe.Add("policy.maxTurns", "must be 0 (no cap) or positive, got "+strconv.Itoa(in.Policy.MaxTurns))
	}
	if in.Policy.IdleTimeout < 0 {
		fe.Add("policy.idleTimeout", "must be 0 (none) or positive")
	}
	if in.Policy.ReportingRequired && inline(in.ConversationKey) == "" {
		fe.Add("conversationKey", "is required when reporting is required: it is the report's source")
	}
	return fe.Err()
}

// source is the origin source shown in the document.
func (in Input) source() string {
	switch {
	case in.Origin.Source != "":
		return in.Origin.Source
	case in.Origin.Broadcast != nil:
		return OriginWorldBroadcast
	default:
		return OriginChatRequest
	}
}

// briefVisible reports whether the viewer may read the request brief: the
// sender always, the recipient only when the brief is a published
// broadcast announcement.
func (in Input) briefVisible() bool {
	return in.Role == RoleSenderKickoff || in.Origin.Broadcast != nil
}

// intentContext is the key: value dump of `## Additional Intent Context`,
// empty when the intent is a plain chat request without extra facts.
func (in Input) intentContext() string {
	var fields []Field
	if b := in.Origin.Broadcast; b != nil {
		fields = append(fields,
			Field{"source", in.source()},
			Field{"broadcastId", b.ID},
			Field{"audience", b.Audience},
			Field{"replyPolicy", b.ReplyPolicy},
			Field{"publishedBy", b.PublishedBy},
		)
		if !b.PublishedAt.IsZero() {
			fields = append(fields, Field{"publishedAt", b.PublishedAt.UTC().Format(time.RFC3339)})
		}
	}
	extra := dumpFields(in.Origin.Context)
	if extra == "" {
		return dumpFields(fields)
	}
	if len(fields) == 0 {
		fields = append(fields, Field{"source", in.source()})
	}
	return dumpFields(fields) + "\n" + extra
}

// dumpFields renders fields as "key: value" lines. Keys are collapsed to one
// line; continuation lines of a multi-line value are indented by two spaces
// so they cannot pose as keys. Fields with an empty key or value are left
// out.
func dumpFields(fields []Field) string {
	var lines []string
	for _, f := range fields {
		k := oneLine(f.Key)
		v := clean(f.Value)
		if k == "" || v == "" {
			continue
		}
		lines = append(lines, k+": "+strings.ReplaceAll(v, "\n", "\n  "))
	}
	return strings.Join(lines, "\n")
}
