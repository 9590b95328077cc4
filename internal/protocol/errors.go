package protocol

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
)

// Class is a protocol error class from the bus spec (E001–E006). Every error
// the hub returns carries one, so an agent can decide whether to retry
// without parsing prose.
type Class string

// The error classes of the envelope protocol.
const (
	ClassPermission  Class = "E001" // permission denied, including a forbidden route
	ClassUnavailable Class = "E002" // resource unavailable: unknown/offline agent, queue full
	ClassInvalid     Class = "E003" // bad parameters; names the field
	ClassTimeout     Class = "E004" // a request deadline passed with no response
	ClassDependency  Class = "E005" // a dependency failed
	ClassSystem      Class = "E006" // system error
)

// Recoverable reports whether retrying (possibly after correcting the input)
// can succeed. E006 "depends": the hub treats internal errors as recoverable
// because they are usually transient.
func (c Class) Recoverable() bool {
	return c != ClassPermission
}

// DefaultStatus is the HTTP status a class maps to when the error does not
// choose a more specific one (404 vs 503 for E002, 400 vs 422 for E003).
func (c Class) DefaultStatus() int {
	switch c {
	case ClassPermission:
		return http.StatusForbidden
	case ClassUnavailable:
		return http.StatusServiceUnavailable
	case ClassInvalid:
		return http.StatusBadRequest
	case ClassTimeout:
		return http.StatusGatewayTimeout
	case ClassDependency:
		return http.StatusBadGateway
	default:
		return http.StatusInternalServerError
	}
}

// Valid reports whether c is one of the six defined classes.
func (c Class) Valid() bool {
	switch c {
	case ClassPermission, ClassUnavailable, ClassInvalid, ClassTimeout, ClassDependency, ClassSystem:
		return true
	}
	return false
}

// Error is the one error type that crosses every boundary of the hub: store,
// services, HTTP, WebSocket frames and tool results. Its JSON form is the
// structured error body described in DESIGN.md; agents (often LLMs) read it,
// so Message and NextAction say what to do next, not only what went wrong.
type Error struct {
	Class          Class             // protocol class; drives the HTTP status and recoverability
	Code           string            // stable machine code, e.g. "forbidden_route", "display_name_too_long"
	Message        string            // one human sentence: what happened and what to do
	Status         int               // HTTP status; 0 means Class.DefaultStatus()
	FieldErrors    map[string]string // field path → problem, for validation errors
	RequiredAction string            // what the caller must do before retrying
	NextAction     string            // the suggested next step
	NextTool       string            // the tool (or endpoint) that performs NextAction
	MissingFields  []string          // fields that must be supplied
	Suggestion     string            // free-text hint for humans
	Extra          map[string]any    // additional top-level JSON members (wire-compatibility fields)
	Err            error             // the underlying cause; never serialized
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(string(e.Class))
	b.WriteString(" ")
	b.WriteString(e.Code)
	if e.Message != "" {
		b.WriteString(": ")
		b.WriteString(e.Message)
	}
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	return b.String()
}

// Unwrap exposes the cause to errors.Is and errors.As.
func (e *Error) Unwrap() error { return e.Err }

// HTTPStatus is the status code this error is answered with.
func (e *Error) HTTPStatus() int {
	if e.Status != 0 {
		return e.Status
	}
	return e.Class.DefaultStatus()
}

// MarshalJSON renders the structured error body. Extra members are merged at
// the top level so wire-compatible shapes (for example Claworld's
// `{"reason": ..., "delivery": {...}}`) can be produced without a second type.
func (e *Error) MarshalJSON() ([]byte, error) {
	m := make(map[string]any, 8+len(e.Extra))
	for k, v := range e.Extra {
		m[k] = v
	}
	m["error"] = e.Code
	m["message"] = e.Message
	m["class"] = e.Class
	m["recoverable"] = e.Class.Recoverable()
	if len(e.FieldErrors) > 0 {
		m["fieldErrors"] = e.FieldErrors
	}
	if e.RequiredAction != "" {
		m["requiredAction"] = e.RequiredAction
	}
	if e.NextAction != "" {
		m["nextAction"] = e.NextAction
	}
	if e.NextTool != "" {
		m["nextTool"] = e.NextTool
	}
	if len(e.MissingFields) > 0 {
		m["missingFields"] = e.MissingFields
	}
	if e.Suggestion != "" {
		m["suggestion"] = e.Suggestion
	}
	return json.Marshal(m)
}

