package httpapi

import (
	"net/http"
	"time"

	"github.com/switchboard-hub/switchboard/internal/agent"
	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// AgentView is an agent as the API shows it: registry fields plus liveness.
type AgentView struct {
	agent.Agent
	Liveness string    `json:"liveness"`
	LastSeen time.Time `json:"lastSeen,omitzero"`
}

// CreatedAgent is the answer to agent creation; Token is shown only here.
type CreatedAgent struct {
	AgentView
	Token string `json:"token"`
}

// TokenResponse carries a freshly minted token.
type TokenResponse struct {
	AgentID string `json:"agentId"`
	Token   string `json:"token"`
}

// AgentList is the answer to GET /v1/agents.
type AgentList struct {
	Agents []AgentView `json:"agents"`
}

func (s *Server) registerAgents() {
	s.router.Handle(Op{Method: "POST", Path: "/v1/admin/agents", Summary: "Create an agent; the token is shown once", Tag: "agents",
		Auth: AuthAdmin, Request: agent.CreateParams{}, Response: CreatedAgent{}, Status: http.StatusCreated}, s.createAgent)
	s.router.Handle(Op{Method: "GET", Path: "/v1/agents", Summary: "List agents with tier, parent and liveness", Tag: "agents",
		Response: AgentList{}, Query: []Param{{Name: "tier"}, {Name: "parent"}}}, s.listAgents)
	s.router.Handle(Op{Method: "GET", Path: "/v1/agents/{id}", Summary: "One agent with liveness", Tag: "agents", Response: AgentView{}}, s.getAgent)
	s.router.Handle(Op{Method: "POST", Path: "/v1/agents/{id}/rotate-token", Summary: "Replace an agent's token (the agent itself or the admin); the old one stops working", Tag: "agents",
		Response: TokenResponse{}}, s.rotateToken)
}

func (s *Server) createAgent(w http.ResponseWriter, r *http.Request) error {
	var p agent.CreateParams
	if err := Decode(r, &p); err != nil {
		return err
	}
	a, tok, err := s.Agents.Create(r.Context(), p)
	if err != nil {
		return err
	}
	s.Log.Info("agent created", "agentId", a.ID, "tier", a.Tier, "parent", a.ParentID)
	return WriteJSON(w, http.StatusCreated, CreatedAgent{AgentView: AgentView{Agent: a, Liveness: "offline"}, Token: tok})
}

func (s *Server) views(r *http.Request, as []agent.Agent) ([]AgentView, error) {
	out := make([]AgentView, len(as))
	ids := make([]string, len(as))
	for i, a := range as {
		out[i] = AgentView{Agent: a, Liveness: "offline"}
		ids[i] = a.ID
	}
	if s.Presence == nil || len(as) == 0 {
		return out, nil
	}
	live, err := s.Presence.Liveness(r.Context(), ids)
	if err != nil {
		return nil, err
	}
	for i := range out {
		if l, ok := live[out[i].ID]; ok {
			out[i].Liveness, out[i].LastSeen = l.Status, l.LastSeen
		}
	}
	return out, nil
}

func (s *Server) listAgents(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	f := agent.Filter{Tier: protocol.Tier(q.Get("tier")), ParentID: q.Get("parent")}
	if f.Tier != "" && !f.Tier.Valid() {
		return protocol.Invalid("tier", "must be one of command, pm, worker")
	}
	as, err := s.Agents.List(r.Context(), f)
	if err != nil {
		return err
	}
	views, err := s.views(r, as)
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, AgentList{Agents: views})
}

func (s *Server) getAgent(w http.ResponseWriter, r *http.Request) error {
	a, err := s.Agents.Get(r.Context(), r.PathValue("id"))
	if err != nil {
		return err
	}
	views, err := s.views(r, []agent.Agent{a})
	if err != nil {
		return err
	}
	return WriteJSON(w, http.StatusOK, views[0])
}

func (s *Server) rotateToken(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := PrincipalFrom(r).ActAs(id, "id"); err != nil {
		return err
	}
	tok, err := s.Agents.RotateToken(r.Context(), id)
	if err != nil {
		return err
	}
	s.Log.Info("agent token rotated", "agentId", id)
	return WriteJSON(w, http.StatusOK, TokenResponse{AgentID: id, Token: tok})
}
