package runner

import "strings"

// Top-level sections of a context document (specs/claworld.md, "Context
// document").
const (
	SectionBackground      = "Background"
	SectionPolicy          = "Policy"
	SectionTaskInstruction = "Task Instruction"
	SectionLiveTurn        = "Live Turn"
)

// Section is one top-level (`# Title`) part of a context document.
type Section struct {
	// Title is the heading text without "# ".
	Title string
	// Text is the whole section, heading line included, without trailing
	// blank lines.
	Text string
}

// IsBaseline reports whether contextText is a full context document — one
// that starts with `# Background`. A baseline starts a new intent: the
// channel agent resets what it assumed about the previous one.
//
// Only the first line counts, so a peer's message quoted further down
// (always inside a fence) can never make a live-turn document look like a
// baseline.
func IsBaseline(contextText string) bool {
	for line := range strings.SplitSeq(contextText, "\n") {
		line = strings.TrimRight(line, " \t\r")
		if line == "" {
			continue
		}
		return line == "# "+SectionBackground
	}
	return false
}

// Sections splits a context document at its level-1 headings. Headings
// inside fenced blocks (``` or ~~~, as the hub fences untrusted text) are
// content, not sections. Text before the first heading is returned as a
// section with an empty title.
func Sections(doc string) []Section {
	var (
		out      []Section
		cur      []string
		title    string
		started  bool
		fenceCh  byte
		fenceLen int
	)
	flush := func() {
		text := strings.TrimRight(strings.Join(cur, "\n"), " \t\r\n")
		if started || strings.TrimSpace(text) != "" {
			out = append(out, Section{Title: title, Text: text})
		}
	}
	for line := range strings.SplitSeq(doc, "\n") {
		if fenceLen > 0 {
			if c, n, rest := fenceRun(line); c == fenceCh && n >= fenceLen && strings.TrimSpace(rest) == "" {
				fenceLen = 0
			}
			cur = append(cur, line)
			continue
		}
		if c, n, _ := fenceRun(line); n >= 3 {
			fenceCh, fenceLen = c, n
			cur = append(cur, line)
			continue
		}
		if t, ok := strings.CutPrefix(strings.TrimRight(line, " \t\r"), "# "); ok {
			flush()
			title, started, cur = strings.TrimSpace(t), true, []string{strings.TrimRight(line, "\r")}
			continue
		}
		cur = append(cur, line)
	}
	flush()
	return out
}

// fenceRun returns the fence character and run length at the start of line
// (after at most three spaces of indentation) and what follows the run.
func fenceRun(line string) (c byte, n int, rest string) {
	i := 0
	for i < len(line) && i < 3 && line[i] == ' ' {
		i++
	}
	if i >= len(line) || (line[i] != '`' && line[i] != '~') {
		return 0, 0, ""
	}
	c = line[i]
	j := i
	for j < len(line) && line[j] == c {
		j++
	}
	return c, j - i, line[j:]
}

// section returns the section titled title, if present.
func section(secs []Section, title string) (Section, bool) {
	for _, s := range secs {
		if s.Title == title {
			return s, true
		}
	}
	return Section{}, false
}

// without joins the sections whose titles are not in drop.
func without(secs []Section, drop ...string) string {
	var parts []string
	for _, s := range secs {
		skip := false
		for _, d := range drop {
			if s.Title == d {
				skip = true
			}
		}
		if !skip && s.Text != "" {
			parts = append(parts, s.Text)
		}
	}
	return strings.Join(parts, "\n\n")
}

// body is a section's text without its heading line.
func (s Section) body() string {
	if s.Title == "" {
		return s.Text
	}
	_, rest, _ := strings.Cut(s.Text, "\n")
	return strings.TrimSpace(rest)
}
