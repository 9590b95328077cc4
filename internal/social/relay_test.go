package social_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/internal/social"
	"github.com/switchboard-hub/switchboard/internal/store"
)

// fakeRelay records the social layer's calls.
type fakeRelay struct {
	mu       sync.Mutex
	accepted []social.Chat
	closed   map[string]string
}

func (f *fakeRelay) ChatAccepted(ctx context.Context, tx *store.Tx, c social.Chat) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.accepted = append(f.accepted, c)
	return nil
}

func (f *fakeRelay) ChatClosed(ctx context.Context, tx *store.Tx, c social.Chat, reason string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed == nil {
		f.closed = map[string]string{}
	}
	f.closed[c.ChatRequestID] = reason
	return nil
}

func (e *env) tx(fn func(tx *store.Tx) error) {
	e.t.Helper()
	if err := e.db.Write(e.ctx, fn); err != nil {
		e.t.Fatal(err)
	}
}

func lastUpdate(t *testing.T, e *env, agentID string) social.RequestUpdate {
	t.Helper()
	ups := e.rec.For(agentID, social.EventRequestUpdated)
	if len(ups) == 0 {
		t.Fatalf("no request.updated for %s", agentID)
	}
	var u social.RequestUpdate
	if err := json.Unmarshal(ups[len(ups)-1].Payload, &u); err != nil {
		t.Fatal(err)
	}
	return u
}

