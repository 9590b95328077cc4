package blackboard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/switchboard-hub/switchboard/client"
)

// Record is the bridge's note of one mirrored delivery, kept in
// .deliveries/<file> next to the agent's folders. It is what lets a
// restarted bridge recognise a redelivery and what the bridge acks when
// the agent moves the file.
type Record struct {
	// File is the name of the envelope's file in inbox/ and processed/.
	File       string    `json:"file"`
	DeliveryID string    `json:"deliveryId"`
	Attempt    int       `json:"attempt"`
	LeaseUntil time.Time `json:"leaseUntil"`
	SessionKey string    `json:"sessionKey,omitempty"`
	// LeaseLost is set when the hub refused to extend the lease: it will
	// redeliver the message, and the next claim refreshes this record.
	LeaseLost bool `json:"leaseLost,omitempty"`
	// Processed is set when the agent was done but the ack came too late
	// for the lease; the redelivery is acked as soon as it is claimed.
	Processed bool            `json:"processed,omitempty"`
	Envelope  json.RawMessage `json:"envelope"`
}

// lostLease lists the hub's answers meaning "this attempt's lease is gone;
// the message is (or will be) delivered again".
func lostLease(err error) bool {
	switch client.Code(err) {
	case "stale_attempt", "lease_expired", "delivery_not_leased":
		return true
	}
	return false
}

// unreachable reports whether err means no answer came from the hub.
func unreachable(err error) bool {
	return err != nil && client.Status(err) == 0 && client.Code(err) == ""
}

func (b *Bridge) recordPath(a agentDir, file string) string { return a.path(DeliveriesDir, file) }

func (b *Bridge) saveRecord(a agentDir, r *Record) error {
	return writeJSON(b.recordPath(a, r.File), r)
}

func (b *Bridge) dropRecord(a agentDir, r *Record) error {
	if err := os.Remove(b.recordPath(a, r.File)); err != nil && !isNotExist(err) {
		return err
	}
	return nil
}

// records loads the agent's delivery records by file name.
func (b *Bridge) records(a agentDir) (map[string]*Record, error) {
	entries, err := os.ReadDir(a.path(DeliveriesDir))
	if err != nil {
		return nil, err
	}
	out := map[string]*Record{}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".json") || !e.Type().IsRegular() {
			continue
		}
		var r Record
		if err := readJSON(a.path(DeliveriesDir, name), &r); err != nil || r.File != name || r.DeliveryID == "" {
			b.log.Warn("blackboard: ignoring unreadable delivery record", "agent", a.id, "file", name, "err", err)
			continue
		}
		out[name] = &r
	}
	return out, nil
}

func (b *Bridge) envelopeExpired(raw json.RawMessage) bool {
	var e client.Envelope
	if json.Unmarshal(raw, &e) != nil || e.Timestamp.IsZero() || e.TTL <= 0 {
		return false
	}
	return b.opts.Clock.Now().After(e.ExpiresAt())
}

// settle acts on what the agent did with mirrored files: a file gone from
// inbox/ is acked (filed in processed/ first if the agent deleted it); a
// file still there has its lease extended when half of it is used up.
func (b *Bridge) settle(ctx context.Context, a agentDir, st *Stats) error {
	recs, err := b.records(a)
	if err != nil {
		return err
	}
	now := b.opts.Clock.Now()
	for _, r := range recs {
		if r.Processed || (r.LeaseLost && exists(a.path(InboxDir, r.File))) {
			// Waiting for the redelivery. If the message expired meanwhile
			// the hub dead-letters it and nothing will come back.
			if b.envelopeExpired(r.Envelope) {
				b.log.Warn("blackboard: message expired before its lease could be renewed; see the dead letters", "agent", a.id, "file", r.File, "delivery", r.DeliveryID)
				if err := b.dropRecord(a, r); err != nil {
					return err
				}
			}
			continue
		}
		if exists(a.path(InboxDir, r.File)) {
			if r.LeaseUntil.Sub(now) > b.opts.Lease/2 {
				continue
			}
			s, err := b.c.Extend(ctx, r.DeliveryID, r.Attempt, b.opts.Lease)
			switch {
			case err == nil:
				r.LeaseUntil = s.LeaseUntil
				st.Extended++
			case lostLease(err):
				r.LeaseLost = true
			case unreachable(err):
				return err
			default:
				b.log.Warn("blackboard: lease extension refused", "agent", a.id, "file", r.File, "err", err)
				continue
			}
			if err := b.saveRecord(a, r); err != nil {
				return err
			}
			continue
		}
		if err := b.ack(ctx, a, r, r.Attempt, st); err != nil {
			return err
		}
	}
	return nil
}

