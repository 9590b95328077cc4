package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-hub/switchboard/client"
	"github.com/switchboard-hub/switchboard/internal/app"
	"github.com/switchboard-hub/switchboard/internal/app/apptest"
	"github.com/switchboard-hub/switchboard/internal/console"
	"github.com/switchboard-hub/switchboard/internal/protocol"
	"github.com/switchboard-hub/switchboard/internal/relay"
	"github.com/switchboard-hub/switchboard/internal/social"
)

// browser is a cookie-keeping HTTP client that does not follow redirects,
// so tests see each answer.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, h *apptest.Hub) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: h.URL, c: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type page struct {
	status int
	body   string
	header http.Header
}

func (b *browser) do(method, path string, form url.Values, header map[string]string) page {
	b.t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	r, err := http.NewRequest(method, b.base+path, body)
	if err != nil {
		b.t.Fatal(err)
	}
	if form != nil {
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	for k, v := range header {
		r.Header.Set(k, v)
	}
	resp, err := b.c.Do(r)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return page{status: resp.StatusCode, body: string(raw), header: resp.Header}
}

func (b *browser) get(path string) page { return b.do("GET", path, nil, nil) }

func (b *browser) post(path string, form url.Values, header ...map[string]string) page {
	var h map[string]string
	if len(header) > 0 {
		h = header[0]
	}
	return b.do("POST", path, form, h)
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// csrf reads the CSRF token from a page's forms.
func (b *browser) csrf(path string) string {
	b.t.Helper()
	p := b.get(path)
	m := csrfRE.FindStringSubmatch(p.body)
	if p.status != 200 || m == nil {
		b.t.Fatalf("no CSRF token on %s (%d):\n%s", path, p.status, p.body)
	}
	return m[1]
}

// signIn signs in with token and checks the session cookie's attributes.
func signIn(t *testing.T, h *apptest.Hub, token string) *browser {
	t.Helper()
	b := newBrowser(t, h)
	tok := b.csrf("/console/sign-in")
	p := b.post("/console/sign-in", url.Values{"csrf": {tok}, "token": {token}, "next": {"/console/agents"}})
	if p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/agents" {
		t.Fatalf("sign-in: %d %s\n%s", p.status, p.header.Get("Location"), p.body)
	}
	var cookie string
	for _, c := range p.header.Values("Set-Cookie") {
		if strings.HasPrefix(c, console.SessionCookie+"=") {
			cookie = c
		}
	}
	for _, attr := range []string{"HttpOnly", "SameSite=Strict", "Path=/console"} {
		if !strings.Contains(cookie, attr) {
			t.Fatalf("session cookie %q lacks %s", cookie, attr)
		}
	}
	return b
}

// world is the cast of the authorization tests: Bob and Carol hold a
// conversation; Y has a dead letter from X (one trace); Z is an outsider.
type world struct {
	bob, carol         social.Account
	bobTok             string
	chat               string
	x, y, z            client.CreatedAgent
	dead, trace, msgID string
	worldID            string
}

func activate(t *testing.T, h *apptest.Hub, name string) (client.Activation, *client.Client) {
	t.Helper()
	ctx := context.Background()
	act, err := client.New(h.URL, "").Activate(ctx, client.ActivateInput{DisplayName: name})
	if err != nil {
		t.Fatal(err)
	}
	c := h.Client(act.AppToken)
	human, prof, open := name+"'s owner likes trail running", name+": a friendly agent", social.PolicyOpen
	if _, err := c.UpdateAccount(ctx, client.AccountUpdate{Action: social.ActionUpdate, HumanProfile: &human, AgentProfile: &prof, ContactPolicy: &open}); err != nil {
		t.Fatal(err)
	}
	return act, c
}

func setup(t *testing.T, h *apptest.Hub) world {
	t.Helper()
	ctx := context.Background()
	var w world
	bob, bc := activate(t, h, "Bob")
	carol, _ := activate(t, h, "Carol")
	w.bob.AgentID, w.carol.AgentID, w.bobTok = bob.AgentID, carol.AgentID, bob.AppToken
	req, err := bc.RequestChat(ctx, client.ChatRequestInput{DisplayName: "Carol", AgentCode: carol.AgentCode, OpeningMessage: "Say hello to Carol."})
	if err != nil || req.Status != social.RequestAccepted {
		t.Fatalf("chat request: %+v %v", req, err)
	}
	w.chat = req.ChatRequestID
	name, text := "Bob's club", "Runs on Sundays."
	wd, err := bc.CreateWorld(ctx, client.WorldInput{DisplayName: &name, WorldContextText: &text, ParticipantContextText: &text})
	if err != nil {
		t.Fatal(err)
	}
	w.worldID = wd.WorldID

	var xc, yc *client.Client
	w.x, xc = h.NewAgent("X")
	w.y, yc = h.NewAgent("Y")
	w.z, _ = h.NewAgent("Z")
	res, err := xc.Send(ctx, &client.Envelope{To: client.Address{Agent: w.y.ID}, Type: protocol.TypeRequest, Payload: json.RawMessage(`{"action":"ping"}`)})
	if err != nil {
		t.Fatal(err)
	}
	w.trace, w.msgID = res.TraceID, res.ID
	ds, err := yc.Inbox(ctx, client.InboxOptions{Limit: 1, Wait: 5 * time.Second})
	if err != nil || len(ds) != 1 {
		t.Fatalf("claim: %+v %v", ds, err)
	}
	if s, err := yc.Nack(ctx, ds[0].DeliveryID, ds[0].Attempt, 0, "cannot ping"); err != nil || s.State != "dead" {
		t.Fatalf("nack: %+v %v", s, err)
	}
	w.dead = ds[0].DeliveryID
	return w
}

func oneAttempt(c *app.Config) { c.Bus.MaxAttempts = 1 }

func TestSignIn(t *testing.T) {
	h := apptest.Start(t, "")
	b := newBrowser(t, h)
	if p := b.get("/console"); p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/" {
		t.Fatalf("/console: %d %s", p.status, p.header.Get("Location"))
	}
	if p := b.get("/console/static/console.css"); p.status != 200 || !strings.HasPrefix(p.header.Get("Content-Type"), "text/css") {
		t.Fatalf("stylesheet: %d %s", p.status, p.header.Get("Content-Type"))
	}
	if p := b.get("/console/static/"); p.status != 404 {
		t.Fatalf("static directory listing: %d", p.status)
	}
	if p := b.get("/console/agents"); p.status != http.StatusSeeOther || !strings.HasPrefix(p.header.Get("Location"), "/console/sign-in?next=") {
		t.Fatalf("signed-out page: %d %s", p.status, p.header.Get("Location"))
	}
	tok := b.csrf("/console/sign-in")
	for _, tc := range []struct {
		name   string
		form   url.Values
		header map[string]string
		status int
		says   string
	}{
		{"no csrf", url.Values{"token": {apptest.AdminToken}}, nil, 403, "expired"},
		{"wrong csrf", url.Values{"csrf": {"x"}, "token": {apptest.AdminToken}}, nil, 403, "expired"},
		{"cross-site", url.Values{"csrf": {"TOKEN"}, "token": {apptest.AdminToken}}, map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, "another site"},
		{"other origin", url.Values{"csrf": {"TOKEN"}, "token": {apptest.AdminToken}}, map[string]string{"Origin": "http://evil.example"}, 403, "another origin"},
		{"empty token", url.Values{"csrf": {"TOKEN"}, "token": {"  "}}, nil, 400, "Paste"},
		{"unknown token", url.Values{"csrf": {"TOKEN"}, "token": {"sbt_nope"}}, nil, 401, "unknown"},
		{"overlong token", url.Values{"csrf": {"TOKEN"}, "token": {strings.Repeat("a", 600)}}, nil, 400, "Paste"},
	} {
		if tc.form.Get("csrf") == "TOKEN" {
			tc.form.Set("csrf", tok)
		}
		p := b.post("/console/sign-in", tc.form, tc.header)
		if p.status != tc.status || !strings.Contains(p.body, tc.says) || strings.Contains(strings.Join(p.header.Values("Set-Cookie"), ";"), console.SessionCookie+"=") {
			t.Fatalf("%s: %d (want %d, %q)\n%s", tc.name, p.status, tc.status, tc.says, p.body)
		}
		tok = b.csrf("/console/sign-in") // each answer issues a fresh form token
	}
	if n := sessions(t, h); n != 0 {
		t.Fatalf("%d sessions after refused sign-ins", n)
	}

	admin := signIn(t, h, apptest.AdminToken)
	if p := admin.get("/console/"); p.status != 200 || !strings.Contains(p.body, "Overview") || !strings.Contains(p.header.Get("Content-Security-Policy"), "script-src 'self'") {
		t.Fatalf("overview: %d %q", p.status, p.header.Get("Content-Security-Policy"))
	}
	if p := admin.get("/console/sign-in"); p.status != http.StatusSeeOther {
		t.Fatalf("sign-in page while signed in: %d", p.status)
	}
	if p := admin.get("/console/sign-in?next=//evil.example/x"); p.header.Get("Location") != "/console/" {
		t.Fatalf("open redirect: %s", p.header.Get("Location"))
	}
	if n := sessions(t, h); n != 1 {
		t.Fatalf("%d sessions, want 1", n)
	}

	// Sign-out is a form like any other: no token, no sign-out.
	if p := admin.post("/console/sign-out", url.Values{}); p.status != 403 {
		t.Fatalf("sign-out without csrf: %d", p.status)
	}
	if p := admin.get("/console/agents"); p.status != 200 {
		t.Fatalf("session lost after refused sign-out: %d", p.status)
	}
	if p := admin.post("/console/sign-out", url.Values{"csrf": {admin.csrf("/console/agents")}}); p.status != http.StatusSeeOther {
		t.Fatalf("sign-out: %d %s", p.status, p.body)
	}
	if n := sessions(t, h); n != 0 {
		t.Fatalf("%d sessions after sign-out", n)
	}
	if p := admin.get("/console/agents"); p.status != http.StatusSeeOther {
		t.Fatalf("page after sign-out: %d", p.status)
	}
}