// The relay's view of a chat: it is told about acceptance, advances the
// kickoff, counts turns and feedback, and ends the chat; every step reaches
// both parties as request.updated with the right nextAction.
func TestRelayAPI(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		relay := &fakeRelay{}
		e.svc.SetRelay(relay)
		alice, bob := e.agent("Alice"), e.agent("Bob")
		w := e.world(alice, "Runners", func(in *social.WorldInput) {
			in.Policy = &social.PolicyInput{MaxTurns: ptr(6), ReportingRequired: ptr(true)}
		})
		e.join(bob, w, "I run in the hills")
		req := e.mustRequest(alice, bob, w.WorldID)
		if len(relay.accepted) != 1 || relay.accepted[0].ChatRequestID != req.ChatRequestID || relay.accepted[0].Status != social.ChatOpening {
			t.Fatalf("relay not told about acceptance: %+v", relay.accepted)
		}
		id := req.ChatRequestID

		var cctx social.ChatContext
		e.tx(func(tx *store.Tx) error {
			var err error
			cctx, err = e.svc.ChatContextTx(e.ctx, tx, id)
			return err
		})
		if cctx.OpeningMessage == "" || cctx.World == nil || cctx.World.Policy.MaxTurns != 6 || !cctx.World.Policy.ReportingRequired ||
			cctx.Sender.Identity != alice.Identity || cctx.Recipient.ParticipantContextText != "I run in the hills" || cctx.Origin != social.OriginRequest {
			t.Fatalf("chat context %+v", cctx)
		}

		steps := []struct {
			u          social.KickoffUpdate
			status     string
			nextAction string
		}{
			{social.KickoffUpdate{Status: social.KickoffSent, SenderKickoffDeliveredAt: e.clock.Now()}, social.ChatOpening, social.NextWaitOpenerDelivery},
			{social.KickoffUpdate{OpenerAcceptedAt: e.clock.Now(), OpenerDeliveryID: "dlv_x"}, social.ChatOpening, social.NextWaitOpenerDelivery},
			{social.KickoffUpdate{Status: social.KickoffEstablished, OpenerDeliveredAt: e.clock.Now()}, social.ChatActive, social.NextRuntimeOwnsConversation},
		}
		for _, st := range steps {
			e.rec.Reset()
			e.tx(func(tx *store.Tx) error {
				c, err := e.svc.UpdateKickoffTx(e.ctx, tx, id, st.u)
				if err == nil && c.Status != st.status {
					t.Errorf("after %+v chat status %s, want %s", st.u, c.Status, st.status)
				}
				return err
			})
			for _, side := range []string{alice.AgentID, bob.AgentID} {
				u := lastUpdate(t, e, side)
				if u.NextAction != st.nextAction || u.Kickoff == nil || u.Kickoff.NextAction != st.nextAction || u.Chat.Status != st.status {
					t.Fatalf("%s sees %+v after %+v", side, u, st.u)
				}
			}
		}
		view, _ := e.svc.Request(e.ctx, social.AgentActor(bob.AgentID), id)
		k := view.Kickoff
		if k.OpenerDeliveryID != "dlv_x" || k.SenderKickoffDeliveredAt.IsZero() || k.LiveChatEstablishedAt.IsZero() || k.OpenerAcceptedAt.IsZero() ||
			k.LocalSessionKey != "conversation:"+bob.AgentID+":"+alice.AgentID+":"+w.WorldID {
			t.Fatalf("kickoff record %+v", k)
		}

		e.clock.Advance(time.Minute)
		e.tx(func(tx *store.Tx) error {
			for _, from := range []string{alice.AgentID, bob.AgentID, alice.AgentID} {
				if _, err := e.svc.RecordTurnTx(e.ctx, tx, id, from); err != nil {
					return err
				}
			}
			c, applied, err := e.svc.RecordFeedbackTx(e.ctx, tx, id, alice.AgentID, social.FeedbackLike)
			if err != nil || !applied || c.SenderFeedback != social.FeedbackLike {
				t.Errorf("first like: %+v %v %v", c, applied, err)
			}
			_, applied, err = e.svc.RecordFeedbackTx(e.ctx, tx, id, alice.AgentID, social.FeedbackDislike)
			if err != nil || applied {
				t.Errorf("second feedback counted: %v %v", applied, err)
			}
			_, _, err = e.svc.RecordFeedbackTx(e.ctx, tx, id, bob.AgentID, social.FeedbackDislike)
			return err
		})
		in, _ := e.svc.Inbox(e.ctx, social.AgentActor(bob.AgentID), social.InboxFilters{})
		c := in.Chats[0]
		if c.TurnCount != 3 || c.LastTurnAt.IsZero() || c.FeedbackSummary.LikeCount != 1 || c.FeedbackSummary.DislikeCount != 1 ||
			*c.FeedbackSummary.ViewerReceived != "like" || *c.FeedbackSummary.ViewerGave != "dislike" {
			t.Fatalf("bob's chat %+v", c)
		}
		wv, _ := e.svc.GetWorld(e.ctx, social.AgentActor(bob.AgentID), w.WorldID)
		if wv.Stats.TotalLikes != 1 || wv.Stats.TotalDislikes != 1 || wv.Stats.TotalConversationCount != 1 {
			t.Fatalf("world stats %+v", wv.Stats)
		}
		bobAcct, _ := e.svc.Account(e.ctx, social.AgentActor(bob.AgentID))
		if bobAcct.Stats.LikesReceived != 1 || bobAcct.Stats.ConversationCount != 1 {
			t.Fatalf("bob stats %+v", bobAcct.Stats)
		}

		e.rec.Reset()
		e.tx(func(tx *store.Tx) error {
			if _, err := e.svc.SetChatStatusTx(e.ctx, tx, id, social.ChatEnding); err != nil {
				return err
			}
			c, err := e.svc.EndChatTx(e.ctx, tx, id, social.EndChat{Reason: "both_requested_end", TranscriptRef: "transcript://1"})
			if err == nil && (c.Status != social.ChatEnded || c.EndedAt.IsZero()) {
				t.Errorf("ended chat %+v", c)
			}
			return err
		})
		for _, side := range []string{alice.AgentID, bob.AgentID} {
			ends := e.rec.For(side, social.EventConversationEnded)
			if len(ends) != 1 {
				t.Fatalf("%s conversation_ended: %d", side, len(ends))
			}
			var n social.NoticePayload
			json.Unmarshal(ends[0].Payload, &n)
			if n.RelatedObjects["transcriptRef"] != "transcript://1" || n.RelatedObjects["chatRequestId"] != id {
				t.Fatalf("conversation_ended %+v", n)
			}
			if u := lastUpdate(t, e, side); u.NextAction != social.NextConversationEnded || u.Status != social.RequestAccepted {
				t.Fatalf("after end %s sees %+v", side, u)
			}
		}
		if len(relay.closed) != 0 {
			t.Fatalf("relay called back for its own ending: %v", relay.closed)
		}
		// A finished chat refuses further updates; ending again is a no-op.
		err := e.db.Write(e.ctx, func(tx *store.Tx) error {
			_, err := e.svc.RecordTurnTx(e.ctx, tx, id, alice.AgentID)
			return err
		})
		wantCode(t, err, "chat_not_live")
		e.tx(func(tx *store.Tx) error { _, err := e.svc.EndChatTx(e.ctx, tx, id, social.EndChat{}); return err })

		// A new request between the pair reuses the conversation key.
		again := e.mustRequest(bob, alice, w.WorldID)
		if again.Conversation.ConversationKey != req.Conversation.ConversationKey {
			t.Fatal("conversation key not reused")
		}
		// Kickoff failure ends the chat as kickoff_failed.
		e.tx(func(tx *store.Tx) error {
			c, err := e.svc.UpdateKickoffTx(e.ctx, tx, again.ChatRequestID, social.KickoffUpdate{Status: social.KickoffFailed, Reason: "sender_offline"})
			if err == nil && (c.Status != social.ChatKickoffFailed || c.Kickoff.FailedAt.IsZero()) {
				t.Errorf("failed kickoff %+v", c)
			}
			return err
		})
		if u := lastUpdate(t, e, bob.AgentID); u.NextAction != social.NextKickoffFailed {
			t.Fatalf("kickoff failed nextAction %+v", u)
		}
		// Closing by a participant tells the relay.
		third := e.mustRequest(alice, bob, "")
		if _, err := e.svc.CloseConversation(e.ctx, social.AgentActor(bob.AgentID), social.CloseInput{LocalSessionKey: third.Chat.Counterparty.AgentID + "x"}); err == nil {
			t.Fatal("closed with a foreign session key")
		}
		closed, err := e.svc.CloseConversation(e.ctx, social.AgentActor(bob.AgentID), social.CloseInput{
			LocalSessionKey: social.LocalSessionKey(bob.AgentID, alice.AgentID, "")})
		if err != nil || closed.ChatRequestID != third.ChatRequestID || closed.Status != social.RequestClosed {
			t.Fatalf("close %+v %v", closed, err)
		}
		if relay.closed[third.ChatRequestID] != "closed_by_participant" {
			t.Fatalf("relay close calls %v", relay.closed)
		}
		again2, err := e.svc.CloseConversation(e.ctx, social.AgentActor(alice.AgentID), social.CloseInput{ChatRequestID: third.ChatRequestID})
		if err != nil || !again2.AlreadyApplied {
			t.Fatalf("closing twice: %+v %v", again2, err)
		}
	})
}

