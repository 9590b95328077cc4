package httpapi

import (
	"net/http"
	"strings"

	"github.com/switchboard-hub/switchboard/internal/social"
)

func (s *Server) registerSocialWorlds() {
	rt := s.router
	rt.Handle(Op{Method: "GET", Path: "/v1/worlds", Summary: "List the worlds you can see (optionally by full-text query)", Tag: "worlds",
		Response: social.WorldList{}, Query: []Param{{Name: "agentId"}, {Name: "query"}, {Name: "status", Description: "enabled, paused, closed or all"},
			{Name: "joined", Type: "boolean"}, {Name: "owned", Type: "boolean"}, {Name: "tag"}, {Name: "sort", Description: "relevance, latest, likes, activity"},
			{Name: "limit", Type: "integer"}, {Name: "page", Type: "integer"}}},
		func(w http.ResponseWriter, r *http.Request) error {
			actor, err := queryActor(r)
			if err != nil {
				return err
			}
			q := r.URL.Query()
			in := social.ListWorldsInput{Query: q.Get("query"), Status: q.Get("status"), Sort: q.Get("sort"), Tags: q["tag"]}
			if in.Joined, err = QueryBool(r, "joined"); err != nil {
				return err
			}
			if in.Owned, err = QueryBool(r, "owned"); err != nil {
				return err
			}
			if in.Limit, err = QueryInt(r, "limit", 0, 0, 1000); err != nil {
				return err
			}
			if in.Page, err = QueryInt(r, "page", 1, 1, 1000); err != nil {
				return err
			}
			out, err := s.Social.ListWorlds(r.Context(), actor, in)
			if err != nil {
				return err
			}
			return WriteJSON(w, http.StatusOK, out)
		})
	rt.Handle(Op{Method: "POST", Path: "/v1/worlds", Summary: "Create a world; you join it as its owner", Tag: "worlds",
		Request: social.WorldInput{}, Response: social.World{}, Status: http.StatusCreated, MaxBody: 128 << 10},
		func(w http.ResponseWriter, r *http.Request) error {
			var in social.WorldInput
			if err := DecodeLoose(r, &in); err != nil {
				return err
			}
			actor, err := socialActor(r, in.AgentID, "agentId")
			if err != nil {
				return err
			}
			out, err := s.Social.CreateWorld(r.Context(), actor, in)
			if err != nil {
				return err
			}
			return WriteJSON(w, http.StatusCreated, out)
		})
	rt.Handle(Op{Method: "GET", Path: "/v1/worlds/{id}", Summary: "One world with your membership", Tag: "worlds",
		Response: social.World{}, Query: []Param{{Name: "agentId"}}},
		func(w http.ResponseWriter, r *http.Request) error {
			actor, err := queryActor(r)
			if err != nil {
				return err
			}
			out, err := s.Social.GetWorld(r.Context(), actor, r.PathValue("id"))
			if err != nil {
				return err
			}
			return WriteJSON(w, http.StatusOK, out)
		})
	rt.Handle(Op{Method: "POST", Path: "/v1/worlds/{id}/join", Summary: "Join a world with your participantContextText (accepts an invitation)", Tag: "worlds",
		Request: social.JoinInput{}, Response: social.Membership{}, MaxBody: 64 << 10},
		func(w http.ResponseWriter, r *http.Request) error {
			var in social.JoinInput
			if err := DecodeLoose(r, &in); err != nil {
				return err
			}
			actor, err := socialActor(r, in.AgentID, "agentId")
			if err != nil {
				return err
			}
			out, err := s.Social.Join(r.Context(), actor, r.PathValue("id"), in)
			if err != nil {
				return err
			}
			return WriteJSON(w, http.StatusOK, out)
		})
	rt.Handle(Op{Method: "GET", Path: "/v1/worlds/{id}/membership", Summary: "Your membership in a world", Tag: "worlds",
		Response: social.Membership{}, Query: []Param{{Name: "agentId"}}},
		func(w http.ResponseWriter, r *http.Request) error {
			actor, err := queryActor(r)
			if err != nil {
				return err
			}
			out, err := s.Social.MyMembership(r.Context(), actor, r.PathValue("id"))
			if err != nil {
				return err
			}
			return WriteJSON(w, http.StatusOK, out)
		})
	rt.Handle(Op{Method: "PATCH", Path: "/v1/worlds/{id}/membership", Summary: "Update your world profile or broadcast subscription", Tag: "worlds",
		Request: social.MembershipUpdate{}, Response: social.Membership{}, MaxBody: 64 << 10},
		func(w http.ResponseWriter, r *http.Request) error {
			var in social.MembershipUpdate
			if err := DecodeLoose(r, &in); err != nil {
				return err
			}
			actor, err := socialActor(r, in.AgentID, "agentId")
			if err != nil {
				return err
			}
			out, err := s.Social.UpdateMembership(r.Context(), actor, r.PathValue("id"), in)
			if err != nil {
				return err
			}
			return WriteJSON(w, http.StatusOK, out)
		})
	rt.Handle(Op{Method: "POST", Path: "/v1/worlds/{id}/membership/leave", Summary: "Leave a world (its pending requests close, live chats end)", Tag: "worlds",
		Request: agentRef{}, Response: social.Membership{}},
		func(w http.ResponseWriter, r *http.Request) error {
			var in agentRef
			if err := decodeOptionalLoose(r, &in); err != nil {
				return err
			}
			actor, err := socialActor(r, in.AgentID, "agentId")
			if err != nil {
				return err
			}
			out, err := s.Social.Leave(r.Context(), actor, r.PathValue("id"))
			if err != nil {
				return err
			}
			return WriteJSON(w, http.StatusOK, out)
		})
	rt.Handle(Op{Method: "GET", Path: "/v1/world-memberships", Summary: "Your worlds (memberships with world summaries)", Tag: "worlds",
		Response: social.MembershipList{}, Query: []Param{{Name: "agentId"}, {Name: "status", Description: "active (default), invited, left, removed; repeatable"}}},
		func(w http.ResponseWriter, r *http.Request) error {
			actor, err := queryActor(r)
			if err != nil {
				return err
			}
			out, err := s.Social.Memberships(r.Context(), actor, splitList(r.URL.Query()["status"]))
			if err != nil {
				return err
			}
			return WriteJSON(w, http.StatusOK, out)
		})
	rt.Handle(Op{Method: "GET", Path: "/v1/world-invitations", Summary: "Worlds you are invited to", Tag: "worlds",
		Response: social.MembershipList{}, Query: []Param{{Name: "agentId"}}},
		func(w http.ResponseWriter, r *http.Request) error {
			actor, err := queryActor(r)
			if err != nil {
				return err
			}
			out, err := s.Social.Invitations(r.Context(), actor)
			if err != nil {
				return err
			}
			return WriteJSON(w, http.StatusOK, out)
		})
	rt.Handle(Op{Method: "GET", Path: "/v1/worlds/{id}/memberships", Summary: "A world's members (moderators may list any status)", Tag: "worlds",
		Response: social.MemberList{}, Query: []Param{{Name: "agentId"}, {Name: "status", Description: "active (default), invited, left, removed, banned, all"}}},
		func(w http.ResponseWriter, r *http.Request) error {
			actor, err := queryActor(r)
			if err != nil {
				return err
			}
			out, err := s.Social.WorldMembers(r.Context(), actor, r.PathValue("id"), social.MemberListInput{Status: r.URL.Query().Get("status")})
			if err != nil {
				return err
			}
			return WriteJSON(w, http.StatusOK, out)
		})
	rt.Handle(Op{Method: "GET", Path: "/v1/worlds/{id}/candidates", Summary: "Candidate feed: other members ranked for you, with a reason each", Tag: "worlds",
		Response: social.CandidateFeed{}, Query: []Param{{Name: "agentId"}, {Name: "limit", Type: "integer"}}},
		func(w http.ResponseWriter, r *http.Request) error {
			actor, err := queryActor(r)
			if err != nil {
				return err
			}
			limit, err := QueryInt(r, "limit", 0, 1, social.MaxCandidateLimit)
			if err != nil {
				return err
			}
			out, err := s.Social.Candidates(r.Context(), actor, r.PathValue("id"), limit)
			if err != nil {
				return err
			}
			return WriteJSON(w, http.StatusOK, out)
		})
	rt.Handle(Op{Method: "POST", Path: "/v1/worlds/{id}/broadcast", Summary: "Broadcast to a world's audience as world-scoped chat requests (owner and admins)", Tag: "worlds",
		Request: social.PublishInput{}, Response: social.BroadcastResult{}, MaxBody: 64 << 10},
		func(w http.ResponseWriter, r *http.Request) error {
			var in social.PublishInput
			if err := DecodeLoose(r, &in); err != nil {
				return err
			}
			actor, err := socialActor(r, in.FromAgentID, "fromAgentId")
			if err != nil {
				return err
			}
			out, err := s.Social.Broadcast(r.Context(), actor, r.PathValue("id"), in)
			if err != nil {
				return err
			}
			return WriteJSON(w, http.StatusOK, out)
		})

	// Moderation.
	rt.Handle(Op{Method: "GET", Path: "/v1/moderation/worlds/{id}", Summary: "Moderation view: world, member counts, invitations, bans", Tag: "moderation",
		Response: social.Moderation{}, Query: []Param{{Name: "agentId"}}},
		func(w http.ResponseWriter, r *http.Request) error {
			actor, err := queryActor(r)
			if err != nil {
				return err
			}
			out, err := s.Social.ModerationView(r.Context(), actor, r.PathValue("id"))
			if err != nil {
				return err
			}
			return WriteJSON(w, http.StatusOK, out)
		})
	rt.Handle(Op{Method: "PATCH", Path: "/v1/moderation/worlds/{id}", Summary: "Update a world or change its status (action pause|resume|close) — owner", Tag: "moderation",
		Request: social.WorldInput{}, Response: social.World{}, MaxBody: 128 << 10},
		func(w http.ResponseWriter, r *http.Request) error {
			var in social.WorldInput
			if err := DecodeLoose(r, &in); err != nil {
				return err
			}
			actor, err := socialActor(r, in.AgentID, "agentId")
			if err != nil {
				return err
			}
			out, err := s.Social.UpdateWorld(r.Context(), actor, r.PathValue("id"), in)
			if err != nil {
				return err
			}
			return WriteJSON(w, http.StatusOK, out)
		})
	member := func(path, summary string, fn func(*Server, *http.Request, social.Actor, social.MemberTarget) (social.Membership, error)) {
		rt.Handle(Op{Method: "POST", Path: "/v1/moderation/worlds/{id}/" + path, Summary: summary, Tag: "moderation",
			Request: social.MemberTarget{}, Response: social.Membership{}, MaxBody: 16 << 10},
			func(w http.ResponseWriter, r *http.Request) error {
				var in social.MemberTarget
				if err := DecodeLoose(r, &in); err != nil {
					return err
				}
				actor, err := socialActor(r, in.ActorAgentID, "actorAgentId")
				if err != nil {
					return err
				}
				out, err := fn(s, r, actor, in)
				if err != nil {
					return err
				}
				return WriteJSON(w, http.StatusOK, out)
			})
	}
	member("invitations", "Invite an agent (agentId or Name#CODE, optional message)",
		func(s *Server, r *http.Request, a social.Actor, t social.MemberTarget) (social.Membership, error) {
			return s.Social.InviteMember(r.Context(), a, r.PathValue("id"), t)
		})
	member("invitations/revoke", "Revoke an open invitation",
		func(s *Server, r *http.Request, a social.Actor, t social.MemberTarget) (social.Membership, error) {
			return s.Social.RevokeInvitation(r.Context(), a, r.PathValue("id"), t)
		})
	member("members/remove", "Remove a member (its requests close, live chats end)",
		func(s *Server, r *http.Request, a social.Actor, t social.MemberTarget) (social.Membership, error) {
			return s.Social.RemoveMember(r.Context(), a, r.PathValue("id"), t, false)
		})
	member("members/ban", "Ban an agent from the world (removes it if a member)",
		func(s *Server, r *http.Request, a social.Actor, t social.MemberTarget) (social.Membership, error) {
			return s.Social.RemoveMember(r.Context(), a, r.PathValue("id"), t, true)
		})
	member("members/unban", "Lift a ban",
		func(s *Server, r *http.Request, a social.Actor, t social.MemberTarget) (social.Membership, error) {
			return s.Social.UnbanMember(r.Context(), a, r.PathValue("id"), t)
		})
	member("members/role", "Make an active member an admin or a plain member (owner)",
		func(s *Server, r *http.Request, a social.Actor, t social.MemberTarget) (social.Membership, error) {
			return s.Social.SetMemberRole(r.Context(), a, r.PathValue("id"), t)
		})

	rt.Handle(Op{Method: "POST", Path: "/v1/search", Summary: "Search worlds, world members and people (full-text, filters, sorts, paging)", Tag: "worlds",
		Request: social.SearchInput{}, Response: social.SearchResult{}, MaxBody: 64 << 10},
		func(w http.ResponseWriter, r *http.Request) error {
			var in social.SearchInput
			if err := DecodeLoose(r, &in); err != nil {
				return err
			}
			actor, err := socialActor(r, in.AgentID, "agentId")
			if err != nil {
				return err
			}
			out, err := s.Social.Search(r.Context(), actor, in)
			if err != nil {
				return err
			}
			return WriteJSON(w, http.StatusOK, out)
		})
}

// agentRef is a body that only names the acting agent.
type agentRef struct {
	AgentID string `json:"agentId,omitempty"`
}

// splitList accepts repeated and comma-separated query values.
func splitList(vals []string) []string {
	var out []string
	for _, v := range vals {
		for _, p := range strings.Split(v, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}
