package app

import (
	"context"

	"github.com/switchboard-hub/switchboard/internal/a2a"
	"github.com/switchboard-hub/switchboard/internal/version"
)

// wireA2A serves enabled agents to standard A2A clients: their cards and
// protocol endpoints under /a2a/agents/{agentId}, the management routes
// under /v1/agents/{id}/a2a, and a sweeper that settles tasks whose
// execution was lost in a restart.
func (a *App) wireA2A(ctx context.Context) error {
	cfg := a.Config.A2A
	if cfg.PublicURL == "" {
		cfg.PublicURL = a.Config.PublicURL
	}
	if cfg.Version == "" {
		cfg.Version = version.Get().Version
	}
	a.A2A = a2a.New(a.DB, a.Bus, a.Agents, a.Config.Clock, a.Log.With("subsystem", "a2a"), cfg)
	a.API.MountA2A(a.A2A)
	a.addWorker("a2a-sweeper", a.A2A.Run)
	return nil
}
