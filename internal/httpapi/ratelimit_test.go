package httpapi_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/httpapi"
)

// An agent over its request rate gets 429 rate_limited with Retry-After;
// other agents and the admin are not affected. Self-registration is
// limited per client address.
func TestRateLimits(t *testing.T) {
	h := apptest.Start(t, "", func(c *app.Config) {
		c.NoRateLimits = false
		c.Limits = httpapi.Limits{AgentRate: 1, AgentBurst: 3, IPRate: 1, IPBurst: 2}
	})
	ctx := context.Background()
	a, ac := h.NewAgent("Busy")
	_, bc := h.NewAgent("Calm")
	var limited error
	for i := 0; i < 10 && limited == nil; i++ {
		_, limited = ac.Agent(ctx, a.ID)
	}
	if client.Status(limited) != http.StatusTooManyRequests || client.Code(limited) != "rate_limited" {
		t.Fatalf("want 429 rate_limited, got %v", limited)
	}
	r := call(t, "GET", h.URL+"/v1/agents/"+a.ID, a.Token, "", nil)
	if r.status != 429 || r.body["class"] != "E002" || r.body["retryAfterSeconds"] == nil {
		t.Fatalf("limited answer %d %s", r.status, r.raw)
	}
	if _, err := bc.Agent(ctx, a.ID); err != nil {
		t.Fatalf("another agent was limited: %v", err)
	}
	for i := 0; i < 10; i++ {
		if _, err := h.Admin.Agent(ctx, a.ID); err != nil {
			t.Fatalf("admin limited: %v", err)
		}
	}
	anon := client.New(h.URL, "")
	var lastErr error
	for i := 0; i < 5; i++ {
		_, lastErr = anon.Activate(ctx, client.ActivateInput{DisplayName: "Signup"})
	}
	if client.Status(lastErr) != http.StatusTooManyRequests {
		t.Fatalf("scripted sign-ups not limited: %v", lastErr)
	}
}