func sessions(t *testing.T, h *apptest.Hub) int {
	t.Helper()
	var n int
	if err := h.App.DB.QueryRow(context.Background(), `SELECT COUNT(*) FROM console_sessions`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// An agent sees its own things and nothing of anyone else's, even by URL;
// the admin sees everything.
func TestAuthorization(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		w := setup(t, h)
		z := signIn(t, h, w.z.Token)
		others := []string{
			"/console/conversations/" + w.chat,
			"/console/events/conversations/" + w.chat,
			"/console/traces/" + w.trace,
			"/console/deliveries/" + w.dead,
			"/console/dead-letters/" + w.dead,
			"/console/dead-letters/" + w.dead + "/replay",
			"/console/agents/" + w.y.ID,
			"/console/agents/" + w.bob.AgentID,
			"/console/worlds/" + w.worldID,
		}
		for _, path := range others {
			if p := z.get(path); p.status != 404 {
				t.Errorf("Z opened %s: %d\n%s", path, p.status, p.body)
			}
		}
		for _, path := range []string{"/console/traces?q=" + w.trace, "/console/traces?q=" + w.msgID} {
			if p := z.get(path); p.status != 200 || !strings.Contains(p.body, "that you may see") {
				t.Errorf("Z searched %s: %d", path, p.status)
			}
		}
		for path, hidden := range map[string]string{
			"/console/conversations": w.chat, "/console/dead-letters": w.dead, "/console/agents": w.y.ID, "/console/": w.y.ID,
		} {
			if p := z.get(path); p.status != 200 || strings.Contains(p.body, hidden) {
				t.Errorf("Z's %s shows %s (%d)", path, hidden, p.status)
			}
		}
		if p := z.get("/console/agents/" + w.z.ID); p.status != 200 || !strings.Contains(p.body, w.z.ID) {
			t.Errorf("Z's own page: %d", p.status)
		}
		p := z.post("/console/dead-letters/"+w.dead+"/replay", url.Values{"csrf": {z.csrf("/console/agents")}, "confirm": {"yes"}})
		if p.status != 404 {
			t.Errorf("Z replayed Y's dead letter: %d", p.status)
		}
		if st := deliveryState(t, h, w.dead); st != "dead" {
			t.Fatalf("after Z's refused replay the dead letter is %s", st)
		}

		// The owners see theirs.
		bob := signIn(t, h, w.bobTok)
		if p := bob.get("/console/conversations/" + w.chat); p.status != 200 || !strings.Contains(p.body, "Transcript") {
			t.Errorf("Bob's conversation: %d", p.status)
		}
		if p := bob.get("/console/conversations"); !strings.Contains(p.body, w.chat) {
			t.Error("Bob's conversation list misses his chat")
		}
		if p := bob.get("/console/worlds/" + w.worldID); p.status != 200 || !strings.Contains(p.body, "Pending requests") {
			t.Errorf("Bob's world: %d", p.status)
		}
		if p := bob.get("/console/worlds"); !strings.Contains(p.body, w.worldID) {
			t.Error("Bob's world list misses his world")
		}
		y := signIn(t, h, w.y.Token)
		for _, path := range []string{"/console/traces/" + w.trace, "/console/deliveries/" + w.dead, "/console/dead-letters/" + w.dead, "/console/agents/" + w.y.ID} {
			if p := y.get(path); p.status != 200 {
				t.Errorf("Y opened its %s: %d", path, p.status)
			}
		}
		if p := y.get("/console/traces?q=" + w.msgID); p.status != http.StatusSeeOther || p.header.Get("Location") != "/console/traces/"+w.trace {
			t.Errorf("Y's message search: %d %s", p.status, p.header.Get("Location"))
		}
		if p := y.get("/console/deliveries/" + w.dead); !strings.Contains(p.body, "cannot ping") {
			t.Error("the delivery page lacks the last error")
		}

		admin := signIn(t, h, apptest.AdminToken)
		for _, path := range append(others[2:], "/console/conversations/"+w.chat, "/console/", "/console/agents", "/console/conversations", "/console/worlds", "/console/traces",
			"/console/dead-letters", "/console/pipelines", "/console/telegram") {
			if p := admin.get(path); p.status != 200 {
				t.Errorf("admin opened %s: %d\n%s", path, p.status, p.body)
			}
		}
		if p := admin.get("/console/nowhere"); p.status != 404 || !strings.Contains(p.body, "Not found") {
			t.Errorf("unknown page: %d", p.status)
		}
	}, oneAttempt)
}