// ErrorBody is the decoded form of a structured error, used by clients.
type ErrorBody struct {
	Error          string            `json:"error"`
	Message        string            `json:"message"`
	Class          Class             `json:"class"`
	Recoverable    bool              `json:"recoverable"`
	FieldErrors    map[string]string `json:"fieldErrors,omitempty"`
	RequiredAction string            `json:"requiredAction,omitempty"`
	NextAction     string            `json:"nextAction,omitempty"`
	NextTool       string            `json:"nextTool,omitempty"`
	MissingFields  []string          `json:"missingFields,omitempty"`
	Suggestion     string            `json:"suggestion,omitempty"`
	Reason         string            `json:"reason,omitempty"`
}

// AsError converts any error into an *Error: protocol errors pass through
// (found with errors.As, so wrapping keeps them), everything else becomes an
// E006 internal error whose message does not leak internals.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var pe *Error
	if errors.As(err, &pe) {
		return pe
	}
	return &Error{Class: ClassSystem, Code: "internal", Message: "internal error; retry later, and report it if it persists", Err: err}
}

// ClassOf returns the protocol class of err (E006 for foreign errors).
func ClassOf(err error) Class { return AsError(err).Class }

// CodeOf returns the machine code of err ("" for nil, "internal" for foreign errors).
func CodeOf(err error) string {
	if err == nil {
		return ""
	}
	return AsError(err).Code
}

// Errorf builds an error of the given class and code with a formatted message.
func Errorf(class Class, code, format string, args ...any) *Error {
	return &Error{Class: class, Code: code, Message: fmt.Sprintf(format, args...)}
}

// Unauthenticated is the 401 answer for a missing or unknown credential.
func Unauthenticated(msg string) *Error {
	return &Error{Class: ClassPermission, Code: "unauthorized", Message: msg, Status: http.StatusUnauthorized,
		RequiredAction: "authenticate", NextAction: "send Authorization: Bearer <token> with a valid agent or admin token"}
}

// Forbidden is the E001 answer for an authenticated caller acting outside its rights.
func Forbidden(code, msg string) *Error {
	return &Error{Class: ClassPermission, Code: code, Message: msg}
}

// NotFound is the E002/404 answer for an unknown resource.
func NotFound(code, msg string) *Error {
	return &Error{Class: ClassUnavailable, Code: code, Message: msg, Status: http.StatusNotFound}
}

// Conflict is the E003/409 answer for a request that contradicts current state.
func Conflict(code, msg string) *Error {
	return &Error{Class: ClassInvalid, Code: code, Message: msg, Status: http.StatusConflict}
}

// Invalid is the E003/400 answer naming the failing field.
func Invalid(field, msg string) *Error {
	e := &Error{Class: ClassInvalid, Code: "invalid_" + fieldCode(field), Message: field + ": " + msg}
	if field != "" {
		e.FieldErrors = map[string]string{field: msg}
	}
	return e
}

// Unprocessable is the E003/422 answer for well-formed input with semantic problems.
func Unprocessable(code, msg string) *Error {
	return &Error{Class: ClassInvalid, Code: code, Message: msg, Status: http.StatusUnprocessableEntity}
}

func fieldCode(field string) string {
	if field == "" {
		return "request"
	}
	r := strings.NewReplacer(".", "_", "[", "_", "]", "", "-", "_")
	return strings.ToLower(r.Replace(field))
}

// FieldErrors accumulates validation problems so one answer lists all of them.
type FieldErrors map[string]string

// Add records a problem with field, keeping the first one reported.
func (f FieldErrors) Add(field, msg string) {
	if _, ok := f[field]; !ok {
		f[field] = msg
	}
}

// Err returns nil when nothing was recorded, otherwise an E003 validation
// error whose code and message name the first field (sorted) and whose
// FieldErrors list all of them.
func (f FieldErrors) Err() error {
	if len(f) == 0 {
		return nil
	}
	keys := make([]string, 0, len(f))
	for k := range f {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	first := keys[0]
	msg := first + ": " + f[first]
	if len(keys) > 1 {
		msg += fmt.Sprintf(" (and %d more field errors)", len(keys)-1)
	}
	e := &Error{Class: ClassInvalid, Code: "validation_failed", Message: msg, FieldErrors: map[string]string(f),
		NextAction: "correct the fields listed in fieldErrors and send again"}
	return e
}
