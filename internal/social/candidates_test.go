package social_test

import (
	"sort"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/social"
)

// candidateNames lists the viewer's candidate feed of a world by name.
func (e *env) candidateNames(viewer social.Account, w social.World) string {
	e.t.Helper()
	feed, err := e.svc.Candidates(e.ctx, social.AgentActor(viewer.AgentID), w.WorldID, 0)
	if err != nil {
		e.t.Fatalf("candidates for %s: %v", viewer.DisplayName, err)
	}
	var names []string
	for _, c := range feed.Candidates {
		names = append(names, c.DisplayName)
	}
	sort.Strings(names)
	if feed.Total != len(names) {
		e.t.Fatalf("feed total %d with %d candidates", feed.Total, len(names))
	}
	return strings.Join(names, ",")
}

// The candidate feed shows only active members: a member the owner banned
// and a member who left drop out of every viewer's feed (and the banned
// one stays out after the owner lifts the ban, until it joins again); a
// member who leaves and joins again comes back.
func TestCandidatesExcludeBannedAndLeftMembers(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		owner := e.agent("Olga")
		bob, carol, dave := e.agent("Bob"), e.agent("Carol"), e.agent("Dave")
		w := e.world(owner, "Trail Runners")
		for _, a := range []social.Account{bob, carol, dave} {
			e.join(a, w, a.DisplayName+" runs mountain trails every weekend")
		}
		if got := e.candidateNames(owner, w); got != "Bob,Carol,Dave" {
			t.Fatalf("before: owner sees %s", got)
		}

		if _, err := e.svc.RemoveMember(e.ctx, social.AgentActor(owner.AgentID), w.WorldID,
			social.MemberTarget{TargetID: carol.AgentID, Reason: "spam"}, true); err != nil {
			t.Fatalf("ban: %v", err)
		}
		if _, err := e.svc.Leave(e.ctx, social.AgentActor(dave.AgentID), w.WorldID); err != nil {
			t.Fatalf("leave: %v", err)
		}
		for _, tc := range []struct {
			viewer social.Account
			want   string
		}{
			{owner, "Bob"},
			{bob, "Olga"},
		} {
			if got := e.candidateNames(tc.viewer, w); got != tc.want {
				t.Errorf("after ban and leave: %s sees %q, want %q", tc.viewer.DisplayName, got, tc.want)
			}
		}
		// Neither the banned member nor the one who left may read the feed.
		_, err := e.svc.Candidates(e.ctx, social.AgentActor(carol.AgentID), w.WorldID, 0)
		wantCode(t, err, "world_member_banned")
		_, err = e.svc.Candidates(e.ctx, social.AgentActor(dave.AgentID), w.WorldID, 0)
		wantCode(t, err, "world_membership_required")

		// Lifting the ban does not make Carol a member again.
		if _, err := e.svc.UnbanMember(e.ctx, social.AgentActor(owner.AgentID), w.WorldID, social.MemberTarget{TargetID: carol.AgentID}); err != nil {
			t.Fatalf("unban: %v", err)
		}
		if got := e.candidateNames(owner, w); got != "Bob" {
			t.Fatalf("after unban: owner sees %s", got)
		}
		// Dave joins again and is a candidate again.
		e.join(dave, w, "Back for the autumn season")
		if got := e.candidateNames(owner, w); got != "Bob,Dave" {
			t.Fatalf("after rejoin: owner sees %s", got)
		}
	})
}
