package httpapi_test

import (
	"context"
	"net/url"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/social"
)

// Another agent's token walks every endpoint of the social layer against
// the first agent's account, worlds, memberships, requests and chats: it
// reads nothing of hers (no secret text or code appears in any answer) and
// changes nothing (the stored state is identical afterwards). The walk must
// cover every registered social route, so a new endpoint without an
// authorization case fails this test.
func TestSocialAuthorizationWalk(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		ctx := context.Background()
		secrets := []string{"SECRET-HUMAN", "SECRET-AGENT", "SECRET-WORLD", "SECRET-BRIEF", "SECRET-MEMBER", "SECRET-INVITE"}
		alice, ac := ready(t, h, "Alicia", "SECRET-HUMAN profile", "SECRET-AGENT profile")
		if _, err := ac.UpdateAccount(ctx, client.AccountUpdate{Action: "update_chat_policy", VisibilityMode: ptr("private")}); err != nil {
			t.Fatal(err)
		}
		secrets = append(secrets, alice.AgentCode)
		bob, bc := ready(t, h, "Bob", "bob human", "bob agent")
		carol, _ := ready(t, h, "Carol", "carol human", "carol agent")
		_, mc := ready(t, h, "Mallory", "mallory human", "mallory agent")
		setPolicy(t, bc, social.PolicyApproval)

		private, err := ac.CreateWorld(ctx, client.WorldInput{DisplayName: ptr("SECRET-WORLD name"), WorldContextText: ptr("SECRET-WORLD rules"),
			Visibility: ptr("private"), ParticipantContextText: ptr("SECRET-MEMBER text"), Broadcast: &social.BroadcastInput{Enabled: ptr(true)}})
		if err != nil {
			t.Fatal(err)
		}
		public, err := ac.CreateWorld(ctx, client.WorldInput{DisplayName: ptr("Open Plaza"), WorldContextText: ptr("anyone may look"),
			ParticipantContextText: ptr("SECRET-MEMBER plaza"), Broadcast: &social.BroadcastInput{Enabled: ptr(true)}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ac.InviteToWorld(ctx, private.WorldID, client.MemberTarget{Identity: bob.Identity, Message: "SECRET-INVITE note"}); err != nil {
			t.Fatal(err)
		}
		pending, err := ac.RequestChat(ctx, client.ChatRequestInput{DisplayName: "Bob", AgentCode: bob.AgentCode, OpeningMessage: "SECRET-BRIEF one"})
		if err != nil {
			t.Fatal(err)
		}
		live, err := ac.RequestChat(ctx, client.ChatRequestInput{DisplayName: "Carol", AgentCode: carol.AgentCode, OpeningMessage: "SECRET-BRIEF two"})
		if err != nil || live.Chat == nil {
			t.Fatalf("live chat %+v %v", live, err)
		}
		inv, err := h.Admin.CreateInvite(ctx, client.InviteInput{})
		if err != nil {
			t.Fatal(err)
		}

		A, PW, PUB := alice.AgentID, private.WorldID, public.WorldID
		q := func(k, v string) string { return "?" + k + "=" + url.QueryEscape(v) }
		type step struct {
			route, path, body string
			status            int
		}
		steps := []step{
			{"POST /v1/onboarding/activate", "/v1/onboarding/activate", j(map[string]string{"displayName": alice.Identity}), 400},
			{"GET /v1/account", "/v1/account" + q("agentId", A), "", 403},
			{"POST /v1/account", "/v1/account", j(map[string]string{"agentId": A, "action": "update_profile", "humanProfile": "pwned"}), 403},
			{"POST /v1/account", "/v1/account", j(map[string]string{"agentId": A, "action": "view"}), 403},
			{"GET /v1/account/share-card", "/v1/account/share-card" + q("agentId", A), "", 403},
			{"GET /v1/public-profiles/lookup", "/v1/public-profiles/lookup" + q("identity", alice.Identity), "", 404},
			{"GET /v1/public-profiles/lookup", "/v1/public-profiles/lookup" + q("agentId", A), "", 403},
			{"GET /v1/public-profiles/{agentId}", "/v1/public-profiles/" + A, "", 404},
			{"GET /v1/public-profiles/{agentId}", "/v1/public-profiles/" + A + q("viewerAgentId", A), "", 403},
			{"POST /v1/admin/invites", "/v1/admin/invites", `{}`, 403},
			{"GET /v1/admin/invites", "/v1/admin/invites", "", 403},
			{"POST /v1/admin/invites/{id}/revoke", "/v1/admin/invites/" + inv.InviteID + "/revoke", "", 403},
			{"GET /v1/worlds", "/v1/worlds", "", 200},
			{"GET /v1/worlds", "/v1/worlds" + q("query", "SECRET"), "", 200},
			{"GET /v1/worlds", "/v1/worlds" + q("agentId", A), "", 403},
			{"POST /v1/worlds", "/v1/worlds", j(map[string]string{"agentId": A, "displayName": "x", "worldContextText": "y"}), 403},
			{"GET /v1/worlds/{id}", "/v1/worlds/" + PW, "", 404},
			{"GET /v1/worlds/{id}", "/v1/worlds/" + PW + q("agentId", A), "", 403},
			{"POST /v1/worlds/{id}/join", "/v1/worlds/" + PW + "/join", `{"participantContextText":"let me in"}`, 404},
			{"POST /v1/worlds/{id}/join", "/v1/worlds/" + PUB + "/join", j(map[string]string{"agentId": A, "participantContextText": "pwned"}), 403},
			{"GET /v1/worlds/{id}/membership", "/v1/worlds/" + PW + "/membership", "", 404},
			{"GET /v1/worlds/{id}/membership", "/v1/worlds/" + PUB + "/membership" + q("agentId", A), "", 403},
			{"PATCH /v1/worlds/{id}/membership", "/v1/worlds/" + PUB + "/membership", j(map[string]string{"agentId": A, "participantContextText": "pwned"}), 403},
			{"PATCH /v1/worlds/{id}/membership", "/v1/worlds/" + PUB + "/membership", `{"participantContextText":"pwned"}`, 404},
			{"POST /v1/worlds/{id}/membership/leave", "/v1/worlds/" + PUB + "/membership/leave", j(map[string]string{"agentId": A}), 403},
			{"POST /v1/worlds/{id}/membership/leave", "/v1/worlds/" + PW + "/membership/leave", "", 404},
			{"GET /v1/world-memberships", "/v1/world-memberships" + q("agentId", A), "", 403},
			{"GET /v1/world-memberships", "/v1/world-memberships", "", 200},
			{"GET /v1/world-invitations", "/v1/world-invitations" + q("agentId", bob.AgentID), "", 403},
			{"GET /v1/world-invitations", "/v1/world-invitations", "", 200},
			{"GET /v1/worlds/{id}/memberships", "/v1/worlds/" + PW + "/memberships", "", 404},
			{"GET /v1/worlds/{id}/memberships", "/v1/worlds/" + PUB + "/memberships", "", 403},
			{"GET /v1/worlds/{id}/candidates", "/v1/worlds/" + PW + "/candidates", "", 404},
			{"GET /v1/worlds/{id}/candidates", "/v1/worlds/" + PUB + "/candidates" + q("agentId", A), "", 403},
			{"POST /v1/worlds/{id}/broadcast", "/v1/worlds/" + PW + "/broadcast", `{"openingMessage":"hi all"}`, 404},
			{"POST /v1/worlds/{id}/broadcast", "/v1/worlds/" + PUB + "/broadcast", `{"openingMessage":"hi all"}`, 403},
			{"POST /v1/worlds/{id}/broadcast", "/v1/worlds/" + PUB + "/broadcast", j(map[string]string{"fromAgentId": A, "openingMessage": "hi"}), 403},
			{"GET /v1/moderation/worlds/{id}", "/v1/moderation/worlds/" + PW, "", 404},
			{"GET /v1/moderation/worlds/{id}", "/v1/moderation/worlds/" + PUB, "", 403},
			{"PATCH /v1/moderation/worlds/{id}", "/v1/moderation/worlds/" + PW, `{"action":"close"}`, 404},
			{"PATCH /v1/moderation/worlds/{id}", "/v1/moderation/worlds/" + PUB, `{"action":"close"}`, 403},
			{"PATCH /v1/moderation/worlds/{id}", "/v1/moderation/worlds/" + PUB, j(map[string]string{"agentId": A, "action": "close"}), 403},
			{"POST /v1/moderation/worlds/{id}/invitations", "/v1/moderation/worlds/" + PW + "/invitations", j(map[string]string{"identity": carol.Identity}), 404},
			{"POST /v1/moderation/worlds/{id}/invitations", "/v1/moderation/worlds/" + PUB + "/invitations", j(map[string]string{"identity": carol.Identity}), 403},
			{"POST /v1/moderation/worlds/{id}/invitations/revoke", "/v1/moderation/worlds/" + PW + "/invitations/revoke", j(map[string]string{"identity": bob.Identity}), 404},
			{"POST /v1/moderation/worlds/{id}/members/remove", "/v1/moderation/worlds/" + PUB + "/members/remove", j(map[string]string{"agentId": A}), 403},
			{"POST /v1/moderation/worlds/{id}/members/ban", "/v1/moderation/worlds/" + PUB + "/members/ban", j(map[string]string{"agentId": bob.AgentID}), 403},
			{"POST /v1/moderation/worlds/{id}/members/ban", "/v1/moderation/worlds/" + PW + "/members/ban", j(map[string]string{"agentId": bob.AgentID}), 404},
			{"POST /v1/moderation/worlds/{id}/members/unban", "/v1/moderation/worlds/" + PUB + "/members/unban", j(map[string]string{"agentId": bob.AgentID}), 403},
			{"POST /v1/moderation/worlds/{id}/members/role", "/v1/moderation/worlds/" + PUB + "/members/role", j(map[string]string{"agentId": A, "role": "member"}), 403},
			{"POST /v1/moderation/worlds/{id}/members/role", "/v1/moderation/worlds/" + PUB + "/members/role", j(map[string]string{"actorAgentId": A, "agentId": bob.AgentID, "role": "admin"}), 403},
			{"POST /v1/search", "/v1/search", j(map[string]string{"agentId": A, "query": "x"}), 403},
			{"POST /v1/search", "/v1/search", `{"query":"SECRET"}`, 200},
			{"POST /v1/search", "/v1/search", j(map[string]string{"query": alice.Identity, "scope": "people"}), 200},
			{"POST /v1/search", "/v1/search", j(map[string]string{"query": "profile", "scope": "world_members"}), 200},
			{"POST /v1/chat-requests", "/v1/chat-requests", j(map[string]string{"fromAgentId": A, "displayName": "Bob", "agentCode": bob.AgentCode, "openingMessage": "pwned"}), 403},
			{"POST /v1/chat-requests", "/v1/chat-requests", j(map[string]string{"displayName": "Alicia", "agentCode": alice.AgentCode, "openingMessage": "hi"}), 404},
			{"GET /v1/chat-requests", "/v1/chat-requests" + q("agentId", A), "", 403},
			{"GET /v1/chat-requests", "/v1/chat-requests" + q("conversationKey", live.Conversation.ConversationKey), "", 200},
			{"GET /v1/chat-requests", "/v1/chat-requests" + q("localSessionKey", live.Conversation.SessionKey), "", 200},
			{"GET /v1/chat-requests/{id}", "/v1/chat-requests/" + pending.ChatRequestID, "", 404},
			{"GET /v1/chat-requests/{id}", "/v1/chat-requests/" + pending.ChatRequestID + q("agentId", A), "", 403},
			{"POST /v1/chat-requests/{id}/accept", "/v1/chat-requests/" + pending.ChatRequestID + "/accept", "", 404},
			{"POST /v1/chat-requests/{id}/accept", "/v1/chat-requests/" + pending.ChatRequestID + "/accept", j(map[string]string{"actorAgentId": bob.AgentID}), 403},
			{"POST /v1/chat-requests/{id}/reject", "/v1/chat-requests/" + pending.ChatRequestID + "/reject", "", 404},
			{"POST /v1/chat-requests/{id}/reject", "/v1/chat-requests/" + pending.ChatRequestID + "/reject", j(map[string]string{"actorAgentId": bob.AgentID}), 403},
			{"POST /v1/chat-requests/conversations/close", "/v1/chat-requests/conversations/close", j(map[string]string{"conversationKey": live.Conversation.ConversationKey}), 404},
			{"POST /v1/chat-requests/conversations/close", "/v1/chat-requests/conversations/close", j(map[string]string{"localSessionKey": live.Conversation.SessionKey}), 404},
			{"POST /v1/chat-requests/conversations/close", "/v1/chat-requests/conversations/close", j(map[string]string{"chatRequestId": live.ChatRequestID}), 404},
			{"POST /v1/chat-requests/conversations/close", "/v1/chat-requests/conversations/close", j(map[string]string{"actorAgentId": A, "chatRequestId": live.ChatRequestID}), 403},
		}

		before := socialState(t, h)
		covered := map[string]bool{}
		for _, s := range steps {
			covered[s.route] = true
			method := strings.SplitN(s.route, " ", 2)[0]
			r := call(t, method, h.URL+s.path, mc.Token, "application/json", []byte(s.body))
			if r.status != s.status {
				t.Errorf("%s %s: status %d, want %d: %s", method, s.path, r.status, s.status, r.raw)
			}
			sent, _ := url.QueryUnescape(s.path)
			sent += s.body
			for _, sec := range secrets {
				// An answer may echo what the caller sent (filters, the code it
				// looked up), never anything else of hers.
				if strings.Contains(r.raw, sec) && !strings.Contains(sent, sec) {
					t.Errorf("%s %s leaked %q: %s", method, s.path, sec, r.raw)
				}
			}
			if strings.Contains(r.raw, PW) && !strings.Contains(s.path, PW) {
				t.Errorf("%s %s revealed the private world id: %s", method, s.path, r.raw)
			}
			if r.status == 200 {
				for _, id := range []string{pending.ChatRequestID, live.ChatRequestID, live.Conversation.ConversationKey} {
					if strings.Contains(r.raw, id) && !strings.Contains(sent, id) {
						t.Errorf("%s %s revealed %s: %s", method, s.path, id, r.raw)
					}
				}
			}
		}
		if after := socialState(t, h); after != before {
			t.Fatalf("the walk changed state:\nbefore %s\nafter  %s", before, after)
		}
		for _, op := range h.App.API.Router().Ops() {
			switch op.Tag {
			case "social", "worlds", "moderation", "chat":
				if !covered[op.Method+" "+op.Path] {
					t.Errorf("route %s %s is not walked by the authorization test", op.Method, op.Path)
				}
			}
		}
		// Her own view is untouched.
		acct, err := ac.Account(ctx, "")
		if err != nil || acct.HumanProfile != "SECRET-HUMAN profile" || acct.VisibilityMode != social.VisibilityPrivate {
			t.Fatalf("alice account %+v %v", acct, err)
		}
	})
}
