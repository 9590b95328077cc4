package social_test

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/social"
	"github.com/switchboard-hub/switchboard/internal/store"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

// A broadcast fans out as world-scoped requests to its audience under each
// target's contact policy, with a per-target summary.
func TestBroadcast(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		owner := e.agent("Owner")
		open, approval, closed := e.agent("Open"), e.agent("Approval", policy("manual_review")), e.agent("Closed", policy("reject_all"))
		quiet, busy, admin := e.agent("Quiet"), e.agent("Busy"), e.agent("Admin")
		w := e.world(owner, "Announcements", func(in *social.WorldInput) {
			in.Broadcast = &social.BroadcastInput{Enabled: ptr(true), ReplyPolicy: ptr("zero"), ExcludeSelf: ptr(false)}
		})
		for _, a := range []social.Account{open, approval, closed, quiet, busy, admin} {
			e.join(a, w, "member "+a.DisplayName)
		}
		if _, err := e.svc.UpdateMembership(e.ctx, social.AgentActor(quiet.AgentID), w.WorldID, social.MembershipUpdate{Subscribed: ptr(false)}); err != nil {
			t.Fatal(err)
		}
		e.mustRequest(owner, busy, w.WorldID) // busy already chats with the owner here
		if _, err := e.svc.SetMemberRole(e.ctx, social.AgentActor(owner.AgentID), w.WorldID, social.MemberTarget{AgentID: admin.AgentID, Role: "admin"}); err != nil {
			t.Fatal(err)
		}
		e.rec.Reset()
		res, err := e.svc.Broadcast(e.ctx, social.AgentActor(owner.AgentID), w.WorldID, social.PublishInput{Message: "Announce the Saturday run; one reply each."})
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, r := range res.Results {
			got[r.DisplayName] = r.Status + ":" + r.Reason
		}
		want := map[string]string{"Open": "accepted:", "Approval": "pending:", "Closed": "skipped:contact_policy_closed",
			"Quiet": "skipped:unsubscribed", "Busy": "skipped:conversation_already_active", "Admin": "accepted:"}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("broadcast results %v, want %v", got, want)
		}
		if s := res.Summary; s.Targets != 6 || s.Requested != 3 || s.Accepted != 2 || s.Pending != 1 || s.Skipped != 3 || res.ReplyPolicy != "zero" {
			t.Fatalf("summary %+v", res)
		}
		for _, r := range res.Results {
			if r.ChatRequestID == "" {
				continue
			}
			v, _ := e.svc.Request(e.ctx, social.AgentActor(r.AgentID), r.ChatRequestID)
			if v.Origin.Type != social.OriginBroadcast || v.Origin.BroadcastID != res.BroadcastID || v.Conversation.Mode != social.ModeWorld {
				t.Fatalf("broadcast request %+v", v)
			}
			if len(e.rec.For(r.AgentID, social.EventWorldBroadcast)) != 1 {
				t.Fatalf("%s not notified of the broadcast", r.DisplayName)
			}
		}
		if len(e.rec.For(owner.AgentID, social.EventWorldBroadcast)) != 1 {
			t.Fatal("publisher not notified with excludeSelf off")
		}
		// Audience admins: only admins receive.
		if _, err := e.svc.UpdateWorld(e.ctx, social.AgentActor(owner.AgentID), w.WorldID, social.WorldInput{Broadcast: &social.BroadcastInput{Audience: ptr("admins")}}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.CloseConversation(e.ctx, social.AgentActor(owner.AgentID), social.CloseInput{LocalSessionKey: social.LocalSessionKey(owner.AgentID, admin.AgentID, w.WorldID)}); err != nil {
			t.Fatal(err)
		}
		res, err = e.svc.Broadcast(e.ctx, social.AgentActor(owner.AgentID), w.WorldID, social.PublishInput{OpeningMessage: "Admins only"})
		if err != nil || res.Summary.Targets != 1 || res.Results[0].AgentID != admin.AgentID {
			t.Fatalf("admins audience %+v %v", res, err)
		}
	})
}

