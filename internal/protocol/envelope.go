// Package protocol defines the envelope protocol v1.0 of the Switchboard bus:
// message types, payload shapes, validation and the error model shared by
// every layer of the hub. It does no I/O.
package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"
)

// Version is the only envelope version this hub speaks.
const Version = "1.0"

// Tier is an agent's place in the team hierarchy; routing rules are defined
// over tiers.
type Tier string

// The three tiers of the routing table.
const (
	TierCommand Tier = "command"
	TierPM      Tier = "pm"
	TierWorker  Tier = "worker"
)

// Valid reports whether t is a known tier.
func (t Tier) Valid() bool { return t == TierCommand || t == TierPM || t == TierWorker }

// MessageType distinguishes the four envelope kinds, each with its own payload shape.
type MessageType string

// The four message types.
const (
	TypeRequest      MessageType = "request"
	TypeResponse     MessageType = "response"
	TypeNotification MessageType = "notification"
	TypeError        MessageType = "error"
)

// Valid reports whether t is a known message type.
func (t MessageType) Valid() bool {
	switch t {
	case TypeRequest, TypeResponse, TypeNotification, TypeError:
		return true
	}
	return false
}

// Priority orders an agent's inbox: critical first, then high, normal, low;
// arrival order within a priority.
type Priority string

// The four priorities.
const (
	PriorityLow      Priority = "low"
	PriorityNormal   Priority = "normal"
	PriorityHigh     Priority = "high"
	PriorityCritical Priority = "critical"
)

// Rank is the sort key of a priority: lower ranks are delivered first.
func (p Priority) Rank() int {
	switch p {
	case PriorityCritical:
		return 0
	case PriorityHigh:
		return 1
	case PriorityLow:
		return 3
	default:
		return 2
	}
}

// Valid reports whether p is a known priority.
func (p Priority) Valid() bool {
	switch p {
	case PriorityLow, PriorityNormal, PriorityHigh, PriorityCritical:
		return true
	}
	return false
}

// Target is the processing-time target of a priority from the spec: a
// delivery not processed within it is overdue. Critical means "immediately";
// the hub treats anything older than a few seconds as overdue.
func (p Priority) Target() time.Duration {
	switch p {
	case PriorityCritical:
		return 5 * time.Second
	case PriorityHigh:
		return 5 * time.Minute
	case PriorityLow:
		return 24 * time.Hour
	default:
		return 30 * time.Minute
	}
}

// Priorities lists all priorities in delivery order.
var Priorities = []Priority{PriorityCritical, PriorityHigh, PriorityNormal, PriorityLow}

// Broadcast is the to.agent value that fans an envelope out to every agent of
// to.tier that the sender may reach.
const Broadcast = "broadcast"

// OfflinePolicy says what to do with a realtime session send when the session
// is not connected.
type OfflinePolicy string

// The offline policies for session sends.
const (
	OfflineQueue OfflinePolicy = "queue" // keep it in the inbox for the session (default)
	OfflineFail  OfflinePolicy = "fail"  // refuse with E002 unless the session is live
)

// Address names one end of an envelope.
type Address struct {
	Agent   string `json:"agent"`
	Tier    Tier   `json:"tier,omitempty"`
	Session string `json:"session,omitempty"`
	// IfOffline applies to sends addressed to a session (to.session): whether
	// to queue or fail fast with E002 when the session is not connected.
	IfOffline OfflinePolicy `json:"ifOffline,omitempty"`
}

// Envelope is the v1.0 message envelope. Payload and Metadata are kept as raw
// JSON so the hub forwards exactly what the sender wrote; the typed views
// (RequestPayload etc.) are decoded on demand.
type Envelope struct {
	Version   string          `json:"version"`
	ID        string          `json:"id"`
	TraceID   string          `json:"traceId"`
	From      Address         `json:"from"`
	To        Address         `json:"to"`
	Type      MessageType     `json:"type"`
	Priority  Priority        `json:"priority,omitempty"`
	Timestamp time.Time       `json:"timestamp"`
	TTL       int             `json:"ttl,omitempty"`
	Payload   json.RawMessage `json:"payload"`
	Metadata  json.RawMessage `json:"metadata,omitempty"`
}

// RequestPayload is the payload of a request envelope.
type RequestPayload struct {
	Action   string          `json:"action"`
	Params   json.RawMessage `json:"params,omitempty"`
	Deadline *time.Time      `json:"deadline,omitempty"`
	Callback string          `json:"callback,omitempty"`
}

