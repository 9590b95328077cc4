package social_test

import (
	"testing"

	"github.com/switchboard-hub/switchboard/internal/social"
)

func TestListChatsAndWorldPendingRequests(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		alice := e.agent("Alice", policy(social.PolicyOpen))
		bob := e.agent("Bob", policy(social.PolicyOpen))
		carol := e.agent("Carol", policy(social.PolicyApproval))
		dave := e.agent("Dave", policy(social.PolicyApproval))
		w := e.world(alice, "Trail Club")
		for _, a := range []social.Account{bob, carol, dave} {
			e.join(a, w, a.DisplayName+" runs trails")
		}
		chat := e.mustRequest(alice, bob, w.WorldID) // open: accepted, a chat starts
		if chat.Chat == nil {
			t.Fatalf("open policy should start a chat: %+v", chat)
		}
		pend := e.mustRequest(bob, carol, w.WorldID) // approval: pending
		e.mustRequest(alice, dave, w.WorldID)        // approval: pending

		admin := social.Actor{Admin: true}
		all, err := e.svc.ListChats(e.ctx, admin, social.ChatFilter{})
		if err != nil || len(all) != 1 || all[0].ChatRequestID != chat.ChatRequestID {
			t.Fatalf("admin chats %+v %v", all, err)
		}
		for _, tc := range []struct {
			who  social.Account
			f    social.ChatFilter
			want int
		}{
			{alice, social.ChatFilter{}, 1},
			{bob, social.ChatFilter{Status: "live"}, 1},
			{bob, social.ChatFilter{Status: social.ChatEnded}, 0},
			{bob, social.ChatFilter{WorldID: "wld_other"}, 0},
			{carol, social.ChatFilter{}, 0},
		} {
			got, err := e.svc.ListChats(e.ctx, social.AgentActor(tc.who.AgentID), tc.f)
			if err != nil || len(got) != tc.want {
				t.Fatalf("%s %+v: %d chats (%v), want %d", tc.who.DisplayName, tc.f, len(got), err, tc.want)
			}
		}
		_, err = e.svc.ListChats(e.ctx, admin, social.ChatFilter{Status: "nonsense"})
		wantCode(t, err, "invalid_status")
		_, err = e.svc.ListChats(e.ctx, social.Actor{}, social.ChatFilter{})
		wantCode(t, err, "agent_required")

		// Moderators see every pending request of the world; members only theirs.
		for _, tc := range []struct {
			who   social.Actor
			want  int
			first string
		}{
			{admin, 2, pend.ChatRequestID},
			{social.AgentActor(alice.AgentID), 2, pend.ChatRequestID},
			{social.AgentActor(carol.AgentID), 1, pend.ChatRequestID},
			{social.AgentActor(dave.AgentID), 1, ""},
		} {
			got, err := e.svc.WorldPendingRequests(e.ctx, tc.who, w.WorldID, 0)
			if err != nil || len(got) != tc.want {
				t.Fatalf("%+v: %+v %v", tc.who, got, err)
			}
			if tc.first != "" && (got[0].ChatRequestID != tc.first || got[0].FromAgentID != bob.AgentID || got[0].ToAgentID != carol.AgentID || got[0].CreatedAt.IsZero()) {
				t.Fatalf("%+v: first %+v", tc.who, got[0])
			}
		}
		outsider := e.agent("Erin")
		_, err = e.svc.WorldPendingRequests(e.ctx, social.AgentActor(outsider.AgentID), w.WorldID, 0)
		wantCode(t, err, "world_membership_required")
		_, err = e.svc.WorldPendingRequests(e.ctx, admin, "wld_missing", 0)
		wantCode(t, err, "world_not_found")
	})
}
