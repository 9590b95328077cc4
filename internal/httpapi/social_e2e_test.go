package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/social"
)

// onboard self-registers an agent through the public endpoint and returns
// its id and a client holding its appToken.
func onboard(t *testing.T, h *apptest.Hub, name string) (string, *client.Client) {
	t.Helper()
	act, err := client.New(h.URL, "").Activate(context.Background(), client.ActivateInput{DisplayName: name})
	if err != nil {
		t.Fatalf("onboard %s: %v", name, err)
	}
	if !strings.HasPrefix(act.AppToken, "sbt_") || act.Identity != name+"#"+act.AgentCode {
		t.Fatalf("activation %+v", act)
	}
	return act.AgentID, h.Client(act.AppToken)
}

// ready onboards an agent and fills its profiles.
func ready(t *testing.T, h *apptest.Hub, name, human, agentProfile string) (client.Account, *client.Client) {
	t.Helper()
	_, c := onboard(t, h, name)
	a, err := c.UpdateAccount(context.Background(), client.AccountUpdate{Action: social.ActionUpdateProfile, HumanProfile: &human, AgentProfile: &agentProfile})
	if err != nil || a.Readiness != social.ReadinessReady {
		t.Fatalf("profile %s: %+v %v", name, a, err)
	}
	return a, c
}

func setPolicy(t *testing.T, c *client.Client, policy string) client.Account {
	t.Helper()
	a, err := c.UpdateAccount(context.Background(), client.AccountUpdate{Action: social.ActionUpdateChatPolicy, ContactPolicy: &policy})
	if err != nil {
		t.Fatalf("policy %s: %v", policy, err)
	}
	return a
}

func brief(c client.Account, worldID string) client.ChatRequestInput {
	return client.ChatRequestInput{DisplayName: c.DisplayName, AgentCode: c.AgentCode, WorldID: worldID,
		OpeningMessage: "Write a warm opener about trail running; the goal is to learn whether they want a weekend run. Stop once that is clear."}
}

type countsWant struct{ total, pending, pendingIn, pendingOut, accepted, rejected, closed, chats, active int }

func checkCounts(t *testing.T, who string, got social.InboxCounts, w countsWant) {
	t.Helper()
	g := countsWant{got.Total, got.Pending, got.PendingInbound, got.PendingOutbound, got.Accepted, got.Rejected, got.Closed, got.Chats, got.ActiveChats}
	if g != w {
		t.Fatalf("%s counts = %+v, want %+v", who, g, w)
	}
}

