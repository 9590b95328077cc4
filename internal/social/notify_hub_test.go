package social_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/social"
)

// hubAgent is an onboarded agent of a running hub.
type hubAgent struct {
	ID, Name, Code string
	C              *client.Client
}

func onboard(t *testing.T, h *apptest.Hub, name, contactPolicy string) hubAgent {
	t.Helper()
	ctx := context.Background()
	act, err := client.New(h.URL, "").Activate(ctx, client.ActivateInput{DisplayName: name})
	if err != nil {
		t.Fatal(err)
	}
	c := h.Client(act.AppToken)
	human, prof := name+"'s owner, who likes trail running", name+": a friendly agent who plans weekend runs"
	if _, err := c.UpdateAccount(ctx, client.AccountUpdate{Action: social.ActionUpdate, HumanProfile: &human, AgentProfile: &prof,
		ContactPolicy: &contactPolicy}); err != nil {
		t.Fatal(err)
	}
	return hubAgent{ID: act.AgentID, Name: name, Code: act.AgentCode, C: c}
}

// reqUpdate is one request.updated delivery as an agent reads it from its inbox.
type reqUpdate struct {
	session string
	env     *protocol.Envelope
	data    social.RequestUpdate
	raw     map[string]any
}

// requestUpdates drains the agent's management session and returns its
// request.updated deliveries in order (acking everything it reads).
func requestUpdates(t *testing.T, a hubAgent) []reqUpdate {
	t.Helper()
	ctx := context.Background()
	var out []reqUpdate
	for {
		ds, err := a.C.Inbox(ctx, client.InboxOptions{Session: social.ManagementSessionKey(a.ID), Limit: 50})
		if err != nil {
			t.Fatalf("inbox of %s: %v", a.Name, err)
		}
		if len(ds) == 0 {
			return out
		}
		for _, d := range ds {
			if _, err := a.C.Ack(ctx, d.DeliveryID, d.Attempt); err != nil {
				t.Fatal(err)
			}
			env, err := d.Decode()
			if err != nil {
				t.Fatal(err)
			}
			if env.Type != protocol.TypeNotification {
				continue
			}
			var n struct {
				Event string          `json:"event"`
				Data  json.RawMessage `json:"data"`
			}
			if err := json.Unmarshal(env.Payload, &n); err != nil || n.Event != social.EventRequestUpdated {
				continue
			}
			u := reqUpdate{session: d.SessionKey, env: env}
			if err := json.Unmarshal(n.Data, &u.data); err != nil {
				t.Fatalf("request.updated data %s: %v", n.Data, err)
			}
			_ = json.Unmarshal(n.Data, &u.raw)
			out = append(out, u)
		}
	}
}

// byType indexes updates by updateType (the last of each type wins).
func byType(us []reqUpdate) map[string]reqUpdate {
	out := map[string]reqUpdate{}
	for _, u := range us {
		out[u.data.UpdateType] = u
	}
	return out
}

