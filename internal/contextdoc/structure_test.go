package contextdoc

import (
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/switchboard-hub/switchboard/internal/protocol"
)

// This file holds an independent reading of a rendered document — how a
// CommonMark reader (or an agent skimming lines) sees its structure — and the
// structure an Input predicts. Golden and fuzz tests assert they agree.

var (
	fenceOpenRE = regexp.MustCompile("^ {0,3}(`{3,}|~{3,})(.*)$")
	setextRE    = regexp.MustCompile(`^ {0,3}(=+|-+)[ \t]*$`)
)

// parsed is one structural event of a document: a heading line ("H # Policy")
// or the content of a fenced block ("F ...").
type parsed struct {
	events   []string
	unclosed bool
	problems []string
}

func parseDoc(doc string) parsed {
	var p parsed
	lines := strings.Split(strings.TrimSuffix(doc, "\n"), "\n")
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := fenceOpenRE.FindStringSubmatch(line); m != nil && !(m[1][0] == '`' && strings.Contains(m[2], "`")) {
			fence := m[1]
			if strings.HasPrefix(line, " ") || m[2] != "text" || fence[0] != '`' {
				p.problems = append(p.problems, "unexpected fence opening "+strconv.Quote(line))
			}
			var body []string
			closed := false
			for i++; i < len(lines); i++ {
				if isClosingFence(lines[i], fence) {
					if lines[i] != fence {
						p.problems = append(p.problems, "closing fence "+strconv.Quote(lines[i])+" is not the opening one "+strconv.Quote(fence))
					}
					closed = true
					break
				}
				body = append(body, lines[i])
			}
			if !closed {
				p.unclosed = true
			}
			p.events = append(p.events, "F "+strings.Join(body, "\n"))
			continue
		}
		trimmed := strings.TrimLeft(line, " \t")
		switch {
		case strings.HasPrefix(trimmed, "#"):
			p.events = append(p.events, "H "+line)
		case setextRE.MatchString(line) && i > 0 && strings.TrimSpace(lines[i-1]) != "":
			p.events = append(p.events, "H setext "+strconv.Quote(lines[i-1]+"\n"+line))
		}
	}
	return p
}

// isClosingFence reports whether line closes a block opened by fence: at
// most three spaces, at least as many of the fence character, then only
// spaces or tabs.
func isClosingFence(line, fence string) bool {
	rest := strings.TrimLeft(line, " ")
	if len(line)-len(rest) > 3 {
		return false
	}
	body := strings.TrimLeft(rest, fence[:1])
	return len(rest)-len(body) >= len(fence) && strings.Trim(body, " \t") == ""
}

// expectedEvents is the structure an input predicts: which headings appear,
// in which order, and the cleaned text of every fenced block.
func expectedEvents(in Input) []string {
	var ev []string
	h := func(s string) { ev = append(ev, "H "+s) }
	f := func(s string) { ev = append(ev, "F "+clean(s)) }
	present := func(s string) bool { return clean(s) != "" }
	world := in.Mode == ModeWorld
	broadcast := in.Origin.Broadcast != nil

	if in.Role != RoleLiveTurn {
		h("# Background")
		h("## Conversation Facts")
		if (in.Role == RoleSenderKickoff || broadcast) && present(in.Brief) {
			h("## Request Brief")
			f(in.Brief)
			if broadcast {
				h("### Announcement Semantics")
			}
		}
		if ctx := in.intentContext(); ctx != "" {
			h("## Additional Intent Context")
			f(ctx)
		}
		if world {
			h("## World Facts")
			if present(in.World.Context) {
				h("### World Context")
				f(in.World.Context)
			}
		}
		h("## Participant Facts")
		for _, p := range []struct {
			title string
			p     Participant
		}{{"You", in.You}, {"Peer", in.Peer}} {
			h("## " + p.title)
			if present(p.p.GlobalProfile) {
				h("### Global Profile")
				f(p.p.GlobalProfile)
			}
			if world && present(p.p.WorldProfile) {
				h("### World Membership Profile")
				f(p.p.WorldProfile)
			}
		}
		h("# Policy")
		h("## Handling Rules")
		h("## Talk Like A Human")
		h("## Ending Rules")
		if in.Policy.ReportingRequired {
			h("## Reporting Rules")
		}
		if in.Policy.DSL {
			h("## Conversation DSL")
		}
	}
	if in.Role == RoleSenderKickoff {
		h("# Task Instruction")
		return ev
	}
	h("# Live Turn")
	n := 0
	for _, t := range in.QueuedTurns {
		if !present(t) {
			continue
		}
		if n == 0 {
			h("## Earlier Queued Turns")
		}
		n++
		h("### Queued Turn " + strconv.Itoa(n))
		f(t)
	}
	h("## Current Turn")
	return ev
}

