package app

import (
	"context"

	"github.com/switchboard-hub/switchboard/internal/mcpserver"
	"github.com/switchboard-hub/switchboard/internal/version"
)

// wireMCP serves the MCP tools at /mcp. They call the social layer, the
// relay, the bus and the pipeline engine directly, as the calling agent.
func (a *App) wireMCP(ctx context.Context) error {
	a.MCP = mcpserver.New(mcpserver.Deps{Social: a.Social, Relay: a.Relay, Bus: a.Bus,
		Log: a.Log.With("subsystem", "mcp"), Version: version.Get().Version})
	if a.Pipelines != nil {
		a.MCP.SetPipelines(a.Pipelines)
	}
	a.API.MountMCP(a.MCP)
	return nil
}
