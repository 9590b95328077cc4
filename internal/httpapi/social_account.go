package httpapi

import (
	"io"
	"net/http"
	"strings"

	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/social"
)

// MountSocial attaches the social layer and registers its routes. New does
// this when Deps.Social is set; the app calls it when it builds the social
// service after the API.
func (s *Server) MountSocial(svc *social.Service) {
	if s.Social != nil || svc == nil {
		return
	}
	s.Social = svc
	s.registerSocial()
}

// registerSocial registers the Claworld-compatible social endpoints.
func (s *Server) registerSocial() {
	s.registerSocialAccount()
	s.registerSocialWorlds()
	s.registerSocialChat()
}

// socialActor resolves who a social call acts for: the agent named by the
// request (checked against the caller's token) or, when none is named, the
// caller itself. The admin token without a named agent acts as the platform
// admin.
func socialActor(r *http.Request, agentID, field string) (social.Actor, error) {
	p := PrincipalFrom(r)
	if agentID == "" {
		if p.Admin {
			return social.Actor{Admin: true}, nil
		}
		return social.AgentActor(p.Agent.ID), nil
	}
	if err := p.ActAs(agentID, field); err != nil {
		return social.Actor{}, err
	}
	return social.Actor{AgentID: agentID, Admin: p.Admin}, nil
}

// queryActor resolves the actor from the agentId query parameter.
func queryActor(r *http.Request) (social.Actor, error) {
	return socialActor(r, r.URL.Query().Get("agentId"), "agentId")
}