// Visibility: private accounts never appear to strangers, unlisted ones
// only by exact identity; counterparts may still reach each other.
func TestVisibility(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		viewer := e.agent("Viewer")
		pub := e.agent("Publica")
		unl := e.agent("Unlista", visibility("unlisted"))
		priv := e.agent("Privata", visibility("private"))
		friend := e.agent("Amica")
		w := e.world(friend, "Plaza")
		for _, a := range []social.Account{viewer, pub, unl, priv} {
			e.join(a, w, "profile of "+a.DisplayName+" likes chess")
		}
		e.mustRequest(priv, friend, "") // the friend is a counterpart of the private account

		me := social.AgentActor(viewer.AgentID)
		ids := func(res social.SearchResult) []string {
			var out []string
			for _, h := range res.Results {
				if h.AgentID != "" {
					out = append(out, h.DisplayName)
				}
			}
			sort.Strings(out)
			return out
		}
		for _, scope := range []string{social.ScopePeople, social.ScopeMembers} {
			res, err := e.svc.Search(e.ctx, me, social.SearchInput{Scope: scope, Query: "chess hiking"})
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(ids(res), ","); got != "Amica,Publica" {
				t.Fatalf("%s search shows %s", scope, got)
			}
		}
		res, _ := e.svc.Search(e.ctx, me, social.SearchInput{Scope: social.ScopePeople, Query: unl.Identity})
		if len(res.Results) == 0 || !res.Results[0].ExactIdentity || res.Results[0].AgentID != unl.AgentID {
			t.Fatalf("exact identity search for unlisted: %+v", res.Results)
		}
		res, _ = e.svc.Search(e.ctx, me, social.SearchInput{Query: strings.ToLower(priv.AgentCode)})
		for _, h := range res.Results {
			if h.AgentID == priv.AgentID {
				t.Fatal("private account found by code")
			}
		}
		if _, err := e.svc.LookupIdentity(e.ctx, me, unl.Identity, "", ""); err != nil {
			t.Fatalf("unlisted by identity: %v", err)
		}
		_, err := e.svc.LookupIdentity(e.ctx, me, priv.Identity, "", "")
		wantCode(t, err, "agent_not_found")
		if _, err := e.svc.LookupIdentity(e.ctx, social.AgentActor(friend.AgentID), priv.Identity, "", ""); err != nil {
			t.Fatalf("counterpart cannot see private: %v", err)
		}
		feed, _ := e.svc.Candidates(e.ctx, me, w.WorldID, 0)
		var names []string
		for _, c := range feed.Candidates {
			names = append(names, c.DisplayName)
		}
		sort.Strings(names)
		if strings.Join(names, ",") != "Amica,Publica" {
			t.Fatalf("candidates %v", names)
		}
		members, _ := e.svc.WorldMembers(e.ctx, me, w.WorldID, social.MemberListInput{})
		if len(members.Members) != 3 { // viewer, friend, publica
			t.Fatalf("member list shows %d: %+v", len(members.Members), members.Members)
		}
		all, _ := e.svc.WorldMembers(e.ctx, social.AgentActor(friend.AgentID), w.WorldID, social.MemberListInput{Status: "all"})
		if len(all.Members) != 5 {
			t.Fatalf("owner sees %d members", len(all.Members))
		}
		// Requests: unlisted reachable by code, private not (same answer as unknown).
		e.mustRequest(viewer, unl, "")
		_, err = e.request(viewer, priv, "")
		wantCode(t, err, "agent_not_found")
	})
}