func deliveryState(t *testing.T, h *apptest.Hub, id string) string {
	t.Helper()
	var st string
	if err := h.App.DB.QueryRow(context.Background(), `SELECT state FROM bus_deliveries WHERE id = ?`, id).Scan(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

// Every state-changing form needs the session's CSRF token and a
// same-origin request; with both, the replay goes through once.
func TestCSRF(t *testing.T) {
	apptest.Each(t, func(t *testing.T, h *apptest.Hub) {
		w := setup(t, h)
		y := signIn(t, h, w.y.Token)
		tok := y.csrf("/console/dead-letters/" + w.dead + "/replay")
		other := signIn(t, h, w.y.Token).csrf("/console/agents") // a token of another session of the same agent
		path := "/console/dead-letters/" + w.dead + "/replay"
		for _, tc := range []struct {
			name   string
			form   url.Values
			header map[string]string
		}{
			{"no token", url.Values{"confirm": {"yes"}}, nil},
			{"empty token", url.Values{"csrf": {""}, "confirm": {"yes"}}, nil},
			{"wrong token", url.Values{"csrf": {tok + "x"}, "confirm": {"yes"}}, nil},
			{"another session's token", url.Values{"csrf": {other}, "confirm": {"yes"}}, nil},
			{"cross-site", url.Values{"csrf": {tok}, "confirm": {"yes"}}, map[string]string{"Sec-Fetch-Site": "cross-site"}},
			{"same-site", url.Values{"csrf": {tok}, "confirm": {"yes"}}, map[string]string{"Sec-Fetch-Site": "same-site"}},
			{"foreign origin", url.Values{"csrf": {tok}, "confirm": {"yes"}}, map[string]string{"Origin": "https://evil.example"}},
			{"null origin", url.Values{"csrf": {tok}, "confirm": {"yes"}}, map[string]string{"Origin": "null"}},
		} {
			if p := y.post(path, tc.form, tc.header); p.status != 403 {
				t.Fatalf("%s: %d\n%s", tc.name, p.status, p.body)
			}
			if st := deliveryState(t, h, w.dead); st != "dead" {
				t.Fatalf("%s: the dead letter became %s", tc.name, st)
			}
		}
		// Without confirmation the form only leads to the confirmation step.
		if p := y.post(path, url.Values{"csrf": {tok}}); p.status != http.StatusSeeOther || p.header.Get("Location") != path || deliveryState(t, h, w.dead) != "dead" {
			t.Fatalf("unconfirmed replay: %d %s", p.status, p.header.Get("Location"))
		}
		origin := map[string]string{"Origin": h.URL, "Sec-Fetch-Site": "same-origin"}
		p := y.post(path, url.Values{"csrf": {tok}, "confirm": {"yes"}}, origin)
		if p.status != http.StatusSeeOther || !strings.Contains(p.header.Get("Location"), "Replayed") {
			t.Fatalf("replay: %d %s\n%s", p.status, p.header.Get("Location"), p.body)
		}
		if st := deliveryState(t, h, w.dead); st != "replayed" {
			t.Fatalf("after replay: %s", st)
		}
		if p := y.post(path, url.Values{"csrf": {tok}, "confirm": {"yes"}}); p.status != 409 || !strings.Contains(p.body, "already replayed") {
			t.Fatalf("second replay: %d", p.status)
		}
		// A signed-out browser's post is refused before anything else.
		anon := newBrowser(t, h)
		if p := anon.post(path, url.Values{"csrf": {tok}, "confirm": {"yes"}}); p.status != 401 {
			t.Fatalf("anonymous post: %d", p.status)
		}
	}, oneAttempt)
}

// sse reads a console event stream.
type sse struct {
	resp   *http.Response
	events chan [2]string
}

func openStream(t *testing.T, b *browser, path string) *sse {
	t.Helper()
	r, _ := http.NewRequest("GET", b.base+path, nil)
	c := *b.c
	c.Timeout = 0
	resp, err := c.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		resp.Body.Close()
		t.Fatalf("stream %s: %d %s", path, resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	s := &sse{resp: resp, events: make(chan [2]string, 64)}
	go func() {
		defer close(s.events)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		var ev string
		var data []string
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if ev != "" {
					s.events <- [2]string{ev, strings.Join(data, "\n")}
				}
				ev, data = "", nil
			case strings.HasPrefix(line, "event: "):
				ev = line[7:]
			case strings.HasPrefix(line, "data: "):
				data = append(data, line[6:])
			}
		}
	}()
	t.Cleanup(func() { resp.Body.Close() })
	return s
}

// next waits for an event whose data contains want ("" for any); ok is
// false when the stream ended first.
func (s *sse) next(t *testing.T, event, want string) (string, bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		select {
		case e, open := <-s.events:
			if !open {
				return "", false
			}
			if e[0] == event && strings.Contains(e[1], want) {
				return e[1], true
			}
		case <-deadline:
			t.Fatalf("no %s event containing %q", event, want)
		}
	}
}

