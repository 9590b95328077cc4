package httpapi

import (
	"net/http"

	"github.com/switchboard-hub/switchboard/internal/a2a"
)

// CallerList is the answer to GET /v1/agents/{id}/a2a/callers.
type CallerList struct {
	Callers []a2a.Caller `json:"callers"`
}

// IssueCallerRequest names the client a caller token is for.
type IssueCallerRequest struct {
	Name string `json:"name"`
}

// MountA2A registers the A2A management routes under /v1 and the protocol
// endpoints under /a2a/agents/{agentId} (served by the a2a package through
// the A2A SDK; documented here as raw routes).
func (s *Server) MountA2A(svc *a2a.Service) {
	if svc == nil {
		return
	}
	rt := s.router
	rt.Handle(Op{Method: "GET", Path: "/v1/agents/{id}/a2a", Summary: "An agent's A2A opt-in, description, skills and card URL",
		Tag: "a2a", Response: a2a.Settings{}}, func(w http.ResponseWriter, r *http.Request) error {
		id := r.PathValue("id")
		if err := PrincipalFrom(r).ActAs(id, "id"); err != nil {
			return err
		}
		st, err := svc.GetSettings(r.Context(), id)
		if err != nil {
			return err
		}
		if st.Enabled {
			st.CardURL = svc.CardURL(hubBase(r), id)
		}
		return WriteJSON(w, http.StatusOK, st)
	})
	rt.Handle(Op{Method: "PUT", Path: "/v1/agents/{id}/a2a", Summary: "Enable or disable an agent's A2A endpoints and set its card's description and skills (the agent itself or the admin)",
		Tag: "a2a", Request: a2a.SettingsInput{}, Response: a2a.Settings{}, MaxBody: 256 << 10}, func(w http.ResponseWriter, r *http.Request) error {
		id := r.PathValue("id")
		if err := PrincipalFrom(r).ActAs(id, "id"); err != nil {
			return err
		}
		var in a2a.SettingsInput
		if err := Decode(r, &in); err != nil {
			return err
		}
		st, err := svc.SetSettings(r.Context(), id, in)
		if err != nil {
			return err
		}
		if st.Enabled {
			st.CardURL = svc.CardURL(hubBase(r), id)
		} else {
			st.CardURL = ""
		}
		return WriteJSON(w, http.StatusOK, st)
	})
	rt.Handle(Op{Method: "POST", Path: "/v1/agents/{id}/a2a/callers", Summary: "Issue a bearer token for an external A2A caller of this agent (shown once)",
		Tag: "a2a", Request: IssueCallerRequest{}, Response: a2a.Caller{}, Status: http.StatusCreated, MaxBody: 16 << 10}, func(w http.ResponseWriter, r *http.Request) error {
		id := r.PathValue("id")
		if err := PrincipalFrom(r).ActAs(id, "id"); err != nil {
			return err
		}
		var in IssueCallerRequest
		if err := Decode(r, &in); err != nil {
			return err
		}
		c, err := svc.IssueCaller(r.Context(), id, in.Name)
		if err != nil {
			return err
		}
		return WriteJSON(w, http.StatusCreated, c)
	})
	rt.Handle(Op{Method: "GET", Path: "/v1/agents/{id}/a2a/callers", Summary: "List an agent's A2A callers (tokens are never shown again)",
		Tag: "a2a", Response: CallerList{}}, func(w http.ResponseWriter, r *http.Request) error {
		id := r.PathValue("id")
		if err := PrincipalFrom(r).ActAs(id, "id"); err != nil {
			return err
		}
		cs, err := svc.ListCallers(r.Context(), id)
		if err != nil {
			return err
		}
		return WriteJSON(w, http.StatusOK, CallerList{Callers: cs})
	})
	rt.Handle(Op{Method: "DELETE", Path: "/v1/agents/{id}/a2a/callers/{callerId}", Summary: "Revoke an A2A caller's token (repeating is harmless)",
		Tag: "a2a", Response: a2a.Caller{}}, func(w http.ResponseWriter, r *http.Request) error {
		id := r.PathValue("id")
		if err := PrincipalFrom(r).ActAs(id, "id"); err != nil {
			return err
		}
		c, err := svc.RevokeCaller(r.Context(), id, r.PathValue("callerId"))
		if err != nil {
			return err
		}
		return WriteJSON(w, http.StatusOK, c)
	})
	rt.Handle(Op{Method: "POST", Path: "/v1/agents/{id}/a2a/send", Summary: "Send a message from this agent to an external A2A agent and wait for its answer (logged on the bus)",
		Tag: "a2a", Request: a2a.SendInput{}, Response: a2a.SendResult{}, MaxBody: 256 << 10}, func(w http.ResponseWriter, r *http.Request) error {
		id := r.PathValue("id")
		if err := PrincipalFrom(r).ActAs(id, "id"); err != nil {
			return err
		}
		var in a2a.SendInput
		if err := Decode(r, &in); err != nil {
			return err
		}
		out, err := svc.Send(r.Context(), id, in)
		if err != nil {
			return err
		}
		return WriteJSON(w, http.StatusOK, out)
	})

	raw := func(f http.HandlerFunc) HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) error { f(w, r); return nil }
	}
	const base = "/a2a/agents/{agentId}"
	rt.Handle(Op{Method: "GET", Path: base + "/.well-known/agent-card.json", Summary: "A2A 1.0 Agent Card of an enabled agent (its interfaces and bearer scheme)",
		Tag: "a2a", Auth: AuthPublic, Raw: true}, raw(svc.ServeCard))
	rt.Handle(Op{Method: "GET", Path: base + a2a.LegacyPath + "/.well-known/agent-card.json", Summary: "The same card in the form A2A 0.3 clients read (url points at the 0.3 endpoint)",
		Tag: "a2a", Auth: AuthPublic, Raw: true}, raw(svc.ServeLegacyCard))
	rt.Handle(Op{Method: "POST", Path: base, Summary: "A2A 1.0 JSON-RPC endpoint (SendMessage, SendStreamingMessage, GetTask, ListTasks, CancelTask, push configs); bearer caller token",
		Tag: "a2a", Auth: AuthPublic, Raw: true, MaxBody: 4 << 20}, raw(svc.ServeJSONRPC))
	rt.Handle(Op{Method: "POST", Path: base + a2a.LegacyPath, Summary: "A2A 0.3 JSON-RPC endpoint for older clients; bearer caller token",
		Tag: "a2a", Auth: AuthPublic, Raw: true, MaxBody: 4 << 20}, raw(svc.ServeLegacy))
	for _, m := range []string{"GET", "POST", "DELETE"} {
		rt.Handle(Op{Method: m, Path: base + a2a.RESTPath + "/{path...}", Summary: "A2A 1.0 HTTP+JSON binding (/message:send, /message:stream, /tasks, ...); bearer caller token",
			Tag: "a2a", Auth: AuthPublic, Raw: true, MaxBody: 4 << 20}, raw(svc.ServeREST))
	}
}

// hubBase is the hub's base URL as the client reached it.
func hubBase(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return scheme + "://" + r.Host
}