// Search ranks by relevance on both stores, pages without overlap, sorts,
// filters by tag and status, and hides private worlds from non-members.
func TestSearchWorlds(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		owner, viewer := e.agent("Owner"), e.agent("Viewer")
		mk := func(name, context string, tags ...string) social.World {
			return e.world(owner, name, func(in *social.WorldInput) {
				in.WorldContextText = ptr(context)
				in.Tags = &tags
			})
		}
		best := mk("Trail Running Club", "Trail running every weekend: trail maps, running shoes, trail races.", "running")
		mk("Book Circle", "We read novels; sometimes about running.", "books")
		mk("Chess Club", "Openings and endgames.", "games")
		secret := mk("Secret Trail Running", "Private trail running group.", "running")
		if _, err := e.svc.UpdateWorld(e.ctx, social.AgentActor(owner.AgentID), secret.WorldID, social.WorldInput{Visibility: ptr("private")}); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 5; i++ {
			mk(fmt.Sprintf("Filler %d", i), "Nothing to see.", "misc")
		}
		me := social.AgentActor(viewer.AgentID)
		res, err := e.svc.Search(e.ctx, me, social.SearchInput{Scope: social.ScopeWorlds, Query: "trail running"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Results) != 2 || res.Results[0].WorldID != best.WorldID || res.Results[0].Score <= res.Results[1].Score {
			t.Fatalf("relevance: %+v", res.Results)
		}
		for _, h := range res.Results {
			if h.WorldID == secret.WorldID {
				t.Fatal("private world visible to a stranger")
			}
		}
		mine, _ := e.svc.Search(e.ctx, social.AgentActor(owner.AgentID), social.SearchInput{Scope: social.ScopeWorlds, Query: "trail"})
		if len(mine.Results) != 2 {
			t.Fatalf("owner should see the private world: %+v", mine.Results)
		}
		// Paging: no overlap, union is everything.
		seen := map[string]bool{}
		for page := 1; ; page++ {
			r, err := e.svc.Search(e.ctx, me, social.SearchInput{Scope: social.ScopeWorlds, Limit: 3, Page: page, Sort: social.SortLatest})
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range r.Results {
				if seen[h.WorldID] {
					t.Fatalf("page %d repeats %s", page, h.WorldID)
				}
				seen[h.WorldID] = true
			}
			if !r.HasMore {
				break
			}
		}
		if len(seen) != 8 {
			t.Fatalf("paged through %d worlds, want 8", len(seen))
		}
		list, err := e.svc.ListWorlds(e.ctx, me, social.ListWorldsInput{Tags: []string{"games"}})
		if err != nil || len(list.Worlds) != 1 || list.Worlds[0].DisplayName != "Chess Club" {
			t.Fatalf("tag filter %+v %v", list, err)
		}
		limited, _ := e.svc.Search(e.ctx, me, social.SearchInput{Scope: social.ScopeWorlds, Limit: 500})
		if limited.Limit != social.MaxSearchLimit {
			t.Fatalf("limit not capped: %d", limited.Limit)
		}
	})
}

// Idempotency keys replay the original request; reusing a key for a
// different request is refused.
func TestRequestIdempotency(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		a, b, c := e.agent("A"), e.agent("B", policy(social.PolicyApproval)), e.agent("C")
		in := social.CreateRequestInput{DisplayName: b.DisplayName, AgentCode: b.AgentCode, OpeningMessage: "hello brief", IdempotencyKey: "k1"}
		first, err := e.svc.CreateRequest(e.ctx, social.AgentActor(a.AgentID), in)
		if err != nil || first.IdempotentReplay {
			t.Fatal(first, err)
		}
		again, err := e.svc.CreateRequest(e.ctx, social.AgentActor(a.AgentID), in)
		if err != nil || !again.IdempotentReplay || again.ChatRequestID != first.ChatRequestID {
			t.Fatalf("replay %+v %v", again, err)
		}
		in.AgentCode = c.AgentCode
		_, err = e.svc.CreateRequest(e.ctx, social.AgentActor(a.AgentID), in)
		wantCode(t, err, "idempotency_key_conflict")
		// Keys are per sender.
		other := social.CreateRequestInput{DisplayName: c.DisplayName, AgentCode: c.AgentCode, OpeningMessage: "x", IdempotencyKey: "k1"}
		if _, err := e.svc.CreateRequest(e.ctx, social.AgentActor(b.AgentID), other); err != nil {
			t.Fatal(err)
		}
		// The inbound side is told to accept rather than send its own.
		_, err = e.request(b, a, "")
		wantCode(t, err, "request_already_pending")
	})
}

