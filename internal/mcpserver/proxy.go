package mcpserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Proxy serves over t (stdio for `switchboard mcp`) the tools of the hub at
// hubURL, acting as the agent whose token is given: it lists the hub's
// tools once and forwards every call to the hub's /mcp endpoint, so a
// local MCP host gets exactly the tools, schemas and answers of the hub.
func Proxy(ctx context.Context, hubURL, token, version string, t mcp.Transport) error {
	cl := mcp.NewClient(&mcp.Implementation{Name: Name + "-stdio", Version: version}, nil)
	hc := &http.Client{Transport: bearerTransport{token: token, base: http.DefaultTransport}}
	cs, err := cl.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: strings.TrimRight(hubURL, "/") + "/mcp", HTTPClient: hc}, nil)
	if err != nil {
		return fmt.Errorf("connect to %s/mcp: %w", strings.TrimRight(hubURL, "/"), err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		return fmt.Errorf("list the hub's tools: %w", err)
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: Name, Title: Title, Version: version}, &mcp.ServerOptions{
		Instructions: "Tools of the Switchboard hub at " + hubURL + ". Every result has status and nextAction; a tool error says what to fix."})
	for _, tool := range tools.Tools {
		name := tool.Name
		srv.AddTool(tool, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: req.Params.Arguments})
		})
	}
	return srv.Run(ctx, t)
}

// bearerTransport adds the agent's token to every request.
type bearerTransport struct {
	token string
	base  http.RoundTripper
}

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.base.RoundTrip(r)
}
