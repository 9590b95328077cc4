package app

import (
	"context"
	"fmt"
	"time"

	"github.com/switchboard-hub/switchboard/internal/social"
)

// socialSweepInterval is how often expired chat requests are swept.
const socialSweepInterval = 30 * time.Second

// wireSocial builds the social layer (identities, accounts, worlds, chat
// requests), mounts its routes and starts the request-expiry sweeper.
// Notifications are dropped until the bus is plugged in with
// a.Social.SetNotifier; accepted chats wait with kickoff `queued` until a
// relay is plugged in with a.Social.SetRelay.
func (a *App) wireSocial(ctx context.Context) error {
	svc, err := social.New(a.DB, a.Agents, a.Config.Clock, social.Config{
		Onboarding: a.Config.Onboarding,
		PublicURL:  a.Config.PublicURL,
	}, a.Log.With("subsystem", "social"))
	if err != nil {
		return fmt.Errorf("social: %w", err)
	}
	svc.SetNotifier(social.NopNotifier{})
	a.Social = svc
	a.API.MountSocial(svc)
	a.addWorker("social-expiry", func(ctx context.Context) { svc.RunExpirySweeper(ctx, socialSweepInterval) })
	return nil
}