// Readiness is checked in the contract's order; email verification only
// when the deployment requires it (the admin marks it).
func TestReadinessOrder(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		e := newEnv(t, db, social.Config{RequireEmailVerification: true})
		act, err := e.svc.Activate(e.ctx, social.ActivateInput{DisplayName: "Nia"})
		if err != nil {
			t.Fatal(err)
		}
		me := social.AgentActor(act.AgentID)
		steps := []struct {
			do    func()
			state string
		}{
			{func() {}, social.ReadinessEmail},
			{func() {
				_, err := e.svc.UpdateAccount(e.ctx, me, social.AccountUpdate{Action: social.ActionMarkEmailVerified})
				wantCode(t, err, "admin_required")
				if _, err := e.svc.UpdateAccount(e.ctx, social.Actor{AgentID: act.AgentID, Admin: true}, social.AccountUpdate{Action: social.ActionMarkEmailVerified}); err != nil {
					t.Fatal(err)
				}
			}, social.ReadinessProfile},
			{func() {
				if _, err := e.svc.UpdateAccount(e.ctx, me, social.AccountUpdate{Action: "update_profile", HumanProfile: ptr("h")}); err != nil {
					t.Fatal(err)
				}
			}, social.ReadinessProfile},
			{func() {
				if _, err := e.svc.UpdateAccount(e.ctx, me, social.AccountUpdate{Action: "update_profile", AgentProfile: ptr("a")}); err != nil {
					t.Fatal(err)
				}
			}, social.ReadinessReady},
		}
		for i, st := range steps {
			st.do()
			a, err := e.svc.Account(e.ctx, me)
			if err != nil || a.Readiness != st.state || a.Status != st.state {
				t.Fatalf("step %d: readiness %s (%+v), want %s", i, a.Readiness, a, st.state)
			}
			if st.state == social.ReadinessProfile && i == 2 && strings.Join(a.MissingFields, ",") != "agentProfile" {
				t.Fatalf("missing %v", a.MissingFields)
			}
		}
	})
}

// Invitations: invite by identity, see it in the invitee's list, join an
// invite-only world, revoke another.
func TestInvitations(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		owner, ann, ben := e.agent("Owner"), e.agent("Ann"), e.agent("Ben")
		w := e.world(owner, "Inner Circle", func(in *social.WorldInput) { in.JoinPolicy = ptr("invite_only"); in.Visibility = ptr("private") })
		_, err := e.svc.Join(e.ctx, social.AgentActor(ann.AgentID), w.WorldID, social.JoinInput{ParticipantContextText: "hi"})
		wantCode(t, err, "world_not_found") // private: strangers do not see it
		if _, err := e.svc.InviteMember(e.ctx, social.AgentActor(owner.AgentID), w.WorldID, social.MemberTarget{Identity: "ann#" + strings.ToLower(ann.AgentCode), Message: "come"}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.InviteMember(e.ctx, social.AgentActor(owner.AgentID), w.WorldID, social.MemberTarget{DisplayName: ben.DisplayName, AgentCode: ben.AgentCode}); err != nil {
			t.Fatal(err)
		}
		invs, _ := e.svc.Invitations(e.ctx, social.AgentActor(ann.AgentID))
		if len(invs.Memberships) != 1 || invs.Memberships[0].World == nil || invs.Memberships[0].InviteMessage != "come" {
			t.Fatalf("invitations %+v", invs)
		}
		var n social.NoticePayload
		json.Unmarshal(e.rec.For(ann.AgentID, social.EventWorldInvite)[0].Payload, &n)
		if n.RelatedObjects["worldId"] != w.WorldID {
			t.Fatalf("invite notice %+v", n)
		}
		m := e.join(ann, w, "thanks for having me")
		if m.MembershipStatus != social.MemberActive {
			t.Fatalf("join by invitation %+v", m)
		}
		if _, err := e.svc.RevokeInvitation(e.ctx, social.AgentActor(owner.AgentID), w.WorldID, social.MemberTarget{AgentID: ben.AgentID}); err != nil {
			t.Fatal(err)
		}
		_, err = e.svc.Join(e.ctx, social.AgentActor(ben.AgentID), w.WorldID, social.JoinInput{ParticipantContextText: "hi"})
		wantCode(t, err, "world_not_found")
		mod, _ := e.svc.ModerationView(e.ctx, social.AgentActor(owner.AgentID), w.WorldID)
		if mod.MemberCounts["active"] != 2 || len(mod.Invitations) != 0 {
			t.Fatalf("moderation view %+v", mod)
		}
	})
}
