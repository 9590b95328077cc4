package blackboard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// SendReport is written beside a sent file as <name>.result.json.
type SendReport struct {
	File   string            `json:"file"`
	SentAt time.Time         `json:"sentAt"`
	Result client.SendResult `json:"result"`
}

// sendOutbox sends every envelope file in outbox/ as the agent, in name
// order, and files each in sent/ or rejected/.
func (b *Bridge) sendOutbox(ctx context.Context, a agentDir, st *Stats) error {
	entries, err := os.ReadDir(a.path(OutboxDir))
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") {
			continue // temporary files of an atomic write, notes, ...
		}
		if err := b.sendFile(ctx, a, name, st); err != nil {
			return err
		}
	}
	return nil
}

func (b *Bridge) sendFile(ctx context.Context, a agentDir, name string, st *Stats) error {
	path := a.path(OutboxDir, name)
	info, err := os.Lstat(path)
	if err != nil {
		return nil // gone since the listing
	}
	switch {
	case info.IsDir():
		return nil
	case !info.Mode().IsRegular():
		// A symlink could make the bridge read files the agent cannot.
		return b.reject(a, name, st, &protocol.Error{Class: protocol.ClassInvalid, Code: "not_a_regular_file",
			Message: name + " is not a regular file; write envelopes as plain files", NextAction: "write the envelope itself into outbox/"})
	case info.Size() > protocol.MaxEnvelopeBytes:
		return b.reject(a, name, st, &protocol.Error{Class: protocol.ClassInvalid, Code: "envelope_too_large", Status: 413,
			Message:    fmt.Sprintf("%s is %d bytes; the envelope limit is %d", name, info.Size(), protocol.MaxEnvelopeBytes),
			NextAction: "shrink the payload or store large data elsewhere and send a reference"})
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	env, err := protocol.DecodeEnvelope(data)
	if err != nil {
		return b.reject(a, name, st, err)
	}
	switch env.From.Agent {
	case "":
		env.From.Agent = a.id
	case a.id:
	default:
		return b.reject(a, name, st, &protocol.Error{Class: protocol.ClassPermission, Code: "not_your_agent",
			Message:     fmt.Sprintf("from.agent is %s, but this is the outbox of %s", env.From.Agent, a.id),
			FieldErrors: map[string]string{"from.agent": "must be " + a.id + " or omitted"},
			NextAction:  "omit from.agent, or drop the file in the sender's own outbox"})
	}
	if env.ID == "" {
		env.ID = derivedID(a.id, name, info.ModTime(), data)
	}
	res, err := b.c.Send(ctx, env)
	if err == nil {
		b.forget(path)
		sentPath, reportPath := freeName(a.path(SentDir), strings.TrimSuffix(name, ".json"), ".json", ".result.json", b.opts.Clock.Now())
		if err := writeJSON(reportPath, SendReport{File: name, SentAt: b.opts.Clock.Now().UTC(), Result: res}); err != nil {
			return err
		}
		if err := moveFile(path, sentPath); err != nil {
			return err
		}
		st.Sent++
		return nil
	}
	switch status := client.Status(err); {
	case unreachable(err):
		return err // the hub is down: try this file again next pass
	case status == 409 && client.Code(err) == "duplicate_id", status == 429:
		return nil // transient: the same id is being accepted, or rate limited
	case status >= 500 && errClass(err) != protocol.ClassUnavailable:
		// A server error may pass; an E002 (no recipients, session
		// offline) is the hub's answer about this message.
		if b.fail(path) < b.opts.SendRetries {
			b.log.Warn("blackboard: send failed; will retry", "agent", a.id, "file", name, "err", err)
			return nil
		}
	}
	b.forget(path)
	return b.reject(a, name, st, err)
}

func errClass(err error) protocol.Class {
	var ce *client.Error
	if errors.As(err, &ce) {
		return ce.Body.Class
	}
	return ""
}

func (b *Bridge) fail(path string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures[path]++
	return b.failures[path]
}

func (b *Bridge) forget(path string) {
	b.mu.Lock()
	delete(b.failures, path)
	b.mu.Unlock()
}

// derivedID names an envelope that came without an id after the file it
// came in: its name, modification time and content. A bridge that stops
// after sending but before filing it in sent/ sends the same id again, and
// the hub answers "duplicate" instead of delivering it twice; the same
// content dropped again later is a new file, hence a new message.
func derivedID(agentID, name string, mtime time.Time, data []byte) string {
	h := sha256.New()
	h.Write([]byte(agentID + "\x00" + name + "\x00" + strconv.FormatInt(mtime.UnixNano(), 10) + "\x00"))
	h.Write(data)
	return "bb-" + hex.EncodeToString(h.Sum(nil))[:32]
}

// reject moves outbox/name to rejected/ and writes the structured error
// beside it as <name>.error.json.
func (b *Bridge) reject(a agentDir, name string, st *Stats, cause error) error {
	body := errorBody(cause)
	body["file"] = name
	body["rejectedAt"] = b.opts.Clock.Now().UTC()
	rejPath, errPath := freeName(a.path(RejectedDir), strings.TrimSuffix(name, ".json"), ".json", ".error.json", b.opts.Clock.Now())
	if err := writeJSON(errPath, body); err != nil {
		return err
	}
	if err := moveFile(a.path(OutboxDir, name), rejPath); err != nil {
		return err
	}
	b.log.Info("blackboard: outbox file rejected", "agent", a.id, "file", name, "error", body["error"])
	st.Rejected++
	return nil
}

// errorBody renders a hub answer or a local refusal as the hub's
// structured error object, with the HTTP status (0 when the bridge refused
// the file itself).
func errorBody(err error) map[string]any {
	out := map[string]any{}
	var ce *client.Error
	if errors.As(err, &ce) {
		if json.Unmarshal(ce.Raw, &out) != nil || out["error"] == nil {
			b, _ := json.Marshal(ce.Body)
			out = map[string]any{}
			_ = json.Unmarshal(b, &out)
		}
		out["status"] = ce.Status
		return out
	}
	pe := protocol.AsError(err)
	b, _ := json.Marshal(pe)
	_ = json.Unmarshal(b, &out)
	out["status"] = 0
	return out
}
