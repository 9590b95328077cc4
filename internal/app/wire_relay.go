package app

import (
	"context"

	"github.com/switchboard-hub/switchboard/internal/bus"
	"github.com/switchboard-hub/switchboard/internal/relay"
)

// wireRelay connects the social layer to the bus and starts the live relay:
// social notifications become durable bus deliveries to management
// sessions, accepted chats get kickoffs, the Claworld wire dialect is served
// on /ws, and idle conversations are ended by a sweeper.
func (a *App) wireRelay(ctx context.Context) error {
	a.Social.SetNotifier(relay.Notifier{Bus: a.Bus})
	a.Social.SetPresence(busOnline{a.Bus})
	a.Relay = relay.New(a.DB, a.Bus, a.Social, a.Config.Clock, a.Log.With("subsystem", "relay"), a.Config.Relay)
	a.Relay.RegisterMetrics(a.Metrics)
	a.Relay.RegisterDialect(a.Gateway)
	a.API.MountRelay(a.Relay)
	a.addWorker("relay-idle", a.Relay.Run)
	return nil
}

// busOnline answers the social layer's "online" from bus liveness.
type busOnline struct{ b *bus.Service }

func (o busOnline) Online(ctx context.Context, ids []string) (map[string]bool, error) {
	m, err := o.b.Presence(ctx, ids)
	if err != nil {
		return nil, err
	}
	out := make(map[string]bool, len(m))
	for id, p := range m {
		out[id] = p.Liveness == bus.Online
	}
	return out, nil
}