// ack files the envelope in processed/ (when the agent deleted it instead
// of moving it) and acknowledges the delivery at attempt.
func (b *Bridge) ack(ctx context.Context, a agentDir, r *Record, attempt int, st *Stats) error {
	if p := a.path(ProcessedDir, r.File); !exists(p) {
		if err := writeAtomic(p, pretty(r.Envelope)); err != nil {
			return err
		}
	}
	_, err := b.c.Ack(ctx, r.DeliveryID, attempt)
	switch {
	case err == nil:
		st.Acked++
		return b.dropRecord(a, r)
	case lostLease(err):
		r.Processed = true
		return b.saveRecord(a, r)
	case unreachable(err):
		return err
	case client.Code(err) == "delivery_not_found":
		b.log.Warn("blackboard: the hub no longer knows this delivery; forgetting it", "agent", a.id, "file", r.File, "delivery", r.DeliveryID)
		return b.dropRecord(a, r)
	default:
		return fmt.Errorf("ack %s: %w", r.DeliveryID, err)
	}
}

// mirror claims new deliveries and writes each to inbox/.
func (b *Bridge) mirror(ctx context.Context, a agentDir, st *Stats) error {
	recs, err := b.records(a)
	if err != nil {
		return err
	}
	byDelivery := make(map[string]*Record, len(recs))
	pending := 0
	for _, r := range recs {
		byDelivery[r.DeliveryID] = r
		if !r.Processed {
			pending++
		}
	}
	for pending < b.opts.MaxPending {
		limit := min(100, b.opts.MaxPending-pending)
		ds, err := b.c.Inbox(ctx, client.InboxOptions{Agent: a.id, Limit: limit, Lease: b.opts.Lease})
		if err != nil {
			return fmt.Errorf("claim: %w", err)
		}
		for _, d := range ds {
			added, err := b.mirrorOne(ctx, a, recs, byDelivery, d, st)
			if err != nil {
				return err
			}
			if added {
				pending++
			}
		}
		if len(ds) < limit {
			return nil
		}
	}
	return nil
}

// mirrorOne writes one claimed delivery to inbox/, or recognises it: a
// redelivery of a message already mirrored refreshes its record (the file
// keeps its name), and one the agent already processed is acked at once.
func (b *Bridge) mirrorOne(ctx context.Context, a agentDir, recs map[string]*Record, byDelivery map[string]*Record, d client.Delivery, st *Stats) (bool, error) {
	env, err := d.Decode()
	if err != nil {
		b.log.Warn("blackboard: undecodable envelope", "agent", a.id, "delivery", d.DeliveryID, "err", err)
		return false, nil
	}
	if r := byDelivery[d.DeliveryID]; r != nil {
		r.Attempt, r.LeaseUntil, r.LeaseLost, r.SessionKey = d.Attempt, d.LeaseUntil, false, d.SessionKey
		if r.Processed || !exists(a.path(InboxDir, r.File)) {
			return false, b.ack(ctx, a, r, d.Attempt, st)
		}
		return false, b.saveRecord(a, r)
	}
	r := &Record{File: b.fileName(a, recs, env, d.DeliveryID), DeliveryID: d.DeliveryID, Attempt: d.Attempt, LeaseUntil: d.LeaseUntil,
		SessionKey: d.SessionKey, Envelope: d.Envelope}
	if p := a.path(ProcessedDir, r.File); exists(p) && sameMessage(p, env) {
		// The agent processed a copy whose record was lost (the bridge
		// stopped between writing the file and its record).
		return false, b.ack(ctx, a, r, d.Attempt, st)
	}
	if err := writeAtomic(a.path(InboxDir, r.File), pretty(d.Envelope)); err != nil {
		return false, err
	}
	if err := b.saveRecord(a, r); err != nil {
		return false, err
	}
	recs[r.File], byDelivery[r.DeliveryID] = r, r
	st.Mirrored++
	return true, nil
}

// fileName is <msg-id>.json, unless that name belongs to another message
// (message ids are unique per sender only), then <msg-id>--<delivery-id>.json.
func (b *Bridge) fileName(a agentDir, recs map[string]*Record, env *client.Envelope, deliveryID string) string {
	base := env.ID
	if !validName(base) {
		base = deliveryID
	}
	name := base + ".json"
	taken := recs[name] != nil
	for _, dir := range []string{InboxDir, ProcessedDir} {
		if p := a.path(dir, name); !taken && exists(p) && !sameMessage(p, env) {
			taken = true
		}
	}
	if taken {
		return base + "--" + deliveryID + ".json"
	}
	return name
}

// sameMessage reports whether the envelope file at path is env (same id,
// sender and trace), whatever the agent did to its layout.
func sameMessage(path string, env *client.Envelope) bool {
	var e client.Envelope
	if readJSON(path, &e) != nil {
		return false
	}
	return e.ID == env.ID && e.From.Agent == env.From.Agent && e.TraceID == env.TraceID
}

// pretty indents an envelope for people and agents reading the file.
func pretty(raw json.RawMessage) []byte {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return append(raw, '\n')
	}
	buf.WriteByte('\n')
	return buf.Bytes()
}
