package app

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/switchboard-hub/switchboard/internal/secrets"
	"github.com/switchboard-hub/switchboard/internal/telegram/hosted"
)

// wireTelegram builds the Telegram bot host: the sealing key for bot
// tokens, the routes under /v1/replyctl and /v1/telegram, and the worker
// that receives updates, sweeps expiries and sends queued replies.
func (a *App) wireTelegram(_ context.Context) error {
	key, created, err := secrets.LoadKey(a.Config.DataDir, a.Config.SecretKey)
	if err != nil {
		return err
	}
	box, err := secrets.New(key)
	if err != nil {
		return err
	}
	if created {
		a.Log.Info("generated the secret key that seals stored bot tokens; back it up with the database",
			"path", filepath.Join(a.Config.DataDir, secrets.KeyFileName), "keyId", box.KeyID())
	}
	h, err := hosted.New(hosted.Options{
		DB: a.DB, Bus: a.Bus, Agents: a.Agents, Box: box, PublicURL: a.publicURL,
		Clock: a.Config.Clock, Logger: a.Log, Metrics: a.Metrics, Tuning: a.Config.Telegram,
	})
	if err != nil {
		return fmt.Errorf("telegram: %w", err)
	}
	h.Register(a.API.Router())
	a.Telegram = h
	a.addWorker("telegram", h.Run)
	return nil
}

// publicURL is the base URL the outside world (Telegram's webhooks) uses:
// the configured public URL, else the listener's address.
func (a *App) publicURL() string {
	if a.Config.PublicURL != "" {
		return a.Config.PublicURL
	}
	return a.URL()
}