// ResponseStatus is the outcome a response reports.
type ResponseStatus string

// The response statuses.
const (
	StatusSuccess ResponseStatus = "success"
	StatusFailure ResponseStatus = "failure"
	StatusPartial ResponseStatus = "partial"
)

// ResponsePayload is the payload of a response envelope.
type ResponsePayload struct {
	RequestID string          `json:"requestId"`
	Status    ResponseStatus  `json:"status"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     json.RawMessage `json:"error,omitempty"`
}

// Progress is the optional progress of a notification.
type Progress struct {
	Current float64 `json:"current"`
	Total   float64 `json:"total"`
	Percent float64 `json:"percent"`
}

// NotificationPayload is the payload of a notification envelope.
type NotificationPayload struct {
	Event    string    `json:"event"`
	Message  string    `json:"message"`
	Progress *Progress `json:"progress,omitempty"`
}

// ErrorPayload is the payload of an error envelope.
type ErrorPayload struct {
	RequestID   string `json:"requestId,omitempty"`
	Code        Class  `json:"code"`
	Message     string `json:"message"`
	Recoverable bool   `json:"recoverable"`
	Suggestion  string `json:"suggestion,omitempty"`
}

// Size limits. They bound memory per message and keep one agent from filling
// another's inbox with a single send.
const (
	MaxEnvelopeBytes = 512 << 10 // whole encoded envelope
	MaxPayloadBytes  = 256 << 10
	MaxMetadataBytes = 16 << 10
	MaxIDLen         = 128
	MaxSessionLen    = 200
	MaxActionLen     = 128
	MaxEventLen      = 128
	MaxMessageLen    = 16 << 10
	MaxTTLSeconds    = 30 * 24 * 3600
)

// idPattern restricts client ids to characters that are safe in file names,
// URLs and log lines: the blackboard bridge writes <id>.json files.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)

// ValidID reports whether s may be used as a message, trace or agent id.
func ValidID(s string) bool {
	return len(s) > 0 && len(s) <= MaxIDLen && idPattern.MatchString(s)
}

// DecodeEnvelope parses one envelope strictly: unknown top-level or address
// members are rejected (they usually mean a misspelled field), trailing data
// is rejected, and the size limit applies. Errors are E003 naming the field.
func DecodeEnvelope(data []byte) (*Envelope, error) {
	if len(data) > MaxEnvelopeBytes {
		return nil, &Error{Class: ClassInvalid, Code: "envelope_too_large", Status: 413,
			Message:    fmt.Sprintf("envelope is %d bytes; the limit is %d", len(data), MaxEnvelopeBytes),
			NextAction: "shrink the payload or store large data elsewhere and send a reference"}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var env Envelope
	if err := dec.Decode(&env); err != nil {
		return nil, JSONError(err)
	}
	if dec.More() {
		return nil, Invalid("", "unexpected data after the envelope object")
	}
	return &env, nil
}

// JSONError turns an encoding/json error into an E003 that names the field
// where possible.
func JSONError(err error) *Error {
	var ute *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &ute):
		field := ute.Field
		if field == "" {
			field = "body"
		}
		return &Error{Class: ClassInvalid, Code: "invalid_json", Message: fmt.Sprintf("%s: expected %s, got JSON %s", field, ute.Type, ute.Value),
			FieldErrors: map[string]string{field: "expected " + ute.Type.String()}, NextAction: "fix the type of " + field}
	case errors.As(err, &se):
		return &Error{Class: ClassInvalid, Code: "invalid_json", Message: fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, se),
			NextAction: "send a well-formed JSON object"}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &Error{Class: ClassInvalid, Code: "unknown_field", Message: fmt.Sprintf("unknown field %q", field),
			FieldErrors: map[string]string{field: "unknown field"}, NextAction: "remove or correct the field " + field}
	case err.Error() == "EOF":
		return &Error{Class: ClassInvalid, Code: "invalid_json", Message: "empty body; a JSON object is required", NextAction: "send a JSON object"}
	default:
		return &Error{Class: ClassInvalid, Code: "invalid_json", Message: "malformed JSON: " + err.Error(), NextAction: "send a well-formed JSON object"}
	}
}

// Normalize fills the fields a client may omit: version, priority, timestamp
// (now) and ttl (the hub default). It does not invent ids; the hub does that
// before validation when a client omitted them.
func (e *Envelope) Normalize(now time.Time, defaultTTL int) {
	if e.Version == "" {
		e.Version = Version
	}
	if e.Priority == "" {
		e.Priority = PriorityNormal
	}
	if e.Timestamp.IsZero() {
		e.Timestamp = now
	}
	e.Timestamp = e.Timestamp.UTC()
	if e.TTL == 0 {
		e.TTL = defaultTTL
	}
	if e.To.Session != "" && e.To.IfOffline == "" {
		e.To.IfOffline = OfflineQueue
	}
}

// Validate checks every field and the payload shape of the envelope's type.
// It reports all problems at once as an E003 with fieldErrors.
func (e *Envelope) Validate() error {
	fe := FieldErrors{}
	if e.Version != Version {
		fe.Add("version", fmt.Sprintf("must be %q", Version))
	}
	if !ValidID(e.ID) {
		fe.Add("id", "required; 1–128 characters from A–Z a–z 0–9 . _ : -, starting with a letter or digit")
	}
	if !ValidID(e.TraceID) {
		fe.Add("traceId", "required; 1–128 characters from A–Z a–z 0–9 . _ : -")
	}
	validateAddress(fe, "from", e.From, false)
	validateAddress(fe, "to", e.To, true)
	if !e.Type.Valid() {
		fe.Add("type", "must be one of request, response, notification, error")
	}
	if !e.Priority.Valid() {
		fe.Add("priority", "must be one of low, normal, high, critical")
	}
	if e.Timestamp.IsZero() {
		fe.Add("timestamp", "required; RFC 3339")
	}
	if e.TTL < 0 {
		fe.Add("ttl", "must be ≥ 0 seconds (0 means the hub default)")
	} else if e.TTL > MaxTTLSeconds {
		fe.Add("ttl", fmt.Sprintf("must be ≤ %d seconds (30 days)", MaxTTLSeconds))
	}
	if len(e.Metadata) > MaxMetadataBytes {
		fe.Add("metadata", fmt.Sprintf("is %d bytes; the limit is %d", len(e.Metadata), MaxMetadataBytes))
	} else if len(e.Metadata) > 0 && !isJSONObjectOrNull(e.Metadata) {
		fe.Add("metadata", "must be a JSON object")
	}
	if len(e.Payload) > MaxPayloadBytes {
		fe.Add("payload", fmt.Sprintf("is %d bytes; the limit is %d", len(e.Payload), MaxPayloadBytes))
	} else if len(e.Payload) == 0 || !isJSONObject(e.Payload) {
		fe.Add("payload", "required; a JSON object whose shape depends on type")
	} else if e.Type.Valid() {
		validatePayload(fe, e.Type, e.Payload)
	}
	if e.To.Agent == Broadcast && e.To.Session != "" {
		fe.Add("to.session", "cannot be combined with a broadcast")
	}
	return fe.Err()
}

func validateAddress(fe FieldErrors, name string, a Address, isTo bool) {
	if a.Agent == "" {
		fe.Add(name+".agent", "required")
	} else if a.Agent == Broadcast && !isTo {
		fe.Add(name+".agent", "broadcast is only a recipient")
	} else if a.Agent != Broadcast && !ValidID(a.Agent) {
		fe.Add(name+".agent", "must be an agent id")
	}
	if a.Tier != "" && !a.Tier.Valid() {
		fe.Add(name+".tier", "must be one of command, pm, worker")
	}
	if isTo && a.Agent == Broadcast && a.Tier == "" {
		fe.Add(name+".tier", "required for a broadcast: the tier to fan out to")
	}
	if len(a.Session) > MaxSessionLen {
		fe.Add(name+".session", fmt.Sprintf("longer than %d characters", MaxSessionLen))
	} else if a.Session != "" && !validText(a.Session, false) {
		fe.Add(name+".session", "must be printable text without control characters")
	}
	switch a.IfOffline {
	case "", OfflineQueue, OfflineFail:
	default:
		fe.Add(name+".ifOffline", "must be queue or fail")
	}
	if a.IfOffline != "" && !isTo {
		fe.Add(name+".ifOffline", "only meaningful on to")
	}
}

func validatePayload(fe FieldErrors, t MessageType, raw json.RawMessage) {
	switch t {
	case TypeRequest:
		var p RequestPayload
		if err := json.Unmarshal(raw, &p); err != nil {
			fe.Add("payload", payloadDecodeMsg(err))
			return
		}
		if p.Action == "" {
			fe.Add("payload.action", "required for a request")
		} else if len(p.Action) > MaxActionLen || !validText(p.Action, false) {
			fe.Add("payload.action", fmt.Sprintf("printable, at most %d characters", MaxActionLen))
		}
		if len(p.Params) > 0 && !isJSONObjectOrNull(p.Params) {
			fe.Add("payload.params", "must be a JSON object")
		}
		if len(p.Callback) > MaxIDLen*2 {
			fe.Add("payload.callback", "too long")
		}
	case TypeResponse:
		var p ResponsePayload
		if err := json.Unmarshal(raw, &p); err != nil {
			fe.Add("payload", payloadDecodeMsg(err))
			return
		}
		if !ValidID(p.RequestID) {
			fe.Add("payload.requestId", "required: the id of the request this answers")
		}
		switch p.Status {
		case StatusSuccess, StatusFailure, StatusPartial:
		default:
			fe.Add("payload.status", "must be one of success, failure, partial")
		}
	case TypeNotification:
		var p NotificationPayload
		if err := json.Unmarshal(raw, &p); err != nil {
			fe.Add("payload", payloadDecodeMsg(err))
			return
		}
		if p.Event == "" {
			fe.Add("payload.event", "required for a notification")
		} else if len(p.Event) > MaxEventLen || !validText(p.Event, false) {
			fe.Add("payload.event", fmt.Sprintf("printable, at most %d characters", MaxEventLen))
		}
		if len(p.Message) > MaxMessageLen {
			fe.Add("payload.message", fmt.Sprintf("longer than %d bytes", MaxMessageLen))
		}
		if p.Progress != nil && (p.Progress.Total < 0 || p.Progress.Current < 0 || p.Progress.Percent < 0 || p.Progress.Percent > 100) {
			fe.Add("payload.progress", "current and total must be ≥ 0 and percent within 0–100")
		}
	case TypeError:
		var p ErrorPayload
		if err := json.Unmarshal(raw, &p); err != nil {
			fe.Add("payload", payloadDecodeMsg(err))
			return
		}
		if !p.Code.Valid() {
			fe.Add("payload.code", "must be one of E001…E006")
		}
		if p.Message == "" {
			fe.Add("payload.message", "required for an error")
		} else if len(p.Message) > MaxMessageLen {
			fe.Add("payload.message", fmt.Sprintf("longer than %d bytes", MaxMessageLen))
		}
		if p.RequestID != "" && !ValidID(p.RequestID) {
			fe.Add("payload.requestId", "must be a message id")
		}
	}
}

func payloadDecodeMsg(err error) string {
	if je := JSONError(err); len(je.FieldErrors) > 0 {
		for f, m := range je.FieldErrors {
			return f + ": " + m
		}
	}
	return "does not match the payload shape of this type"
}

// validText reports whether s is valid UTF-8 without control characters
// (newlines allowed only when multiline).
func validText(s string, multiline bool) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r == '\n' && multiline {
			continue
		}
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

func isJSONObject(raw json.RawMessage) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && json.Valid(raw)
}

func isJSONObjectOrNull(raw json.RawMessage) bool {
	t := bytes.TrimSpace(raw)
	return bytes.Equal(t, []byte("null")) || isJSONObject(raw)
}

// Request decodes the payload of a request envelope.
func (e *Envelope) Request() (RequestPayload, error) {
	var p RequestPayload
	err := json.Unmarshal(e.Payload, &p)
	return p, err
}

// Response decodes the payload of a response envelope.
func (e *Envelope) Response() (ResponsePayload, error) {
	var p ResponsePayload
	err := json.Unmarshal(e.Payload, &p)
	return p, err
}

// Notification decodes the payload of a notification envelope.
func (e *Envelope) Notification() (NotificationPayload, error) {
	var p NotificationPayload
	err := json.Unmarshal(e.Payload, &p)
	return p, err
}

// ErrorPayload decodes the payload of an error envelope.
func (e *Envelope) ErrorPayload() (ErrorPayload, error) {
	var p ErrorPayload
	err := json.Unmarshal(e.Payload, &p)
	return p, err
}

// ExpiresAt is when the envelope's TTL runs out.
func (e *Envelope) ExpiresAt() time.Time {
	return e.Timestamp.Add(time.Duration(e.TTL) * time.Second)
}

// MustJSON marshals v, panicking on failure; for values that cannot fail
// (maps and structs of plain data built by the hub itself).
func MustJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("protocol.MustJSON: %v", err))
	}
	return b
}
