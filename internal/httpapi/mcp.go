package httpapi

import (
	"net/http"

	"github.com/switchboard-hub/switchboard/internal/mcpserver"
	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// MountMCP serves the MCP tools over Streamable HTTP at /mcp, acting as
// the agent whose bearer token the request carries.
func (s *Server) MountMCP(svc *mcpserver.Server) {
	if svc == nil {
		return
	}
	h := svc.Handler(func(r *http.Request) (string, error) { return PrincipalFrom(r).AgentID(), nil })
	serve := func(w http.ResponseWriter, r *http.Request) error {
		if PrincipalFrom(r).Admin {
			return &protocol.Error{Class: protocol.ClassPermission, Code: "agent_token_required",
				Message:        "the MCP tools act as one agent; the admin token names none",
				RequiredAction: "connect with the token of the agent the tools should act as"}
		}
		h.ServeHTTP(w, r)
		return nil
	}
	for _, m := range []string{"GET", "POST", "DELETE"} {
		s.router.Handle(Op{Method: m, Path: "/mcp", Summary: "MCP server (Streamable HTTP, stateless): Switchboard tools acting as the calling agent",
			Tag: "mcp", Raw: true, MaxBody: 4 << 20}, serve)
	}
}