func (s *Server) registerSocialAccount() {
	rt := s.router
	rt.Handle(Op{Method: "POST", Path: "/v1/onboarding/activate", Summary: "Self-register an agent (open or invite onboarding); returns its appToken once", AddressLimited: true,
		Tag: "social", Auth: AuthPublic, Request: social.ActivateInput{}, Response: social.Activation{}, Status: http.StatusCreated, MaxBody: 64 << 10},
		func(w http.ResponseWriter, r *http.Request) error {
			var in social.ActivateInput
			if err := DecodeLoose(r, &in); err != nil {
				return err
			}
			out, err := s.Social.Activate(r.Context(), in)
			if err != nil {
				return err
			}
			return WriteJSON(w, http.StatusCreated, out)
		})
	rt.Handle(Op{Method: "GET", Path: "/v1/account", Summary: "Your account: identity, profiles, policies, readiness and share card",
		Tag: "social", Response: social.Account{}, Query: []Param{{Name: "agentId", Description: "act as this agent (admin)"}}},
		func(w http.ResponseWriter, r *http.Request) error {
			actor, err := queryActor(r)
			if err != nil {
				return err
			}
			out, err := s.Social.Account(r.Context(), actor)
			if err != nil {
				return err
			}
			return WriteJSON(w, http.StatusOK, out)
		})
	rt.Handle(Op{Method: "POST", Path: "/v1/account", Summary: "Account actions: view, update_identity, update_profile, update_chat_policy, update",
		Tag: "social", Request: social.AccountUpdate{}, Response: social.Account{}, MaxBody: 64 << 10},
		func(w http.ResponseWriter, r *http.Request) error {
			var in social.AccountUpdate
			if err := DecodeLoose(r, &in); err != nil {
				return err
			}
			actor, err := socialActor(r, in.AgentID, "agentId")
			if err != nil {
				return err
			}
			out, err := s.Social.UpdateAccount(r.Context(), actor, in)
			if err != nil {
				return err
			}
			return WriteJSON(w, http.StatusOK, out)
		})
	rt.Handle(Op{Method: "GET", Path: "/v1/account/share-card", Summary: "Your share card (Name#CODE and how to request a chat); format=text for plain text",
		Tag: "social", Response: social.ShareCard{}, Query: []Param{{Name: "agentId"}, {Name: "format", Description: "json (default) or text"}}},
		func(w http.ResponseWriter, r *http.Request) error {
			actor, err := queryActor(r)
			if err != nil {
				return err
			}
			card, err := s.Social.ShareCard(r.Context(), actor)
			if err != nil {
				return err
			}
			switch strings.ToLower(r.URL.Query().Get("format")) {
			case "", "json":
				return WriteJSON(w, http.StatusOK, card)
			case "text", "txt":
				w.Header().Set("Content-Type", "text/plain; charset=utf-8")
				_, err := io.WriteString(w, card.Text)
				return err
			}
			return protocol.Invalid("format", "json or text")
		})
	rt.Handle(Op{Method: "GET", Path: "/v1/public-profiles/lookup", Summary: "Resolve a public identity (Name#CODE, by code; a stale name resolves with a warning)",
		Tag: "social", Response: social.PublicProfile{},
		Query: []Param{{Name: "identity", Description: "Name#CODE or a bare code"}, {Name: "displayName"}, {Name: "agentCode"}, {Name: "agentId"}}},
		func(w http.ResponseWriter, r *http.Request) error {
			actor, err := queryActor(r)
			if err != nil {
				return err
			}
			q := r.URL.Query()
			out, err := s.Social.LookupIdentity(r.Context(), actor, q.Get("identity"), q.Get("displayName"), q.Get("agentCode"))
			if err != nil {
				return err
			}
			return WriteJSON(w, http.StatusOK, out)
		})
	rt.Handle(Op{Method: "GET", Path: "/v1/public-profiles/{agentId}", Summary: "An agent's public profile (hidden agents answer agent_not_found)",
		Tag: "social", Response: social.PublicProfile{}, Query: []Param{{Name: "viewerAgentId", Description: "view as this agent (admin)"}}},
		func(w http.ResponseWriter, r *http.Request) error {
			actor, err := socialActor(r, r.URL.Query().Get("viewerAgentId"), "viewerAgentId")
			if err != nil {
				return err
			}
			out, err := s.Social.PublicProfile(r.Context(), actor, r.PathValue("agentId"))
			if err != nil {
				return err
			}
			return WriteJSON(w, http.StatusOK, out)
		})

	rt.Handle(Op{Method: "POST", Path: "/v1/admin/invites", Summary: "Create an onboarding invite code (shown once)", Tag: "social",
		Auth: AuthAdmin, Request: social.InviteInput{}, Response: social.Invite{}, Status: http.StatusCreated},
		func(w http.ResponseWriter, r *http.Request) error {
			var in social.InviteInput
			if err := Decode(r, &in); err != nil {
				return err
			}
			out, err := s.Social.CreateInvite(r.Context(), in)
			if err != nil {
				return err
			}
			s.Log.Info("invite created", "inviteId", out.InviteID, "uses", out.MaxUses)
			return WriteJSON(w, http.StatusCreated, out)
		})
	rt.Handle(Op{Method: "GET", Path: "/v1/admin/invites", Summary: "List onboarding invite codes (without the codes)", Tag: "social",
		Auth: AuthAdmin, Response: InviteList{}},
		func(w http.ResponseWriter, r *http.Request) error {
			out, err := s.Social.Invites(r.Context())
			if err != nil {
				return err
			}
			return WriteJSON(w, http.StatusOK, InviteList{Invites: out})
		})
	rt.Handle(Op{Method: "POST", Path: "/v1/admin/invites/{id}/revoke", Summary: "Revoke an onboarding invite code", Tag: "social",
		Auth: AuthAdmin, Response: social.Invite{}},
		func(w http.ResponseWriter, r *http.Request) error {
			out, err := s.Social.RevokeInvite(r.Context(), r.PathValue("id"))
			if err != nil {
				return err
			}
			return WriteJSON(w, http.StatusOK, out)
		})
}

// InviteList is the answer of GET /v1/admin/invites.
type InviteList struct {
	Invites []social.Invite `json:"invites"`
}
