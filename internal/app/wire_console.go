package app

import (
	"context"
	"fmt"

	"github.com/switchboard-hub/switchboard/internal/console"
	"github.com/switchboard-hub/switchboard/internal/httpapi"
	"github.com/switchboard-hub/switchboard/internal/replyctl"
	"github.com/switchboard-hub/switchboard/internal/telegram/hosted"
	"github.com/switchboard-hub/switchboard/internal/version"
)

// wireConsole mounts the web console at /console. It reads the services
// wired before it, the pipeline engine and hosted Telegram bots included.
// Its live streams end when the server shuts down.
func (a *App) wireConsole(_ context.Context) error {
	c, err := console.New(console.Deps{
		Log: a.Log.With("subsystem", "console"), DB: a.DB, Agents: a.Agents, Auth: httpapi.RegistryAuth{Agents: a.Agents},
		Bus: a.Bus, Social: a.Social, Relay: a.Relay, Metrics: a.Metrics, Replyctl: replyctl.NewDBStore(a.DB),
		Clock: a.Config.Clock, Version: version.Get().Version,
		SecureCookies: len(a.Config.PublicURL) > 8 && a.Config.PublicURL[:8] == "https://",
	})
	if err != nil {
		return fmt.Errorf("console: %w", err)
	}
	a.Console = c
	if a.Telegram != nil {
		c.SetBots(consoleBots{a.Telegram})
	}
	if a.Pipelines != nil {
		c.SetPipelines(a.Pipelines)
	}
	a.API.MountConsole(c)
	a.onShutdown = append(a.onShutdown, c.Shutdown)
	return nil
}

// consoleBots shows the hosted Telegram bots on the console's Telegram page.
type consoleBots struct{ h *hosted.Host }

func (b consoleBots) ConsoleBots(ctx context.Context, agentID string) ([]console.TelegramBot, error) {
	bots, err := b.h.Bots(ctx, agentID)
	if err != nil {
		return nil, err
	}
	out := make([]console.TelegramBot, len(bots))
	for i, x := range bots {
		out[i] = console.TelegramBot{ID: x.ID, AgentID: x.AgentID, Username: x.Username, Mode: string(x.Mode), CreatedAt: x.CreatedAt}
	}
	return out, nil
}