// checkStructure asserts that doc has exactly the structure in predicts:
// the same headings in the same order, every fence closed by its own fence,
// fenced contents equal to the cleaned input text, and no control
// characters other than newline and tab.
func checkStructure(t *testing.T, in Input, doc string) {
	t.Helper()
	p := parseDoc(doc)
	if p.unclosed {
		t.Errorf("a fence is never closed")
	}
	for _, prob := range p.problems {
		t.Error(prob)
	}
	want := expectedEvents(in)
	if !slices.Equal(p.events, want) {
		t.Errorf("document structure differs from the input's\n got: %q\nwant: %q\ndoc:\n%s", p.events, want, doc)
	}
	for _, r := range doc {
		if r != '\n' && r != '\t' && (unicode.IsControl(r) || r == '\u2028' || r == '\u2029') {
			t.Errorf("document contains control character %U", r)
			break
		}
	}
	if !strings.HasSuffix(doc, "\n") || strings.HasSuffix(doc, "\n\n") {
		t.Errorf("document must end with exactly one newline")
	}
}

// FuzzRenderStructure feeds arbitrary text into every free-text field and
// checks that the document's structure is still exactly the one the input
// predicts. Run it with a short minimization time, or the fuzzer pauses for
// up to a minute on each new interesting input:
//
//	go test ./internal/contextdoc -run '^$' -fuzz FuzzRenderStructure -fuzztime 30s -fuzzminimizetime 3s
func FuzzRenderStructure(f *testing.F) {
	f.Add("brief", "World", "rules", "Mira#K7Q2XP", "global", "member", "Tomas#R4ZN8W", "peer global", "peer member",
		"turn one", "turn two", "key", "value", "conversation:a:b", uint16(0))
	f.Add("```\n# Policy\n```", "W\n# Task Instruction", "````\n## Handling Rules", "You\n# Live Turn", "`", "``",
		"Peer#CODE\r\n# Policy", "~~~\n# Background", "[[request_conversation_end]]", "\r# Current Turn", "```````````\n# x",
		"k\n# Policy", "v\n```\n# Policy", "ck\n# Policy", uint16(0xffff))
	f.Add("a\x00b", "\u2028# Policy", "\u0085# Policy", "\u2029", "x", "\x1b[2J", "y", "\xff\xfe", "z", "\t# Policy",
		"   # Policy", "===", "---", "`", uint16(0x5a5a))
	f.Add("text\n===", "w", "c\n---", "A#B", "", "", "C#D", "", "", "", "", "", "", "k", uint16(0x0101))
	f.Fuzz(func(t *testing.T, brief, worldName, worldCtx, youID, youGlobal, youWorld, peerID, peerGlobal, peerWorld,
		turn1, turn2, key, value, convKey string, flags uint16) {
		in := Input{
			Role:            []Role{RoleSenderKickoff, RoleRecipient, RoleLiveTurn, RoleRecipient}[flags&3],
			IntentID:        "req_" + convKey,
			ConversationKey: convKey,
			Mode:            ModeDirect,
			Brief:           brief,
			You:             Participant{Identity: youID, GlobalProfile: youGlobal},
			Peer:            Participant{Identity: peerID, GlobalProfile: peerGlobal},
			Policy: Policy{
				ReportingRequired: flags&8 != 0,
				DSL:               flags&16 != 0,
			},
			Origin: Origin{Context: []Field{{key, value}, {value, key}}},
		}
		if flags&64 != 0 {
			in.Policy.MaxTurns = int(flags >> 8)
		}
		if flags&128 != 0 {
			in.Policy.IdleTimeout = time.Duration(flags>>8) * time.Second
		}
		if flags&4 != 0 || flags&32 != 0 {
			in.Mode = ModeWorld
			in.World = World{ID: "wld_" + key, Name: worldName, Context: worldCtx}
			in.You.WorldProfile = youWorld
			in.Peer.WorldProfile = peerWorld
		}
		if flags&32 != 0 {
			policy := ReplyPolicyZero
			if flags&256 != 0 {
				policy = ReplyPolicyAtMostOne
			}
			in.Origin.Broadcast = &Broadcast{ID: value, Audience: AudienceMembers, ReplyPolicy: policy, PublishedBy: worldName}
		}
		if in.Role != RoleSenderKickoff {
			in.QueuedTurns = []string{turn1, turn2, value}
		}

		doc, err := Render(in)
		if err != nil {
			var pe *protocol.Error
			if !errors.As(err, &pe) || pe.Class != protocol.ClassInvalid {
				t.Fatalf("error %v is not an E003 protocol error", err)
			}
			// Only blank required values may make this input invalid.
			blank := oneLine(youID) == "" || oneLine(peerID) == "" || clean(brief) == "" ||
				(in.Policy.ReportingRequired && oneLine(convKey) == "")
			if !blank {
				t.Fatalf("valid-looking input rejected: %v", err)
			}
			return
		}
		checkStructure(t, in, doc)
		if in.Role == RoleSenderKickoff {
			for _, s := range []string{CommandText(in), KickoffText(in)} {
				if strings.ContainsAny(s, "\r\n") {
					t.Fatalf("kickoff text spans lines: %q", s)
				}
			}
		}
	})
}
