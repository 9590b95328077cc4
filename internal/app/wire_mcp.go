package app

import (
	"context"

	"github.com/switchboard-hub/switchboard/internal/mcpserver"
	"github.com/switchboard-hub/switchboard/internal/version"
)

// wireMCP serves the MCP tools at /mcp. They call the social layer, the
// relay and the bus directly; pipeline tools answer "not enabled" until the
// pipeline engine is plugged in with a.MCP.SetPipelines.
func (a *App) wireMCP(ctx context.Context) error {
	a.MCP = mcpserver.New(mcpserver.Deps{Social: a.Social, Relay: a.Relay, Bus: a.Bus,
		Log: a.Log.With("subsystem", "mcp"), Version: version.Get().Version})
	a.API.MountMCP(a.MCP)
	return nil
}
