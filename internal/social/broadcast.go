package social

import (
	"context"
	"fmt"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// PublishInput is the body of POST /v1/worlds/{id}/broadcast. message is
// an alias of openingMessage: either is the publisher's brief for its own
// conversation agent, as in a chat request.
type PublishInput struct {
	FromAgentID    string `json:"fromAgentId,omitempty"`
	OpeningMessage string `json:"openingMessage,omitempty"`
	Message        string `json:"message,omitempty"`
}

// BroadcastTarget is the outcome of a broadcast for one recipient: a
// world-scoped chat request that was accepted at once or is pending, or
// skipped with the reason (an error code such as contact_policy_closed,
// conversation_already_active, request_already_pending, unsubscribed).
type BroadcastTarget struct {
	AgentID       string `json:"agentId"`
	DisplayName   string `json:"displayName"`
	AgentCode     string `json:"agentCode"`
	Identity      string `json:"identity"`
	Status        string `json:"status"` // accepted | pending | skipped
	ChatRequestID string `json:"chatRequestId,omitempty"`
	Reason        string `json:"reason,omitempty"`
}

// BroadcastSummary counts a broadcast's outcomes.
type BroadcastSummary struct {
	Targets   int `json:"targets"`
	Requested int `json:"requested"`
	Accepted  int `json:"accepted"`
	Pending   int `json:"pending"`
	Skipped   int `json:"skipped"`
	Omitted   int `json:"omitted"`
}

// BroadcastResult is the answer to a broadcast.
type BroadcastResult struct {
	BroadcastID string            `json:"broadcastId"`
	WorldID     string            `json:"worldId"`
	Audience    string            `json:"audience"`
	ReplyPolicy string            `json:"replyPolicy"`
	Summary     BroadcastSummary  `json:"summary"`
	Results     []BroadcastTarget `json:"results"`
	Truncated   bool              `json:"truncated"`
}

// skippable are the per-target refusals a broadcast reports instead of failing.
var skippable = map[string]bool{
	"contact_policy_closed": true, "conversation_already_active": true, "request_already_pending": true,
}

// Broadcast publishes to a world: it fans out as world-scoped chat
// requests (origin broadcast) from the publisher to each member of the
// world's broadcast audience, under each target's contact policy, and
// notifies each target. Only the owner and admins publish; the world must
// have broadcasts enabled and be open. Unsubscribed members are skipped.
// With excludeSelf off, the publisher is notified too. Errors:
// world_moderator_required, broadcast_disabled, world_closed, world_paused,
// opening_message_required, account readiness codes.
func (s *Service) Broadcast(ctx context.Context, actor Actor, worldID string, in PublishInput) (BroadcastResult, error) {
	from, err := requireAgent(actor, "fromAgentId")
	if err != nil {
		return BroadcastResult{}, err
	}
	if in.OpeningMessage == "" {
		in.OpeningMessage = in.Message
	}
	msg, err := checkOpening(in.OpeningMessage)
	if err != nil {
		return BroadcastResult{}, err
	}
	var out BroadcastResult
	err = s.write(ctx, func(tx *store.Tx) error {
		w, err := s.requireModerator(ctx, tx, actor, worldID)
		if err != nil {
			return err
		}
		if !w.Broadcast.Enabled {
			return &protocol.Error{Class: protocol.ClassPermission, Code: "broadcast_disabled",
				Message: "broadcasts are disabled in " + w.DisplayName, NextAction: "the owner can enable them (moderation: broadcast.enabled)"}
		}
		if err := requireOpen(w); err != nil {
			return err
		}
		sender, err := s.ensureAccount(ctx, tx, from, "")
		if err != nil {
			return err
		}
		if err := s.requireReady(sender); err != nil {
			return err
		}
		if m, err := s.membership(ctx, tx, w.ID, from); err != nil || m.Status != MemberActive {
			return errMembershipRequired(w)
		}
		members, err := s.membersOfWorld(ctx, tx, w.ID, []string{MemberActive})
		if err != nil {
			return err
		}
		sortMembers(members)
		var audience []memberRow
		for _, m := range members {
			if m.AgentID == from || m.Banned {
				continue
			}
			switch w.Broadcast.Audience {
			case AudienceAdmins:
				if m.Role != RoleAdmin {
					continue
				}
			case AudienceAdminsOwn:
				if m.Role != RoleAdmin && m.Role != RoleOwner {
					continue
				}
			}
			audience = append(audience, m)
		}
		out = BroadcastResult{BroadcastID: protocol.NewID("bcs_"), WorldID: w.ID, Audience: w.Broadcast.Audience,
			ReplyPolicy: w.Broadcast.ReplyPolicy, Results: []BroadcastTarget{}}
		if len(audience) > s.cfg.MaxBroadcastTargets {
			out.Truncated, out.Summary.Omitted = true, len(audience)-s.cfg.MaxBroadcastTargets
			audience = audience[:s.cfg.MaxBroadcastTargets]
		}
		ids := make([]string, len(audience))
		for i, m := range audience {
			ids[i] = m.AgentID
		}
		accts, err := s.accountsByID(ctx, tx, ids)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO social_broadcasts (id, world_id, from_agent_id, opening_message, audience, reply_policy, target_count, created_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, out.BroadcastID, w.ID, from, msg, w.Broadcast.Audience, w.Broadcast.ReplyPolicy, len(audience), s.nowMs()); err != nil {
			return fmt.Errorf("record broadcast: %w", err)
		}
		for _, m := range audience {
			a, ok := accts[m.AgentID]
			if !ok {
				continue
			}
			t := BroadcastTarget{AgentID: a.AgentID, DisplayName: a.DisplayName, AgentCode: a.Code, Identity: a.identity()}
			out.Summary.Targets++
			switch {
			case a.Disabled:
				t.Status, t.Reason = "skipped", "agent_disabled"
			case !m.Subscribed:
				t.Status, t.Reason = "skipped", "unsubscribed"
			default:
				r, err := s.createRequestTx(ctx, tx, sender, a, &w, msg, "", OriginBroadcast, out.BroadcastID)
				if err != nil {
					code := protocol.CodeOf(err)
					if !skippable[code] {
						return err
					}
					t.Status, t.Reason = "skipped", code
					break
				}
				t.ChatRequestID = r.ID
				t.Status = "pending"
				if r.Status == RequestAccepted {
					t.Status = "accepted"
				}
				if err := s.notice(ctx, tx, EventWorldBroadcast, a.AgentID, NoticeWorldBroadcast, "Broadcast in "+w.DisplayName,
					sender.identity()+" broadcast to the members of "+w.DisplayName+".",
					map[string]any{"worldId": w.ID, "broadcastId": out.BroadcastID, "chatRequestId": r.ID, "fromAgentId": from,
						"replyPolicy": w.Broadcast.ReplyPolicy}); err != nil {
					return err
				}
			}
			switch t.Status {
			case "accepted":
				out.Summary.Requested++
				out.Summary.Accepted++
			case "pending":
				out.Summary.Requested++
				out.Summary.Pending++
			default:
				out.Summary.Skipped++
			}
			out.Results = append(out.Results, t)
		}
		if !w.Broadcast.ExcludeSelf {
			if err := s.notice(ctx, tx, EventWorldBroadcast, from, NoticeWorldBroadcast, "Your broadcast in "+w.DisplayName,
				fmt.Sprintf("Your broadcast reached %d of %d members.", out.Summary.Requested, out.Summary.Targets),
				map[string]any{"worldId": w.ID, "broadcastId": out.BroadcastID}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return BroadcastResult{}, err
	}
	s.log.Info("world broadcast", "worldId", worldID, "broadcastId", out.BroadcastID, "targets", out.Summary.Targets, "requested", out.Summary.Requested)
	return out, nil
}