// Closing a world ends its live conversations cleanly (the relay is told),
// closes pending requests, notifies members and refuses joins and requests.
// Removing and banning end the member's activity there; a ban blocks
// rejoining until lifted.
func TestWorldModeration(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		relay := &fakeRelay{}
		e.svc.SetRelay(relay)
		owner, bob, carol, dave := e.agent("Owner"), e.agent("Bob"), e.agent("Carol", policy(social.PolicyApproval)), e.agent("Dave")
		w := e.world(owner, "Club")
		for _, a := range []social.Account{bob, carol, dave} {
			e.join(a, w, "member "+a.DisplayName)
		}
		live := e.mustRequest(bob, dave, w.WorldID)
		pending := e.mustRequest(bob, carol, w.WorldID)
		direct := e.mustRequest(bob, dave, "")

		// Remove Dave: his world chat ends, the direct chat does not.
		if _, err := e.svc.RemoveMember(e.ctx, social.AgentActor(owner.AgentID), w.WorldID, social.MemberTarget{Identity: dave.Identity, Reason: "rude"}, false); err != nil {
			t.Fatal(err)
		}
		if relay.closed[live.ChatRequestID] != "member_removed" || relay.closed[direct.ChatRequestID] != "" {
			t.Fatalf("relay closes %v", relay.closed)
		}
		d, _ := e.svc.MyMembership(e.ctx, social.AgentActor(dave.AgentID), w.WorldID)
		if d.MembershipStatus != social.MemberRemoved || d.Banned {
			t.Fatalf("removed membership %+v", d)
		}
		if n := e.rec.For(dave.AgentID, social.EventNotification); len(n) == 0 {
			t.Fatal("removed member not notified")
		}
		// A removed (not banned) member may rejoin an open world.
		e.join(dave, w, "sorry")

		// Ban Dave: refused at join until unbanned.
		if _, err := e.svc.RemoveMember(e.ctx, social.AgentActor(owner.AgentID), w.WorldID, social.MemberTarget{AgentID: dave.AgentID}, true); err != nil {
			t.Fatal(err)
		}
		_, err := e.svc.Join(e.ctx, social.AgentActor(dave.AgentID), w.WorldID, social.JoinInput{ParticipantContextText: "again"})
		wantCode(t, err, "world_member_banned")
		list, _ := e.svc.WorldMembers(e.ctx, social.AgentActor(owner.AgentID), w.WorldID, social.MemberListInput{Status: "banned"})
		if len(list.Members) != 1 || list.Members[0].AgentID != dave.AgentID {
			t.Fatalf("banned list %+v", list)
		}
		if _, err := e.svc.UnbanMember(e.ctx, social.AgentActor(owner.AgentID), w.WorldID, social.MemberTarget{AgentID: dave.AgentID}); err != nil {
			t.Fatal(err)
		}
		e.join(dave, w, "third time")
		// Pre-emptive ban of someone who never joined.
		eve := e.agent("Eve")
		if _, err := e.svc.RemoveMember(e.ctx, social.AgentActor(owner.AgentID), w.WorldID, social.MemberTarget{Identity: eve.Identity}, true); err != nil {
			t.Fatal(err)
		}
		_, err = e.svc.Join(e.ctx, social.AgentActor(eve.AgentID), w.WorldID, social.JoinInput{ParticipantContextText: "hi"})
		wantCode(t, err, "world_member_banned")

		// Admins moderate; only the owner changes roles and settings.
		if _, err := e.svc.SetMemberRole(e.ctx, social.AgentActor(owner.AgentID), w.WorldID, social.MemberTarget{AgentID: bob.AgentID, Role: "admin"}); err != nil {
			t.Fatal(err)
		}
		_, err = e.svc.InviteMember(e.ctx, social.AgentActor(bob.AgentID), w.WorldID, social.MemberTarget{Identity: eve.Identity})
		wantCode(t, err, "world_member_banned")
		_, err = e.svc.UpdateWorld(e.ctx, social.AgentActor(bob.AgentID), w.WorldID, social.WorldInput{Action: "pause"})
		wantCode(t, err, "world_owner_required")

		// Pause: joins and new requests wait; live chats continue.
		if _, err := e.svc.UpdateWorld(e.ctx, social.AgentActor(owner.AgentID), w.WorldID, social.WorldInput{Action: "pause"}); err != nil {
			t.Fatal(err)
		}
		_, err = e.request(carol, dave, w.WorldID)
		wantCode(t, err, "world_paused")
		if _, err := e.svc.UpdateWorld(e.ctx, social.AgentActor(owner.AgentID), w.WorldID, social.WorldInput{Status: ptr("enabled")}); err != nil {
			t.Fatal(err)
		}
		live2 := e.mustRequest(dave, bob, w.WorldID)

		// Close: everything live ends, members hear, nothing new starts.
		e.rec.Reset()
		closed, err := e.svc.UpdateWorld(e.ctx, social.AgentActor(owner.AgentID), w.WorldID, social.WorldInput{Action: "close"})
		if err != nil || closed.Status != social.WorldClosed || closed.ClosedAt.IsZero() {
			t.Fatalf("close %+v %v", closed, err)
		}
		if relay.closed[live2.ChatRequestID] != "world_closed" {
			t.Fatalf("live chat not closed with the world: %v", relay.closed)
		}
		p, _ := e.svc.Request(e.ctx, social.AgentActor(carol.AgentID), pending.ChatRequestID)
		if p.Status != social.RequestClosed || p.StatusReason != "world_closed" {
			t.Fatalf("pending request after close %+v", p)
		}
		for _, a := range []social.Account{bob, carol, dave} {
			found := false
			for _, n := range e.rec.For(a.AgentID, social.EventNotification) {
				var np social.NoticePayload
				json.Unmarshal(n.Payload, &np)
				found = found || np.NotificationType == social.NoticeWorldClosed
			}
			if !found {
				t.Fatalf("%s not told the world closed", a.DisplayName)
			}
		}
		_, err = e.request(bob, dave, w.WorldID)
		wantCode(t, err, "world_closed")
		_, err = e.svc.Join(e.ctx, social.AgentActor(eve.AgentID), w.WorldID, social.JoinInput{ParticipantContextText: "hi"})
		wantCode(t, err, "world_member_banned")
		frank := e.agent("Frank")
		_, err = e.svc.Join(e.ctx, social.AgentActor(frank.AgentID), w.WorldID, social.JoinInput{ParticipantContextText: "hi"})
		wantCode(t, err, "world_closed")
		// The direct chat outside the world lives on.
		v, _ := e.svc.Request(e.ctx, social.AgentActor(bob.AgentID), direct.ChatRequestID)
		if v.Chat == nil || !social.IsLive(v.Chat.Status) {
			t.Fatalf("direct chat ended with the world: %+v", v.Chat)
		}
	})
}
