package pipeline

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// Output is the standard output every skill returns (the seed's format):
//
//	{"success": true, "data": {…}, "metadata": {"processed_at": "…", "duration_ms": 1500, "records_count": 100}, "errors": []}
//
// A failed output has success false and at least one error
// {code, message, field?, details?, stack?}.
type Output struct {
	Success  bool            `json:"success"`
	Data     json.RawMessage `json:"data"`
	Metadata json.RawMessage `json:"metadata"`
	Errors   []SkillError    `json:"errors"`
}

// parseOutput enforces the standard output format on an answer and
// returns it normalised: all four members in the standard order, errors
// never null, and metadata.processed_at / duration_ms filled in from the
// hub's clock when the skill left them out. Any defect is returned as a
// MALFORMED_OUTPUT (or OUTPUT_TOO_LARGE) error that says what is wrong.
func parseOutput(raw []byte, max int, now time.Time, dur time.Duration) (json.RawMessage, *Output, *SkillError) {
	if len(raw) > max {
		return nil, nil, skillErr(CodeOutputTooBig, "the output is %d bytes; the limit is %d bytes (Options.MaxOutputBytes); return less data or a reference to it", len(raw), max)
	}
	malformed := func(format string, args ...any) (json.RawMessage, *Output, *SkillError) {
		return nil, nil, skillErr(CodeMalformed, "the output is not in the standard format: "+format+
			`; return {"success": bool, "data": …, "metadata": {…}, "errors": [{"code", "message"}]}`, args...)
	}
	members, err := objectMembers(raw)
	if err != nil {
		return malformed("%v", err)
	}
	out := &Output{Data: json.RawMessage("null"), Metadata: json.RawMessage("{}"), Errors: []SkillError{}}
	var haveSuccess bool
	for _, m := range members {
		switch m.K {
		case "success":
			if err := json.Unmarshal(m.V.(json.RawMessage), &out.Success); err != nil {
				return malformed("success must be true or false")
			}
			haveSuccess = true
		case "data":
			out.Data = m.V.(json.RawMessage)
		case "metadata":
			md, err := normaliseMetadata(m.V.(json.RawMessage), now, dur)
			if err != nil {
				return malformed("metadata: %v", err)
			}
			out.Metadata = md
		case "errors":
			errs, err := parseErrors(m.V.(json.RawMessage))
			if err != nil {
				return malformed("errors: %v", err)
			}
			out.Errors = errs
		default:
			return malformed("unknown member %q (allowed: success, data, metadata, errors)", m.K)
		}
	}
	if !haveSuccess {
		return malformed("success is missing")
	}
	if !hasMember(members, "metadata") {
		out.Metadata, _ = normaliseMetadata(out.Metadata, now, dur)
	}
	if !out.Success && len(out.Errors) == 0 {
		return malformed("success is false but errors is empty; a failed output must say what went wrong")
	}
	norm := mustEncode(obj{{"success", out.Success}, {"data", out.Data}, {"metadata", out.Metadata}, {"errors", out.Errors}})
	return norm, out, nil
}

func hasMember(ms []kv, k string) bool {
	for _, m := range ms {
		if m.K == k {
			return true
		}
	}
	return false
}

// objectMembers splits a JSON object into its members in document order
// (values as raw JSON), refusing duplicates and trailing data.
func objectMembers(raw []byte) ([]kv, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("not JSON (%v)", err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("not a JSON object")
	}
	var out []kv
	seen := map[string]bool{}
	for dec.More() {
		kt, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("not JSON (%v)", err)
		}
		k := kt.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("not JSON (%v)", err)
		}
		if seen[k] {
			return nil, fmt.Errorf("member %q appears twice", k)
		}
		seen[k] = true
		out = append(out, kv{k, v})
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("not JSON (%v)", err)
	}
	if _, err := dec.Token(); err == nil {
		return nil, fmt.Errorf("unexpected data after the JSON object")
	}
	return out, nil
}

func normaliseMetadata(raw json.RawMessage, now time.Time, dur time.Duration) (json.RawMessage, error) {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = json.RawMessage("{}")
	}
	members, err := objectMembers(raw)
	if err != nil {
		return nil, fmt.Errorf("must be an object")
	}
	for _, m := range members {
		v := m.V.(json.RawMessage)
		switch m.K {
		case "processed_at":
			var s string
			if json.Unmarshal(v, &s) != nil {
				return nil, fmt.Errorf("processed_at must be an RFC 3339 timestamp string")
			}
			if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
				return nil, fmt.Errorf("processed_at %q is not an RFC 3339 timestamp", s)
			}
		case "duration_ms":
			var f float64
			if json.Unmarshal(v, &f) != nil || f < 0 {
				return nil, fmt.Errorf("duration_ms must be a number ≥ 0")
			}
		case "records_count":
			var n json.Number
			if json.Unmarshal(v, &n) != nil {
				return nil, fmt.Errorf("records_count must be a whole number ≥ 0")
			}
			if i, err := n.Int64(); err != nil || i < 0 {
				return nil, fmt.Errorf("records_count must be a whole number ≥ 0")
			}
		}
	}
	o := obj(members)
	if !hasMember(members, "processed_at") {
		o = append(o, kv{"processed_at", now.UTC().Format(time.RFC3339)})
	}
	if !hasMember(members, "duration_ms") {
		o = append(o, kv{"duration_ms", dur.Milliseconds()})
	}
	return mustEncode(o), nil
}

func parseErrors(raw json.RawMessage) ([]SkillError, error) {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return []SkillError{}, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("must be an array of {code, message, field?, details?}")
	}
	out := make([]SkillError, 0, len(items))
	for i, it := range items {
		members, err := objectMembers(it)
		if err != nil {
			return nil, fmt.Errorf("[%d] must be an object", i)
		}
		var se SkillError
		for _, m := range members {
			v := m.V.(json.RawMessage)
			var target *string
			switch m.K {
			case "code":
				target = &se.Code
			case "message":
				target = &se.Message
			case "field":
				target = &se.Field
			case "stack":
				target = &se.Stack
			case "details":
				se.Details = v // a string in the seed; any JSON is kept as is
				continue
			default:
				return nil, fmt.Errorf("[%d]: unknown member %q (allowed: code, message, field, details, stack)", i, m.K)
			}
			if json.Unmarshal(v, target) != nil {
				return nil, fmt.Errorf("[%d].%s must be a string", i, m.K)
			}
		}
		if strings.TrimSpace(se.Code) == "" {
			return nil, fmt.Errorf("[%d].code is required", i)
		}
		if se.Message == "" {
			return nil, fmt.Errorf("[%d].message is required", i)
		}
		out = append(out, se)
	}
	return out, nil
}

// failedOutput builds a standard output for a failure the engine observed
// itself (used when answering an invoking agent).
func failedOutput(se *SkillError, now time.Time) json.RawMessage {
	return mustEncode(obj{{"success", false}, {"data", nil}, {"metadata", obj{{"processed_at", now.UTC().Format(time.RFC3339)}}}, {"errors", []*SkillError{se}}})
}