// Two agents go through the whole social flow over REST: onboard, set
// profiles, create and join a world, search, see each other as candidates,
// request chats under each contact policy, accept and reject, and list
// inboxes with exact counts. request.updated reaches both management
// sessions on every change.
func TestSocialEndToEnd(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		ctx := context.Background()
		rec := &social.Recorder{}
		h.App.Social.SetNotifier(rec)

		// Onboarding gives an incomplete account first.
		aliceID, ac := onboard(t, h, "Alice")
		acct, err := ac.Account(ctx, "")
		if err != nil {
			t.Fatal(err)
		}
		if acct.Readiness != social.ReadinessProfile || acct.RequiredAction != "complete_account_profile" || acct.NextTool != "account" ||
			strings.Join(acct.MissingFields, ",") != "humanProfile,agentProfile" || acct.ContactPolicy != social.PolicyOpen || acct.VisibilityMode != social.VisibilityPublic {
			t.Fatalf("fresh account %+v", acct)
		}
		human, prof := "Mia, a nurse in Shanghai who runs trails on weekends", "Alice: friendly, curious, into trail running and hiking routes"
		alice, err := ac.UpdateAccount(ctx, client.AccountUpdate{Action: "update_profile", HumanProfile: &human, AgentProfile: &prof})
		if err != nil || alice.Readiness != social.ReadinessReady || alice.NextAction != "browse_worlds" || alice.AgentID != aliceID {
			t.Fatalf("alice profile %+v %v", alice, err)
		}
		bob, bc := ready(t, h, "Bob", "Leo, a developer who likes mountain trails", "Bob: calm, loves trail running in the mountains")

		// Alice creates a world; Bob finds it and joins.
		w, err := ac.CreateWorld(ctx, client.WorldInput{DisplayName: ptr("Shanghai Trail Runners"),
			WorldContextText:       ptr("A world for people who run trails around Shanghai. Be kind, share routes."),
			ParticipantContextText: ptr("I organise weekend trail runs"), Tags: &[]string{"running", "outdoors"},
			ParticipantContextField: &social.ParticipantFieldInput{Label: ptr("Your running"), Description: ptr("How and where you run")}})
		if err != nil {
			t.Fatal(err)
		}
		list, err := bc.Worlds(ctx, client.WorldsQuery{Query: "shanghai trails"})
		if err != nil || len(list.Worlds) != 1 || list.Worlds[0].WorldID != w.WorldID || list.Worlds[0].ViewerMembership != nil {
			t.Fatalf("bob lists worlds: %+v %v", list, err)
		}
		m, err := bc.JoinWorld(ctx, w.WorldID, client.JoinInput{ParticipantContextText: "I run mountain trails most weekends"})
		if err != nil || m.MembershipStatus != social.MemberActive || m.Role != social.RoleMember {
			t.Fatalf("join %+v %v", m, err)
		}
		got, _ := bc.World(ctx, w.WorldID, "")
		if got.Stats.ActiveParticipants != 2 || got.ViewerMembership == nil || got.ViewerMembership.MembershipStatus != social.MemberActive {
			t.Fatalf("world after join %+v", got)
		}

		// Search finds the world, Alice as a member, and Alice as a person.
		for _, scope := range []string{social.ScopeWorlds, social.ScopeMembers, social.ScopePeople, social.ScopeMixed} {
			res, err := bc.Search(ctx, client.SearchInput{Scope: scope, Query: "trail", Keywords: []string{"weekend"}})
			if err != nil {
				t.Fatalf("search %s: %v", scope, err)
			}
			found := false
			for _, hit := range res.Results {
				if hit.AgentID == bob.AgentID {
					t.Fatalf("search %s returned the viewer itself: %+v", scope, hit)
				}
				if (hit.Kind == social.HitWorld && hit.WorldID == w.WorldID) || (hit.AgentID == aliceID && hit.RequestChat != nil && hit.RequestChat.AgentCode == alice.AgentCode) {
					found = true
				}
				if hit.Score <= 0 || hit.ReasonSummary == "" {
					t.Fatalf("search %s hit without score or reason: %+v", scope, hit)
				}
			}
			if !found {
				t.Fatalf("search %s found nothing relevant: %+v", scope, res)
			}
		}

		// Each sees the other as a candidate.
		for _, pair := range []struct {
			c    *client.Client
			peer string
		}{{ac, bob.AgentID}, {bc, aliceID}} {
			feed, err := pair.c.Candidates(ctx, w.WorldID, "", 0)
			if err != nil || len(feed.Candidates) != 1 || feed.Candidates[0].AgentID != pair.peer || feed.Candidates[0].ReasonSummary == "" ||
				feed.Candidates[0].RequestChat.WorldID != w.WorldID {
				t.Fatalf("candidates: %+v %v", feed, err)
			}
		}

		// Policy open (Bob's default): accepted at once, kickoff queued.
		r1, err := ac.RequestChat(ctx, brief(bob, w.WorldID))
		if err != nil {
			t.Fatal(err)
		}
		if r1.Status != social.RequestAccepted || r1.Chat == nil || r1.Chat.Status != social.ChatOpening || r1.Kickoff == nil ||
			r1.Kickoff.Status != social.KickoffQueued || r1.NextAction != social.NextWaitRuntime || r1.Conversation.Mode != social.ModeWorld ||
			r1.Kickoff.LocalSessionKey != "conversation:"+aliceID+":"+bob.AgentID+":"+w.WorldID || r1.Kickoff.ConversationKey == "" {
			t.Fatalf("auto-accepted request %+v", r1)
		}
		feed, _ := ac.Candidates(ctx, w.WorldID, "", 0)
		if len(feed.Candidates) != 0 {
			t.Fatalf("candidate with an active chat still listed: %+v", feed.Candidates)
		}
		for _, id := range []string{aliceID, bob.AgentID} {
			ups := rec.For(id, social.EventRequestUpdated)
			if len(ups) != 1 {
				t.Fatalf("%s request.updated: %d", id, len(ups))
			}
			var u social.RequestUpdate
			json.Unmarshal(ups[0].Payload, &u)
			if u.UpdateType != "accepted" || u.ChatRequestID != r1.ChatRequestID || u.Kickoff == nil || ups[0].SessionKey != "management:"+id {
				t.Fatalf("request.updated for %s: %+v", id, u)
			}
			if id == bob.AgentID && u.OpeningMessage != "" {
				t.Fatal("the recipient saw the sender's brief")
			}
		}
		bin, _ := bc.ChatInbox(ctx, client.InboxFilters{})
		checkCounts(t, "bob", bin.Counts.Global, countsWant{total: 1, accepted: 1, chats: 1, active: 1})
		if len(bin.Chats) != 1 || bin.Chats[0].Direction != "inbound" || bin.Chats[0].Counterparty.Identity != alice.Identity ||
			bin.Chats[0].LocalSessionKey != "conversation:"+bob.AgentID+":"+aliceID+":"+w.WorldID {
			t.Fatalf("bob chats %+v", bin.Chats)
		}
		if _, err := bc.CloseConversation(ctx, client.CloseInput{LocalSessionKey: bin.Chats[0].LocalSessionKey}); err != nil {
			t.Fatal(err)
		}

		// approval_required (via its legacy alias): pending, notification, reject.
		if a := setPolicy(t, bc, "manual_review"); a.ContactPolicy != social.PolicyApproval {
			t.Fatalf("alias not mapped: %s", a.ContactPolicy)
		}
		rec.Reset()
		r2, err := ac.RequestChat(ctx, brief(bob, ""))
		if err != nil || r2.Status != social.RequestPending || r2.NextAction != social.NextWaitPeerAcceptance || r2.Conversation.Mode != social.ModeDirect {
			t.Fatalf("pending request %+v %v", r2, err)
		}
		notes := rec.For(bob.AgentID, social.EventNotification)
		if len(notes) != 1 {
			t.Fatalf("bob notifications %+v", notes)
		}
		bin, _ = bc.ChatInbox(ctx, client.InboxFilters{Direction: "inbound", Status: "pending"})
		if len(bin.PendingRequests) != 1 || bin.PendingRequests[0].NextAction != social.NextReviewInbound || bin.Counts.Filtered.PendingInbound != 1 {
			t.Fatalf("bob pending inbox %+v", bin)
		}
		if _, err := bc.RejectChatRequest(ctx, r2.ChatRequestID, ""); err != nil {
			t.Fatal(err)
		}
		ain, _ := ac.ChatInbox(ctx, client.InboxFilters{})
		checkCounts(t, "alice", ain.Counts.Global, countsWant{total: 2, closed: 1, rejected: 1, chats: 1})

		// Again, and Bob accepts.
		r3, err := ac.RequestChat(ctx, brief(bob, ""))
		if err != nil || r3.Status != social.RequestPending {
			t.Fatalf("second pending %+v %v", r3, err)
		}
		acc, err := bc.AcceptChatRequest(ctx, r3.ChatRequestID, "")
		if err != nil || acc.Status != social.RequestAccepted || acc.Chat == nil || acc.Chat.Status != social.ChatOpening {
			t.Fatalf("accept %+v %v", acc, err)
		}
		if r3.Conversation.ConversationKey != acc.Conversation.ConversationKey || r2.Conversation.ConversationKey != r3.Conversation.ConversationKey {
			t.Fatal("conversation key is not stable for the pair")
		}
		if _, err := ac.RequestChat(ctx, brief(bob, "")); client.Code(err) != "conversation_already_active" || client.Status(err) != 409 {
			t.Fatalf("duplicate active: %v", err)
		}

		// closed (via do_not_disturb): refused before creation.
		setPolicy(t, bc, "do_not_disturb")
		if _, err := ac.RequestChat(ctx, brief(bob, w.WorldID)); client.Code(err) != "contact_policy_closed" || client.Status(err) != 403 {
			t.Fatalf("closed policy: %v", err)
		}

		ain, _ = ac.ChatInbox(ctx, client.InboxFilters{})
		checkCounts(t, "alice", ain.Counts.Global, countsWant{total: 3, accepted: 1, closed: 1, rejected: 1, chats: 2, active: 1})
		bin, _ = bc.ChatInbox(ctx, client.InboxFilters{})
		checkCounts(t, "bob", bin.Counts.Global, countsWant{total: 3, accepted: 1, closed: 1, rejected: 1, chats: 2, active: 1})
		if len(bin.RecentRequests) != 3 || len(bin.Chats) != 2 || bin.Chats[0].Status != social.ChatOpening || bin.Chats[1].Status != social.ChatEnded {
			t.Fatalf("bob inbox lists %+v", bin)
		}
		bin, _ = bc.ChatInbox(ctx, client.InboxFilters{Mode: social.ModeWorld})
		checkCounts(t, "bob world", bin.Counts.Filtered, countsWant{total: 1, closed: 1, chats: 1})
		bin, _ = bc.ChatInbox(ctx, client.InboxFilters{Status: "live"})
		if bin.Counts.Filtered.ActiveChats != 1 || len(bin.Chats) != 1 || bin.Chats[0].ChatRequestID != r3.ChatRequestID {
			t.Fatalf("live filter %+v", bin)
		}
		bin, _ = bc.ChatInbox(ctx, client.InboxFilters{CounterpartyAgentID: aliceID, ChatRequestID: r2.ChatRequestID})
		if bin.Counts.Filtered.Total != 1 || bin.Counts.Filtered.Rejected != 1 {
			t.Fatalf("chatRequestId filter %+v", bin.Counts)
		}
	})
}

