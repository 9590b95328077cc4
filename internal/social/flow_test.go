package social_test

import (
	"encoding/json"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/social"
)

// The core flow at the service level: worlds, membership, candidates,
// requests under each contact policy, accept, inbox counts, close.
func TestServiceFlow(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		alice := e.agent("Alice")
		bob := e.agent("Bob", policy(social.PolicyApproval))
		carol := e.agent("Carol", policy("reject_all"))

		w := e.world(alice, "Trail Runners", func(in *social.WorldInput) { in.Tags = &[]string{"Running", "#outdoors"} })
		if w.OwnerAgentID != alice.AgentID || w.Stats.ActiveParticipants != 1 || w.ViewerMembership == nil || w.ViewerMembership.Role != social.RoleOwner {
			t.Fatalf("world %+v", w)
		}
		if len(w.Tags) != 2 || w.Tags[0] != "running" || w.Tags[1] != "outdoors" {
			t.Fatalf("tags %v", w.Tags)
		}
		e.join(bob, w, "I run trails in the mountains every weekend")
		e.join(carol, w, "Coffee lover")

		feed, err := e.svc.Candidates(e.ctx, social.AgentActor(alice.AgentID), w.WorldID, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(feed.Candidates) != 1 || feed.Candidates[0].AgentID != bob.AgentID {
			t.Fatalf("candidates (carol is closed): %+v", feed)
		}

		// approval_required → pending + notification.
		req := e.mustRequest(alice, bob, w.WorldID)
		if req.Status != social.RequestPending || req.NextAction != social.NextWaitPeerAcceptance || req.Kickoff != nil {
			t.Fatalf("pending request %+v", req)
		}
		if n := e.rec.For(bob.AgentID, social.EventNotification); len(n) != 1 {
			t.Fatalf("bob notifications: %v", n)
		}
		var note social.NoticePayload
		json.Unmarshal(e.rec.For(bob.AgentID, social.EventNotification)[0].Payload, &note)
		if note.NotificationType != social.NoticeChatRequestReceived || note.TargetSessionKey != "management:"+bob.AgentID {
			t.Fatalf("notice %+v", note)
		}
		if _, err := e.request(alice, bob, w.WorldID); err == nil {
			t.Fatal("duplicate pending accepted")
		}
		// candidates exclude pending pairs
		feed, _ = e.svc.Candidates(e.ctx, social.AgentActor(alice.AgentID), w.WorldID, 0)
		if len(feed.Candidates) != 0 {
			t.Fatalf("candidates with pending request: %+v", feed.Candidates)
		}
		acc, err := e.svc.AcceptRequest(e.ctx, social.AgentActor(bob.AgentID), req.ChatRequestID)
		if err != nil {
			t.Fatal(err)
		}
		if acc.Status != social.RequestAccepted || acc.Chat == nil || acc.Chat.Status != social.ChatOpening ||
			acc.Kickoff.Status != social.KickoffQueued || acc.NextAction != social.NextWaitRuntime || acc.OpeningMessage != "" {
			t.Fatalf("accepted %+v", acc)
		}
		if acc.Chat.LocalSessionKey != "conversation:"+bob.AgentID+":"+alice.AgentID+":"+w.WorldID {
			t.Fatalf("local session key %q", acc.Chat.LocalSessionKey)
		}
		wantCode(t, func() error { _, err := e.request(alice, bob, w.WorldID); return err }(), "conversation_already_active")

		// closed → refused
		_, err = e.request(alice, carol, "")
		wantCode(t, err, "contact_policy_closed")

		// open → accepted at once
		dave := e.agent("Dave")
		auto := e.mustRequest(bob, dave, "")
		if auto.Status != social.RequestAccepted || auto.Chat == nil || auto.Kickoff == nil {
			t.Fatalf("auto accept %+v", auto)
		}

		inbox, err := e.svc.Inbox(e.ctx, social.AgentActor(bob.AgentID), social.InboxFilters{})
		if err != nil {
			t.Fatal(err)
		}
		g := inbox.Counts.Global
		if g.Total != 2 || g.Accepted != 2 || g.ActiveChats != 2 || len(inbox.Chats) != 2 || len(inbox.PendingRequests) != 0 {
			t.Fatalf("bob inbox %+v", inbox.Counts)
		}
		inbox, _ = e.svc.Inbox(e.ctx, social.AgentActor(bob.AgentID), social.InboxFilters{Direction: "inbound"})
		if inbox.Counts.Filtered.Total != 1 || len(inbox.Chats) != 1 || inbox.Chats[0].Counterparty.AgentID != alice.AgentID {
			t.Fatalf("bob inbound %+v", inbox)
		}

		closed, err := e.svc.CloseConversation(e.ctx, social.AgentActor(alice.AgentID), social.CloseInput{ConversationKey: acc.Conversation.ConversationKey})
		if err != nil {
			t.Fatal(err)
		}
		if closed.Status != social.RequestClosed || closed.Chat.Status != social.ChatEnded {
			t.Fatalf("closed %+v", closed)
		}
		// Same pair again reuses the conversation key.
		again := e.mustRequest(alice, bob, w.WorldID)
		if again.Conversation.ConversationKey != acc.Conversation.ConversationKey {
			t.Fatalf("conversation key changed: %s vs %s", again.Conversation.ConversationKey, acc.Conversation.ConversationKey)
		}

		res, err := e.svc.Search(e.ctx, social.AgentActor(alice.AgentID), social.SearchInput{Query: "trail mountains"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Results) == 0 {
			t.Fatalf("search: %+v", res)
		}
		t.Logf("search: %+v", res.Results)
	})
}