// request.updated reaches both parties' management sessions through the
// hub's real notifier (the bus): on create, accept and close, each side gets
// a system:social notification in management:<agentId> whose data is the
// request as that side sees it — direction, counterparty, its own
// conversation session key, status and nextAction per the Claworld
// contract, the kickoff record and chat once accepted, and the sender's
// brief only in the sender's copy.
func TestRequestUpdatedReachesBothManagementSessions(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		ctx := context.Background()
		alice := onboard(t, h, "Alice", social.PolicyOpen)
		bob := onboard(t, h, "Bob", social.PolicyApproval)
		brief := "Find out whether Bob runs on Saturdays; stop once that is clear."
		req, err := alice.C.RequestChat(ctx, client.ChatRequestInput{DisplayName: bob.Name, AgentCode: bob.Code, OpeningMessage: brief})
		if err != nil {
			t.Fatal(err)
		}
		if req.Status != social.RequestPending {
			t.Fatalf("request to an approval_required agent: %s", req.Status)
		}
		// Bob reads his pending request before deciding.
		created := map[string]reqUpdate{"Alice": byType(requestUpdates(t, alice))["created"], "Bob": byType(requestUpdates(t, bob))["created"]}

		if _, err := bob.C.AcceptChatRequest(ctx, req.ChatRequestID, bob.ID); err != nil {
			t.Fatal(err)
		}
		accepted := map[string]reqUpdate{"Alice": byType(requestUpdates(t, alice))["accepted"], "Bob": byType(requestUpdates(t, bob))["accepted"]}

		if _, err := alice.C.CloseConversation(ctx, client.CloseInput{ActorAgentID: alice.ID, ConversationKey: req.Conversation.ConversationKey}); err != nil {
			t.Fatal(err)
		}
		ended := map[string]reqUpdate{"Alice": byType(requestUpdates(t, alice))["ended"], "Bob": byType(requestUpdates(t, bob))["ended"]}

		for _, side := range []struct {
			me, peer  hubAgent
			direction string
			pending   string
			brief     string
		}{
			{alice, bob, "outbound", social.NextWaitPeerAcceptance, brief},
			{bob, alice, "inbound", social.NextReviewInbound, ""},
		} {
			for _, step := range []struct {
				name    string
				u       reqUpdate
				status  string
				next    string
				chat    string
				kickoff string
			}{
				{"created", created[side.me.Name], social.RequestPending, side.pending, "", ""},
				{"accepted", accepted[side.me.Name], social.RequestAccepted, social.NextWaitRuntime, social.ChatOpening, social.KickoffQueued},
				{"ended", ended[side.me.Name], social.RequestClosed, social.NextConversationClosed, social.ChatEnded, social.KickoffSkipped},
			} {
				u, who := step.u, side.me.Name+" "+step.name
				if u.env == nil {
					t.Errorf("%s: no request.updated in the management session", who)
					continue
				}
				if u.session != "management:"+side.me.ID || u.env.From.Agent != "system:social" || u.env.To.Agent != side.me.ID || u.env.Type != protocol.TypeNotification {
					t.Errorf("%s: delivery %s from %s to %s (%s)", who, u.session, u.env.From.Agent, u.env.To.Agent, u.env.Type)
				}
				d := u.data
				if d.ChatRequestID != req.ChatRequestID || d.FromAgentID != alice.ID || d.ToAgentID != bob.ID {
					t.Errorf("%s: request %s %s→%s", who, d.ChatRequestID, d.FromAgentID, d.ToAgentID)
				}
				if d.Status != step.status || d.NextAction != step.next || d.Direction != side.direction {
					t.Errorf("%s: status %s nextAction %s direction %s, want %s %s %s", who, d.Status, d.NextAction, d.Direction, step.status, step.next, side.direction)
				}
				if d.Counterparty.AgentID != side.peer.ID || d.Counterparty.Identity != side.peer.Name+"#"+side.peer.Code {
					t.Errorf("%s: counterparty %+v", who, d.Counterparty)
				}
				if want := "conversation:" + side.me.ID + ":" + side.peer.ID; d.Conversation.SessionKey != want || d.Conversation.Mode != "direct" {
					t.Errorf("%s: conversation %+v, want session %s", who, d.Conversation, want)
				}
				if d.OpeningMessage != side.brief {
					t.Errorf("%s: openingMessage %q, want %q (the brief is the sender's only)", who, d.OpeningMessage, side.brief)
				}
				for _, field := range []string{"chatRequestId", "fromAgentId", "toAgentId", "conversation", "status", "createdAt", "expiresAt", "nextAction", "updateType"} {
					if _, ok := u.raw[field]; !ok {
						t.Errorf("%s: data has no %s: %v", who, field, u.raw)
					}
				}
				if step.chat == "" {
					if d.Kickoff != nil || d.Chat != nil {
						t.Errorf("%s: a pending request carries a kickoff or chat: %+v %+v", who, d.Kickoff, d.Chat)
					}
					continue
				}
				if d.Kickoff == nil || d.Chat == nil {
					t.Errorf("%s: no kickoff record or chat", who)
					continue
				}
				if d.Chat.Status != step.chat || d.Kickoff.Status != step.kickoff || d.Kickoff.ConversationKey != req.Conversation.ConversationKey ||
					d.Chat.LocalSessionKey != d.Conversation.SessionKey || d.RespondedAt.IsZero() {
					t.Errorf("%s: chat %s kickoff %s (%s), want %s %s", who, d.Chat.Status, d.Kickoff.Status, d.Kickoff.ConversationKey, step.chat, step.kickoff)
				}
			}
		}
	})
}
