package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/agent"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/store"
	"github.com/switchboard-hub/switchboard/internal/store/storetest"
)

func TestValidateDisplayName(t *testing.T) {
	tests := []struct {
		in, want, code string
	}{
		{"  Alice  ", "Alice", ""},
		{"小龙虾", "小龙虾", ""},
		{"", "", "display_name_required"},
		{"   ", "", "display_name_required"},
		{strings.Repeat("a", 40), strings.Repeat("a", 40), ""},
		{strings.Repeat("a", 41), "", "display_name_too_long"},
		{strings.Repeat("界", 41), "", "display_name_too_long"},
		{"Al#ice", "", "display_name_reserved_character"},
		{"Al\tice", "", "display_name_invalid_whitespace"},
		{"Al\nice", "", "display_name_invalid_whitespace"},
		{"Al\x00ice", "", "display_name_invalid_character"},
		{"Al\u202eice", "", "display_name_invalid_character"},
		{"Al\xffice", "", "display_name_invalid_character"},
	}
	for _, tt := range tests {
		got, err := agent.ValidateDisplayName(tt.in)
		if code := protocol.CodeOf(err); code != tt.code {
			t.Errorf("ValidateDisplayName(%q) code = %q, want %q", tt.in, code, tt.code)
		}
		if got != tt.want {
			t.Errorf("ValidateDisplayName(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if err != nil && protocol.ClassOf(err) != protocol.ClassInvalid {
			t.Errorf("class = %s", protocol.ClassOf(err))
		}
	}
}

func TestCreateAuthenticateRotate(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		reg := agent.New(db, nil)
		cmd, tok, err := reg.Create(ctx, agent.CreateParams{DisplayName: "Boss"})
		if err != nil {
			t.Fatal(err)
		}
		if cmd.Tier != protocol.TierCommand || !strings.HasPrefix(cmd.ID, "agt_") || !strings.HasPrefix(tok, agent.TokenPrefix) {
			t.Fatalf("agent %+v token %q", cmd, tok)
		}
		pm, _, err := reg.Create(ctx, agent.CreateParams{DisplayName: "PM", ParentID: cmd.ID})
		if err != nil || pm.Tier != protocol.TierPM {
			t.Fatalf("pm %+v %v", pm, err)
		}
		w, _, err := reg.Create(ctx, agent.CreateParams{DisplayName: "W", ParentID: pm.ID})
		if err != nil || w.Tier != protocol.TierWorker {
			t.Fatalf("worker %+v %v", w, err)
		}
		if _, _, err := reg.Create(ctx, agent.CreateParams{DisplayName: "Bad", ParentID: cmd.ID, Tier: protocol.TierWorker}); protocol.CodeOf(err) != "invalid_parent" {
			t.Fatalf("worker under command: %v", err)
		}
		if _, _, err := reg.Create(ctx, agent.CreateParams{DisplayName: "Bad", ParentID: "agt_nope"}); protocol.ClassOf(err) != protocol.ClassInvalid {
			t.Fatalf("unknown parent: %v", err)
		}
		got, err := reg.Authenticate(ctx, tok)
		if err != nil || got.ID != cmd.ID {
			t.Fatalf("auth %+v %v", got, err)
		}
		for _, bad := range []string{"", "nope", agent.TokenPrefix + "unknown"} {
			if _, err := reg.Authenticate(ctx, bad); protocol.AsError(err).HTTPStatus() != 401 {
				t.Fatalf("auth(%q) = %v", bad, err)
			}
		}
		tok2, err := reg.RotateToken(ctx, cmd.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := reg.Authenticate(ctx, tok); err == nil {
			t.Fatal("old token still works after rotation")
		}
		if got, err := reg.Authenticate(ctx, tok2); err != nil || got.ID != cmd.ID {
			t.Fatalf("new token: %v", err)
		}
		if _, err := reg.RotateToken(ctx, "agt_missing"); protocol.CodeOf(err) != "agent_not_found" {
			t.Fatalf("rotate missing: %v", err)
		}
		list, err := reg.List(ctx, agent.Filter{ParentID: cmd.ID})
		if err != nil || len(list) != 1 || list[0].ID != pm.ID {
			t.Fatalf("list %+v %v", list, err)
		}
		if err := reg.SetDisabled(ctx, w.ID, true); err != nil {
			t.Fatal(err)
		}
	})
}

func TestAdminToken(t *testing.T) {
	storetest.Each(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		reg := agent.New(db, nil)
		tok, created, err := reg.EnsureAdminToken(ctx, "")
		if err != nil || !created || !strings.HasPrefix(tok, agent.AdminTokenPrefix) {
			t.Fatalf("first: %q %v %v", tok, created, err)
		}
		again, created, err := reg.EnsureAdminToken(ctx, "")
		if err != nil || created || again != "" {
			t.Fatalf("second start must not mint a new token: %q %v %v", again, created, err)
		}
		if ok, _ := reg.IsAdminToken(ctx, tok); !ok {
			t.Fatal("admin token not recognised")
		}
		if ok, _ := reg.IsAdminToken(ctx, tok+"x"); ok {
			t.Fatal("wrong admin token accepted")
		}
		if _, _, err := reg.EnsureAdminToken(ctx, "configured-secret"); err != nil {
			t.Fatal(err)
		}
		if ok, _ := reg.IsAdminToken(ctx, tok); ok {
			t.Fatal("old generated token still valid after configuring one")
		}
		if ok, _ := reg.IsAdminToken(ctx, "configured-secret"); !ok {
			t.Fatal("configured token not recognised")
		}
	})
}