func ptr[T any](v T) *T { return &v }

// The Claworld plugin's tolerant inputs: the x-claworld-app-token header,
// extra members such as accountId, Name#CODE in displayName with a
// lower-case code, a stale display name (success with a warning).
func TestSocialClaworldTolerance(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		ctx := context.Background()
		alice, ac := ready(t, h, "Alice", "human", "agent")
		_, bc := ready(t, h, "Bob", "human", "agent")
		if _, err := ac.UpdateAccount(ctx, client.AccountUpdate{Action: "update_identity", DisplayName: ptr("Alicia")}); err != nil {
			t.Fatal(err)
		}
		body := fmt.Sprintf(`{"accountId":"claworld","displayName":"Alice#%s","openingMessage":"Say hi and ask about their week.","extra":{"x":1}}`,
			strings.ToLower(alice.AgentCode))
		r := callHeader(t, "POST", h.URL+"/v1/chat-requests", bc.Token, body)
		if r.status != 201 || r.body["status"] != social.RequestAccepted {
			t.Fatalf("tolerant request: %d %s", r.status, r.raw)
		}
		warn, _ := r.body["warning"].(map[string]any)
		if warn["code"] != "display_name_stale" || warn["currentDisplayName"] != "Alicia" {
			t.Fatalf("warning: %s", r.raw)
		}
		p, err := bc.LookupIdentity(ctx, "Alice#"+strings.ToLower(alice.AgentCode))
		if err != nil || p.AgentID != alice.AgentID || p.Warning == nil {
			t.Fatalf("lookup %+v %v", p, err)
		}
		p, err = bc.LookupIdentity(ctx, "Ali#ce#"+alice.AgentCode)
		if err != nil || p.AgentID != alice.AgentID {
			t.Fatalf("split at the last #: %+v %v", p, err)
		}
	})
}

// callHeader sends a JSON body authenticated with the Claworld header.
func callHeader(t *testing.T, method, url, token, body string) rawResp {
	t.Helper()
	return callWith(t, method, url, map[string]string{"x-claworld-app-token": token, "Content-Type": "application/json"}, body)
}
