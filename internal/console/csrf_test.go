package console_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/pipeline"
)

// forgeries are the ways a state-changing form can arrive without proof
// that the signed-in user sent it from the console: each is refused with
// 403 before anything changes. tok is the session's token; other is a token
// of another session of the same agent.
func forgeries(tok, other string, form url.Values) []struct {
	name   string
	form   url.Values
	header map[string]string
} {
	with := func(csrf string) url.Values {
		f := url.Values{}
		for k, v := range form {
			f[k] = v
		}
		if csrf != "-" {
			f.Set("csrf", csrf)
		}
		return f
	}
	return []struct {
		name   string
		form   url.Values
		header map[string]string
	}{
		{"no token", with("-"), nil},
		{"empty token", with(""), nil},
		{"wrong token", with(tok + "x"), nil},
		{"another session's token", with(other), nil},
		{"cross-site", with(tok), map[string]string{"Sec-Fetch-Site": "cross-site"}},
		{"foreign origin", with(tok), map[string]string{"Origin": "https://evil.example"}},
	}
}

// Signing out needs the session's CSRF token: a forged sign-out leaves the
// session signed in; the real one ends this session only.
func TestCSRFSignOut(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		a, _ := h.NewAgent("Alpha")
		b := signIn(t, h, a.Token)
		second := signIn(t, h, a.Token)
		tok, other := b.csrf("/console/agents"), second.csrf("/console/agents")
		signedIn := func(x *browser) bool {
			t.Helper()
			p := x.get("/console/agents")
			return p.status == 200
		}
		for _, tc := range forgeries(tok, other, url.Values{}) {
			if p := b.post("/console/sign-out", tc.form, tc.header); p.status != 403 {
				t.Fatalf("%s: %d\n%s", tc.name, p.status, p.body)
			}
			if !signedIn(b) {
				t.Fatalf("%s: the forged sign-out ended the session", tc.name)
			}
		}
		p := b.post("/console/sign-out", url.Values{"csrf": {tok}}, map[string]string{"Origin": h.URL, "Sec-Fetch-Site": "same-origin"})
		if p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/sign-in" {
			t.Fatalf("sign-out: %d %s\n%s", p.status, p.header.Get("Location"), p.body)
		}
		if signedIn(b) {
			t.Fatal("still signed in after signing out")
		}
		if !signedIn(second) {
			t.Fatal("signing out ended another session too")
		}
	})
}

// Cancelling a pipeline from the console needs the session's CSRF token:
// forged cancels leave the execution running; the real one cancels it.
func TestCSRFPipelineCancel(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		ctx := context.Background()
		eng := h.App.Pipelines
		owner, _ := h.NewAgent("Owner")
		x, err := eng.Submit(ctx, pipeline.SubmitRequest{Owner: owner.ID,
			Pipeline: []byte("id: review\npipeline: [gate]\nsteps:\n  gate: {approval: true}\n"),
			Skills:   []pipeline.SkillFile{{Name: "gate.md", Content: []byte("---\nid: gate\n---\nA person approves.\n")}},
			Input:    json.RawMessage(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		waitStep(t, eng, x.ID, "gate", pipeline.StatusWaitingInput)
		o := signIn(t, h, owner.Token)
		tok := o.csrf("/console/pipelines/" + x.ID)
		other := signIn(t, h, owner.Token).csrf("/console/pipelines")
		path := "/console/pipelines/" + x.ID + "/cancel"
		status := func() pipeline.Status {
			t.Helper()
			got, err := eng.Get(ctx, "", x.ID)
			if err != nil {
				t.Fatal(err)
			}
			return got.Status
		}
		before := status()
		for _, tc := range forgeries(tok, other, url.Values{"confirm": {"yes"}, "reason": {"forged"}}) {
			if p := o.post(path, tc.form, tc.header); p.status != 403 {
				t.Fatalf("%s: %d\n%s", tc.name, p.status, p.body)
			}
			if got := status(); got != before {
				t.Fatalf("%s: the execution became %s", tc.name, got)
			}
		}
		p := o.post(path, url.Values{"csrf": {tok}, "confirm": {"yes"}, "reason": {"not needed"}}, map[string]string{"Origin": h.URL})
		if p.status != http.StatusSeeOther {
			t.Fatalf("cancel: %d %s", p.status, p.body)
		}
		if got := status(); got != pipeline.StatusCancelled {
			t.Fatalf("after cancel: %s", got)
		}
	})
}