// The conversation page's stream sends the transcript as it grows, ends
// on sign-out, and every stream ends when the hub shuts down.
func TestLiveStreams(t *testing.T) {
	h := apptest.Start(t, "", oneAttempt)
	w := setup(t, h)
	ctx := context.Background()
	bob := signIn(t, h, w.bobTok)
	s := openStream(t, bob, "/console/events/conversations/"+w.chat)
	if first, ok := s.next(t, "update", ""); !ok || !strings.Contains(first, "Transcript") || strings.Contains(first, "Hello Carol from the test") {
		t.Fatalf("first update: %v\n%s", ok, first)
	}
	// Bob's runtime answers the kickoff over HTTP: the opener is a turn.
	bc := h.Client(w.bobTok)
	var kick client.Delivery
	for deadline := time.Now().Add(20 * time.Second); kick.DeliveryID == "" && time.Now().Before(deadline); {
		ds, err := bc.Inbox(ctx, client.InboxOptions{Wait: time.Second, Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range ds {
			env, _ := d.Decode()
			var p struct {
				Action string `json:"action"`
			}
			json.Unmarshal(env.Payload, &p)
			if p.Action == relay.DeliveryAction {
				kick = d
			}
		}
	}
	if kick.DeliveryID == "" {
		t.Fatal("no kickoff for Bob")
	}
	if _, err := bc.ReplyToDelivery(ctx, kick.DeliveryID, "Hello Carol from the test"); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.next(t, "update", "Hello Carol from the test"); !ok {
		t.Fatal("the stream ended before the new turn arrived")
	}

	// Signing out (in another tab: same cookie) ends the stream.
	if p := bob.post("/console/sign-out", url.Values{"csrf": {bob.csrf("/console/agents")}}); p.status != http.StatusSeeOther {
		t.Fatalf("sign-out: %d", p.status)
	}
	if _, ok := s.next(t, "end", ""); !ok {
		t.Fatal("no end event after sign-out")
	}
	if _, ok := s.next(t, "update", "never"); ok {
		t.Fatal("the stream went on after its end event")
	}
	waitStreams(t, h, 0)

	// Shutdown ends the rest, quickly (not after the server's drain timeout).
	admin := signIn(t, h, apptest.AdminToken)
	a := openStream(t, admin, "/console/events/overview")
	b := openStream(t, admin, "/console/events/conversations")
	a.next(t, "update", "")
	b.next(t, "update", "")
	waitStreams(t, h, 2)
	start := time.Now()
	if err := h.App.Close(); err != nil {
		t.Fatal(err)
	}
	for _, st := range []*sse{a, b} {
		for range st.events {
		}
	}
	if d := time.Since(start); d > 8*time.Second {
		t.Fatalf("shutdown took %s with open streams", d)
	}
	if n := h.App.Console.ActiveStreams(); n != 0 {
		t.Fatalf("%d streams still active after shutdown", n)
	}
}

func waitStreams(t *testing.T, h *apptest.Hub, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if h.App.Console.ActiveStreams() == n {
			return
		}
	}
	t.Fatalf("%d active streams, want %d", h.App.Console.ActiveStreams(), n)
}
