package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/switchboard-hub/switchboard/internal/agent"
	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// Principal is the authenticated caller: the admin, or one agent.
type Principal struct {
	Admin bool
	Agent agent.Agent // zero for the admin
}

// AgentID is the caller's agent id ("" for the admin).
func (p Principal) AgentID() string { return p.Agent.ID }

// CanActAs reports whether the caller may act as agentID: an agent only as
// itself; the admin as anyone (operators and scripts manage agents).
func (p Principal) CanActAs(agentID string) bool {
	return p.Admin || (agentID != "" && p.Agent.ID == agentID)
}

// ActAs returns nil when the caller may act as agentID, and otherwise the
// E001 answer every endpoint gives for "another agent's id".
func (p Principal) ActAs(agentID, field string) error {
	if p.CanActAs(agentID) {
		return nil
	}
	return &protocol.Error{Class: protocol.ClassPermission, Code: "not_your_agent",
		Message:     field + " names another agent; an agent can act only as itself",
		FieldErrors: map[string]string{field: "must be your own agent id (" + p.Agent.ID + ")"},
		NextAction:  "use your own agent id, or the admin token for administrative actions"}
}

// Self resolves the agent id a request acts for: the given id (checked with
// ActAs) or, when empty, the caller's own id. The admin must name an agent.
func (p Principal) Self(agentID, field string) (string, error) {
	if agentID == "" {
		if p.Admin {
			return "", &protocol.Error{Class: protocol.ClassInvalid, Code: "agent_required", Message: field + " is required when using the admin token",
				FieldErrors: map[string]string{field: "required"}, MissingFields: []string{field}}
		}
		return p.Agent.ID, nil
	}
	return agentID, p.ActAs(agentID, field)
}

// PrincipalFrom returns the caller of an authenticated request.
func PrincipalFrom(r *http.Request) Principal {
	p, _ := r.Context().Value(principalKey).(Principal)
	return p
}

// ContextWithPrincipal attaches a principal to ctx (for transports that
// authenticate outside the router, such as the WebSocket auth frame).
func ContextWithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey, p)
}

// RegistryAuth authenticates agent tokens against the registry and the
// admin token against the stored hash.
type RegistryAuth struct{ Agents *agent.Registry }

// Authenticate implements Authenticator.
func (a RegistryAuth) Authenticate(ctx context.Context, token string) (Principal, error) {
	if strings.HasPrefix(token, agent.TokenPrefix) {
		ag, err := a.Agents.Authenticate(ctx, token)
		if err == nil {
			return Principal{Agent: ag}, nil
		}
		if protocol.AsError(err).HTTPStatus() != http.StatusUnauthorized {
			return Principal{}, err
		}
	}
	ok, err := a.Agents.IsAdminToken(ctx, token)
	if err != nil {
		return Principal{}, err
	}
	if !ok {
		return Principal{}, protocol.Unauthenticated("unknown, rotated or disabled token")
	}
	return Principal{Admin: true}, nil
}
