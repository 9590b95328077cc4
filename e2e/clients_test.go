package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	sba2a "github.com/switchboard-hub/switchboard/internal/a2a"
	"github.com/switchboard-hub/switchboard/internal/app"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// Real clients from the npm registry, pinned in clients/package-lock.json,
// run against a live hub: the official A2A JavaScript SDK 1.3.0 (JSON-RPC
// and HTTP+JSON) and 0.3.14 (the 0.3 endpoint), and the official MCP
// TypeScript SDK (Streamable HTTP and stdio). Each script prints "ok
// <check>" lines and "done"; the test asserts them.
func TestRealClients(t *testing.T) {
	dir := nodeClients(t)
	h := apptest.Start(t, "", func(c *app.Config) { c.A2A = sba2a.Config{Wait: 20 * time.Second} })
	ctx := context.Background()
	ag, ac := h.NewAgent("Echo")
	if _, err := ac.SetA2A(ctx, ag.ID, client.A2ASettings{Enabled: true, Description: "Echoes what you say."}); err != nil {
		t.Fatal(err)
	}
	caller, err := ac.IssueA2ACaller(ctx, ag.ID, "npm clients")
	if err != nil {
		t.Fatal(err)
	}
	stop := echoAgent(t, ac, ag.ID)
	defer stop()
	peer, pc := h.NewAgent("Peer")
	hp, ap := "Tests clients", "Receives chat requests"
	if _, err := pc.UpdateAccount(ctx, client.AccountUpdate{Action: "update_profile", HumanProfile: &hp, AgentProfile: &ap}); err != nil {
		t.Fatal(err)
	}
	env := []string{"HUB=" + h.URL, "AGENT_ID=" + ag.ID, "CALLER_TOKEN=" + caller.Token,
		"AGENT_TOKEN=" + ac.Token, "PEER_ID=" + peer.ID, "SWITCHBOARD_BIN=" + binary(t)}
	scripts := map[string][]string{
		"a2a.mjs":   {"JSONRPC send", "JSONRPC stream", "JSONRPC get", "JSONRPC cancel", "JSONRPC multi-turn context", "HTTP+JSON send", "HTTP+JSON stream", "HTTP+JSON cancel", "HTTP+JSON multi-turn context"},
		"a2a03.mjs": {"0.3 send", "0.3 get", "0.3 stream"},
		"mcp.mjs":   {"http list tools", "http call pipeline_run", "http bad argument is a tool error", "stdio list tools", "stdio call report_to_owner", "stdio bad argument is a tool error"},
	}
	for script, wants := range scripts {
		t.Run(script, func(t *testing.T) {
			out := runNode(t, dir, script, env)
			lines := map[string]bool{}
			for _, l := range strings.Split(out, "\n") {
				lines[strings.TrimSpace(l)] = true
			}
			for _, w := range wants {
				if !lines["ok "+w] {
					t.Errorf("%s: no check %q passed; output:\n%s", script, w, out)
				}
			}
			if !lines["done"] {
				t.Errorf("%s did not finish:\n%s", script, out)
			}
		})
	}
}

// nodeClients returns the clients directory after making sure its
// dependencies are installed (npm ci, once; node_modules is git-ignored).
// Without Node.js the test is skipped so a newcomer's ./scripts/test still
// runs; CI installs the clients and runs it.
func nodeClients(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs("clients")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("node is not installed; CI must run the real-client tests (install Node.js 20+ and npm)")
		}
		t.Skip("node is not installed: the real A2A/MCP client tests need Node.js 20+ and npm (CI runs them)")
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@a2a-js", "sdk", "package.json")); err != nil {
		npm, err := exec.LookPath("npm")
		if err != nil {
			t.Skip("npm is not installed: run `npm ci --prefix e2e/clients` to enable the real-client tests")
		}
		cmd := exec.Command(npm, "ci", "--no-audit", "--no-fund")
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm ci in %s: %v\n%s", dir, err, out)
		}
	}
	return dir
}

func runNode(t *testing.T, dir, script string, env []string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", script)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %s: %v\n%s", script, err, out.String())
	}
	t.Logf("node %s:\n%s", script, out.String())
	return out.String()
}

// echoAgent answers every A2A message with "echo: <text>", except "never
// answered", which it leaves waiting (the clients cancel it).
func echoAgent(t *testing.T, c *client.Client, agentID string) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			ds, err := c.Inbox(ctx, client.InboxOptions{Wait: 2 * time.Second, Limit: 10})
			if err != nil {
				continue
			}
			for _, d := range ds {
				env, err := d.Decode()
				if err == nil && env.Type == protocol.TypeRequest {
					rp, _ := env.Request()
					var p sba2a.Params
					_ = json.Unmarshal(rp.Params, &p)
					if rp.Action == sba2a.Action && p.Text != "never answered" {
						res, _ := json.Marshal(map[string]string{"text": "echo: " + p.Text})
						payload, _ := json.Marshal(protocol.ResponsePayload{RequestID: env.ID, Status: protocol.StatusSuccess, Result: res})
						if _, err := c.Send(ctx, &protocol.Envelope{TraceID: env.TraceID, From: protocol.Address{Agent: agentID},
							To: protocol.Address{Agent: sba2a.SystemID}, Type: protocol.TypeResponse, Payload: payload}); err != nil && ctx.Err() == nil {
							t.Errorf("echo agent: %v", err)
						}
					}
				}
				_, _ = c.Ack(ctx, d.DeliveryID, d.Attempt)
			}
		}
	}()
	return func() { cancel(); <-done }
}
